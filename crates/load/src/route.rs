//! Which member of the pool each key goes to, worked out once per run.
//!
//! Keys are `<prefix>:<index>` over a key space bounded by [`caps::MAX_KEY_SPACE`], so the
//! member of every key is computed before the run (with the pool's distribution, the one
//! production clients use: [`cachelab_client::pool`]) into a table of one byte per key. The
//! hot path then finds a key's member with one load; a pool of one has no table.
//!
//! [`caps::MAX_KEY_SPACE`]: crate::caps::MAX_KEY_SPACE

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use cachelab_client::resp::key_slot;
use cachelab_client::resp::slot::SLOTS;

use crate::spec::{Pool, Protocol, Spec};
use crate::wire;

impl Pool {
    /// Whether the pool is a Redis Cluster's masters, keys routed by hash slot.
    pub fn is_cluster(&self) -> bool {
        !self.slots.is_empty()
    }
}

/// A Redis Cluster run's own checks (none for a pool): RESP, database 0, no proxy, no
/// membership changes, every slot served by a member.
pub(crate) fn check_cluster(spec: &Spec) -> Result<(), String> {
    if !spec.pool.is_cluster() {
        return Ok(());
    }
    match &spec.protocol {
        Protocol::Memcached => return Err("a Redis Cluster speaks RESP".into()),
        Protocol::Resp(l) if l.db.is_some_and(|d| d != 0) => {
            return Err("a Redis Cluster has only database 0".into())
        }
        Protocol::Resp(_) => {}
    }
    if !spec.pool.changes.is_empty() || !spec.behind.is_empty() {
        return Err(
            "a Redis Cluster's members are its masters: no membership changes, no \
                    proxy"
                .into(),
        );
    }
    cluster_owners(&spec.pool).map(|_| ())
}

/// A Redis Cluster's routing: each key's hash slot, worked out once, and each slot's master
/// (a member), which a `-MOVED` changes during the run.
#[derive(Debug)]
pub(crate) struct Slots {
    of_key: Vec<u16>,
    owner: Vec<AtomicU8>,
}

/// The master (member index) of every slot of `pool`'s cluster: an error names a slot no
/// member serves, or a member index out of range.
pub(crate) fn cluster_owners(pool: &Pool) -> Result<Vec<u8>, String> {
    const NONE: u8 = u8::MAX;
    let mut owner = vec![NONE; SLOTS as usize];
    for &(start, end, m) in &pool.slots {
        if m >= pool.len() || start > end || end >= SLOTS {
            return Err(format!(
                "cluster_slots: ({start}, {end}, {m}) is not a slot range (0 to {}) of one of \
                 the {} members",
                SLOTS - 1,
                pool.len()
            ));
        }
        owner[start as usize..=end as usize].fill(m as u8);
    }
    if let Some(slot) = owner.iter().position(|&o| o == NONE) {
        return Err(format!(
            "hash slot {slot} has no master: the cluster does not serve every slot \
             (cluster_state:fail); fix the cluster before loading it"
        ));
    }
    Ok(owner)
}

/// One membership of the pool: from when, its members, and its key -> member table.
#[derive(Debug, Clone)]
pub(crate) struct Epoch {
    /// From this long after the start of sending.
    pub from: Duration,
    /// Its members (indices into the pool's members), in the pool's order.
    pub active: Vec<usize>,
    /// Member of each key index; empty for a pool of one.
    table: Vec<u8>,
}

/// The key -> member tables of a run, one per membership (one unless the run adds or removes
/// members), and how many keys each member holds at the start.
#[derive(Debug)]
pub(crate) struct Routes {
    pub epochs: Vec<Epoch>,
    /// Keys of the key space per member at the start, in the pool's order.
    pub keys: Vec<u64>,
    /// Members of the pool.
    members: usize,
    /// The pool's `remap`: a key of a member marked down goes to another member.
    remap: bool,
    /// A Redis Cluster: keys go by hash slot (the epochs' tables are then empty).
    slots: Option<Slots>,
}

/// The table of `pool`'s members `active` over `spec`'s key space, computed on up to
/// `spec.threads` threads (at least two when the machine has them: a large key space takes a
/// while to hash); each entry an index into the pool's members.
pub(crate) fn table(spec: &Spec, pool: &Pool, active: &[usize]) -> Result<Vec<u8>, String> {
    let map = pool.distribution_of(active)?;
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
                    *slot = active[map.server_for(&key)] as u8;
                }
            });
        }
    });
    Ok(table)
}

impl Routes {
    /// The tables for `spec`'s pool, each membership's, and key space.
    pub fn build(spec: &Spec) -> Result<Routes, String> {
        let members = spec.pool.len();
        if spec.pool.is_cluster() {
            let owner = cluster_owners(&spec.pool)?;
            let prefix = spec.prefix.as_bytes();
            let mut key = Vec::with_capacity(prefix.len() + 24);
            let mut keys = vec![0u64; members];
            let of_key = (0..spec.key_space)
                .map(|i| {
                    key.clear();
                    wire::put_key(&mut key, prefix, i);
                    let slot = key_slot(&key);
                    keys[owner[slot as usize] as usize] += 1;
                    slot
                })
                .collect();
            return Ok(Routes {
                epochs: vec![Epoch {
                    from: Duration::ZERO,
                    active: (0..members).collect(),
                    table: Vec::new(),
                }],
                keys,
                members,
                remap: false,
                slots: Some(Slots {
                    of_key,
                    owner: owner.into_iter().map(AtomicU8::new).collect(),
                }),
            });
        }
        if members == 1 {
            return Ok(Routes {
                epochs: vec![Epoch {
                    from: Duration::ZERO,
                    active: vec![0],
                    table: Vec::new(),
                }],
                keys: vec![spec.key_space],
                members,
                remap: spec.pool.remap,
                slots: None,
            });
        }
        let epochs = spec
            .pool
            .epochs()?
            .into_iter()
            .map(|(from, active)| {
                let table = table(spec, &spec.pool, &active)?;
                Ok(Epoch {
                    from,
                    active,
                    table,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut keys = vec![0u64; members];
        for &m in &epochs[0].table {
            keys[m as usize] += 1;
        }
        Ok(Routes {
            epochs,
            keys,
            members,
            remap: spec.pool.remap,
            slots: None,
        })
    }

    /// A cluster's: the hash slot of key `index`.
    #[inline]
    pub fn slot(&self, index: u64) -> Option<u16> {
        self.slots.as_ref().map(|s| s.of_key[index as usize])
    }

    /// A cluster's: slot `slot` now lives on member `member` (a `-MOVED`, or the slot map
    /// read again).
    pub fn moved(&self, slot: u16, member: usize) {
        if let Some(s) = &self.slots {
            s.owner[slot as usize].store(member as u8, Ordering::Relaxed);
        }
    }

    /// The member that holds key `index` at the start.
    #[inline]
    pub fn member(&self, index: u64) -> usize {
        self.member_in(0, index)
    }

    /// The member that holds key `index` in membership `epoch`.
    #[inline]
    pub fn member_in(&self, epoch: usize, index: u64) -> usize {
        if let Some(s) = &self.slots {
            return s.owner[s.of_key[index as usize] as usize].load(Ordering::Relaxed) as usize;
        }
        let t = &self.epochs[epoch].table;
        if t.is_empty() {
            0
        } else {
            t[index as usize] as usize
        }
    }

    /// The membership in force `elapsed` after the start of sending.
    #[inline]
    pub fn epoch_at(&self, elapsed: Duration) -> usize {
        self.epochs
            .iter()
            .rposition(|e| e.from <= elapsed)
            .unwrap_or(0)
    }

    /// The members that may hold key `index` at some time of the run, as a bitset over the
    /// pool's members (at most [`MAX_MEMBERS`](crate::caps::MAX_MEMBERS), 64): its member in
    /// each membership — or every member under `remap`, where a key of a member marked down
    /// goes to another.
    pub fn holders(&self, index: u64) -> u64 {
        if self.slots.is_some() {
            // A cluster's master answers -MOVED for a key it does not serve: only the one
            // serving it now.
            return 1 << self.member(index);
        }
        if self.remap {
            return u64::MAX >> (64 - self.members);
        }
        (0..self.epochs.len()).fold(0, |acc, e| acc | 1 << self.member_in(e, index))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::{Member, Pool};
    use cachelab_client::pool::{Distribution, Kind, Server};

    /// A spec whose pool is `hosts` (weight 1 each) spread by `kind`, over `key_space` keys.
    pub(crate) fn spec(kind: Kind, hosts: &[&str], key_space: u64) -> Spec {
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
            ..Pool::single(hosts[0].parse().unwrap())
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

    #[test]
    fn a_removed_member_holds_no_keys_after_its_removal_and_ketama_moves_only_its_own() {
        let hosts = ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11212"];
        let mut s = spec(Kind::Ketama, &hosts, 6000);
        s.pool.changes = vec![crate::spec::Change {
            at: std::time::Duration::from_secs(2),
            member: 1,
            add: false,
        }];
        let r = Routes::build(&s).unwrap();
        assert_eq!(r.epochs.len(), 2);
        assert_eq!(r.epoch_at(std::time::Duration::from_millis(1999)), 0);
        assert_eq!(r.epoch_at(std::time::Duration::from_secs(3)), 1);
        let held = (0..6000u64).filter(|&i| r.member_in(1, i) == 1).count();
        assert_eq!(held, 0);
        let servers = [hosts[0], hosts[2]]
            .iter()
            .map(|h| Server::parse(h).unwrap())
            .collect();
        let after = Distribution::new(Kind::Ketama, servers).unwrap();
        for i in 0..6000u64 {
            let key = format!("p:run:{i}");
            let m = [0, 2][after.server_for(key.as_bytes())];
            assert_eq!(r.member_in(1, i), m, "key {key}");
            // ketama: a key of a member that stays does not move.
            if r.member(i) != 1 {
                assert_eq!(r.member_in(1, i), r.member(i), "key {key}");
            }
        }
    }

    #[test]
    fn a_key_may_be_held_by_its_member_in_each_membership_or_by_any_under_remap() {
        let hosts = ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11212"];
        let mut s = spec(Kind::Ketama, &hosts, 3000);
        let r = Routes::build(&s).unwrap();
        assert!((0..3000).all(|i| r.holders(i) == 1 << r.member(i)));
        s.pool.changes = vec![crate::spec::Change {
            at: std::time::Duration::from_secs(2),
            member: 1,
            add: false,
        }];
        let r = Routes::build(&s).unwrap();
        for i in 0..3000u64 {
            let both = 1 << r.member(i) | 1 << r.member_in(1, i);
            assert_eq!(r.holders(i), both, "key {i}");
        }
        // Member 1's keys moved: two holders each.
        assert!((0..3000).any(|i| r.holders(i).count_ones() == 2));
        s.pool.remap = true;
        let r = Routes::build(&s).unwrap();
        assert!((0..3000).all(|i| r.holders(i) == 0b111));
    }

    #[test]
    fn a_cluster_s_keys_go_to_their_slot_s_master_until_the_slot_moves() {
        let hosts = ["127.0.0.31:7000", "127.0.0.32:7000", "127.0.0.33:7000"];
        let mut s = spec(Kind::Ketama, &hosts, 3000);
        s.pool.slots = vec![(0, 5460, 0), (5461, 10922, 1), (10923, 16383, 2)];
        let r = Routes::build(&s).unwrap();
        let owner = |slot: u16| match slot {
            0..=5460 => 0,
            5461..=10922 => 1,
            _ => 2,
        };
        for i in 0..3000u64 {
            let slot = key_slot(format!("p:run:{i}").as_bytes());
            assert_eq!(r.slot(i), Some(slot));
            assert_eq!((r.member(i), r.holders(i)), (owner(slot), 1 << owner(slot)));
        }
        assert_eq!(r.keys.iter().sum::<u64>(), 3000);
        assert!(r.keys.iter().all(|&k| k > 800), "{:?}", r.keys);
        let slot = r.slot(7).unwrap();
        let to = (owner(slot) + 1) % 3;
        r.moved(slot, to);
        assert_eq!((r.member(7), r.holders(7)), (to, 1 << to));
        // A slot no master serves, or a member that is not one, is refused.
        s.pool.slots.pop();
        let e = Routes::build(&s).unwrap_err();
        assert!(e.starts_with("hash slot 10923 has no master"), "{e}");
        s.pool.slots.push((10923, 16383, 3));
        assert!(Routes::build(&s).unwrap_err().contains("(10923, 16383, 3)"));
    }
}
