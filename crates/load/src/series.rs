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
        let [t] = Totals::from_each(intervals, [from]);
        t
    }

    /// The totals from each position of `froms` on, in one pass: each interval's histograms
    /// are unpacked once however many of the totals it counts in (the whole run, the measured
    /// part and the steady window overlap).
    pub fn from_each<const N: usize>(intervals: &[Interval], froms: [usize; N]) -> [Totals; N] {
        let mut totals = froms.map(|from| Totals {
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
        });
        for (pos, i) in intervals.iter().enumerate() {
            let unpack = |h: &Packed| (!h.is_empty()).then(|| h.unpack());
            let (corrected, uncorrected) = (unpack(&i.corrected), unpack(&i.uncorrected));
            for (t, _) in totals
                .iter_mut()
                .zip(froms)
                .filter(|&(_, from)| pos >= from)
            {
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
                if let Some(h) = &corrected {
                    t.corrected.add(h).expect("same bounds");
                }
                if let Some(h) = &uncorrected {
                    t.uncorrected.add(h).expect("same bounds");
                }
            }
        }
        totals
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

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(index: u64, latencies: &[u64]) -> Interval {
        let h = cachelab_metrics::from_values(latencies.iter().copied());
        Interval {
            index,
            start_s: index as f64,
            duration_s: 1.0,
            warmup: index == 0,
            ops: [latencies.len() as u64, 0, 0, 0],
            hits: latencies.len() as u64,
            misses: 0,
            errors: [("timeout", index)].into(),
            lost: index,
            sent: latencies.len() as u64 + index,
            corrected: Packed::of(&h),
            uncorrected: Packed::of(&cachelab_metrics::latency()),
        }
    }

    #[test]
    fn totals_from_each_position_in_one_pass_are_the_totals_over_each_suffix() {
        let ivs: Vec<Interval> = (0..5)
            .map(|i| interval(i, &[1000 * (i + 1), 2000 * (i + 1), 5000]))
            .collect();
        let each = Totals::from_each(&ivs, [0, 1, 3, 5]);
        for (t, from) in each.iter().zip([0, 1, 3, 5]) {
            let by_hand = ivs[from..]
                .iter()
                .fold(cachelab_metrics::latency(), |mut h, i| {
                    h.add(i.corrected.unpack()).unwrap();
                    h
                });
            assert_eq!(t.intervals, 5 - from);
            assert_eq!(t.first_index, if from < 5 { from as u64 } else { 0 });
            assert_eq!(t.corrected, by_hand);
            assert!(t.uncorrected.is_empty());
            assert_eq!(t.ops[0], 3 * (5 - from) as u64);
            let lost: u64 = (from as u64..5).sum();
            assert_eq!(
                (t.lost, t.errors.get("timeout").copied()),
                (lost, Some(lost).filter(|_| from < 5))
            );
        }
    }
}
