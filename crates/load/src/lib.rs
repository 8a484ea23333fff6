//! A load generator for memcached that tells the truth about latency.
//!
//! * **Closed loop**: every connection keeps `pipeline` requests outstanding; a reply frees a
//!   slot for the next request.
//! * **Open loop**: every connection follows its own schedule of intended send times (Poisson
//!   or evenly spaced arrivals at `rate / connections`). Latency counts from the *intended*
//!   time (the corrected histogram) as well as from the actual send (the uncorrected one), so
//!   a stalled server cannot hide its queueing delay (coordinated omission). A connection
//!   never has more than `max_outstanding` requests in flight; requests that fall due while
//!   it is full are sent late, and their lateness is part of their corrected latency.
//!
//! Each client thread runs a current-thread tokio runtime with its share of the connections.
//! Requests are encoded straight into a connection's write buffer and replies are decoded in
//! place ([`cachelab_proto::frame`]); the hot path allocates nothing per request. Open-loop
//! timing uses one `timerfd` per thread, set for the earliest request due on any of its
//! connections (microsecond precision; tokio's own timer has 1 ms).
//!
//! Results come as per-interval records ([`Interval`]) — throughput, hits, misses, errors and
//! both histograms — plus the steady-state window ([`steady`]) and totals over it, the
//! server's `stats` deltas and, for a server on this machine, its run-queue wait from
//! `/proc/<pid>/task/*/schedstat`. An [`Outcome`] serializes (serde) into the record whose
//! names and derived figures (percentiles, the encoded histograms, rates) the `record`
//! module sets out.
//!
//! Every key is `<prefix>:<index>`; at the end every key the run may have written (the
//! prefilled key space and every key set) is deleted. Nothing is ever flushed.
//!
//! The modules, each using only those listed after it:
//!
//! * `thread` — the sending phase: the client threads and the collection of their intervals;
//! * `conn` — one connection task (a socket per pool member): its loop and failures, with
//!   `conn::send` (the schedule, requests encoded, writes) and `conn::reply` (replies read);
//!   `member` — one member's socket, its reconnects and failures; `group` — multi-gets split
//!   over members; `route` — which member each key goes to;
//! * `pacing` — open-loop timetables and the per-thread timer; `stream` — the socket;
//!   `wire` — requests encoded and replies decoded in place;
//! * `recorder` — per-thread interval recording and the collector that merges it;
//! * `record` — the serialized outcome; `outcome` — what a run produced; [`samples`] — sends'
//!   lateness and bounded samples of send times and latencies for the validity checks;
//! * `drill` — a failure drill's predicted hit ratio per interval, from the run's route
//!   tables;
//! * [`steady`], `series` (intervals and totals), `fault`, `setup` (value pool, prefill,
//!   clean-up), [`server`] (stats or INFO, and schedstat), `shared` (progress and run state),
//!   `spec` (the workload and its checks), `protocol` (memcached or RESP, and RESP's login),
//!   [`busy`], [`keys`], [`sizes`].

pub mod busy;
mod conn;
mod drill;
mod fault;
mod group;
pub mod keys;
mod member;
mod outcome;
mod pacing;
mod protocol;
mod record;
mod recorder;
mod route;
pub mod samples;
mod series;
pub mod server;
mod setup;
mod shared;
pub mod sizes;
mod spec;
pub mod stalls;
pub mod steady;
mod stream;
mod thread;
mod wire;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

pub use cachelab_client::pool::Kind as Distribution;
pub use drill::{predict, Predicted};
pub use fault::Fault;
pub use outcome::{ClientSched, MemberOutcome, Outcome, ProbeOutcome, Schedule};
pub use recorder::Episode;
pub use series::{Interval, Totals, OPS};
pub use server::ServerView;
pub use shared::Progress;
pub use spec::{
    caps, limits, Arrivals, Change, Defaults, DistSpec, Member, Mix, Mode, Password, Pool,
    Protocol, RespLogin, Spec, SpecError, Stop, DEFAULTS, LIMITS, MEMBER_TIMEOUT,
};
pub use stalls::Stall;
pub use steady::Steady;

use shared::Shared;

/// This process's CPU time so far (user, system), seconds; zeros when it cannot be read.
fn process_cpu() -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    getrusage(UsageWho::RUSAGE_SELF).map_or((0.0, 0.0), |u| (s(u.user_time()), s(u.system_time())))
}

/// Why the run ended with the server gone, when every connection was down at the end: the
/// run's time was up before the reconnect budget (`give_up_after`) was spent, but the server
/// was not answering when it ended.
///
/// Gone needs the server's word for it: a connection it closed or reset, or a connect that
/// failed. Connections dropped by our own request timeouts alone, with no reconnect tried
/// before the end, are not: a client that waited for a CPU past the timeout (a loaded
/// machine) drops every connection the same way, and those timeouts are the run's errors
/// and stalls, not a server gone.
fn gone(shared: &Shared, all: &Totals, cancelled: bool) -> Option<String> {
    let down = shared.conns_down.load(Ordering::Relaxed);
    if cancelled || down < shared.spec.connections {
        return None;
    }
    let count = |faults: &[Fault]| -> u64 {
        faults
            .iter()
            .filter_map(|f| all.errors.get(f.as_str()))
            .sum()
    };
    let attempts = count(&[
        Fault::ConnectRefused,
        Fault::ConnectFailed,
        Fault::ConnectTimeout,
    ]);
    if attempts == 0 && count(&[Fault::Closed, Fault::Reset, Fault::Io]) == 0 {
        return None;
    }
    let last = shared.last_success_ms.load(Ordering::Relaxed) as f64 / 1e3;
    Some(format!(
        "the server went away: every connection was down when the run ended, the last reply \
         came {last:.1} s into the run, and {attempts} connection attempts failed"
    ))
}

/// Each pool member's outcome: its tally, its share of the keys and its server's view.
fn members(
    spec: &Spec,
    routes: &route::Routes,
    tallies: Vec<recorder::MemberTally>,
    views: &[ServerView],
    redirects: Option<Vec<(u64, u64)>>,
) -> Vec<MemberOutcome> {
    let mut tallies = tallies.into_iter();
    spec.pool
        .members
        .iter()
        .zip(views)
        .enumerate()
        .map(|(m, (member, view))| {
            let t = tallies.next().unwrap_or_else(recorder::MemberTally::new);
            let address = match &member.address {
                cachelab_client::Address::Tcp(hp) => hp.clone(),
                cachelab_client::Address::Unix(p) => format!("unix:{}", p.display()),
            };
            MemberOutcome {
                address,
                weight: member.weight,
                keys: routes.keys[m],
                sent: t.sent,
                replies: t.replies,
                hits: t.hits,
                misses: t.misses,
                errors: fault::named(&t.errors),
                lost: t.lost,
                latency: t.latency,
                down: t.down,
                server: view.clone(),
                redirects: redirects.as_ref().map(|r| r[m]),
            }
        })
        .collect()
}

/// Runs the workload. Blocks until it ends, is cancelled, or gives up.
///
/// Fails only when the spec is invalid or the server cannot be reached at the start; after
/// that every failure is counted and the outcome carries the partial results.
pub fn run(spec: &Spec, progress: &Arc<Progress>) -> Result<Outcome, SpecError> {
    spec.validate()?;
    route::check_cluster(spec).map_err(SpecError::Invalid)?;
    let proxy = if spec.behind.is_empty() {
        None
    } else {
        Some(server::proxy_view(spec).map_err(SpecError::Server)?)
    };
    let mut views = server::snapshot_start(spec).map_err(SpecError::Server)?;
    let routes = Arc::new(route::Routes::build(spec).map_err(SpecError::Invalid)?);

    let max_value = sizes::build(&spec.value_size.name, &spec.value_size.params)
        .map_err(SpecError::Invalid)?
        .max();
    let pool = setup::random_pool(max_value, spec.seed);

    let prefill_start = Instant::now();
    let prefilled_keys = if spec.prefill && !progress.cancelled() {
        setup::prefill(spec, &routes, &pool, progress)
    } else {
        0
    };
    let prefill_s = prefill_start.elapsed().as_secs_f64();

    // The measured phase starts from fresh counters.
    server::snapshot_before(spec, &mut views);
    match spec.stop {
        Stop::Duration(_) => progress.total.store(
            spec.send_limit().expect("timed").as_millis() as u64,
            Ordering::Relaxed,
        ),
        Stop::Requests(n) => progress.total.store(n, Ordering::Relaxed),
    }
    // The probe gets its own state (and progress: it adds nothing to the run's), started
    // with the load connections and stopped when they are done.
    let probe_spec = spec.probe();
    let probe_shared = probe_spec
        .as_ref()
        .map(|p| Shared::start(p, &Progress::new(), pool.clone(), Arc::clone(&routes)));
    let shared = Shared::start(spec, progress, pool, Arc::clone(&routes));
    let process0 = process_cpu();
    let probe_thread = probe_shared.as_ref().map(|p| {
        let p = Arc::clone(p);
        std::thread::Builder::new()
            .name("cachelab-probe".into())
            .spawn(move || thread::drive(&p))
            .expect("spawn the probe's thread")
    });
    let run = thread::drive(&shared);
    if let Some(p) = &probe_shared {
        p.stop.store(true, Ordering::Relaxed);
    }
    let mut probe_run = probe_thread.map(|h| h.join().expect("probe thread panicked"));
    let process1 = process_cpu();
    server::snapshot_after(spec, &mut views);

    // The probe sends the run's mix: the keys it set are deleted with the others.
    let probe_written = probe_run.as_mut().map_or(setup::Written::None, |p| {
        std::mem::replace(&mut p.written, setup::Written::None)
    });
    let written = if spec.prefill {
        setup::Written::All
    } else {
        run.written.merge(probe_written)
    };
    let steady = steady::detect(&run.intervals, spec);
    let after_warmup = run
        .intervals
        .iter()
        .position(|i| !i.warmup)
        .unwrap_or(run.intervals.len());
    let [all, measured, window] =
        Totals::from_each(&run.intervals, [0, after_warmup, steady.start_index]);
    let probe_lost = probe_run
        .as_ref()
        .is_some_and(|p| p.intervals.iter().any(|i| i.lost > 0));
    if spec.cleanup && spec.pool.is_cluster() {
        // Slots may have moved during the run: each key is deleted from its master now.
        setup::refresh_slots(spec, &routes);
    }
    let (deleted_keys, leftover_keys) = if spec.cleanup {
        setup::cleanup(spec, &routes, &written, all.lost > 0 || probe_lost)
    } else {
        (0, 0)
    };

    let schedule = match spec.mode {
        Mode::Open { rate, .. } => Some(Schedule {
            target_rate: rate,
            backlog_at_end: run.backlog_at_end,
            skipped_disconnected: run.skipped,
        }),
        Mode::Closed => None,
    };
    let aborted = shared
        .aborted
        .lock()
        .expect("not poisoned")
        .clone()
        .or_else(|| gone(&shared, &all, progress.cancelled()));
    let redirects = spec.pool.is_cluster().then(|| {
        let mut r = shared.redirections();
        if let Some(p) = &probe_shared {
            for (a, b) in r.iter_mut().zip(p.redirections()) {
                *a = (a.0 + b.0, a.1 + b.1);
            }
        }
        r
    });
    let probe = probe_run
        .zip(probe_shared)
        .map(|(r, p)| probe_outcome(r, &p));
    let members = if spec.pool.len() > 1 || spec.pool.is_cluster() {
        members(spec, &routes, run.members, &views, redirects)
    } else {
        Vec::new()
    };
    Ok(Outcome {
        intervals: run.intervals,
        steady,
        all,
        measured,
        window,
        stalls: run.stalls,
        stalls_dropped: run.stalls_dropped,
        server: match proxy {
            Some(p) => p,
            None => views.swap_remove(0),
        },
        behind: if spec.behind.is_empty() {
            Vec::new()
        } else {
            views
        },
        members,
        schedule,
        client_cpu_s: run.cpu_s,
        client_sched: run.sched,
        process_cpu_s: (process1.0 - process0.0, process1.1 - process0.1),
        prefilled_keys,
        prefill_s,
        deleted_keys,
        leftover_keys,
        cancelled: progress.cancelled(),
        aborted,
        elapsed: run.elapsed,
        client_samples: run.client,
        probe,
    })
}

/// The probe's outcome from its sending phase.
fn probe_outcome(r: thread::RunData, shared: &Shared) -> ProbeOutcome {
    let after_warmup = r
        .intervals
        .iter()
        .position(|i| !i.warmup)
        .unwrap_or(r.intervals.len());
    let rate = match shared.spec.mode {
        Mode::Open { rate, .. } => rate,
        Mode::Closed => unreachable!("a probe is an open loop"),
    };
    ProbeOutcome {
        rate,
        all: Totals::over(&r.intervals, 0),
        measured: Totals::over(&r.intervals, after_warmup),
        intervals: r.intervals,
        cpu_s: r.cpu_s,
        wait_s: r.sched.wait_s,
        backlog_at_end: r.backlog_at_end,
        skipped_disconnected: r.skipped,
        stalls: r.stalls.len(),
        aborted: shared.aborted.lock().expect("not poisoned").clone(),
        elapsed: r.elapsed,
        client_samples: r.client,
    }
}
