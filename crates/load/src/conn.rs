//! One worker thread: a current-thread tokio runtime driving its share of the connections.
//!
//! A connection task encodes requests straight into its write buffer, writes whatever the
//! socket takes, and decodes replies in place from its read buffer, matching them in order to
//! the requests in flight. Nothing is allocated per request.
//!
//! In open loop one `timerfd` per thread (a [`Pacer`]) is set, with an absolute expiry, for the
//! earliest intended send time of all the thread's connections; when it fires every connection
//! with a request due is woken, so one wake-up sends all that is due and the timer is set
//! once per wake-up, not once per request and connection.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

use cachelab_client::{Address, Error, Options};
use cachelab_proto::frame::{self, DecodeError, Frame};

use crate::busy;
use crate::keys::{self, KeyDist};
use crate::recorder::{Fault, Recorder, GET, MULTIGET, SET};
use crate::setup::Written;
use crate::sizes::{self, SizeDist};
use crate::{Arrivals, ClientSched, Mode, Shared, Stop};

/// How often an idle connection wakes to check for timeouts, the end, and interval rollover.
const TICK: Duration = Duration::from_millis(20);
const READ_CHUNK: usize = 64 * 1024;

pub(crate) struct ThreadReport {
    pub written: Written,
    pub cpu_s: (f64, f64),
    pub sched: ClientSched,
    pub backlog_at_end: u64,
    pub skipped: u64,
    pub ended: Instant,
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
                busy_caught: busy.caught,
                writes: 0,
            };
            ((s(u.user_time()), s(u.system_time())), sched)
        }
        Err(_) => ((0.0, 0.0), ClientSched::default()),
    }
}

struct Ctx {
    shared: Arc<Shared>,
    /// Open loop: the thread's timer.
    pacer: Option<Pacer>,
    rec: RefCell<Recorder>,
    written: RefCell<Option<Vec<u64>>>,
    backlog: Cell<u64>,
    skipped: Cell<u64>,
    writes: Cell<u64>,
}

/// Runs `conns` (connection ids) on this thread until the run ends; returns the recorder.
pub(crate) fn run_thread(
    shared: &Arc<Shared>,
    conns: &[usize],
    rec: Recorder,
) -> (ThreadReport, Recorder) {
    let spec = &shared.spec;
    let mut builder = tokio::runtime::Builder::new_current_thread();
    busy::install(builder.enable_all(), spec.busy_poll, conns.len());
    let (cpu0, sched0) = thread_usage();
    let rt = builder.build().expect("a tokio runtime");
    let track = spec.mix.set > 0.0 && !spec.prefill;
    let pacer = match spec.mode {
        Mode::Closed => None,
        Mode::Open { .. } => {
            // Inside the runtime: registering the timerfd needs its reactor.
            let _guard = rt.enter();
            match Pacer::new(conns.len(), shared.t0, spec.busy_poll) {
                Ok(p) => {
                    busy::watch(conns.len(), p.timer.get_ref().0.as_fd());
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
    let written = match ctx.written.into_inner() {
        Some(bits) => Written::Some(bits),
        None => Written::None,
    };
    let report = ThreadReport {
        written,
        cpu_s: (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1),
        sched: ClientSched {
            wait_s: sched1.wait_s - sched0.wait_s,
            sleeps: sched1.sleeps.saturating_sub(sched0.sleeps),
            preempted: sched1.preempted.saturating_sub(sched0.preempted),
            busy_polls: sched1.busy_polls - sched0.busy_polls,
            busy_caught: sched1.busy_caught - sched0.busy_caught,
            writes: ctx.writes.get(),
        },
        backlog_at_end: ctx.backlog.get(),
        skipped: ctx.skipped.get(),
        ended,
    };
    (report, ctx.rec.into_inner())
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    async fn connect(address: &Address, options: Options) -> Result<Stream, Error> {
        let connect = async {
            match address {
                Address::Tcp(hp) => {
                    let s = TcpStream::connect(hp.as_str()).await?;
                    s.set_nodelay(true)?;
                    Ok(Stream::Tcp(s))
                }
                Address::Unix(p) => Ok(Stream::Unix(UnixStream::connect(p).await?)),
            }
        };
        match tokio::time::timeout(options.connect_timeout, connect).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(source)) => Err(Error::Connect {
                address: address.to_string(),
                source,
            }),
            Err(_) => Err(Error::ConnectTimeout {
                address: address.to_string(),
                after: options.connect_timeout,
            }),
        }
    }

    async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Unix(s) => s.readable().await,
        }
    }

    async fn writable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.writable().await,
            Stream::Unix(s) => s.writable().await,
        }
    }

    /// Reads what the socket holds into `buf`'s spare room. A read that leaves room took all
    /// there was, so the readiness is cleared at once instead of by a second read failing with
    /// `WouldBlock` (a syscall per wake-up saved). This is safe: data arriving later raises a
    /// new readiness event, and tokio does not clear readiness newer than the one it saw.
    fn read_some(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let room = buf.capacity() - buf.len();
        let mut got = None;
        let mut read = || {
            let n = match self {
                Stream::Tcp(s) => s.try_read_buf(buf),
                Stream::Unix(s) => s.try_read_buf(buf),
            }?;
            got = Some(n);
            if n > 0 && n < room {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(n)
            }
        };
        let r = match self {
            Stream::Tcp(s) => s.try_io(Interest::READABLE, &mut read),
            Stream::Unix(s) => s.try_io(Interest::READABLE, &mut read),
        };
        match got {
            Some(n) => Ok(n),
            None => r,
        }
    }

    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_write(buf),
            Stream::Unix(s) => s.try_write(buf),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

fn io_fault(e: &io::Error) -> Fault {
    use io::ErrorKind as K;
    match e.kind() {
        K::ConnectionReset | K::BrokenPipe | K::ConnectionAborted => Fault::Reset,
        _ => Fault::Io,
    }
}

/// A timerfd that tokio can wait on.
struct Timer(TimerFd);

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Registers the timer with the runtime. `AsyncFd::new` is deprecated because a type could
/// hand it a descriptor it does not own; [`Timer`] owns its `timerfd` for its whole life and
/// always returns that same descriptor, which is the condition `new` needs.
#[allow(deprecated)]
fn register(t: Timer) -> io::Result<AsyncFd<Timer>> {
    AsyncFd::new(t)
}

/// A connection's entry in its thread's [`Pacer`].
struct Slot {
    /// When the connection next needs waking, ns after the run start (`u64::MAX`: never).
    due: u64,
    /// Its due time has come and it has not yet noticed.
    fired: bool,
    waker: Option<Waker>,
}

/// Open loop: one `timerfd` per thread, set (absolute `CLOCK_MONOTONIC`) for the earliest time
/// any of the thread's connections needs waking. Its task wakes every connection whose time
/// has come, lets them send, and only then sets the timer again, once, for the new earliest.
struct Pacer {
    timer: AsyncFd<Timer>,
    t0: Instant,
    /// `CLOCK_MONOTONIC` at `t0`, ns: where the timer's absolute expiries count from.
    mono_t0_ns: u64,
    /// The expiry the timer is set for (ns after `t0`), if it is set.
    armed_for: Cell<Option<u64>>,
    slots: RefCell<Vec<Slot>>,
    /// The earliest due time may have changed: set the timer again.
    dirty: Cell<bool>,
    /// The pacer task, to wake when `dirty` is raised.
    waker: RefCell<Option<Waker>>,
    /// Busy polling: the timer first expires this long (ns) before a due time, and the thread
    /// polls through the rest instead of being woken late from sleep (0: off).
    lead_ns: u64,
}

impl Pacer {
    fn new(conns: usize, t0: Instant, lead: Duration) -> io::Result<Pacer> {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        Ok(Pacer {
            timer: register(Timer(fd))?,
            t0,
            mono_t0_ns: monotonic_at(t0),
            armed_for: Cell::new(None),
            slots: RefCell::new(
                (0..conns)
                    .map(|_| Slot {
                        due: u64::MAX,
                        fired: false,
                        waker: None,
                    })
                    .collect(),
            ),
            dirty: Cell::new(false),
            waker: RefCell::new(None),
            lead_ns: lead.as_nanos() as u64,
        })
    }

    /// Sets when connection `slot` next needs waking (`None`: not at all).
    fn want(&self, slot: usize, due: Option<u64>) {
        let due = due.unwrap_or(u64::MAX);
        let mut slots = self.slots.borrow_mut();
        let s = &mut slots[slot];
        if s.due == due && !s.fired {
            return;
        }
        s.due = due;
        s.fired = false;
        if due < self.armed_for.get().unwrap_or(u64::MAX) {
            self.raise();
        }
    }

    fn raise(&self) {
        if !self.dirty.replace(true) {
            if let Some(w) = self.waker.borrow().as_ref() {
                w.wake_by_ref();
            }
        }
    }

    /// Resolves once connection `slot`'s due time has come.
    async fn fired(&self, slot: usize) {
        poll_fn(|cx| {
            let mut slots = self.slots.borrow_mut();
            let s = &mut slots[slot];
            if s.fired {
                s.fired = false;
                return Poll::Ready(());
            }
            if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                s.waker = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Sets the timer for the earliest due time (a no-op when it is already set for it).
    fn arm(&self) {
        let min = self
            .slots
            .borrow()
            .iter()
            .filter(|s| !s.fired)
            .map(|s| s.due)
            .min()
            .unwrap_or(u64::MAX);
        if min == u64::MAX || self.armed_for.get() == Some(min) {
            // Nothing to wait for: a stale expiry only makes the task look and re-arm.
            return;
        }
        // With a lead, expire early unless that time has passed (then this is the second,
        // exact setting, and the thread polls until it expires).
        let early = min.saturating_sub(self.lead_ns);
        let expiry = if early > ns(Instant::now(), self.t0) {
            early
        } else {
            min
        };
        let at = Duration::from_nanos(self.mono_t0_ns + expiry).max(Duration::from_nanos(1));
        let set = self.timer.get_ref().0.set(
            Expiration::OneShot(TimeSpec::from_duration(at)),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        );
        // If setting fails the connections still wake on replies and on their tick.
        self.armed_for.set(set.is_ok().then_some(min));
        if set.is_ok() {
            busy::timer_due(self.t0 + Duration::from_nanos(min));
        }
    }

    /// The pacer task: runs until aborted when the thread's connections are done.
    async fn run(&self) {
        loop {
            if self.dirty.replace(false) {
                self.arm();
            }
            let expired = poll_fn(|cx| {
                if self.dirty.get() {
                    return Poll::Ready(false);
                }
                {
                    let mut w = self.waker.borrow_mut();
                    if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        *w = Some(cx.waker().clone());
                    }
                }
                match self.timer.poll_read_ready(cx) {
                    // No read of the timerfd: setting it again resets its expiry count and
                    // every expiry raises a new event, so clearing tokio's readiness is enough.
                    Poll::Ready(Ok(mut g)) => {
                        g.clear_ready();
                        Poll::Ready(true)
                    }
                    Poll::Ready(Err(_)) => Poll::Ready(false),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await;
            if !expired {
                continue;
            }
            self.armed_for.set(None);
            let now = ns(Instant::now(), self.t0);
            for s in self.slots.borrow_mut().iter_mut() {
                if !s.fired && s.due <= now {
                    s.fired = true;
                    s.due = u64::MAX;
                    if let Some(w) = s.waker.take() {
                        w.wake();
                    }
                }
            }
            // Set the timer again only after the woken connections have sent and said when
            // they next need waking: wake this task behind them, in the thread's run queue.
            self.dirty.set(true);
            let mut yielded = false;
            poll_fn(|cx| {
                if yielded {
                    Poll::Ready(())
                } else {
                    yielded = true;
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            })
            .await;
        }
    }
}

/// A request in flight.
#[derive(Clone, Copy)]
struct Pending {
    op: u8,
    keys: u16,
    intended: Instant,
    sent: Instant,
}

/// The open-loop schedule of one connection: intended send times as ns after the run start.
struct Schedule {
    mean_gap_ns: f64,
    poisson: bool,
    next_ns: f64,
}

impl Schedule {
    fn advance(&mut self, rng: &mut SmallRng) {
        self.next_ns += if self.poisson {
            -(1.0 - rng.random::<f64>()).ln() * self.mean_gap_ns
        } else {
            self.mean_gap_ns
        };
    }
}

enum Event {
    Read(io::Result<()>),
    Write(io::Result<()>),
    Timer,
    Tick,
}

struct Conn {
    ctx: Rc<Ctx>,
    rng: SmallRng,
    keys: Box<dyn KeyDist>,
    sizes: Box<dyn SizeDist>,
    /// Cumulative op shares, normalised to end at 1.
    mix: [f64; 4],
    inflight: VecDeque<Pending>,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: BytesMut,
    /// Requests this connection may still send (counted runs).
    quota: Option<u64>,
    depth: usize,
    /// Closed loop: refill only once this many slots are free.
    batch: usize,
    schedule: Option<Schedule>,
    /// This connection's place in the thread's [`Pacer`].
    slot: usize,
    pool_off: usize,
}

impl Conn {
    fn new(ctx: Rc<Ctx>, id: usize, slot: usize) -> Conn {
        let spec = &ctx.shared.spec;
        let conns = spec.connections;
        let seed = spec.seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut rng = SmallRng::seed_from_u64(seed);
        let keys = keys::build(
            &spec.key_dist.name,
            &spec.key_dist.params,
            spec.key_space,
            id,
            conns,
        )
        .expect("validated");
        let sizes =
            sizes::build(&spec.value_size.name, &spec.value_size.params).expect("validated");
        let m = spec.mix;
        let total = m.get + m.multiget + m.set + m.delete;
        let mix = [
            m.get / total,
            (m.get + m.multiget) / total,
            (m.get + m.multiget + m.set) / total,
            1.0,
        ];
        let quota = match spec.stop {
            Stop::Requests(n) => {
                let c = conns as u64;
                Some(n / c + u64::from((id as u64) < n % c))
            }
            Stop::Duration(_) => None,
        };
        let (depth, schedule) = match spec.mode {
            Mode::Closed => (spec.pipeline, None),
            Mode::Open { rate, arrivals } => {
                let mean_gap_ns = 1e9 * conns as f64 / rate;
                let poisson = arrivals == Arrivals::Poisson;
                let first = if poisson {
                    -(1.0 - rng.random::<f64>()).ln() * mean_gap_ns
                } else {
                    rng.random::<f64>() * mean_gap_ns
                };
                let s = Schedule {
                    mean_gap_ns,
                    poisson,
                    next_ns: first,
                };
                (spec.max_outstanding, Some(s))
            }
        };
        let pool_len = ctx.shared.pool.len();
        let batch = spec.send_batch.max(1);
        Conn {
            ctx,
            pool_off: rng.random_range(0..pool_len.max(1)),
            rng,
            keys,
            sizes,
            mix,
            inflight: VecDeque::with_capacity(depth),
            wbuf: Vec::with_capacity(16 * 1024),
            wpos: 0,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            quota,
            depth,
            batch,
            schedule,
            slot,
        }
    }

    fn done_sending(&self, now: Instant) -> bool {
        let sh = &self.ctx.shared;
        sh.stopping() || sh.send_until.is_some_and(|u| now >= u) || self.quota == Some(0)
    }

    async fn run(mut self) {
        let sh = Arc::clone(&self.ctx.shared);
        let mut failures = 0u32;
        loop {
            if self.done_sending(Instant::now()) {
                break;
            }
            let stream = match Stream::connect(&sh.spec.address, sh.spec.options).await {
                Ok(s) => s,
                Err(e) => {
                    self.ctx.rec.borrow_mut().fault(Fault::from_kind(e.kind()));
                    failures += 1;
                    if !self.back_off(failures, &e.to_string()).await {
                        break;
                    }
                    continue;
                }
            };
            self.skip_missed(Instant::now());
            busy::watch(self.slot, stream.as_fd());
            let exchanged = self.exchange(&stream).await;
            busy::unwatch(self.slot);
            match exchanged {
                Ok(()) => break,
                Err(f) => {
                    drop(stream);
                    {
                        let mut rec = self.ctx.rec.borrow_mut();
                        rec.fault(f);
                        rec.lost(self.inflight.len() as u64);
                    }
                    busy::settled(self.inflight.len() as u64);
                    self.inflight.clear();
                    self.wbuf.clear();
                    self.wpos = 0;
                    self.rbuf.clear();
                    failures = if f == Fault::Timeout { failures + 1 } else { 1 };
                    if !self.back_off(failures, f.as_str()).await {
                        break;
                    }
                }
            }
        }
        self.note_backlog(Instant::now());
    }

    /// Waits before reconnecting; false when the run should end instead.
    async fn back_off(&mut self, failures: u32, why: &str) -> bool {
        let sh = Arc::clone(&self.ctx.shared);
        let now = Instant::now();
        if sh.since_success(now) >= sh.spec.give_up_after {
            sh.give_up(format!(
                "gave up: no request succeeded for {:.1} s; last error: {why}",
                sh.since_success(now).as_secs_f64()
            ));
            return false;
        }
        let wait = Duration::from_millis(10u64 << failures.min(7)).min(Duration::from_secs(1));
        let until = now + wait;
        while Instant::now() < until {
            if self.done_sending(Instant::now()) {
                return false;
            }
            tokio::time::sleep(TICK.min(until.saturating_duration_since(Instant::now()))).await;
            self.ctx.rec.borrow_mut().tick(Instant::now());
        }
        !self.done_sending(Instant::now())
    }

    fn due(&self, ns: f64) -> Instant {
        self.ctx.shared.t0 + Duration::from_nanos(ns as u64)
    }

    /// Open loop, after a reconnect: requests that fell due more than a timeout ago, while
    /// the connection was down, are skipped (and counted) rather than sent in one burst.
    fn skip_missed(&mut self, now: Instant) {
        let timeout = self.ctx.shared.spec.options.request_timeout;
        let Some(s) = self.schedule.as_mut() else {
            return;
        };
        let t0 = self.ctx.shared.t0;
        let limit = now
            .saturating_duration_since(t0)
            .saturating_sub(timeout)
            .as_nanos() as f64;
        let mut skipped = 0;
        while s.next_ns < limit && self.quota != Some(0) {
            s.advance(&mut self.rng);
            skipped += 1;
            if let Some(q) = self.quota.as_mut() {
                *q -= 1;
            }
        }
        self.ctx.skipped.set(self.ctx.skipped.get() + skipped);
    }

    /// Open loop, at the end: requests due before sending stopped that were never sent.
    fn note_backlog(&mut self, now: Instant) {
        let sh = &self.ctx.shared;
        let Some(s) = self.schedule.as_ref() else {
            return;
        };
        let end = sh.send_until.map_or(now, |u| u.min(now));
        let end_ns = end.saturating_duration_since(sh.t0).as_nanos() as f64;
        if s.next_ns < end_ns {
            let mut n = ((end_ns - s.next_ns) / s.mean_gap_ns).floor() as u64 + 1;
            if let Some(q) = self.quota {
                n = n.min(q);
            }
            self.ctx.backlog.set(self.ctx.backlog.get() + n);
        }
    }

    async fn exchange(&mut self, s: &Stream) -> Result<(), Fault> {
        let timeout = self.ctx.shared.spec.options.request_timeout;
        let mut tick = Box::pin(tokio::time::sleep(TICK));
        loop {
            let now = Instant::now();
            self.ctx.rec.borrow_mut().tick(now);
            let sending = !self.done_sending(now);
            if sending {
                self.fill(now);
            }
            if self.wpos < self.wbuf.len() {
                self.flush(s)?;
            }
            if !sending && self.inflight.is_empty() {
                return Ok(());
            }
            if let Some(p) = self.inflight.front() {
                if now.saturating_duration_since(p.sent) > timeout {
                    return Err(Fault::Timeout);
                }
            }
            let want_write = self.wpos < self.wbuf.len();
            let timer_on = self.want_timer(sending);
            let pacer = self.ctx.pacer.as_ref();
            let slot = self.slot;
            let ev = tokio::select! {
                biased;
                r = s.readable() => Event::Read(r),
                r = s.writable(), if want_write => Event::Write(r),
                _ = async {
                    if let Some(p) = pacer {
                        p.fired(slot).await;
                    }
                }, if timer_on => Event::Timer,
                _ = &mut tick => Event::Tick,
            };
            match ev {
                Event::Read(r) => {
                    r.map_err(|e| io_fault(&e))?;
                    self.read(s)?;
                }
                Event::Write(r) => {
                    r.map_err(|e| io_fault(&e))?;
                }
                Event::Timer => {}
                Event::Tick => tick.as_mut().reset(tokio::time::Instant::now() + TICK),
            }
        }
    }

    /// Open loop: tells the thread's pacer when this connection next needs waking (never,
    /// while it is full: a reply will wake it). True when it waits for the pacer.
    fn want_timer(&mut self, sending: bool) -> bool {
        let (Some(s), Some(p)) = (self.schedule.as_ref(), self.ctx.pacer.as_ref()) else {
            return false;
        };
        let due = (sending && self.inflight.len() < self.depth).then_some(s.next_ns as u64);
        p.want(self.slot, due);
        due.is_some()
    }

    fn fill(&mut self, now: Instant) {
        let mut n = 0u64;
        if self.schedule.is_none() {
            // A batch is never more than the requests left to send, so the last ones go out.
            let batch = self
                .batch
                .min(self.quota.map_or(usize::MAX, |q| q as usize));
            if self.depth - self.inflight.len() < batch && !self.inflight.is_empty() {
                return;
            }
            while self.inflight.len() < self.depth && self.quota != Some(0) {
                self.push(now, now);
                n += 1;
            }
        } else {
            while self.inflight.len() < self.depth && self.quota != Some(0) {
                let s = self.schedule.as_ref().expect("open loop");
                let due = self.due(s.next_ns);
                if due > now {
                    break;
                }
                self.push(due, now);
                self.schedule
                    .as_mut()
                    .expect("open loop")
                    .advance(&mut self.rng);
                n += 1;
            }
        }
        if n > 0 {
            self.ctx.rec.borrow_mut().sent(n);
            busy::sent(n);
        }
    }

    fn put_key(&mut self, index: u64) {
        self.wbuf
            .extend_from_slice(self.ctx.shared.spec.prefix.as_bytes());
        self.wbuf.push(b':');
        put_u64(&mut self.wbuf, index);
    }

    /// Encodes one request and records it as in flight.
    fn push(&mut self, intended: Instant, now: Instant) {
        let x: f64 = self.rng.random();
        let op = self.mix.iter().position(|&c| x < c).unwrap_or(GET);
        let mut keys = 1u16;
        match op {
            GET => {
                self.wbuf.extend_from_slice(b"get ");
                let k = self.keys.next(&mut self.rng);
                self.put_key(k);
            }
            MULTIGET => {
                let n = self.ctx.shared.spec.multiget_keys;
                keys = n as u16;
                self.wbuf.extend_from_slice(b"get");
                for _ in 0..n {
                    self.wbuf.push(b' ');
                    let k = self.keys.next(&mut self.rng);
                    self.put_key(k);
                }
            }
            SET => {
                let k = self.keys.next(&mut self.rng);
                let len = self.sizes.next(&mut self.rng);
                self.wbuf.extend_from_slice(b"set ");
                self.put_key(k);
                self.wbuf.extend_from_slice(b" 0 ");
                put_u64(&mut self.wbuf, u64::from(self.ctx.shared.spec.ttl));
                self.wbuf.push(b' ');
                put_u64(&mut self.wbuf, len as u64);
                self.wbuf.extend_from_slice(b"\r\n");
                let pool = &self.ctx.shared.pool;
                if self.pool_off + len > pool.len() {
                    self.pool_off = 0;
                }
                self.wbuf
                    .extend_from_slice(&pool[self.pool_off..self.pool_off + len]);
                self.pool_off += 1 + (len & 0xff);
                if let Some(bits) = self.ctx.written.borrow_mut().as_mut() {
                    bits[(k / 64) as usize] |= 1 << (k % 64);
                }
            }
            _ => {
                // DELETE
                self.wbuf.extend_from_slice(b"delete ");
                let k = self.keys.next(&mut self.rng);
                self.put_key(k);
            }
        }
        self.wbuf.extend_from_slice(b"\r\n");
        self.inflight.push_back(Pending {
            op: op as u8,
            keys,
            intended,
            sent: now,
        });
        if let Some(q) = self.quota.as_mut() {
            *q -= 1;
        }
    }

    fn flush(&mut self, s: &Stream) -> Result<(), Fault> {
        while self.wpos < self.wbuf.len() {
            match s.try_write(&self.wbuf[self.wpos..]) {
                Ok(n) => {
                    self.wpos += n;
                    self.ctx.writes.set(self.ctx.writes.get() + 1);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(io_fault(&e)),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
        }
        Ok(())
    }

    fn read(&mut self, s: &Stream) -> Result<(), Fault> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
            self.rbuf.reserve(READ_CHUNK);
        }
        match s.read_some(&mut self.rbuf) {
            Ok(0) => return Err(Fault::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(io_fault(&e)),
        }
        let now = Instant::now();
        let mut pos = 0;
        let mut done = 0u64;
        {
            let mut rec = self.ctx.rec.borrow_mut();
            rec.tick(now);
            while let Some(&p) = self.inflight.front() {
                let is_get = p.op as usize == GET || p.op as usize == MULTIGET;
                match parse_reply(is_get, &self.rbuf[pos..]) {
                    Ok(None) => break,
                    Ok(Some((n, reply))) => {
                        pos += n;
                        self.inflight.pop_front();
                        done += 1;
                        match reply {
                            Reply::Done { hits } => rec.reply(
                                p.op as usize,
                                u32::from(p.keys),
                                hits.min(u32::from(p.keys)),
                                ns(now, p.intended),
                                ns(now, p.sent),
                            ),
                            Reply::Failed(f) => rec.fault(f),
                        }
                    }
                    Err(_) => return Err(Fault::Protocol),
                }
            }
        }
        if self.inflight.is_empty() && pos < self.rbuf.len() {
            return Err(Fault::Protocol); // bytes nobody asked for
        }
        self.rbuf.advance(pos);
        busy::settled(done);
        if done > 0 {
            let sh = &self.ctx.shared;
            let ms = now.saturating_duration_since(sh.t0).as_millis() as u64;
            sh.last_success_ms.fetch_max(ms, Ordering::Relaxed);
            if matches!(sh.spec.stop, Stop::Requests(_)) {
                sh.progress.done.fetch_add(done, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

/// `CLOCK_MONOTONIC` in ns at `then` (a past instant), from one reading of both clocks.
fn monotonic_at(then: Instant) -> u64 {
    let mono = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| Duration::from(t).as_nanos() as u64)
        .unwrap_or(0);
    mono.saturating_sub(ns(Instant::now(), then))
}

fn ns(now: Instant, then: Instant) -> u64 {
    now.saturating_duration_since(then).as_nanos() as u64
}

/// Appends the decimal digits of `v`.
fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[derive(Debug, PartialEq, Eq)]
enum Reply {
    /// A reply; for a get, the number of values it carried.
    Done { hits: u32 },
    /// An error reply; the connection is still usable.
    Failed(Fault),
}

/// Decodes one whole reply from the start of `buf`: `None` until all of it has arrived.
fn parse_reply(is_get: bool, buf: &[u8]) -> Result<Option<(usize, Reply)>, DecodeError> {
    let mut pos = 0;
    let mut hits = 0u32;
    loop {
        let (f, n) = match frame::decode(&buf[pos..]) {
            Ok(x) => x,
            Err(DecodeError::Incomplete) => return Ok(None),
            Err(e) => return Err(e),
        };
        pos += n;
        let reply = match f {
            Frame::Value { .. } if is_get => {
                hits += 1;
                continue;
            }
            Frame::End if is_get => Reply::Done { hits },
            Frame::ServerError(_) => Reply::Failed(Fault::ServerError),
            Frame::ClientError(_) => Reply::Failed(Fault::ClientError),
            Frame::Error => Reply::Failed(Fault::UnknownCommand),
            Frame::Stored | Frame::NotStored | Frame::Deleted | Frame::NotFound | Frame::Exists
                if !is_get =>
            {
                Reply::Done { hits: 0 }
            }
            _ => {
                return Err(DecodeError::Invalid(frame::Invalid {
                    kind: frame::InvalidKind::UnknownReply,
                    offset: pos - n,
                }))
            }
        };
        return Ok(Some((pos, reply)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` with a pacer of `slots` connections whose task is running; with a `lead`
    /// its timer first expires that long before each due time (busy polling).
    fn with_pacer<F, Fut>(slots: usize, lead: Duration, f: F)
    where
        F: FnOnce(Rc<Pacer>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let p = Rc::new(Pacer::new(slots, Instant::now(), lead).unwrap());
            let task = {
                let p = Rc::clone(&p);
                tokio::task::spawn_local(async move { p.run().await })
            };
            tokio::time::timeout(Duration::from_secs(10), f(Rc::clone(&p)))
                .await
                .expect("the pacer woke the connections");
            task.abort();
        });
    }

    #[test]
    fn pacer_wakes_each_connection_at_its_time_never_before() {
        wakes_each_connection_at_its_time_never_before(Duration::ZERO);
    }

    #[test]
    fn pacer_with_a_lead_still_wakes_no_connection_before_its_time() {
        // The early expiry (4 ms before each due time) must wake nobody.
        wakes_each_connection_at_its_time_never_before(Duration::from_millis(4));
    }

    fn wakes_each_connection_at_its_time_never_before(lead: Duration) {
        with_pacer(3, lead, |p| async move {
            let ms = |n: u64| n * 1_000_000;
            p.want(0, Some(ms(30)));
            p.want(1, Some(ms(10)));
            p.want(2, None);
            let first = tokio::select! {
                biased;
                _ = p.fired(0) => 0,
                _ = p.fired(1) => 1,
                _ = p.fired(2) => 2,
            };
            assert_eq!(first, 1);
            assert!(ns(Instant::now(), p.t0) >= ms(10), "woken early");
            // An earlier time asked for after the timer was set still comes first.
            p.want(1, Some(ms(20)));
            let second = tokio::select! {
                biased;
                _ = p.fired(0) => 0,
                _ = p.fired(1) => 1,
            };
            assert_eq!(second, 1);
            assert!(ns(Instant::now(), p.t0) >= ms(20), "woken early");
            p.fired(0).await;
            assert!(ns(Instant::now(), p.t0) >= ms(30), "woken early");
            assert!(
                !p.slots.borrow()[2].fired,
                "a connection that asked for nothing"
            );
        });
    }

    #[test]
    fn pacer_wakes_every_connection_that_is_due_at_once() {
        with_pacer(4, Duration::ZERO, |p| async move {
            for slot in 0..4 {
                p.want(slot, Some(5_000_000));
            }
            for slot in 0..4 {
                p.fired(slot).await;
            }
        });
    }

    #[test]
    fn digits() {
        for v in [0u64, 7, 10, 12345, u64::MAX] {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
    }

    #[test]
    fn replies_are_taken_whole() {
        let get = b"VALUE a 0 1\r\nx\r\nVALUE b 0 2\r\nyz\r\nEND\r\nSTORED\r\n";
        assert_eq!(
            parse_reply(true, get).unwrap(),
            Some((38, Reply::Done { hits: 2 }))
        );
        for cut in 0..38 {
            assert_eq!(parse_reply(true, &get[..cut]).unwrap(), None, "cut {cut}");
        }
        assert_eq!(
            parse_reply(false, &get[38..]).unwrap(),
            Some((8, Reply::Done { hits: 0 }))
        );
        assert_eq!(
            parse_reply(true, b"END\r\n").unwrap(),
            Some((5, Reply::Done { hits: 0 }))
        );
        assert_eq!(
            parse_reply(false, b"SERVER_ERROR out of memory\r\n").unwrap(),
            Some((28, Reply::Failed(Fault::ServerError)))
        );
        assert!(parse_reply(false, b"END\r\n").is_err());
        assert!(parse_reply(true, b"STORED\r\n").is_err());
        assert!(parse_reply(true, b"HELLO garbage\r\n").is_err());
    }
}
