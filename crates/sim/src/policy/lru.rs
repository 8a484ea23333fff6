//! LRU, as libCacheSim's `LRU.c`: a hit moves the object to the head; a miss evicts from the
//! tail until the new object fits and inserts it at the head.
//!
//! The list is kept over *cache positions*, not objects: each cached object holds a position
//! `1..`, and the list lives in an array of 16-byte nodes indexed by position (links, the
//! object's key and its stored size), so its size follows the number of objects cached, not
//! the number in the trace (1.6 MB for 100,000 cached objects, which mostly stays in the CPU's
//! caches however many objects the trace has), and an eviction finds everything it needs in
//! the victim's node. Position 0 is the sentinel of a circular list (its `next` is the head,
//! its `prev` the tail), so linking and unlinking take no branches. An evicted object's
//! position goes on a free stack and is the next one a miss takes.
//!
//! An [`Index`] maps an object's key to its position ([`NIL`] = not cached): a dense slot
//! table for a [`SimTrace`], or, when streaming an oracleGeneral file ([`stream_oracle`]),
//! the file's ids themselves ([`Ids`]: a table indexed by id while the ids are dense enough, a
//! hash table of the cached ids otherwise, so its size follows the cache, not the ids' range),
//! so a streamed request costs one lookup and no numbering. The streamed loop
//! takes blocks of requests in two passes: the first reads each request's index entry and
//! node (independent loads the CPU overlaps, standing in for prefetches), the second
//! simulates them and finds that state in the cache.

use std::fs::File;

use super::idmap::IdMap;
use super::{Counts, Policy, Runner, Space, Unit, BLOCK, NIL};

use crate::error::TraceError;
use crate::flat::{SimTrace, ORACLE_RECORD};

const PREV: usize = 0;
const NEXT: usize = 1;
const KEY: usize = 2;
const SIZE: usize = 3;

/// Where each key's position is kept.
pub(crate) trait Index {
    /// The position of `key`, `NIL` when not cached.
    fn get(&self, key: u64) -> u32;
    /// Records that `key` is cached at position `p`; returns the `u32` handle that
    /// [`Index::clear`] takes to forget it.
    fn insert(&mut self, key: u64, p: u32) -> u32;
    /// Forgets the key cached at `p`, given its handle.
    fn clear(&mut self, handle: u32, p: u32);
}

/// Positions indexed by dense slot (the table always covers every slot seen).
pub(crate) struct Slots(Vec<u32>);

impl Index for Slots {
    #[inline]
    fn get(&self, key: u64) -> u32 {
        self.0[key as usize]
    }

    #[inline]
    fn insert(&mut self, key: u64, p: u32) -> u32 {
        self.0[key as usize] = p;
        key as u32
    }

    #[inline]
    fn clear(&mut self, handle: u32, _p: u32) {
        self.0[handle as usize] = NIL;
    }
}

/// Ids below this may be indexed by a table (256 MiB at most).
const DIRECT_MAX: u64 = 1 << 26;
/// The id table grows to at most this many entries per cached object (64 B), or
/// [`DIRECT_MIN`]: a large cache over dense ids gets a table (one load per lookup), sparse ids
/// (block numbers in the tens of millions over a small cache) stay in the hash map.
const DIRECT_PER_OBJECT: usize = 16;
const DIRECT_MIN: usize = 1 << 12;

/// Positions indexed by raw id: a table indexed by id for ids below its length (grown while
/// it stays within [`DIRECT_PER_OBJECT`] entries per cached object), an [`IdMap`] for the
/// others. When the table grows, the map's ids it now covers move into it, so an id below the
/// table's length is always in the table.
pub(crate) struct Ids {
    table: Vec<u32>,
    /// The ids beyond the table, and the id at every position.
    map: IdMap,
    cached: usize,
}

impl Ids {
    fn new() -> Ids {
        Ids {
            table: Vec::new(),
            map: IdMap::new(),
            cached: 0,
        }
    }

    /// Bytes of table and map (the state a lookup reads).
    fn bytes(&self) -> usize {
        self.table.len() * 4 + self.map.table_bytes()
    }

    /// Grows the table to cover `key` (not covered yet) if it may; whether it covers it.
    #[inline]
    fn cover(&mut self, key: u64) -> bool {
        // The table would need more than `key` entries: most misses of sparse ids stop here.
        let most = (DIRECT_PER_OBJECT * (self.cached + 1)).max(DIRECT_MIN);
        if key >= DIRECT_MAX || key as usize >= most {
            return false;
        }
        self.grow_to(key)
    }

    #[cold]
    fn grow_to(&mut self, key: u64) -> bool {
        let len = (key as usize + 1).next_power_of_two().max(DIRECT_MIN);
        if len > (DIRECT_PER_OBJECT * (self.cached + 1)).max(DIRECT_MIN) {
            return false;
        }
        self.table.resize(len, NIL);
        for p in self.map.take_below(len as u64) {
            self.table[self.map.key(p) as usize] = p;
        }
        true
    }
}

impl Index for Ids {
    #[inline]
    fn get(&self, key: u64) -> u32 {
        match self.table.get(key as usize) {
            Some(&p) => p,
            None => self.map.get(key),
        }
    }

    #[inline]
    fn insert(&mut self, key: u64, p: u32) -> u32 {
        self.map.set_key(p, key);
        if (key as usize) < self.table.len() || self.cover(key) {
            self.table[key as usize] = p;
        } else {
            self.map.insert(p, key);
        }
        self.cached += 1;
        NIL
    }

    #[inline]
    fn clear(&mut self, _handle: u32, p: u32) {
        let key = self.map.key(p);
        match self.table.get_mut(key as usize) {
            Some(slot) => *slot = NIL,
            None => self.map.remove(p, key),
        }
        self.cached -= 1;
    }
}

pub(crate) struct Lru<I> {
    index: I,
    /// `[prev, next, key handle, stored size]` of each position; position 0 is the sentinel.
    nodes: Vec<[u32; 4]>,
    /// Positions no object holds.
    free: Vec<u32>,
    space: Space,
}

pub(crate) fn build(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    Box::new(Lru::new(capacity, Slots(vec![NIL; trace.n_objects])))
}

impl<I: Index> Lru<I> {
    fn new(capacity: u64, index: I) -> Lru<I> {
        Lru {
            index,
            nodes: vec![[0; 4]],
            free: Vec::new(),
            space: Space::new(capacity),
        }
    }

    /// Reads the state of `key` ahead of its access (see [`Policy::touch`]).
    #[inline]
    fn peek(&self, key: u64) -> u32 {
        let p = self.index.get(key);
        let i = (p as usize).min(self.nodes.len() - 1);
        self.nodes[i][PREV] ^ p
    }

    /// One request for `key` charged `size`; whether it hit.
    #[inline]
    fn request(&mut self, key: u64, size: u32) -> bool {
        let p = self.index.get(key);
        if p != NIL {
            let nodes = &mut self.nodes[..];
            unlink(nodes, p);
            link_front(nodes, p);
            return true;
        }
        if !self.space.admits(size) {
            return false;
        }
        // The last victim's position is the new object's (the others go on the free stack).
        let mut spare = NIL;
        while !self.space.fits(size) {
            let nodes = &mut self.nodes[..];
            let victim = nodes[0][PREV];
            unlink(nodes, victim);
            let [_, _, handle, stored] = nodes[victim as usize];
            self.index.clear(handle, victim);
            self.space.used -= u64::from(stored);
            if spare != NIL {
                self.free.push(spare);
            }
            spare = victim;
        }
        let p = if spare != NIL {
            spare
        } else {
            self.free.pop().unwrap_or_else(|| self.new_position())
        };
        let handle = self.index.insert(key, p);
        let nodes = &mut self.nodes[..];
        nodes[p as usize][KEY] = handle;
        nodes[p as usize][SIZE] = size;
        link_front(nodes, p);
        self.space.used += u64::from(size);
        false
    }

    /// A position no object held before.
    #[cold]
    fn new_position(&mut self) -> u32 {
        self.nodes.push([0; 4]);
        (self.nodes.len() - 1) as u32
    }
}

/// Takes position `p` out of the list.
#[inline]
fn unlink(nodes: &mut [[u32; 4]], p: u32) {
    let [a, b, _, _] = nodes[p as usize];
    nodes[a as usize][NEXT] = b;
    nodes[b as usize][PREV] = a;
}

/// Puts position `p` at the head of the list.
#[inline]
fn link_front(nodes: &mut [[u32; 4]], p: u32) {
    let head = nodes[0][NEXT];
    let n = &mut nodes[p as usize];
    n[PREV] = 0;
    n[NEXT] = head;
    nodes[head as usize][PREV] = p;
    nodes[0][NEXT] = p;
}

impl Policy for Lru<Slots> {
    #[inline]
    fn touch(&self, slot: u32) -> u32 {
        self.peek(u64::from(slot))
    }

    fn grow(&mut self, n: usize) {
        if n > self.index.0.len() {
            self.index.0.resize(n, NIL);
        }
    }

    #[inline]
    fn access(&mut self, _t: usize, x: u32, size: u32) -> bool {
        self.request(u64::from(x), size)
    }
}

/// Bytes of index and list above which the streamed loop reads ahead (see [`stream_oracle`]).
const WARM_ABOVE: usize = 256 << 10;

/// Simulates LRU at `capacity` over `n` records of an opened oracleGeneral file, keyed by the
/// file's ids (no slot numbering, no per-request arrays). Same results as [`build`] over a
/// loaded trace: requests of size 0 are skipped, and counted nowhere.
pub(crate) fn stream_oracle(
    file: File,
    n: usize,
    path: &str,
    capacity: u64,
    unit: Unit,
) -> Result<Counts, TraceError> {
    let mut lru = Lru::new(capacity, Ids::new());
    let mut c = Counts::default();
    crate::flat::oracle_chunks(file, n, path, |data| {
        for block in data.chunks(ORACLE_RECORD * BLOCK) {
            // A first pass reads every request's state: independent loads the CPU overlaps,
            // so the second pass finds them in its cache (a prefetch in safe Rust). Not when
            // that state is small enough to stay in the CPU's L2 anyway: there the first pass
            // only doubles the lookups (a fifth of the time of a 489-object LRU here).
            if lru.index.bytes() + lru.nodes.len() * 16 > WARM_ABOVE {
                let mut warm = 0u32;
                for r in block.chunks_exact(ORACLE_RECORD) {
                    warm ^= lru.peek(crate::flat::oracle_id_size(r).0);
                }
                std::hint::black_box(warm);
            }
            let mut b = Counts::default();
            for r in block.chunks_exact(ORACLE_RECORD) {
                let (id, size) = crate::flat::oracle_id_size(r);
                if size == 0 {
                    continue;
                }
                let charged = match unit {
                    Unit::Objects => 1,
                    Unit::Bytes => size,
                };
                b.requests += 1;
                b.bytes += u64::from(size);
                if !lru.request(id, charged) {
                    b.misses += 1;
                    b.miss_bytes += u64::from(size);
                }
            }
            c.requests += b.requests;
            c.misses += b.misses;
            c.bytes += b.bytes;
            c.miss_bytes += b.miss_bytes;
        }
    })?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flat::{FlatTrace, Format};
    use crate::policy::simulate;

    /// The id index answers as a hash map does while its table grows and takes over ids
    /// from its map (ids dense enough for a table only once enough of them are cached).
    #[test]
    fn ids_agree_with_a_hash_map_as_the_table_grows() {
        let mut ids = Ids::new();
        let mut reference: std::collections::HashMap<u64, u32> = Default::default();
        let mut at: Vec<Option<u64>> = vec![None; 20_000];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut grew = 0;
        for _ in 0..300_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = if x & 1 == 0 {
                x % 200_000
            } else {
                x % 7 + (1 << 40)
            };
            let p = (x >> 24) as usize % at.len();
            if let Some(old) = at[p].take() {
                ids.clear(NIL, p as u32);
                reference.remove(&old);
            } else if ids.get(key) == NIL {
                let before = ids.table.len();
                ids.insert(key, p as u32);
                grew += usize::from(ids.table.len() > before.max(DIRECT_MIN));
                reference.insert(key, p as u32);
                at[p] = Some(key);
            }
            let probe = x.rotate_left(23) % 200_000;
            assert_eq!(
                ids.get(probe),
                reference.get(&probe).copied().unwrap_or(NIL)
            );
        }
        for (k, &p) in &reference {
            assert_eq!(ids.get(*k), p);
        }
        assert!(grew >= 3, "the table grew {grew} times");
    }

    /// Streaming by raw id (small ids through the table, huge ones through the map, sizes of
    /// 0 skipped) counts exactly what the slot-indexed LRU counts over the loaded trace.
    #[test]
    fn streamed_ids_match_loaded_slots() {
        let mut t = FlatTrace::default();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % 300) * (x % 300) / 300;
            let id = if k & 3 == 0 { (1 << 40) + k } else { k };
            let size = if x & 63 == 0 {
                0
            } else {
                1 + (k as u32 * 37) % 500
            };
            t.push(i, id, size);
        }
        let dir = std::env::temp_dir().join(format!("cachelab-lru-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.oracleGeneral.bin");
        t.write(&path, Some(Format::Oracle)).unwrap();
        let st = SimTrace::new(&t);
        for (unit, caps) in [
            (Unit::Objects, [1u64, 7, 40, 150]),
            (Unit::Bytes, [300, 2_000, 10_000, 60_000]),
        ] {
            for cap in caps {
                let (f, n) = crate::flat::oracle_open(&path, "t").unwrap();
                let streamed = stream_oracle(f, n, "t", cap, unit).unwrap();
                let loaded = simulate(&st, "lru", cap, unit).unwrap().counts;
                assert_eq!(streamed, loaded, "{} {cap}", unit.name());
                assert!(loaded.misses > 0 && loaded.misses < loaded.requests);
            }
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
