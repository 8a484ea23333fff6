//! The prediction of a failure drill: the hit ratio per interval of a run's key stream over
//! the pool's membership as it changes, from the same route tables the run uses
//! ([`Routes`], built with [`cachelab_client::pool`]) — so `simulate --drill` and the live
//! run place every key alike.
//!
//! The stream is the spec's: its key distribution (one stream with the spec's seed: the
//! same distribution as the run's connections, not their exact draws), its op mix, and a
//! given number of requests in each interval, spread evenly over it. Each member is a cache
//! that never evicts: the key space is prefilled on its first member when the spec
//! prefills; a get hits when its member holds the key, and with `on_miss_set` a miss stores
//! it there; a set stores it, a delete removes it. A member that joins starts empty; one
//! that leaves and joins again still holds what it held. (Members that fail are the
//! run's own business: only `changes` are followed.)

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::keys;
use crate::route::Routes;
use crate::series::{GET, MULTIGET, SET};
use crate::spec::{Spec, SpecError};

/// One interval of a prediction: the keys asked by gets and multi-gets, and those found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Predicted {
    pub keys: u64,
    pub hits: u64,
}

/// The hit ratio per interval of `spec`'s key stream with `requests[i]` of the workload's
/// requests (refills not counted) in interval `i`.
pub fn predict(spec: &Spec, requests: &[u64]) -> Result<Vec<Predicted>, SpecError> {
    spec.validate()?;
    let routes = Routes::build(spec).map_err(SpecError::Invalid)?;
    let members = spec.pool.len();
    let words = spec.key_space.div_ceil(64) as usize;
    let mut held = vec![vec![0u64; words]; members];
    if spec.prefill {
        for k in 0..spec.key_space {
            let m = routes.member(k);
            held[m][(k / 64) as usize] |= 1 << (k % 64);
        }
    }
    let mut keys = keys::build(
        &spec.key_dist.name,
        &spec.key_dist.params,
        spec.key_space,
        0,
        1,
    )
    .map_err(SpecError::Invalid)?;
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let mix = spec.mix.cumulative();
    let iv = spec.interval;
    let mut out = Vec::with_capacity(requests.len());
    for (i, &n) in requests.iter().enumerate() {
        let start = iv * i as u32;
        let mut p = Predicted { keys: 0, hits: 0 };
        for j in 0..n {
            let at = start + iv.mul_f64((j as f64 + 0.5) / n as f64);
            let epoch = routes.epoch_at(at);
            let x: f64 = rng.random();
            let op = mix.iter().position(|&c| x < c).unwrap_or(GET);
            let count = if op == MULTIGET {
                spec.multiget_keys
            } else {
                1
            };
            for _ in 0..count {
                let k = keys.next(&mut rng);
                let m = routes.member_in(epoch, k);
                let (w, bit) = ((k / 64) as usize, 1u64 << (k % 64));
                let has = held[m][w] & bit != 0;
                match op {
                    GET | MULTIGET => {
                        p.keys += 1;
                        p.hits += u64::from(has);
                        if !has && spec.on_miss_set && op == GET {
                            held[m][w] |= bit;
                        }
                    }
                    SET => held[m][w] |= bit,
                    _ => held[m][w] &= !bit,
                }
            }
        }
        out.push(p);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Change;
    use cachelab_client::pool::Kind;
    use std::time::Duration;

    fn spec(kind: Kind) -> Spec {
        let hosts = ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"];
        let mut s = crate::route::tests::spec(kind, &hosts, 30_000);
        s.pool.changes = vec![Change {
            at: Duration::from_secs(2),
            member: 1,
            add: false,
        }];
        s.prefix = "p:drill".into();
        s.prefill = true;
        s.on_miss_set = true;
        s
    }

    fn ratio(p: &Predicted) -> f64 {
        p.hits as f64 / p.keys as f64
    }

    #[test]
    fn removing_one_of_three_misses_a_third_under_ketama_and_about_two_thirds_under_modula() {
        // 3 intervals before, a tiny one at the removal (its first requests show the dip),
        // then refills bring the ratio back.
        let counts = [1000, 1000, 1000, 2000, 20_000, 20_000];
        for (kind, lo, hi) in [(Kind::Ketama, 0.55, 0.80), (Kind::Modula, 0.20, 0.45)] {
            let mut s = spec(kind);
            s.interval = Duration::from_secs(1);
            s.pool.changes[0].at = Duration::from_secs(3);
            let p = predict(&s, &counts).unwrap();
            assert!(p[..3].iter().all(|x| x.hits == x.keys), "{kind:?} {p:?}");
            let dip = ratio(&p[3]);
            assert!((lo..hi).contains(&dip), "{kind:?}: {dip}");
            assert!(
                ratio(&p[5]) > ratio(&p[4]) && ratio(&p[4]) > dip,
                "{kind:?} {p:?}"
            );
        }
    }

    #[test]
    fn a_member_added_starts_empty() {
        let mut s = spec(Kind::Ketama);
        s.pool.changes[0].add = true; // member 1 joins at 2 s
        let p = predict(&s, &[1000, 1000, 1000]).unwrap();
        assert_eq!(p[0].hits, p[0].keys);
        assert!(ratio(&p[2]) < 0.9, "{p:?}");
    }
}
