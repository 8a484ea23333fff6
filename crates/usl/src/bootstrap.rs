//! Residual bootstrap: refit on fitted + resampled residuals to get percentile intervals for
//! the coefficients, Nmax and the peak throughput, whose sampling distributions are skewed
//! (Nmax is a ratio and can be infinite), so symmetric t intervals would mislead.
//!
//! Resample i draws from its own seeded stream, so results do not depend on the thread count.

use serde::Serialize;

use crate::estimate::estimate;
use crate::method::Method;
use crate::model::Params;
use crate::rng::SplitMix64;

/// What the bootstrap resamples: a fit's loads, fitted values and residuals, and what each
/// refit needs.
pub(crate) struct Sample<'a> {
    pub n: &'a [f64],
    pub fitted: &'a [f64],
    pub residuals: &'a [f64],
    /// Residual degrees of freedom of the fit.
    pub df: usize,
    pub method: Method,
    /// The fit's coefficients: every refit starts from them.
    pub params: Params,
    /// Confidence level of the intervals.
    pub level: f64,
}

/// A percentile interval and the median of the bootstrap distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub lo: f64,
    pub median: f64,
    pub hi: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bootstrap {
    pub resamples: usize,
    pub seed: u64,
    pub level: f64,
    /// Resamples whose refit failed (left out).
    pub failed: usize,
    pub gamma: Interval,
    pub alpha: Interval,
    pub beta: Interval,
    /// Over resamples with a peak; +∞ where β* = 0.
    pub n_max: Option<Interval>,
    pub x_max: Option<Interval>,
    /// Share of resamples with β* = 0 (Nmax infinite).
    pub infinite_n_max: f64,
    /// Share of resamples where X never rises (no Nmax).
    pub no_peak: f64,
}

/// Type-7 (linear interpolation) quantile of sorted values; infinities are allowed.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * q;
    let (i, frac) = (h.floor() as usize, h - h.floor());
    let a = sorted[i];
    let b = sorted[(i + 1).min(sorted.len() - 1)];
    if frac == 0.0 || a == b {
        a
    } else {
        a + frac * (b - a)
    }
}

fn interval(mut v: Vec<f64>, level: f64) -> Option<Interval> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    Some(Interval {
        lo: quantile(&v, tail),
        median: quantile(&v, 0.5),
        hi: quantile(&v, 1.0 - tail),
    })
}

/// Refits resample `index`; None when the refit fails.
fn one(sample: &Sample, pool: &[f64], seed: u64, index: u64) -> Option<Params> {
    let mut rng = SplitMix64::stream(seed, index);
    let y: Vec<f64> = sample
        .fitted
        .iter()
        .map(|&f| (f + pool[rng.below(pool.len())]).max(0.0))
        .collect();
    estimate(sample.n, &y, sample.method, Some(sample.params))
        .ok()
        .map(|e| e.params)
}

/// `resamples` refits of `sample`, the fit (0 threads: up to 4, as the machine allows).
pub(crate) fn run(sample: &Sample, resamples: usize, seed: u64, threads: usize) -> Bootstrap {
    // Centred residuals, inflated by sqrt(n/df) so their spread matches the error variance.
    let n = sample.residuals.len() as f64;
    let mean = sample.residuals.iter().sum::<f64>() / n;
    let inflate = (n / sample.df.max(1) as f64).sqrt();
    let pool: Vec<f64> = sample
        .residuals
        .iter()
        .map(|r| (r - mean) * inflate)
        .collect();
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |v| v.get().min(4))
    } else {
        threads
    }
    .clamp(1, resamples.max(1));
    let chunk = resamples.div_ceil(threads);
    let mut results: Vec<Option<Params>> = Vec::with_capacity(resamples);
    if threads == 1 {
        results.extend((0..resamples as u64).map(|i| one(sample, &pool, seed, i)));
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let pool = &pool;
                    let start = (t * chunk) as u64;
                    let end = ((t + 1) * chunk).min(resamples) as u64;
                    s.spawn(move || {
                        (start..end)
                            .map(|i| one(sample, pool, seed, i))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for h in handles {
                results.extend(h.join().expect("bootstrap worker panicked"));
            }
        });
    }
    let ok: Vec<Params> = results.iter().flatten().copied().collect();
    let failed = resamples - ok.len();
    let mut n_max = Vec::new();
    let mut x_max = Vec::new();
    let (mut infinite, mut none) = (0usize, 0usize);
    for p in &ok {
        match p.n_max() {
            Some(v) => {
                if v.is_infinite() {
                    infinite += 1;
                }
                n_max.push(v);
                x_max.extend(p.peak_throughput());
            }
            None => none += 1,
        }
    }
    let share = |c: usize| {
        if ok.is_empty() {
            f64::NAN
        } else {
            c as f64 / ok.len() as f64
        }
    };
    let nan = Interval {
        lo: f64::NAN,
        median: f64::NAN,
        hi: f64::NAN,
    };
    let level = sample.level;
    Bootstrap {
        resamples,
        seed,
        level,
        failed,
        gamma: interval(ok.iter().map(|p| p.gamma).collect(), level).unwrap_or(nan),
        alpha: interval(ok.iter().map(|p| p.alpha).collect(), level).unwrap_or(nan),
        beta: interval(ok.iter().map(|p| p.beta).collect(), level).unwrap_or(nan),
        n_max: interval(n_max, level),
        x_max: interval(x_max, level),
        infinite_n_max: share(infinite),
        no_peak: share(none),
    }
}
