//! The sending phase: the client threads, each a current-thread tokio runtime driving its
//! share of the connections, and [`drive`], which starts them, collects their intervals on
//! the calling thread, and waits for them.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use nix::sys::resource::{getrusage, UsageWho};

use crate::busy;
use crate::conn::{Conn, Ctx};
use crate::outcome::ClientSched;
use crate::pacing::Pacer;
use crate::recorder::{self, Collector, MemberTally, Msg, Recorder};
use crate::samples::ClientSamples;
use crate::series::Interval;
use crate::setup::Written;
use crate::shared::Shared;
use crate::spec::Mode;
use crate::stalls::Stall;

/// What the sending phase produced.
pub(crate) struct RunData {
    pub intervals: Vec<Interval>,
    pub written: Written,
    pub cpu_s: (f64, f64),
    pub sched: ClientSched,
    pub backlog_at_end: u64,
    pub skipped: u64,
    pub elapsed: Duration,
    /// When requests waited at least the stall threshold, merged over the threads.
    pub stalls: Vec<Stall>,
    /// Stalls the threads noted but could not keep.
    pub stalls_dropped: u64,
    /// Per pool member, summed over the threads (empty for a single server).
    pub members: Vec<MemberTally>,
    /// Sends' lateness and samples of sends and replies, over the threads.
    pub client: ClientSamples,
}

/// Starts the worker threads, collects their intervals, and waits for them.
pub(crate) fn drive(shared: &Arc<Shared>) -> RunData {
    let spec = &shared.spec;
    let threads = spec.threads;
    let (tx, rx) = recorder::channel();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let conns: Vec<usize> = (t..spec.connections).step_by(threads).collect();
            let shared = Arc::clone(shared);
            let tx = tx.clone();
            std::thread::Builder::new()
                .name(format!("cachelab-load-{t}"))
                .spawn(move || run_thread(&shared, t, &conns, tx))
                .expect("spawn a load thread")
        })
        .collect();
    drop(tx);
    let mut collector = Collector::collect(rx, threads, shared);
    let (stalls, stalls_dropped) = collector.take_stalls(spec.stall);
    let members = collector.take_members();
    let client = collector.take_client();
    let reports: Vec<ThreadReport> = handles
        .into_iter()
        .map(|h| h.join().expect("load thread panicked"))
        .collect();

    let end = reports
        .iter()
        .map(|r| r.ended)
        .max()
        .unwrap_or_else(Instant::now);
    let elapsed = end.saturating_duration_since(shared.t0);
    let intervals = collector.intervals(elapsed, spec.interval, spec.warmup);

    let mut written = Written::None;
    let (mut user, mut sys, mut backlog, mut skipped) = (0.0, 0.0, 0, 0);
    let mut sched = ClientSched::default();
    for r in reports {
        sched.wait_s += r.sched.wait_s;
        sched.sleeps += r.sched.sleeps;
        sched.preempted += r.sched.preempted;
        sched.busy_polls += r.sched.busy_polls;
        sched.busy_caught += r.sched.busy_caught;
        sched.spins += r.sched.spins;
        sched.spun_s += r.sched.spun_s;
        sched.spin_sends += r.sched.spin_sends;
        sched.spin_fallbacks += r.sched.spin_fallbacks;
        sched.writes += r.sched.writes;
        written = written.merge(r.written);
        user += r.cpu_s.0;
        sys += r.cpu_s.1;
        backlog += r.backlog_at_end;
        skipped += r.skipped;
    }
    RunData {
        intervals,
        written,
        cpu_s: (user, sys),
        sched,
        backlog_at_end: backlog,
        skipped,
        elapsed,
        stalls,
        stalls_dropped,
        members,
        client,
    }
}

/// What one worker thread did, besides its intervals.
struct ThreadReport {
    written: Written,
    cpu_s: (f64, f64),
    sched: ClientSched,
    backlog_at_end: u64,
    skipped: u64,
    ended: Instant,
}

/// This thread's CPU time (user, system) and scheduler counters.
fn thread_usage() -> ((f64, f64), ClientSched) {
    let busy = busy::counts();
    let wait_s = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 * 1e-9);
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => {
            let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
            let sched = ClientSched {
                wait_s,
                sleeps: u.voluntary_context_switches().max(0) as u64,
                preempted: u.involuntary_context_switches().max(0) as u64,
                busy_polls: busy.polls,
                spins: busy.spins,
                spun_s: busy.spun_ns as f64 / 1e9,
                spin_sends: busy.spin_sends,
                spin_fallbacks: busy.spin_fallbacks,
                busy_caught: busy.caught,
                writes: 0,
            };
            ((s(u.user_time()), s(u.system_time())), sched)
        }
        Err(_) => ((0.0, 0.0), ClientSched::default()),
    }
}

/// Worker thread `thread`: runs `conns` (connection ids) until the run ends, recording into
/// `tx`.
fn run_thread(
    shared: &Arc<Shared>,
    thread: usize,
    conns: &[usize],
    tx: mpsc::Sender<Msg>,
) -> ThreadReport {
    let spec = &shared.spec;
    let rec = Recorder::new(thread, shared, tx);
    let mut builder = tokio::runtime::Builder::new_current_thread();
    // A busy-polling slot per member socket of every connection, then the timer.
    let sockets = conns.len() * spec.pool.len();
    busy::install(builder.enable_all(), spec.busy_poll, spec.spin, sockets);
    let (cpu0, sched0) = thread_usage();
    let rt = builder.build().expect("a tokio runtime");
    let track = spec.mix.set > 0.0 && !spec.prefill;
    let pacer = match spec.mode {
        Mode::Closed => None,
        Mode::Open { .. } => {
            // Inside the runtime: registering the timerfd needs its reactor.
            let _guard = rt.enter();
            match Pacer::new(
                conns.len(),
                shared.t0,
                spec.busy_poll.max(spec.spin),
                !spec.spin.is_zero(),
            ) {
                Ok(p) => {
                    busy::watch(sockets, p.fd());
                    Some(p)
                }
                Err(e) => {
                    shared.give_up(format!("could not create a timerfd for the open loop: {e}"));
                    None
                }
            }
        }
    };
    let ctx = Rc::new(Ctx {
        shared: Arc::clone(shared),
        pacer,
        rec: RefCell::new(rec),
        written: RefCell::new(track.then(|| vec![0u64; spec.key_space.div_ceil(64) as usize])),
        backlog: Cell::new(0),
        skipped: Cell::new(0),
        writes: Cell::new(0),
    });
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let tasks: Vec<_> = conns
            .iter()
            .enumerate()
            .map(|(slot, &id)| {
                let c = Conn::new(Rc::clone(&ctx), id, slot);
                tokio::task::spawn_local(c.run())
            })
            .collect();
        let pacer = ctx.pacer.is_some().then(|| {
            let ctx = Rc::clone(&ctx);
            tokio::task::spawn_local(async move {
                if let Some(p) = ctx.pacer.as_ref() {
                    p.run().await;
                }
            })
        });
        for t in tasks {
            let _ = t.await;
        }
        if let Some(p) = pacer {
            p.abort();
        }
    });
    let ended = Instant::now();
    let (cpu1, sched1) = thread_usage();
    drop(local);
    drop(rt);
    let ctx = Rc::try_unwrap(ctx).ok().expect("all tasks finished");
    ctx.rec.into_inner().finish();
    let written = match ctx.written.into_inner() {
        Some(bits) => Written::Some(bits),
        None => Written::None,
    };
    ThreadReport {
        written,
        cpu_s: (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1),
        sched: ClientSched {
            wait_s: sched1.wait_s - sched0.wait_s,
            sleeps: sched1.sleeps.saturating_sub(sched0.sleeps),
            preempted: sched1.preempted.saturating_sub(sched0.preempted),
            busy_polls: sched1.busy_polls - sched0.busy_polls,
            busy_caught: sched1.busy_caught - sched0.busy_caught,
            spins: sched1.spins - sched0.spins,
            spun_s: sched1.spun_s - sched0.spun_s,
            spin_sends: sched1.spin_sends - sched0.spin_sends,
            spin_fallbacks: sched1.spin_fallbacks - sched0.spin_fallbacks,
            writes: ctx.writes.get(),
        },
        backlog_at_end: ctx.backlog.get(),
        skipped: ctx.skipped.get(),
        ended,
    }
}
