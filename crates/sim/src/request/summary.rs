//! One draw's per-request results folded into a summary as they come, in bounded memory.
//!
//! Every total (requests, the sums behind the means, the routes, the shares slowed by each
//! threshold) is exact and summed in the order requests are added. Percentiles need the
//! values themselves: up to a limit they are kept and read exactly (by nearest rank); past
//! it they move into a log histogram — 1,024 buckets per power of two, so a percentile read
//! there is the midpoint of the bucket holding it, within 2^-11 (0.05 %) of the exact value.

use super::{nearest_rank, Counts, PERCENTILES, SLOWED};

/// Mantissa bits a histogram bucket keeps.
const MANTISSA_BITS: u32 = 10;
/// Powers of two the histogram covers with buckets of their own: 2^-64 up to 2^64.
const MIN_EXP: i64 = -64;
const EXPONENTS: usize = 128;
/// Bucket 0: zero; 1: positive below 2^-64; then the regular buckets; last: 2^64 and above.
const REGULAR: usize = EXPONENTS << MANTISSA_BITS;
const BUCKETS: usize = REGULAR + 3;

fn bucket(v: f64) -> usize {
    if v <= 0.0 {
        return 0;
    }
    let bits = v.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    if e < MIN_EXP {
        return 1;
    }
    let e = (e - MIN_EXP) as usize;
    if e >= EXPONENTS {
        return BUCKETS - 1;
    }
    let m = ((bits >> (52 - MANTISSA_BITS)) & ((1 << MANTISSA_BITS) - 1)) as usize;
    2 + (e << MANTISSA_BITS | m)
}

/// The value a bucket stands for: its midpoint (regular buckets), 0, or the extremes seen.
fn representative(b: usize, min: f64, max: f64) -> f64 {
    let v = match b {
        0 => 0.0,
        1 => min,
        _ if b == BUCKETS - 1 => max,
        _ => {
            let k = (b - 2) as u64;
            let e = (k >> MANTISSA_BITS) as i64 + MIN_EXP;
            let m = k & ((1 << MANTISSA_BITS) - 1);
            let low = ((e + 1023) as u64) << 52 | m << (52 - MANTISSA_BITS);
            f64::from_bits(low | 1 << (52 - MANTISSA_BITS - 1))
        }
    };
    v.clamp(min, max)
}

/// Values for percentiles: kept exactly up to `limit`, then a log histogram.
pub(crate) struct Quantiles {
    exact: Vec<f64>,
    limit: usize,
    counts: Vec<u64>,
    n: u64,
    min: f64,
    max: f64,
}

impl Quantiles {
    pub(crate) fn new(limit: usize) -> Quantiles {
        Quantiles {
            exact: Vec::new(),
            limit,
            counts: Vec::new(),
            n: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    /// True once the values went into the histogram.
    pub(crate) fn is_histogram(&self) -> bool {
        !self.counts.is_empty()
    }

    #[inline]
    pub(crate) fn add(&mut self, v: f64) {
        self.n += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if self.counts.is_empty() {
            if self.exact.len() < self.limit {
                self.exact.push(v);
                return;
            }
            self.counts = vec![0; BUCKETS];
            for x in std::mem::take(&mut self.exact) {
                self.counts[bucket(x)] += 1;
            }
        }
        self.counts[bucket(v)] += 1;
    }

    /// The p-th percentiles (0-100) by nearest rank, for each of `ps`; `None` without values.
    pub(crate) fn percentiles(&mut self, ps: &[f64]) -> Option<Vec<f64>> {
        if self.n == 0 {
            return None;
        }
        if !self.is_histogram() {
            self.exact.sort_unstable_by(f64::total_cmp);
            return Some(ps.iter().map(|&p| nearest_rank(&self.exact, p)).collect());
        }
        // The same rank as `nearest_rank`, found in the cumulative counts.
        let n = self.n as f64;
        Some(
            ps.iter()
                .map(|&p| {
                    let x = n * p.clamp(0.0, 100.0) / 100.0;
                    let rank = ((x * (1.0 - 1e-12)).ceil() as u64).clamp(1, self.n);
                    let mut seen = 0u64;
                    let b = self
                        .counts
                        .iter()
                        .position(|&c| {
                            seen += c;
                            seen >= rank
                        })
                        .unwrap_or(BUCKETS - 1);
                    representative(b, self.min, self.max)
                })
                .collect(),
        )
    }
}

/// One draw of one strategy, request by request: everything its summary needs.
pub(crate) struct DrawAcc {
    pub fracs: Quantiles,
    /// Requests with an increase of at least each of [`SLOWED`].
    slowed: [u64; SLOWED.len()],
    sum_increase: f64,
    total_ms: f64,
    n: u64,
    /// By route slot: (requests, added ms, sum of fractional increases).
    pub routes: Vec<(u64, f64, f64)>,
    pub counts: Counts,
}

/// What one draw of one strategy leaves behind.
pub(crate) struct DrawSummary {
    pub percentiles: Vec<f64>,
    pub curve: Vec<f64>,
    pub slowed: Vec<f64>,
    pub mean_increase: f64,
    pub mean_added_ms: f64,
    /// By route slot: (requests, added ms, sum of fractional increases).
    pub routes: Vec<(u64, f64, f64)>,
    pub counts: Counts,
}

impl DrawAcc {
    /// `limit`: values kept exactly for the percentiles (see [`Quantiles`]).
    pub(crate) fn new(limit: usize) -> DrawAcc {
        DrawAcc {
            fracs: Quantiles::new(limit),
            slowed: [0; SLOWED.len()],
            sum_increase: 0.0,
            total_ms: 0.0,
            n: 0,
            routes: Vec::new(),
            counts: Counts::default(),
        }
    }

    /// One evaluated request: `ms` added to a request of base latency `base_ms` on route slot
    /// `route`.
    #[inline]
    pub(crate) fn add(&mut self, ms: f64, base_ms: f64, route: usize) {
        let frac = ms / base_ms;
        if route >= self.routes.len() {
            self.routes.resize(route + 1, (0, 0.0, 0.0));
        }
        let acc = &mut self.routes[route];
        acc.0 += 1;
        acc.1 += ms;
        acc.2 += frac;
        self.total_ms += ms;
        self.sum_increase += frac;
        self.n += 1;
        for (s, &t) in self.slowed.iter_mut().zip(SLOWED.iter()) {
            *s += u64::from(frac >= t);
        }
        self.fracs.add(frac);
    }

    /// The summary (percentiles at [`PERCENTILES`] and at `grid`); `routes` padded to
    /// `n_routes` slots.
    pub(crate) fn finish(mut self, grid: &[f64], n_routes: usize) -> DrawSummary {
        let n = self.n as f64;
        let mut ps: Vec<f64> = PERCENTILES.to_vec();
        ps.extend_from_slice(grid);
        let values = self
            .fracs
            .percentiles(&ps)
            .unwrap_or_else(|| vec![f64::NAN; ps.len()]);
        self.routes
            .resize(n_routes.max(self.routes.len()), (0, 0.0, 0.0));
        DrawSummary {
            percentiles: values[..PERCENTILES.len()].to_vec(),
            curve: values[PERCENTILES.len()..].to_vec(),
            slowed: self.slowed.iter().map(|&s| s as f64 / n).collect(),
            mean_increase: self.sum_increase / n,
            mean_added_ms: self.total_ms / n,
            routes: self.routes,
            counts: self.counts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_reads_percentiles_within_its_precision() {
        // 100,001 values over nine decades, and zeros: exact below the limit, the histogram
        // above it, the same ranks.
        let values: Vec<f64> = (0..100_001)
            .map(|i| {
                if i % 10 == 0 {
                    0.0
                } else {
                    1e-4 * 1.0002f64.powi(i)
                }
            })
            .collect();
        let (mut exact, mut hist) = (Quantiles::new(usize::MAX), Quantiles::new(1000));
        for &v in &values {
            exact.add(v);
            hist.add(v);
        }
        assert!(!exact.is_histogram() && hist.is_histogram());
        let ps = [0.0, 5.0, 10.0, 10.5, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0];
        let (a, b) = (
            exact.percentiles(&ps).unwrap(),
            hist.percentiles(&ps).unwrap(),
        );
        for ((p, x), y) in ps.iter().zip(&a).zip(&b) {
            assert!(
                (x - y).abs() <= x * 2f64.powi(-11),
                "p{p}: exact {x}, histogram {y}"
            );
        }
        assert_eq!(b[0], 0.0);
    }

    #[test]
    fn shares_and_means_are_exact_and_routes_pad() {
        let mut acc = DrawAcc::new(1);
        for (ms, route) in [(1.0, 0), (5.0, 2), (0.0, 0)] {
            acc.add(ms, 10.0, route);
        }
        let s = acc.finish(&[], 4);
        assert_eq!(s.slowed, vec![2.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]);
        assert_eq!(s.mean_added_ms, 2.0);
        assert_eq!(s.routes.len(), 4);
        assert_eq!(s.routes[0], (2, 1.0, 0.1));
    }
}
