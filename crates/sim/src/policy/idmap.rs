//! The positions of the cached objects, keyed by raw id: an open-addressing hash table
//! (linear probing, sparse, doubled as the cache grows) whose size follows the number of
//! objects *cached*, not the number of ids seen or their range.
//!
//! A streamed LRU over a block trace sees ids up to tens of millions (block numbers) while
//! caching a few hundred of them: a table indexed by id would take hundreds of MiB and a page
//! fault per first touch. Here the table holds only 4-byte positions, and the id cached at
//! each position is kept by position ([`IdMap::key`]), so a 489-object cache's whole index is
//! about 70 KiB. Deletion shifts the following entries back (no tombstones), so lookups stay
//! short under the steady insert/evict churn of a full cache.

use super::NIL;

/// Up to this many entries (64 KiB) the table is kept at most 1/[`SPARSE`] full, beyond it at
/// most half full: a small cache's probes then almost never meet another entry (a cache of 489
/// block ids ran its LRU faster at 1/16 than at 1/4, and a little faster again at 1/32, in
/// timings taken while writing it; the recorded figure is the whole run's:
/// benches/runs/2026-11-27-flat-sim-block.md), while a large one's table stays near 8 B per
/// cached object.
const SPARSE_UP_TO: usize = 1 << 14;
const SPARSE: usize = 32;

/// The most entries a table of `t` slots takes (see [`SPARSE`]).
fn most(t: usize) -> usize {
    if t < SPARSE_UP_TO {
        t / SPARSE
    } else {
        t / 2
    }
}

pub(crate) struct IdMap {
    /// Positions ([`NIL`] = empty slot).
    table: Vec<u32>,
    /// `64 - log2(table.len())`: a key's home slot is the top bits of its multiplied hash.
    shift: u32,
    len: usize,
    /// The most entries the table takes before it doubles.
    most: usize,
    /// The id at each position (set with [`IdMap::set_key`], for ids in the map or not).
    keys: Vec<u64>,
}

impl IdMap {
    pub(crate) fn new() -> IdMap {
        IdMap {
            table: vec![NIL; 64],
            shift: 64 - 6,
            len: 0,
            most: most(64),
            keys: Vec::new(),
        }
    }

    /// Bytes of the table.
    pub(crate) fn table_bytes(&self) -> usize {
        self.table.len() * 4
    }

    /// Records that position `p` holds `key` (before [`IdMap::insert`] of `p`).
    #[inline]
    pub(crate) fn set_key(&mut self, p: u32, key: u64) {
        let i = p as usize;
        if i >= self.keys.len() {
            self.keys.resize((i + 1).next_power_of_two(), 0);
        }
        self.keys[i] = key;
    }

    /// The id at position `p`.
    #[inline]
    pub(crate) fn key(&self, p: u32) -> u64 {
        self.keys[p as usize]
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    /// The position of `key` in the map, [`NIL`] when it is not there.
    #[inline]
    pub(crate) fn get(&self, key: u64) -> u32 {
        let mut i = self.home(key);
        loop {
            let p = self.table[i];
            if p == NIL || self.keys[p as usize] == key {
                return p;
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Adds position `p`, whose key (set, and not in the map) is `key`.
    #[inline]
    pub(crate) fn insert(&mut self, p: u32, key: u64) {
        debug_assert_eq!(self.keys[p as usize], key);
        if self.len >= self.most {
            self.grow();
        }
        self.place(p, key);
        self.len += 1;
    }

    #[inline]
    fn place(&mut self, p: u32, key: u64) {
        let mut i = self.home(key);
        while self.table[i] != NIL {
            i = (i + 1) & self.mask();
        }
        self.table[i] = p;
    }

    #[cold]
    fn grow(&mut self) {
        let bigger = vec![NIL; self.table.len() * 2];
        let old = std::mem::replace(&mut self.table, bigger);
        self.shift -= 1;
        self.most = most(self.table.len());
        for p in old.into_iter().filter(|&p| p != NIL) {
            self.place(p, self.keys[p as usize]);
        }
    }

    /// The positions whose key is below `limit`, removed from the map.
    pub(crate) fn take_below(&mut self, limit: u64) -> Vec<u32> {
        let out: Vec<u32> = self
            .table
            .iter()
            .copied()
            .filter(|&p| p != NIL && self.keys[p as usize] < limit)
            .collect();
        for &p in &out {
            self.remove(p, self.keys[p as usize]);
        }
        out
    }

    /// Removes position `p` (which is in the map), whose key is `key`.
    #[inline]
    pub(crate) fn remove(&mut self, p: u32, key: u64) {
        debug_assert_eq!(self.keys[p as usize], key);
        let mask = self.mask();
        let mut i = self.home(key);
        while self.table[i] != p {
            i = (i + 1) & mask;
        }
        // Backward-shift deletion: move up each later entry of the run whose home slot is
        // not in (i, j] cyclically, so every entry stays reachable from its home.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let e = self.table[j];
            if e == NIL {
                break;
            }
            let h = self.home(self.keys[e as usize]);
            let stays = if i <= j {
                i < h && h <= j
            } else {
                i < h || h <= j
            };
            if !stays {
                self.table[i] = e;
                i = j;
            }
        }
        self.table[i] = NIL;
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::Entry;
    use std::collections::HashMap;

    /// Under heavy churn (ids clustered to collide, positions reused) the map answers as a
    /// std HashMap does, and stays at most half full (past its sparse sizes).
    #[test]
    fn agrees_with_a_hash_map_under_churn() {
        let mut m = IdMap::new();
        let mut reference: HashMap<u64, u32> = HashMap::new();
        let mut at: Vec<Option<u64>> = vec![None; 6000];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = ((x % 10_000) << 40) | (x % 7);
            let p = (x >> 20) as usize % at.len();
            if let Some(old) = at[p].take() {
                m.remove(p as u32, old);
                reference.remove(&old);
            } else if let Entry::Vacant(v) = reference.entry(key) {
                m.set_key(p as u32, key);
                m.insert(p as u32, key);
                v.insert(p as u32);
                at[p] = Some(key);
            }
            let probe = ((x.rotate_left(17) % 10_000) << 40) | (x % 7);
            assert_eq!(m.get(probe), reference.get(&probe).copied().unwrap_or(NIL));
            assert_eq!(m.len, reference.len());
            assert!(2 * m.len <= m.table.len());
        }
        for (k, &p) in &reference {
            assert_eq!(m.get(*k), p);
        }
        let limit = 5_000 << 40;
        let mut low: Vec<(u64, u32)> = m.take_below(limit).iter().map(|&p| (m.key(p), p)).collect();
        low.sort_unstable();
        let mut want: Vec<(u64, u32)> = reference
            .iter()
            .filter(|(k, _)| **k < limit)
            .map(|(k, p)| (*k, *p))
            .collect();
        want.sort_unstable();
        assert_eq!(low, want);
        assert!(!want.is_empty());
        for (k, &p) in &reference {
            assert_eq!(m.get(*k), if *k < limit { NIL } else { p });
        }
    }
}
