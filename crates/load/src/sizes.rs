//! Value-size distributions for sets and prefill.
//!
//! Every distribution implements [`SizeDist`] and is found by name in [`REGISTRY`]. Sizes are
//! bytes, at least 1 and at most [`MAX_VALUE`].

use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, LogNormal};

/// The largest value a run may write: fits memcached's default 1 MiB item with its header.
pub const MAX_VALUE: usize = 1_000_000;

pub trait SizeDist: Send {
    fn next(&mut self, rng: &mut SmallRng) -> usize;
    /// The largest size it can return.
    fn max(&self) -> usize;
}

type Build = fn(params: &[f64]) -> Result<Box<dyn SizeDist>, String>;

/// The size distributions by name: (name, parameters, constructor).
pub const REGISTRY: &[(&str, &str, Build)] = &[
    ("fixed", "size", fixed),
    ("uniform", "min, max", uniform),
    ("lognormal", "median, sigma", lognormal),
    (
        "histogram",
        "size1, weight1, size2, weight2, ...",
        histogram,
    ),
];

pub fn build(name: &str, params: &[f64]) -> Result<Box<dyn SizeDist>, String> {
    match REGISTRY.iter().find(|(k, _, _)| *k == name) {
        Some((_, _, build)) => build(params),
        None => Err(format!(
            "unknown value-size distribution {name:?}; known: {}",
            REGISTRY.iter().map(|r| r.0).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn size(name: &str, v: f64) -> Result<usize, String> {
    if v.fract() != 0.0 || !(1.0..=MAX_VALUE as f64).contains(&v) {
        return Err(format!(
            "{name}: value size {v} must be a whole number of bytes from 1 to {MAX_VALUE}"
        ));
    }
    Ok(v as usize)
}

struct Fixed(usize);

impl SizeDist for Fixed {
    fn next(&mut self, _: &mut SmallRng) -> usize {
        self.0
    }
    fn max(&self) -> usize {
        self.0
    }
}

fn fixed(p: &[f64]) -> Result<Box<dyn SizeDist>, String> {
    match p {
        [s] => Ok(Box::new(Fixed(size("fixed", *s)?))),
        _ => Err("fixed takes one size".into()),
    }
}

struct Uniform(usize, usize);

impl SizeDist for Uniform {
    fn next(&mut self, rng: &mut SmallRng) -> usize {
        rng.random_range(self.0..=self.1)
    }
    fn max(&self) -> usize {
        self.1
    }
}

fn uniform(p: &[f64]) -> Result<Box<dyn SizeDist>, String> {
    match p {
        [lo, hi] => {
            let (lo, hi) = (size("uniform", *lo)?, size("uniform", *hi)?);
            if lo > hi {
                return Err(format!("uniform: min {lo} is above max {hi}"));
            }
            Ok(Box::new(Uniform(lo, hi)))
        }
        _ => Err("uniform takes a min and a max size".into()),
    }
}

/// Log-normal with the given median and shape sigma, clamped to 1 ..= MAX_VALUE.
struct LogNormalSizes(LogNormal<f64>);

impl SizeDist for LogNormalSizes {
    fn next(&mut self, rng: &mut SmallRng) -> usize {
        (self.0.sample(rng).round() as usize).clamp(1, MAX_VALUE)
    }
    fn max(&self) -> usize {
        MAX_VALUE
    }
}

fn lognormal(p: &[f64]) -> Result<Box<dyn SizeDist>, String> {
    match p {
        [median, sigma] => {
            size("lognormal", median.round())?;
            if !(sigma.is_finite() && *sigma > 0.0 && *sigma <= 10.0) {
                return Err(format!("lognormal: sigma must be in (0, 10], got {sigma}"));
            }
            let d = LogNormal::new(median.ln(), *sigma).map_err(|e| format!("lognormal: {e}"))?;
            Ok(Box::new(LogNormalSizes(d)))
        }
        _ => Err("lognormal takes a median size and a sigma".into()),
    }
}

/// Sizes drawn with the given weights.
struct Histogram {
    sizes: Vec<usize>,
    /// Cumulative weights, the last one the total.
    cumulative: Vec<f64>,
}

impl SizeDist for Histogram {
    fn next(&mut self, rng: &mut SmallRng) -> usize {
        let total = *self.cumulative.last().expect("at least one bin");
        let x = rng.random::<f64>() * total;
        let i = self.cumulative.partition_point(|&c| c <= x);
        self.sizes[i.min(self.sizes.len() - 1)]
    }
    fn max(&self) -> usize {
        self.sizes.iter().copied().max().unwrap_or(1)
    }
}

fn histogram(p: &[f64]) -> Result<Box<dyn SizeDist>, String> {
    if p.is_empty() || !p.len().is_multiple_of(2) {
        return Err("histogram takes pairs of size and weight".into());
    }
    let mut sizes = Vec::new();
    let mut cumulative = Vec::new();
    let mut total = 0.0;
    for pair in p.chunks(2) {
        let w = pair[1];
        if !(w.is_finite() && w >= 0.0) {
            return Err(format!("histogram: weight {w} must be 0 or more"));
        }
        total += w;
        sizes.push(size("histogram", pair[0])?);
        cumulative.push(total);
    }
    if total <= 0.0 {
        return Err("histogram: the weights add up to 0".into());
    }
    Ok(Box::new(Histogram { sizes, cumulative }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn draws(name: &str, p: &[f64], n: usize) -> Vec<usize> {
        let mut d = build(name, p).unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        (0..n).map(|_| d.next(&mut rng)).collect()
    }

    #[test]
    fn sizes_stay_in_range() {
        assert!(draws("fixed", &[100.0], 100).iter().all(|&s| s == 100));
        let u = draws("uniform", &[10.0, 20.0], 10_000);
        assert!(u.iter().all(|&s| (10..=20).contains(&s)));
        assert!(u.contains(&10) && u.contains(&20));
        let l = draws("lognormal", &[1000.0, 1.0], 10_000);
        assert!(l.iter().all(|&s| (1..=MAX_VALUE).contains(&s)));
    }

    #[test]
    fn lognormal_median_is_the_median() {
        let mut l = draws("lognormal", &[1000.0, 0.5], 20_001);
        l.sort_unstable();
        let median = l[10_000] as f64;
        assert!((median / 1000.0 - 1.0).abs() < 0.03, "{median}");
    }

    #[test]
    fn histogram_follows_its_weights() {
        let h = draws("histogram", &[100.0, 3.0, 1000.0, 1.0, 5.0, 0.0], 40_000);
        let small = h.iter().filter(|&&s| s == 100).count() as f64 / h.len() as f64;
        assert!((small - 0.75).abs() < 0.01, "{small}");
        assert!(!h.contains(&5));
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert!(build("fixed", &[0.0]).is_err());
        assert!(build("fixed", &[1.5]).is_err());
        assert!(build("fixed", &[2e6]).is_err());
        assert!(build("uniform", &[20.0, 10.0]).is_err());
        assert!(build("histogram", &[100.0]).is_err());
        assert!(build("histogram", &[100.0, 0.0]).is_err());
        assert!(build("lognormal", &[100.0, -1.0]).is_err());
        assert!(build("zipf", &[1.0]).is_err());
    }
}
