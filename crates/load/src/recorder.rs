//! Per-interval recording: each worker thread fills the current interval's counters and
//! histograms, hands finished intervals to the collector (the calling thread), which merges
//! the threads' parts, encodes the histograms and keeps one small [`Interval`] per interval.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cachelab_client::ErrorKind;
use cachelab_metrics::Latency;

use crate::setup::Written;
use crate::{conn, histogram, Shared};

/// The operations, in the order of every per-op array.
pub const OPS: [&str; 4] = ["get", "multiget", "set", "delete"];
pub(crate) const GET: usize = 0;
pub(crate) const MULTIGET: usize = 1;
pub(crate) const SET: usize = 2;

/// What went wrong, counted by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    ConnectRefused,
    ConnectFailed,
    ConnectTimeout,
    /// No reply within the request timeout; the connection is dropped and reopened.
    Timeout,
    /// The server closed the connection.
    Closed,
    /// Connection reset or broken pipe.
    Reset,
    Io,
    /// Bytes that are not a valid reply.
    Protocol,
    /// `SERVER_ERROR` (e.g. out of memory); the connection stays.
    ServerError,
    ClientError,
    UnknownCommand,
}

pub(crate) const FAULTS: usize = 11;

impl Fault {
    pub const ALL: [Fault; FAULTS] = [
        Fault::ConnectRefused,
        Fault::ConnectFailed,
        Fault::ConnectTimeout,
        Fault::Timeout,
        Fault::Closed,
        Fault::Reset,
        Fault::Io,
        Fault::Protocol,
        Fault::ServerError,
        Fault::ClientError,
        Fault::UnknownCommand,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::ConnectRefused => "connect_refused",
            Fault::ConnectFailed => "connect_failed",
            Fault::ConnectTimeout => "connect_timeout",
            Fault::Timeout => "timeout",
            Fault::Closed => "closed",
            Fault::Reset => "reset",
            Fault::Io => "io",
            Fault::Protocol => "protocol",
            Fault::ServerError => "server_error",
            Fault::ClientError => "client_error",
            Fault::UnknownCommand => "unknown_command",
        }
    }

    pub(crate) fn from_kind(k: ErrorKind) -> Fault {
        match k {
            ErrorKind::ConnectRefused => Fault::ConnectRefused,
            ErrorKind::ConnectTimeout => Fault::ConnectTimeout,
            ErrorKind::ConnectFailed => Fault::ConnectFailed,
            ErrorKind::Timeout => Fault::Timeout,
            ErrorKind::Closed => Fault::Closed,
            ErrorKind::Reset => Fault::Reset,
            ErrorKind::Protocol => Fault::Protocol,
            ErrorKind::ServerError => Fault::ServerError,
            ErrorKind::ClientError => Fault::ClientError,
            ErrorKind::UnknownCommand => Fault::UnknownCommand,
            _ => Fault::Io,
        }
    }

    fn index(self) -> usize {
        Fault::ALL.iter().position(|&f| f == self).expect("listed")
    }
}

/// Counters of one interval (or of a total).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Replies received, by operation.
    pub ops: [u64; 4],
    /// Keys found by get and multi-get.
    pub hits: u64,
    /// Keys asked for by get and multi-get and not found.
    pub misses: u64,
    pub errors: [u64; FAULTS],
    /// Requests in flight on a connection that failed: sent, never answered.
    pub lost: u64,
    /// Requests written.
    pub sent: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        for i in 0..4 {
            self.ops[i] += o.ops[i];
        }
        for i in 0..FAULTS {
            self.errors[i] += o.errors[i];
        }
        self.hits += o.hits;
        self.misses += o.misses;
        self.lost += o.lost;
        self.sent += o.sent;
    }
}

/// One interval's raw data from one thread (or merged).
pub(crate) struct Raw {
    pub counts: Counts,
    pub corrected: Latency,
    pub uncorrected: Latency,
}

impl Raw {
    fn new() -> Raw {
        Raw {
            counts: Counts::default(),
            corrected: histogram(),
            uncorrected: histogram(),
        }
    }

    fn add(&mut self, o: &Raw) {
        self.counts.add(&o.counts);
        self.corrected.add(&o.corrected).expect("same bounds");
        self.uncorrected.add(&o.uncorrected).expect("same bounds");
    }
}

enum Msg {
    Interval(usize, u64, Box<Raw>),
    Done(usize, conn::ThreadReport),
}

/// A worker thread's recorder, shared by its connection tasks.
pub(crate) struct Recorder {
    thread: usize,
    t0: Instant,
    interval: Duration,
    index: u64,
    boundary: Instant,
    cur: Box<Raw>,
    tx: mpsc::Sender<Msg>,
    open: bool,
}

impl Recorder {
    fn new(thread: usize, shared: &Shared, tx: mpsc::Sender<Msg>) -> Recorder {
        let interval = shared.spec.interval;
        Recorder {
            thread,
            t0: shared.t0,
            interval,
            index: 0,
            boundary: shared.t0 + interval,
            cur: Box::new(Raw::new()),
            tx,
            open: matches!(shared.spec.mode, crate::Mode::Open { .. }),
        }
    }

    /// Hands the current interval over when `now` is past its end.
    #[inline]
    pub fn tick(&mut self, now: Instant) {
        if now >= self.boundary {
            self.rotate(now);
        }
    }

    #[cold]
    fn rotate(&mut self, now: Instant) {
        let full = std::mem::replace(&mut self.cur, Box::new(Raw::new()));
        let _ = self.tx.send(Msg::Interval(self.thread, self.index, full));
        let elapsed = now.saturating_duration_since(self.t0);
        self.index = (elapsed.as_nanos() / self.interval.as_nanos()) as u64;
        self.boundary = self.t0 + self.interval * (self.index as u32 + 1);
    }

    fn finish(&mut self) {
        let full = std::mem::replace(&mut self.cur, Box::new(Raw::new()));
        let _ = self.tx.send(Msg::Interval(self.thread, self.index, full));
    }

    #[inline]
    pub fn sent(&mut self, n: u64) {
        self.cur.counts.sent += n;
    }

    /// A reply: `op`, keys asked and found, and its latencies in ns.
    #[inline]
    pub fn reply(&mut self, op: usize, keys: u32, hits: u32, corrected: u64, uncorrected: u64) {
        let c = &mut self.cur.counts;
        c.ops[op] += 1;
        if op == GET || op == MULTIGET {
            c.hits += u64::from(hits);
            c.misses += u64::from(keys - hits);
        }
        cachelab_metrics::record(&mut self.cur.uncorrected, uncorrected);
        if self.open {
            cachelab_metrics::record(&mut self.cur.corrected, corrected);
        }
    }

    pub fn fault(&mut self, f: Fault) {
        self.cur.counts.errors[f.index()] += 1;
    }

    pub fn lost(&mut self, n: u64) {
        self.cur.counts.lost += n;
    }
}

/// One interval of the time series.
#[derive(Debug, Clone)]
pub struct Interval {
    pub index: u64,
    /// Seconds from the start of the run.
    pub start_s: f64,
    pub duration_s: f64,
    /// Inside the configured warm-up.
    pub warmup: bool,
    pub ops: [u64; 4],
    pub hits: u64,
    pub misses: u64,
    pub errors: BTreeMap<&'static str, u64>,
    pub lost: u64,
    pub sent: u64,
    /// Latency from the intended send time (open loop only; empty in closed loop).
    pub corrected: Latency,
    /// Latency from the actual send.
    pub uncorrected: Latency,
}

impl Interval {
    pub fn replies(&self) -> u64 {
        self.ops.iter().sum()
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Replies per second.
    pub fn throughput(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.replies() as f64 / self.duration_s
        } else {
            0.0
        }
    }

    /// The histogram that counts queueing: corrected in open loop, otherwise uncorrected.
    pub fn latency(&self) -> &Latency {
        if self.corrected.is_empty() {
            &self.uncorrected
        } else {
            &self.corrected
        }
    }
}

fn errors_map(e: &[u64; FAULTS]) -> BTreeMap<&'static str, u64> {
    Fault::ALL
        .iter()
        .zip(e)
        .filter(|(_, &n)| n > 0)
        .map(|(f, &n)| (f.as_str(), n))
        .collect()
}

/// Sums over a range of intervals.
#[derive(Debug, Clone)]
pub struct Totals {
    pub first_index: u64,
    pub intervals: usize,
    pub duration_s: f64,
    pub ops: [u64; 4],
    pub hits: u64,
    pub misses: u64,
    pub errors: BTreeMap<&'static str, u64>,
    pub lost: u64,
    pub sent: u64,
    pub corrected: Latency,
    pub uncorrected: Latency,
}

impl Totals {
    /// Totals of the intervals from position `from` on.
    pub fn over(intervals: &[Interval], from: usize) -> Totals {
        let mut t = Totals {
            first_index: intervals.get(from).map_or(0, |i| i.index),
            intervals: 0,
            duration_s: 0.0,
            ops: [0; 4],
            hits: 0,
            misses: 0,
            errors: BTreeMap::new(),
            lost: 0,
            sent: 0,
            corrected: histogram(),
            uncorrected: histogram(),
        };
        for i in intervals.iter().skip(from) {
            t.intervals += 1;
            t.duration_s += i.duration_s;
            for k in 0..4 {
                t.ops[k] += i.ops[k];
            }
            t.hits += i.hits;
            t.misses += i.misses;
            for (k, n) in &i.errors {
                *t.errors.entry(k).or_default() += n;
            }
            t.lost += i.lost;
            t.sent += i.sent;
            t.corrected.add(&i.corrected).expect("same bounds");
            t.uncorrected.add(&i.uncorrected).expect("same bounds");
        }
        t
    }

    pub fn replies(&self) -> u64 {
        self.ops.iter().sum()
    }

    pub fn throughput(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.replies() as f64 / self.duration_s
        } else {
            0.0
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// What the sending phase produced.
pub(crate) struct RunData {
    pub intervals: Vec<Interval>,
    pub written: Written,
    pub cpu_s: (f64, f64),
    pub sched: crate::ClientSched,
    pub backlog_at_end: u64,
    pub skipped: u64,
    pub elapsed: Duration,
}

/// Starts the worker threads, collects their intervals, and waits for them.
pub(crate) fn drive(shared: &Arc<Shared>) -> RunData {
    let spec = &shared.spec;
    let threads = spec.threads;
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut handles = Vec::new();
    for t in 0..threads {
        let conns: Vec<usize> = (t..spec.connections).step_by(threads).collect();
        let shared = Arc::clone(shared);
        let tx = tx.clone();
        let h = std::thread::Builder::new()
            .name(format!("cachelab-load-{t}"))
            .spawn(move || {
                let rec = Recorder::new(t, &shared, tx.clone());
                let (report, mut rec) = conn::run_thread(&shared, &conns, rec);
                rec.finish();
                let _ = tx.send(Msg::Done(t, report));
            })
            .expect("spawn a load thread");
        handles.push(h);
    }
    drop(tx);

    let mut pending: BTreeMap<u64, Raw> = BTreeMap::new();
    let mut reported = vec![0u64; threads]; // next interval index each thread may still send
    let mut finished: Vec<Option<conn::ThreadReport>> = (0..threads).map(|_| None).collect();
    let mut out: Vec<(u64, Raw)> = Vec::new();
    let mut next_final = 0u64;
    let mut errors_so_far = 0u64;
    let progress = &shared.progress;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Msg::Interval(t, idx, raw)) => {
                pending.entry(idx).or_insert_with(Raw::new).add(&raw);
                reported[t] = reported[t].max(idx + 1);
            }
            Ok(Msg::Done(t, report)) => {
                reported[t] = u64::MAX;
                finished[t] = Some(report);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(shared.t0);
        if matches!(spec.stop, crate::Stop::Duration(_)) {
            progress
                .done
                .store(elapsed.as_millis() as u64, Ordering::Relaxed);
        }
        // Intervals every thread has moved past are final.
        let safe = reported.iter().copied().min().unwrap_or(0);
        while next_final < safe && pending.keys().next().is_some_and(|&k| k < safe) {
            let (&idx, _) = pending.iter().next().expect("non-empty");
            let raw = pending.remove(&idx).expect("present");
            errors_so_far += raw.counts.errors.iter().sum::<u64>();
            progress.errors.store(errors_so_far, Ordering::Relaxed);
            let d = spec.interval.as_secs_f64();
            progress.last_rate.store(
                (raw.counts.ops.iter().sum::<u64>() as f64 / d) as u64,
                Ordering::Relaxed,
            );
            let h = if raw.corrected.is_empty() {
                &raw.uncorrected
            } else {
                &raw.corrected
            };
            progress.last_p99_ns.store(
                cachelab_metrics::percentiles(h, &[99.0])[0],
                Ordering::Relaxed,
            );
            out.push((idx, raw));
            next_final = idx + 1;
        }
    }
    for h in handles {
        h.join().expect("load thread panicked");
    }
    let end = finished
        .iter()
        .flatten()
        .map(|r| r.ended)
        .max()
        .unwrap_or_else(Instant::now);
    let elapsed = end.saturating_duration_since(shared.t0);
    out.extend(pending);
    out.sort_by_key(|(i, _)| *i);

    let iv = spec.interval.as_secs_f64();
    let total_s = elapsed.as_secs_f64();
    let warm = spec.warmup.as_secs_f64();
    let last = out.last().map_or(0, |(i, _)| *i);
    let mut by_index: BTreeMap<u64, Raw> = out.into_iter().collect();
    let intervals = (0..=last)
        .map(|idx| {
            let raw = by_index.remove(&idx).unwrap_or_else(Raw::new);
            let start = idx as f64 * iv;
            Interval {
                index: idx,
                start_s: start,
                duration_s: (total_s - start).clamp(0.0, iv),
                warmup: start + 1e-9 < warm,
                ops: raw.counts.ops,
                hits: raw.counts.hits,
                misses: raw.counts.misses,
                errors: errors_map(&raw.counts.errors),
                lost: raw.counts.lost,
                sent: raw.counts.sent,
                corrected: raw.corrected,
                uncorrected: raw.uncorrected,
            }
        })
        .collect();

    let mut written = Written::None;
    let (mut user, mut sys, mut backlog, mut skipped) = (0.0, 0.0, 0, 0);
    let mut sched = crate::ClientSched::default();
    for r in finished.into_iter().flatten() {
        sched.wait_s += r.sched.wait_s;
        sched.sleeps += r.sched.sleeps;
        sched.preempted += r.sched.preempted;
        sched.busy_polls += r.sched.busy_polls;
        sched.busy_caught += r.sched.busy_caught;
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
    }
}
