//! The time series a run produces: one [`Interval`] per interval, and [`Totals`] over a range
//! of them (the whole run, or the steady-state window).

use std::collections::BTreeMap;

use cachelab_metrics::{Latency, Packed};

/// The operations, in the order of every per-op array.
pub const OPS: [&str; 4] = ["get", "multiget", "set", "delete"];
pub(crate) const GET: usize = 0;
pub(crate) const MULTIGET: usize = 1;
pub(crate) const SET: usize = 2;
pub(crate) const DELETE: usize = 3;

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
    /// Latency from the intended send time (open loop only; empty in closed loop), packed:
    /// a run keeps every interval's histograms to its end.
    pub corrected: Packed,
    /// Latency from the actual send, packed.
    pub uncorrected: Packed,
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
    pub fn latency(&self) -> Latency {
        if self.corrected.is_empty() {
            self.uncorrected.unpack()
        } else {
            self.corrected.unpack()
        }
    }
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
            corrected: cachelab_metrics::latency(),
            uncorrected: cachelab_metrics::latency(),
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
            if !i.corrected.is_empty() {
                t.corrected.add(i.corrected.unpack()).expect("same bounds");
            }
            if !i.uncorrected.is_empty() {
                t.uncorrected
                    .add(i.uncorrected.unpack())
                    .expect("same bounds");
            }
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
