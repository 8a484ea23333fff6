//! What a run produced: the [`Outcome`] and the figures it carries besides the time series.

use std::collections::BTreeMap;
use std::time::Duration;

use cachelab_metrics::Latency;

use serde::Serialize;

use crate::recorder::Episode;
use crate::samples::ClientSamples;
use crate::series::{Interval, Totals};
use crate::server::ServerView;
use crate::stalls::Stall;
use crate::steady::Steady;

/// How the open loop kept to its schedule.
#[derive(Debug, Clone, Copy, Default, Serialize)]
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
    /// Open loop, spinning to sends: times a thread waited awake for a send's due time, and
    /// the seconds it spent so (pacing: part of the threads' CPU time, not their work).
    pub spins: u64,
    pub spun_s: f64,
    /// Open loop, spinning on a single server: requests the spin itself wrote at their due
    /// time (one write each), and those staged for it that the connection task sent instead
    /// (the socket would block, or the task came first).
    pub spin_sends: u64,
    pub spin_fallbacks: u64,
    /// Writes that sent requests (requests sent / writes: the requests one write carried).
    pub writes: u64,
}

/// One member of a pool over the whole sending phase (warm-up included, as its `stats`
/// deltas): its parts of the requests (a multi-get split over the pool is one part per member
/// it touches), their replies, hits, misses, errors and latency, its down episodes, and its
/// `stats` before and after.
#[derive(Debug, Clone)]
pub struct MemberOutcome {
    /// `host:port` as given.
    pub address: String,
    pub weight: u32,
    /// Keys of the key space it holds.
    pub keys: u64,
    /// Parts sent to it, or failed at once while it was marked down.
    pub sent: u64,
    pub replies: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: BTreeMap<&'static str, u64>,
    /// Parts in flight on a socket to it that failed.
    pub lost: u64,
    /// Each replied part's latency: from its request's intended time in open loop, from its
    /// send in closed loop.
    pub latency: Latency,
    /// When it was marked down, merged over the connections.
    pub down: Vec<Episode>,
    pub server: ServerView,
    /// A Redis Cluster's master: the redirections it sent (`-MOVED`, `-ASK`); None in a
    /// pool.
    pub redirects: Option<(u64, u64)>,
}

/// The latency probe's part of a run (see [`Spec::probe_rate`](crate::Spec::probe_rate)):
/// one connection on its own thread sending the run's mix at a low open-loop Poisson rate
/// beside the load connections. Its latencies are its own, counted from each request's
/// intended send time; its requests, errors and keys are the run's too.
#[derive(Debug, Clone)]
pub struct ProbeOutcome {
    /// Requests per second asked for.
    pub rate: f64,
    /// Its time series, on the load's interval length (its own clock: it starts with the
    /// load connections).
    pub intervals: Vec<Interval>,
    /// Over every interval, warm-up included.
    pub all: Totals,
    /// Over the intervals after the warm-up.
    pub measured: Totals,
    /// CPU time of the probe's thread while sending (user, system), seconds.
    pub cpu_s: (f64, f64),
    /// Time the probe's thread was runnable but waiting for a CPU, seconds.
    pub wait_s: f64,
    /// Requests due by the end of sending but never sent.
    pub backlog_at_end: u64,
    /// Requests skipped because the connection was down when they fell due.
    pub skipped_disconnected: u64,
    /// Stretches when its requests waited at least the stall threshold.
    pub stalls: usize,
    /// Why the probe gave up early, if it did.
    pub aborted: Option<String>,
    /// From its first request to its last reply.
    pub elapsed: Duration,
    /// After the warm-up: its sends' lateness and samples of its sends and replies.
    pub client_samples: ClientSamples,
}

/// A finished (or stopped) run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub intervals: Vec<Interval>,
    pub steady: Steady,
    /// Over every interval, warm-up included.
    pub all: Totals,
    /// Over the measured run: every interval after the warm-up. The headline figures.
    pub measured: Totals,
    /// Over the steady-state window.
    pub window: Totals,
    /// When requests waited at least the stall threshold (see [`crate::stalls`]).
    pub stalls: Vec<Stall>,
    /// Stalls noted but not kept (a thread's list is bounded).
    pub stalls_dropped: u64,
    /// The server; for a pool, its first member; through a proxy, the proxy (its version,
    /// no stats).
    pub server: ServerView,
    /// Through a proxy: the servers behind it (their stats), in the order given.
    pub behind: Vec<ServerView>,
    /// Every member of a pool, in its order (empty for a single server).
    pub members: Vec<MemberOutcome>,
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
    /// After the warm-up: sends' lateness (open loop) and samples of sends and replies.
    pub client_samples: ClientSamples,
    /// The latency probe's part, when the spec asked for one.
    pub probe: Option<ProbeOutcome>,
}
