//! What the calling thread and the worker threads share while a run is on: the public
//! [`Progress`] (also read and cancelled from outside), and the crate's own [`Shared`] state.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::route::Routes;
use crate::spec::Spec;

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
    /// Each finished interval's index and the encoded histogram its p99 is read from
    /// (corrected in open loop, plain in closed loop), in the order they finished: what a
    /// caller needs to judge the run's precision while it runs.
    pub histograms: Mutex<Vec<(u64, String)>>,
    /// Keep [`histograms`](Progress::histograms) (encoding one per interval costs the
    /// collector time: only when a caller asked, `load --precision`).
    pub keep_histograms: AtomicBool,
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

/// What every worker thread shares.
pub(crate) struct Shared {
    pub spec: Spec,
    pub t0: Instant,
    pub send_until: Option<Instant>,
    pub progress: Arc<Progress>,
    /// Milliseconds after `t0` of the latest successful reply.
    pub last_success_ms: AtomicU64,
    /// Connections without a connection to any member (not yet connected, or dropped and
    /// not back).
    pub conns_down: AtomicUsize,
    pub stop: AtomicBool,
    pub aborted: Mutex<Option<String>>,
    /// Random bytes that values are cut from.
    pub pool: bytes::Bytes,
    /// Which pool member each key goes to.
    pub routes: Arc<Routes>,
    /// A Redis Cluster's redirections, by the member that sent them: `-MOVED`, `-ASK`.
    pub redirects: Vec<[AtomicU64; 2]>,
}

impl Shared {
    /// The state of a run whose measured phase starts now, cutting values from `pool`.
    pub fn start(
        spec: &Spec,
        progress: &Arc<Progress>,
        pool: bytes::Bytes,
        routes: Arc<Routes>,
    ) -> Arc<Shared> {
        let t0 = Instant::now();
        Arc::new(Shared {
            spec: spec.clone(),
            t0,
            send_until: spec.send_limit().map(|d| t0 + d),
            progress: Arc::clone(progress),
            last_success_ms: AtomicU64::new(0),
            conns_down: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            aborted: Mutex::new(None),
            pool,
            routes,
            redirects: (0..spec.pool.len())
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
        })
    }

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

    /// The redirections each member sent: (`-MOVED`, `-ASK`), in the pool's order.
    pub fn redirections(&self) -> Vec<(u64, u64)> {
        self.redirects
            .iter()
            .map(|[m, a]| (m.load(Ordering::Relaxed), a.load(Ordering::Relaxed)))
            .collect()
    }

    pub fn since_success(&self, now: Instant) -> Duration {
        let ms = self.last_success_ms.load(Ordering::Relaxed);
        now.saturating_duration_since(self.t0 + Duration::from_millis(ms))
    }
}
