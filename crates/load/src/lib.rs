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
//! timing uses a `timerfd` per connection (microsecond precision; tokio's own timer has 1 ms).
//!
//! Results come as per-interval records ([`Interval`]) — throughput, hits, misses, errors and
//! both histograms — plus the steady-state window ([`steady`]) and totals over it, the
//! server's `stats` deltas and, for a server on this machine, its run-queue wait from
//! `/proc/<pid>/task/*/schedstat`.
//!
//! Every key is `<prefix>:<index>`; at the end every key the run may have written (the
//! prefilled key space and every key set) is deleted. Nothing is ever flushed.

pub mod busy;
mod conn;
pub mod keys;
mod recorder;
pub mod server;
mod setup;
pub mod sizes;
pub mod steady;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cachelab_client::{Address, Options};
use cachelab_metrics::Latency;
use cachelab_proto::Key;

pub use recorder::{Fault, Interval, Totals, OPS};
pub use steady::Steady;

/// Hard caps: a spec beyond them is refused with a message naming the cap.
pub mod caps {
    pub const MAX_CONNECTIONS: usize = 4096;
    pub const MAX_THREADS: usize = 64;
    pub const MAX_PIPELINE: usize = 1024;
    pub const MAX_RATE: f64 = 5_000_000.0;
    pub const MAX_DURATION_S: f64 = 3600.0;
    pub const MAX_WARMUP_S: f64 = 600.0;
    pub const MAX_KEY_SPACE: u64 = 100_000_000;
    pub const MAX_REQUESTS: u64 = 10_000_000_000;
    pub const MAX_MULTIGET_KEYS: usize = 100;
    /// The longest prefix accepted, leaving room in the 250-byte key for `:<index>`.
    pub const MAX_PREFIX: usize = 120;
    /// The longest busy-poll budget, µs: past this a sleep's wake-up no longer dominates.
    pub const MAX_BUSY_POLL_US: u64 = 1000;
}

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// `pipeline` requests outstanding per connection, always.
    Closed,
    /// A target rate over all connections, in requests per second.
    Open { rate: f64, arrivals: Arrivals },
}

/// Gaps between intended send times in open loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Exponentially distributed gaps (a Poisson process per connection).
    Poisson,
    /// Equal gaps, each connection starting at a random phase.
    Uniform,
}

/// Shares of each operation; they need not add up to 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    pub get: f64,
    pub multiget: f64,
    pub set: f64,
    pub delete: f64,
}

/// A distribution by registry name and numeric parameters (see [`keys`] and [`sizes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DistSpec {
    pub name: String,
    pub params: Vec<f64>,
}

/// When the run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Measure for this long after the warm-up.
    Duration(Duration),
    /// Send this many requests in all (warm-up included).
    Requests(u64),
}

/// A workload.
#[derive(Debug, Clone)]
pub struct Spec {
    pub address: Address,
    pub connections: usize,
    /// Client threads; connections are dealt out to them round-robin.
    pub threads: usize,
    /// Closed loop: requests outstanding per connection.
    pub pipeline: usize,
    /// Open loop: the most requests in flight on one connection.
    pub max_outstanding: usize,
    pub mode: Mode,
    pub mix: Mix,
    /// Keys per multi-get.
    pub multiget_keys: usize,
    pub key_space: u64,
    pub key_dist: DistSpec,
    pub value_size: DistSpec,
    /// The per-run key prefix; every key is `<prefix>:<index>`.
    pub prefix: String,
    /// Expiry of every value set, in seconds (0: none).
    pub ttl: u32,
    pub stop: Stop,
    /// Time at the start whose intervals are marked warm-up and left out of the totals.
    pub warmup: Duration,
    /// Set every key of the key space before the run.
    pub prefill: bool,
    /// Length of one time-series interval.
    pub interval: Duration,
    pub options: Options,
    /// Stop when no request has succeeded for this long.
    pub give_up_after: Duration,
    pub seed: u64,
    /// The server's process id, when known to be on this machine (for schedstat).
    pub server_pid: Option<u32>,
    /// Busy polling: with replies outstanding, a client thread polls its sockets for up to
    /// this long before it sleeps (zero: never; see [`busy`]).
    pub busy_poll: Duration,
    /// Closed loop: a connection sends new requests only once at least this many of its
    /// `pipeline` slots are free (1: after every reply), so each write carries that many.
    /// Fewer, larger writes cost client and server less per request; the requests
    /// outstanding then vary between `pipeline - send_batch + 1` and `pipeline`.
    pub send_batch: usize,
}

/// Why a run could not start: an invalid spec, or a server that could not be reached.
pub use cachelab_client::StartError as SpecError;

impl Spec {
    /// Checks every field against its range and the hard caps.
    pub fn validate(&self) -> Result<(), SpecError> {
        use caps::*;
        let bad = |m: String| Err(SpecError::Invalid(m));
        if self.prefix.is_empty() || self.prefix.len() > MAX_PREFIX {
            return bad(format!("key prefix must be 1 to {MAX_PREFIX} bytes"));
        }
        if let Err(e) = Key::new(&self.prefix) {
            return bad(format!("key prefix {:?}: {e}", self.prefix));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return bad(format!(
                "connections must be between 1 and {MAX_CONNECTIONS} (hard cap)"
            ));
        }
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return bad(format!(
                "threads must be between 1 and {MAX_THREADS} (hard cap)"
            ));
        }
        if self.threads > self.connections {
            return bad(format!(
                "{} threads for {} connections: each thread needs at least one connection",
                self.threads, self.connections
            ));
        }
        if !(1..=MAX_PIPELINE).contains(&self.pipeline)
            || !(1..=MAX_PIPELINE).contains(&self.max_outstanding)
        {
            return bad(format!(
                "pipeline depth and max outstanding must be between 1 and {MAX_PIPELINE}"
            ));
        }
        if !(1..=self.pipeline).contains(&self.send_batch) {
            return bad(format!(
                "send batch must be between 1 and the pipeline depth ({})",
                self.pipeline
            ));
        }
        if let Mode::Open { rate, .. } = self.mode {
            if self.send_batch > 1 {
                return bad(
                    "send batch is for the closed loop only: an open loop sends each request \
                     at its scheduled time"
                        .into(),
                );
            }
            if !(rate.is_finite() && rate > 0.0) {
                return bad(format!("rate must be a positive number, got {rate}"));
            }
            if rate > MAX_RATE {
                return bad(format!(
                    "rate {rate} is above the hard cap of {MAX_RATE} requests/s"
                ));
            }
        }
        let m = self.mix;
        let shares = [m.get, m.multiget, m.set, m.delete];
        if shares.iter().any(|s| !(s.is_finite() && *s >= 0.0)) || shares.iter().sum::<f64>() <= 0.0
        {
            return bad("op mix: shares must be 0 or more and not all 0".into());
        }
        if !(1..=MAX_MULTIGET_KEYS).contains(&self.multiget_keys) {
            return bad(format!(
                "keys per multi-get must be between 1 and {MAX_MULTIGET_KEYS}"
            ));
        }
        if !(1..=MAX_KEY_SPACE).contains(&self.key_space) {
            return bad(format!(
                "key space must be between 1 and {MAX_KEY_SPACE} keys (hard cap)"
            ));
        }
        keys::build(
            &self.key_dist.name,
            &self.key_dist.params,
            self.key_space,
            0,
            1,
        )
        .map_err(SpecError::Invalid)?;
        sizes::build(&self.value_size.name, &self.value_size.params).map_err(SpecError::Invalid)?;
        match self.stop {
            Stop::Duration(d) if d.is_zero() || d.as_secs_f64() > MAX_DURATION_S => {
                return bad(format!(
                    "duration must be above 0 and at most {MAX_DURATION_S} s (hard cap)"
                ))
            }
            Stop::Requests(n) if n == 0 || n > MAX_REQUESTS => {
                return bad(format!(
                    "request count must be between 1 and {MAX_REQUESTS} (hard cap)"
                ))
            }
            _ => {}
        }
        if self.busy_poll > Duration::from_micros(MAX_BUSY_POLL_US) {
            return bad(format!(
                "busy-poll must be at most {MAX_BUSY_POLL_US} µs (hard cap)"
            ));
        }
        if self.warmup.as_secs_f64() > MAX_WARMUP_S {
            return bad(format!(
                "warm-up must be at most {MAX_WARMUP_S} s (hard cap)"
            ));
        }
        let iv = self.interval.as_secs_f64();
        if !(0.01..=60.0).contains(&iv) {
            return bad("interval must be between 0.01 and 60 s".into());
        }
        for (name, d) in [
            ("timeout", self.options.request_timeout),
            ("connect timeout", self.options.connect_timeout),
            ("give-up time", self.give_up_after),
        ] {
            if d.is_zero() || d > Duration::from_secs(3600) {
                return bad(format!("{name} must be above 0 and at most 3600 s"));
            }
        }
        if self.ttl > 30 * 24 * 3600 {
            return bad("ttl must be at most 30 days (2592000 s)".into());
        }
        Ok(())
    }

    /// Wall-clock limit of the sending phase, when there is one.
    fn send_limit(&self) -> Option<Duration> {
        match self.stop {
            Stop::Duration(d) => Some(self.warmup + d),
            Stop::Requests(_) => None,
        }
    }
}

/// Shared progress: `done` of `total` (milliseconds of a timed run, or requests of a counted
/// one), the latest interval's throughput and p99, and a stop flag.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicU64,
    pub total: AtomicU64,
    /// Requests per second in the latest finished interval.
    pub last_rate: AtomicU64,
    /// Corrected (open loop) or plain (closed loop) p99 of the latest interval, ns.
    pub last_p99_ns: AtomicU64,
    /// Errors so far.
    pub errors: AtomicU64,
    cancel: AtomicBool,
}

impl Progress {
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress::default())
    }

    /// Stops sending; requests in flight are awaited (up to the timeout), results are kept.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// The server's `stats` before and after the measured phase, and its scheduler counters.
#[derive(Debug, Clone, Default)]
pub struct ServerView {
    pub version: String,
    pub before: BTreeMap<String, String>,
    pub after: BTreeMap<String, String>,
    /// The process whose schedstat was read, when the server is on this machine.
    pub pid: Option<u32>,
    pub schedstat_before: Option<server::SchedStat>,
    pub schedstat_after: Option<server::SchedStat>,
}

/// How the open loop kept to its schedule.
#[derive(Debug, Clone, Copy, Default)]
pub struct Schedule {
    /// Requests per second asked for.
    pub target_rate: f64,
    /// Requests that were due by the end of sending but never sent (the connection was full).
    pub backlog_at_end: u64,
    /// Requests skipped because their connection was down when they fell due.
    pub skipped_disconnected: u64,
}

/// Scheduler counters of the client threads over the sending phase, summed over the threads:
/// a client that waits for a CPU, or sleeps and wakes once per request, adds that delay to
/// every latency it measures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientSched {
    /// Time runnable but waiting for a CPU (`/proc/thread-self/schedstat`), seconds.
    pub wait_s: f64,
    /// Times a thread went to sleep (voluntary context switches).
    pub sleeps: u64,
    /// Times a thread was preempted (involuntary context switches).
    pub preempted: u64,
    /// Busy polling: times a thread polled before sleeping, and polls that a reply (or the
    /// open-loop timer) ended before the budget ran out.
    pub busy_polls: u64,
    pub busy_caught: u64,
    /// Writes that sent requests (requests sent / writes: the requests one write carried).
    pub writes: u64,
}

/// A finished (or stopped) run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub intervals: Vec<Interval>,
    pub steady: Steady,
    /// Over every interval, warm-up included.
    pub all: Totals,
    /// Over the steady-state window.
    pub window: Totals,
    pub server: ServerView,
    pub schedule: Option<Schedule>,
    /// CPU time of the client threads while sending (user, system), seconds.
    pub client_cpu_s: (f64, f64),
    /// How the client threads were scheduled while sending.
    pub client_sched: ClientSched,
    /// CPU time of the whole process over the same phase (user, system), seconds: the
    /// client threads plus whatever else the process ran meanwhile (an embedding
    /// application's threads, a progress display), but not its start-up, prefill or clean-up.
    pub process_cpu_s: (f64, f64),
    pub prefilled_keys: u64,
    pub prefill_s: f64,
    /// Keys the clean-up deleted (or found already gone).
    pub deleted_keys: u64,
    /// Keys that may remain because their delete failed.
    pub leftover_keys: u64,
    pub cancelled: bool,
    pub aborted: Option<String>,
    /// From the first request to the last reply.
    pub elapsed: Duration,
}

/// What every worker thread shares.
pub(crate) struct Shared {
    pub spec: Spec,
    pub t0: Instant,
    pub send_until: Option<Instant>,
    pub progress: Arc<Progress>,
    /// Milliseconds after `t0` of the latest successful reply.
    pub last_success_ms: AtomicU64,
    pub stop: AtomicBool,
    pub aborted: Mutex<Option<String>>,
    /// Random bytes that values are cut from.
    pub pool: bytes::Bytes,
}

impl Shared {
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.progress.cancelled()
    }

    pub fn give_up(&self, why: String) {
        let mut a = self.aborted.lock().expect("not poisoned");
        if a.is_none() {
            *a = Some(why);
        }
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn since_success(&self, now: Instant) -> Duration {
        let ms = self.last_success_ms.load(Ordering::Relaxed);
        now.saturating_duration_since(self.t0 + Duration::from_millis(ms))
    }
}

/// This process's CPU time so far (user, system), seconds; zeros when it cannot be read.
fn process_cpu() -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    getrusage(UsageWho::RUSAGE_SELF).map_or((0.0, 0.0), |u| (s(u.user_time()), s(u.system_time())))
}

/// Runs the workload. Blocks until it ends, is cancelled, or gives up.
///
/// Fails only when the spec is invalid or the server cannot be reached at the start; after
/// that every failure is counted and the outcome carries the partial results.
pub fn run(spec: &Spec, progress: &Arc<Progress>) -> Result<Outcome, SpecError> {
    spec.validate()?;
    let mut view = server::snapshot_start(spec).map_err(SpecError::Server)?;

    let max_value = sizes::build(&spec.value_size.name, &spec.value_size.params)
        .map_err(SpecError::Invalid)?
        .max();
    let pool = setup::random_pool(max_value, spec.seed);

    let prefill_start = Instant::now();
    let prefilled_keys = if spec.prefill && !progress.cancelled() {
        setup::prefill(spec, &pool, progress)
    } else {
        0
    };
    let prefill_s = prefill_start.elapsed().as_secs_f64();

    // The measured phase starts from fresh counters.
    server::snapshot_before(spec, &mut view);
    let t0 = Instant::now();
    match spec.stop {
        Stop::Duration(_) => progress.total.store(
            spec.send_limit().expect("timed").as_millis() as u64,
            Ordering::Relaxed,
        ),
        Stop::Requests(n) => progress.total.store(n, Ordering::Relaxed),
    }
    let shared = Arc::new(Shared {
        spec: spec.clone(),
        t0,
        send_until: spec.send_limit().map(|d| t0 + d),
        progress: Arc::clone(progress),
        last_success_ms: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        aborted: Mutex::new(None),
        pool,
    });
    let process0 = process_cpu();
    let run = recorder::drive(&shared);
    let process1 = process_cpu();
    server::snapshot_after(spec, &mut view);

    let written = if spec.prefill {
        setup::Written::All
    } else {
        run.written
    };
    let (deleted_keys, leftover_keys) = setup::cleanup(spec, &written);

    let steady = steady::detect(&run.intervals, spec);
    let all = Totals::over(&run.intervals, 0);
    let window = Totals::over(&run.intervals, steady.start_index);
    let schedule = match spec.mode {
        Mode::Open { rate, .. } => Some(Schedule {
            target_rate: rate,
            backlog_at_end: run.backlog_at_end,
            skipped_disconnected: run.skipped,
        }),
        Mode::Closed => None,
    };
    let aborted = shared.aborted.lock().expect("not poisoned").clone();
    Ok(Outcome {
        intervals: run.intervals,
        steady,
        all,
        window,
        server: view,
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
    })
}

/// An empty latency histogram of the kind every interval uses.
pub(crate) fn histogram() -> Latency {
    cachelab_metrics::latency()
}
