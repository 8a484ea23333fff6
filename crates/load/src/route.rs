//! Which member of the pool each key goes to, worked out once per run.
//!
//! Keys are `<prefix>:<index>` over a key space bounded by [`caps::MAX_KEY_SPACE`], so the
//! member of every key is computed before the run (with the pool's distribution, the one
//! production clients use: [`cachelab_client::pool`]) into a table of one byte per key. The
//! hot path then finds a key's member with one load; a pool of one has no table.
//!
//! [`caps::MAX_KEY_SPACE`]: crate::caps::MAX_KEY_SPACE

use crate::spec::Spec;
use crate::wire;

/// The key -> member table of a run, and how many keys each member holds.
#[derive(Debug, Clone)]
pub(crate) struct Routes {
    /// Member of each key index; empty for a pool of one.
    table: Vec<u8>,
    /// Keys of the key space per member, in the pool's order.
    pub keys: Vec<u64>,
}

impl Routes {
    /// The table for `spec`'s pool and key space, computed on up to `spec.threads` threads
    /// (at least two when the machine has them: a large key space takes a while to hash).
    pub fn build(spec: &Spec) -> Result<Routes, String> {
        let members = spec.pool.len();
        if members == 1 {
            return Ok(Routes {
                table: Vec::new(),
                keys: vec![spec.key_space],
            });
        }
        let map = spec.pool.distribution()?;
        let n = spec.key_space as usize;
        let mut table = vec![0u8; n];
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        let threads = spec.threads.max(cpus.min(8)).clamp(1, n.max(1));
        let chunk = n.div_ceil(threads).max(1);
        let prefix = spec.prefix.as_bytes();
        std::thread::scope(|s| {
            for (i, part) in table.chunks_mut(chunk).enumerate() {
                let map = &map;
                s.spawn(move || {
                    let mut key = Vec::with_capacity(prefix.len() + 24);
                    for (j, slot) in part.iter_mut().enumerate() {
                        key.clear();
                        wire::put_key(&mut key, prefix, (i * chunk + j) as u64);
                        *slot = map.server_for(&key) as u8;
                    }
                });
            }
        });
        let mut keys = vec![0u64; members];
        for &m in &table {
            keys[m as usize] += 1;
        }
        Ok(Routes { table, keys })
    }

    /// The member that holds key `index`.
    #[inline]
    pub fn member(&self, index: u64) -> usize {
        if self.table.is_empty() {
            0
        } else {
            self.table[index as usize] as usize
        }
    }

    /// The key indices from `indices` that member `m` holds.
    pub fn of_member(&self, m: usize, indices: &[u64]) -> Vec<u64> {
        indices
            .iter()
            .copied()
            .filter(|&i| self.member(i) == m)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Member, Pool};
    use cachelab_client::pool::{Distribution, Kind, Server};

    fn spec(kind: Kind, hosts: &[&str], key_space: u64) -> Spec {
        let mut s = crate::steady::tests::spec();
        s.pool = Pool {
            members: hosts
                .iter()
                .map(|h| Member {
                    address: h.parse().unwrap(),
                    weight: 1,
                })
                .collect(),
            distribution: kind,
            failure_limit: 2,
            retry: std::time::Duration::from_secs(1),
        };
        s.key_space = key_space;
        s.prefix = "p:run".into();
        s
    }

    #[test]
    fn every_key_goes_where_the_distribution_puts_it() {
        let hosts = ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11212"];
        for kind in [
            Kind::Ketama,
            Kind::KetamaPlain,
            Kind::Rendezvous,
            Kind::Modula,
        ] {
            let r = Routes::build(&spec(kind, &hosts, 5000)).unwrap();
            let servers = hosts.iter().map(|h| Server::parse(h).unwrap()).collect();
            let map = Distribution::new(kind, servers).unwrap();
            for i in 0..5000u64 {
                let key = format!("p:run:{i}");
                assert_eq!(
                    r.member(i),
                    map.server_for(key.as_bytes()),
                    "{kind:?} key {key}"
                );
            }
            assert_eq!(r.keys.iter().sum::<u64>(), 5000);
            assert!(r.keys.iter().all(|&k| k > 0), "{kind:?}: {:?}", r.keys);
        }
    }

    #[test]
    fn a_pool_of_one_has_no_table() {
        let r = Routes::build(&spec(Kind::Ketama, &["10.0.0.1:11211"], 100)).unwrap();
        assert_eq!((r.member(99), r.keys.clone()), (0, vec![100]));
    }
}
