//! Key distributions: which key index (0 .. key space) each request touches.
//!
//! Every distribution implements [`KeyDist`] and is found by name in [`REGISTRY`]; a spec names
//! one with numeric parameters (`zipf` with `[0.99]`, `hotset` with `[0.2, 0.8]`).

use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, Normal, Zipf};

/// Picks key indices in `0..n`.
pub trait KeyDist: Send {
    fn next(&mut self, rng: &mut SmallRng) -> u64;
}

/// Builds a distribution over `n` keys for connection `conn` of `conns` from its parameters.
type Build =
    fn(params: &[f64], n: u64, conn: usize, conns: usize) -> Result<Box<dyn KeyDist>, String>;

/// The key distributions by name: (name, parameters it takes, constructor).
pub const REGISTRY: &[(&str, &str, Build)] = &[
    ("uniform", "none", uniform),
    ("zipf", "s > 0 (e.g. 0.99)", zipf),
    (
        "gaussian",
        "optional sd as a fraction of the key space (default 0.1)",
        gaussian,
    ),
    ("sequential", "none", sequential),
    (
        "hotset",
        "x, y in (0, 1): x of the keys get y of the requests",
        hotset,
    ),
];

/// The distribution `name` with `params` over `n` keys.
pub fn build(
    name: &str,
    params: &[f64],
    n: u64,
    conn: usize,
    conns: usize,
) -> Result<Box<dyn KeyDist>, String> {
    match REGISTRY.iter().find(|(k, _, _)| *k == name) {
        Some((_, _, build)) => build(params, n, conn, conns),
        None => Err(format!(
            "unknown key distribution {name:?}; known: {}",
            REGISTRY.iter().map(|r| r.0).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn arity(name: &str, params: &[f64], allowed: &[usize]) -> Result<(), String> {
    if !allowed.contains(&params.len()) {
        return Err(format!(
            "key distribution {name} takes {allowed:?} parameters, got {}",
            params.len()
        ));
    }
    if params.iter().any(|p| !p.is_finite()) {
        return Err(format!(
            "key distribution {name}: parameters must be finite numbers"
        ));
    }
    Ok(())
}

struct Uniform(u64);

impl KeyDist for Uniform {
    fn next(&mut self, rng: &mut SmallRng) -> u64 {
        rng.random_range(0..self.0)
    }
}

fn uniform(p: &[f64], n: u64, _: usize, _: usize) -> Result<Box<dyn KeyDist>, String> {
    arity("uniform", p, &[0])?;
    Ok(Box::new(Uniform(n)))
}

/// Zipf over ranks 1..=n; rank r is key r - 1, so key 0 is the most popular.
struct ZipfKeys(Zipf<f64>, u64);

impl KeyDist for ZipfKeys {
    fn next(&mut self, rng: &mut SmallRng) -> u64 {
        (self.0.sample(rng) as u64).clamp(1, self.1) - 1
    }
}

fn zipf(p: &[f64], n: u64, _: usize, _: usize) -> Result<Box<dyn KeyDist>, String> {
    arity("zipf", p, &[1])?;
    if p[0] <= 0.0 || p[0] > 10.0 {
        return Err(format!("zipf exponent must be in (0, 10], got {}", p[0]));
    }
    let z = Zipf::new(n as f64, p[0]).map_err(|e| format!("zipf: {e}"))?;
    Ok(Box::new(ZipfKeys(z, n)))
}

/// A normal distribution centred on the middle of the key space; draws outside are redrawn.
struct Gaussian(Normal<f64>, u64);

impl KeyDist for Gaussian {
    fn next(&mut self, rng: &mut SmallRng) -> u64 {
        for _ in 0..64 {
            let x = self.0.sample(rng);
            if x >= 0.0 && x < self.1 as f64 {
                return x as u64;
            }
        }
        self.1 / 2
    }
}

fn gaussian(p: &[f64], n: u64, _: usize, _: usize) -> Result<Box<dyn KeyDist>, String> {
    arity("gaussian", p, &[0, 1])?;
    let frac = p.first().copied().unwrap_or(0.1);
    if frac <= 0.0 || frac > 10.0 {
        return Err(format!(
            "gaussian sd fraction must be in (0, 10], got {frac}"
        ));
    }
    let normal = Normal::new(n as f64 / 2.0, (n as f64 * frac).max(1e-9))
        .map_err(|e| format!("gaussian: {e}"))?;
    Ok(Box::new(Gaussian(normal, n)))
}

/// Each connection walks the key space in order from its own starting point, wrapping around.
struct Sequential {
    next: u64,
    n: u64,
}

impl KeyDist for Sequential {
    fn next(&mut self, _: &mut SmallRng) -> u64 {
        let k = self.next;
        self.next = if k + 1 == self.n { 0 } else { k + 1 };
        k
    }
}

fn sequential(p: &[f64], n: u64, conn: usize, conns: usize) -> Result<Box<dyn KeyDist>, String> {
    arity("sequential", p, &[0])?;
    let start = (n as u128 * conn as u128 / conns.max(1) as u128) as u64;
    Ok(Box::new(Sequential { next: start, n }))
}

/// The first `hot` keys get a share `y` of the requests, uniformly; the rest share the others.
struct HotSet {
    hot: u64,
    n: u64,
    y: f64,
}

impl KeyDist for HotSet {
    fn next(&mut self, rng: &mut SmallRng) -> u64 {
        if self.hot == self.n || rng.random::<f64>() < self.y {
            rng.random_range(0..self.hot)
        } else {
            rng.random_range(self.hot..self.n)
        }
    }
}

fn hotset(p: &[f64], n: u64, _: usize, _: usize) -> Result<Box<dyn KeyDist>, String> {
    arity("hotset", p, &[2])?;
    let (x, y) = (p[0], p[1]);
    if !(x > 0.0 && x <= 1.0 && (0.0..=1.0).contains(&y)) {
        return Err(format!(
            "hotset needs 0 < x <= 1 (share of keys) and 0 <= y <= 1 (share of requests), got {x}, {y}"
        ));
    }
    let hot = ((n as f64 * x).round() as u64).clamp(1, n);
    Ok(Box::new(HotSet { hot, n, y }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn draws(name: &str, params: &[f64], n: u64, count: usize) -> Vec<u64> {
        let mut d = build(name, params, n, 0, 1).unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        (0..count).map(|_| d.next(&mut rng)).collect()
    }

    #[test]
    fn every_distribution_stays_in_the_key_space() {
        for (name, params) in [
            ("uniform", &[][..]),
            ("zipf", &[0.99][..]),
            ("gaussian", &[][..]),
            ("gaussian", &[5.0][..]),
            ("sequential", &[][..]),
            ("hotset", &[0.2, 0.8][..]),
        ] {
            for n in [1, 2, 1000] {
                assert!(
                    draws(name, params, n, 5000).iter().all(|&k| k < n),
                    "{name} {n}"
                );
            }
        }
    }

    #[test]
    fn hotset_sends_the_asked_share_to_the_hot_keys() {
        let d = draws("hotset", &[0.1, 0.9], 1000, 100_000);
        let hot = d.iter().filter(|&&k| k < 100).count() as f64 / d.len() as f64;
        assert!((hot - 0.9).abs() < 0.01, "{hot}");
    }

    #[test]
    fn zipf_puts_rank_one_first() {
        // P(rank 1) for s = 1, n = 100 is 1 / H(100) = 0.1928.
        let d = draws("zipf", &[1.0], 100, 200_000);
        let first = d.iter().filter(|&&k| k == 0).count() as f64 / d.len() as f64;
        assert!((first - 0.1928).abs() < 0.005, "{first}");
    }

    #[test]
    fn sequential_connections_start_apart_and_wrap() {
        let mut d = build("sequential", &[], 10, 1, 2).unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let got: Vec<u64> = (0..7).map(|_| d.next(&mut rng)).collect();
        assert_eq!(got, vec![5, 6, 7, 8, 9, 0, 1]);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(build("zipf", &[], 10, 0, 1).is_err());
        assert!(build("zipf", &[-1.0], 10, 0, 1).is_err());
        assert!(build("hotset", &[1.5, 0.5], 10, 0, 1).is_err());
        assert!(build("uniform", &[1.0], 10, 0, 1).is_err());
        assert!(build("pareto", &[], 10, 0, 1).is_err());
    }
}
