//! Steady-state detection over the per-interval time series.
//!
//! The method, in full:
//!
//! 1. Intervals inside the configured warm-up are never steady.
//! 2. The *candidates* are the remaining whole intervals (a final interval shorter than half
//!    the interval length is not a candidate, but it is still counted in the totals).
//! 3. The *reference* is the median throughput, and the median p50 latency (corrected in open
//!    loop), of the last half of the candidates.
//! 4. The steady state starts at the first candidate from which [`WINDOW`] consecutive
//!    candidates (or all that are left, if fewer) each have a throughput within
//!    [`THROUGHPUT_TOLERANCE`] of the reference and a p50 no more than [`LATENCY_FACTOR`]
//!    times the reference p50.
//! 5. If no candidate qualifies the run never settled: `reached` is false and the window is
//!    every candidate after the warm-up, so the totals still leave the warm-up out.
//!
//! Totals are computed from the first steady interval to the end of the run.

use serde::Serialize;

use crate::series::Interval;
use crate::spec::Spec;

/// Consecutive intervals that must agree with the reference.
pub const WINDOW: usize = 3;
/// Allowed relative difference from the reference throughput.
pub const THROUGHPUT_TOLERANCE: f64 = 0.10;
/// Allowed ratio of an interval's p50 to the reference p50.
pub const LATENCY_FACTOR: f64 = 2.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Steady {
    /// Position (in the interval list) of the first interval of the window.
    pub start_index: usize,
    /// Whether the criteria were met; if not, the window is everything after the warm-up.
    pub reached: bool,
    pub reference_throughput: f64,
    pub reference_p50_ns: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Finds the steady-state window (see the module documentation).
pub fn detect(intervals: &[Interval], spec: &Spec) -> Steady {
    let len = spec.interval.as_secs_f64();
    let after_warmup = intervals
        .iter()
        .position(|i| !i.warmup)
        .unwrap_or(intervals.len());
    let candidates: Vec<usize> = (after_warmup..intervals.len())
        .filter(|&i| intervals[i].duration_s >= len / 2.0)
        .collect();
    let p50 = |i: &Interval| cachelab_metrics::percentiles(&i.latency(), &[50.0])[0] as f64;
    let tail = &candidates[candidates.len() / 2..];
    let ref_tp = median(tail.iter().map(|&i| intervals[i].throughput()).collect());
    let ref_p50 = median(tail.iter().map(|&i| p50(&intervals[i])).collect());
    let ok = |i: usize| {
        let iv = &intervals[i];
        ref_tp > 0.0
            && (iv.throughput() - ref_tp).abs() <= THROUGHPUT_TOLERANCE * ref_tp
            && p50(iv) <= LATENCY_FACTOR * ref_p50
    };
    for (pos, &start) in candidates.iter().enumerate() {
        let window = &candidates[pos..(pos + WINDOW).min(candidates.len())];
        if window.iter().all(|&i| ok(i)) {
            return Steady {
                start_index: start,
                reached: true,
                reference_throughput: ref_tp,
                reference_p50_ns: ref_p50 as u64,
            };
        }
    }
    Steady {
        start_index: after_warmup,
        reached: false,
        reference_throughput: ref_tp,
        reference_p50_ns: ref_p50 as u64,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cachelab_metrics::Packed;
    use std::collections::BTreeMap;
    use std::time::Duration;

    pub(crate) fn spec() -> Spec {
        Spec {
            pool: crate::spec::Pool::single("127.0.0.1:1".parse().unwrap()),
            connections: 1,
            threads: 1,
            pipeline: 1,
            max_outstanding: 1,
            mode: crate::spec::Mode::Closed,
            mix: crate::spec::Mix {
                get: 1.0,
                multiget: 0.0,
                set: 0.0,
                delete: 0.0,
            },
            multiget_keys: 1,
            key_space: 10,
            key_dist: crate::spec::DistSpec {
                name: "uniform".into(),
                params: vec![],
            },
            value_size: crate::spec::DistSpec {
                name: "fixed".into(),
                params: vec![10.0],
            },
            prefix: "t".into(),
            ttl: 0,
            stop: crate::spec::Stop::Duration(Duration::from_secs(10)),
            warmup: Duration::from_secs(1),
            prefill: false,
            interval: Duration::from_secs(1),
            options: Default::default(),
            give_up_after: Duration::from_secs(5),
            stall: Duration::from_millis(100),
            seed: 1,
            server_pid: None,
            busy_poll: Duration::ZERO,
            spin: Duration::ZERO,
            send_batch: 1,
            behind: Vec::new(),
            on_miss_set: false,
            probe_rate: None,
            cleanup: true,
            protocol: Default::default(),
        }
    }

    /// Intervals with the given throughputs and p50s (µs); the first is warm-up.
    fn series(tp: &[u64], p50_us: &[u64]) -> Vec<Interval> {
        tp.iter()
            .zip(p50_us)
            .enumerate()
            .map(|(i, (&n, &lat))| Interval {
                index: i as u64,
                start_s: i as f64,
                duration_s: 1.0,
                warmup: i == 0,
                ops: [n, 0, 0, 0],
                hits: 0,
                misses: 0,
                errors: BTreeMap::new(),
                lost: 0,
                sent: n,
                corrected: Packed::of(&cachelab_metrics::latency()),
                uncorrected: Packed::of(&cachelab_metrics::from_values([lat * 1000])),
            })
            .collect()
    }

    #[test]
    fn ramp_up_is_left_out() {
        let s = detect(
            &series(&[10, 50, 80, 100, 101, 99, 100, 100], &[5; 8]),
            &spec(),
        );
        assert!(s.reached);
        assert_eq!(s.start_index, 3);
    }

    #[test]
    fn latency_still_settling_is_left_out() {
        let s = detect(
            &series(&[100; 8], &[50, 40, 30, 10, 10, 10, 10, 10]),
            &spec(),
        );
        assert!(s.reached);
        assert_eq!(s.start_index, 3);
    }

    #[test]
    fn a_run_that_never_settles_keeps_only_the_warmup_out() {
        let s = detect(
            &series(&[100, 10, 200, 10, 200, 10, 200, 10], &[5; 8]),
            &spec(),
        );
        assert!(!s.reached);
        assert_eq!(s.start_index, 1);
    }
}
