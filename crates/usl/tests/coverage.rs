//! Simulation: data drawn from a known USL with Gaussian noise; the 95 % t intervals of the
//! coefficients (and of the fitted mean X at one load) must cover the truth 93–97 % of the
//! time. 2,000 replicates put the binomial standard error at ~0.5 %, so the band is ±4 SE.

use cachelab_usl::rng::SplitMix64;
use cachelab_usl::{fit, Method, Options, Params};

const REPLICATES: usize = 2000;
const SEED: u64 = 20_261_122;

fn coverage(method: Method, truth: Params, loads: &[f64], noise_sd: f64) -> [f64; 4] {
    let mut rng = SplitMix64::new(SEED);
    let probe = 24.0;
    let mut hits = [0usize; 4];
    for _ in 0..REPLICATES {
        let x: Vec<f64> = loads
            .iter()
            .map(|&n| truth.throughput(n) + noise_sd * rng.normal())
            .collect();
        let f = fit(
            loads,
            &x,
            &Options {
                method,
                ..Options::default()
            },
        )
        .expect("fit");
        let t = truth.to_array();
        for i in 0..3 {
            let (lo, hi) = f.ci[i].expect("interval");
            if lo <= t[i] && t[i] <= hi {
                hits[i] += 1;
            }
        }
        let p = f.predict(&[probe])[0];
        let want = truth.throughput(probe);
        if p.x_lo <= want && want <= p.x_hi {
            hits[3] += 1;
        }
    }
    hits.map(|h| h as f64 / REPLICATES as f64)
}

#[test]
fn ninety_five_percent_intervals_cover_the_truth() {
    let truth = Params::new(1000.0, 0.03, 0.0005);
    // Many loads with moderate noise, and eight loads (df = 5, where the t quantile matters).
    let many: Vec<f64> = (1..=32).map(f64::from).collect();
    let few = [1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0];
    for (method, loads, sd) in [
        (Method::Bounded, &many[..], 150.0),
        (Method::Unbounded, &few[..], 60.0),
    ] {
        let c = coverage(method, truth, loads, sd);
        eprintln!(
            "{}: coverage gamma, alpha, beta, X(24) = {c:?}",
            method.name()
        );
        for (name, share) in ["gamma", "alpha", "beta", "X(24)"].iter().zip(c) {
            assert!(
                (0.93..=0.97).contains(&share),
                "{}: {name} covered {:.1} % of the time",
                method.name(),
                share * 100.0
            );
        }
    }
}
