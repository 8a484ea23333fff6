//! The in-process LRU of one app instance, capacity in items or bytes.
//!
//! A doubly linked list over a node arena, with an item → node index that is a flat array when
//! the catalog is small enough (one `u32` per item per instance) and a hash map otherwise.

const NIL: u32 = u32::MAX;

/// Items times instances up to which the index may be a flat array (64 MiB of `u32`).
pub(crate) const DENSE_LIMIT: usize = 1 << 24;

/// The flat index is used when the cache may hold at least 1 / `DENSE_SHARE` of the catalog;
/// a small cache is faster with a small hash map that stays in the CPU cache.
pub(crate) const DENSE_SHARE: u64 = 16;

#[derive(Clone, Copy)]
struct Node {
    item: u32,
    prev: u32,
    next: u32,
    weight: u64,
}

/// An open-addressing map from item to node: one `u64` per slot (`item + 1` in the low half,
/// the node in the high half, 0 = empty), linear probing from a Fibonacci hash, at most half
/// full, backward-shift deletion. A lookup usually reads one cache line.
pub(crate) struct ItemTable {
    slots: Vec<u64>,
    shift: u32,
    len: usize,
}

impl ItemTable {
    fn with_slots(n: usize) -> ItemTable {
        let n = n.next_power_of_two().max(16);
        ItemTable {
            slots: vec![0; n],
            shift: 64 - n.trailing_zeros(),
            len: 0,
        }
    }

    /// A table for up to `expected` entries without growing.
    pub(crate) fn new(expected: usize) -> ItemTable {
        ItemTable::with_slots(expected.saturating_mul(2))
    }

    #[inline]
    fn home(&self, item: u32) -> usize {
        (u64::from(item).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline]
    pub(crate) fn get(&self, item: u32) -> u32 {
        let tag = u64::from(item) + 1;
        let mut i = self.home(item);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return NIL;
            }
            if s & 0xffff_ffff == tag {
                return (s >> 32) as u32;
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Adds `item` (not present) -> `node`.
    pub(crate) fn insert(&mut self, item: u32, node: u32) {
        if (self.len + 1) * 2 > self.slots.len() {
            let old = std::mem::replace(self, ItemTable::with_slots(self.slots.len() * 2));
            for s in old.slots.into_iter().filter(|&s| s != 0) {
                self.put(s);
            }
        }
        self.put((u64::from(node) << 32) | (u64::from(item) + 1));
    }

    #[inline]
    fn put(&mut self, slot: u64) {
        let mut i = self.home(((slot & 0xffff_ffff) - 1) as u32);
        while self.slots[i] != 0 {
            i = (i + 1) & self.mask();
        }
        self.slots[i] = slot;
        self.len += 1;
    }

    /// Removes `item` if present.
    pub(crate) fn remove(&mut self, item: u32) {
        let tag = u64::from(item) + 1;
        let mask = self.mask();
        let mut i = self.home(item);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return;
            }
            if s & 0xffff_ffff == tag {
                break;
            }
            i = (i + 1) & mask;
        }
        // Shift later entries of the probe run back into the hole when that keeps them
        // reachable from their home slot.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = self.home(((s & 0xffff_ffff) - 1) as u32);
            // Distance from home to j versus from the hole to j, cyclically.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.slots[i] = s;
                i = j;
            }
        }
        self.slots[i] = 0;
        self.len -= 1;
    }
}

enum Index {
    Dense(Vec<u32>),
    Hashed(ItemTable),
}

impl Index {
    #[inline]
    fn get(&self, item: u32) -> u32 {
        match self {
            Index::Dense(v) => v[item as usize],
            Index::Hashed(m) => m.get(item),
        }
    }
    #[inline]
    fn set(&mut self, item: u32, node: u32) {
        match self {
            Index::Dense(v) => v[item as usize] = node,
            Index::Hashed(m) => m.insert(item, node),
        }
    }
    #[inline]
    fn remove(&mut self, item: u32) {
        match self {
            Index::Dense(v) => v[item as usize] = NIL,
            Index::Hashed(m) => m.remove(item),
        }
    }
}

/// One instance's LRU. Weights are 1 per item (item capacity) or the value size (byte capacity).
pub(crate) struct Lru {
    capacity: u64,
    by_bytes: bool,
    used: u64,
    head: u32,
    tail: u32,
    nodes: Vec<Node>,
    free: Vec<u32>,
    index: Index,
}

impl Lru {
    /// An empty LRU over a catalog of `n_items`; `dense` picks the flat index.
    pub(crate) fn new(capacity: u64, by_bytes: bool, n_items: usize, dense: bool) -> Lru {
        Lru {
            capacity,
            by_bytes,
            used: 0,
            head: NIL,
            tail: NIL,
            nodes: Vec::new(),
            free: Vec::new(),
            index: if dense {
                Index::Dense(vec![NIL; n_items])
            } else {
                // An item capacity bounds the entries; a byte capacity grows the table.
                let expected = if by_bytes {
                    64
                } else {
                    capacity.min(n_items as u64) as usize
                };
                Index::Hashed(ItemTable::new(expected))
            },
        }
    }

    #[inline]
    fn unlink(&mut self, n: u32) {
        let Node { prev, next, .. } = self.nodes[n as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    #[inline]
    fn push_front(&mut self, n: u32) {
        self.nodes[n as usize].prev = NIL;
        self.nodes[n as usize].next = self.head;
        if self.head != NIL {
            self.nodes[self.head as usize].prev = n;
        } else {
            self.tail = n;
        }
        self.head = n;
    }

    /// True when `item` is cached; it becomes the most recently used.
    #[inline]
    pub(crate) fn touch(&mut self, item: u32) -> bool {
        let n = self.index.get(item);
        if n == NIL {
            return false;
        }
        if self.head != n {
            self.unlink(n);
            self.push_front(n);
        }
        true
    }

    /// True when `item` is cached (no change of order).
    #[cfg(test)]
    pub(crate) fn contains(&self, item: u32) -> bool {
        self.index.get(item) != NIL
    }

    /// Adds `item` (not cached, `size` bytes) as the most recently used, evicting from the
    /// tail until it fits. An item heavier than the whole capacity is not admitted.
    #[inline]
    pub(crate) fn insert(&mut self, item: u32, size: u64) {
        let w = if self.by_bytes { size } else { 1 };
        if w > self.capacity {
            return;
        }
        while self.used + w > self.capacity {
            let t = self.tail;
            let victim = self.nodes[t as usize];
            self.unlink(t);
            self.index.remove(victim.item);
            self.used -= victim.weight;
            self.free.push(t);
        }
        let node = Node {
            item,
            prev: NIL,
            next: NIL,
            weight: w,
        };
        let n = match self.free.pop() {
            Some(n) => {
                self.nodes[n as usize] = node;
                n
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.push_front(n);
        self.index.set(item, n);
        self.used += w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn item_table_agrees_with_a_hash_map() {
        // A deterministic mix of inserts and removes over a small key space, with growth and
        // long probe runs (keys that share a home slot).
        let mut t = ItemTable::new(4);
        let mut m: HashMap<u32, u32> = HashMap::new();
        let mut x: u64 = 1;
        for step in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let item = ((x >> 33) % 300) as u32 * 64;
            if m.remove(&item).is_some() {
                t.remove(item);
            } else {
                t.insert(item, step);
                m.insert(item, step);
            }
            assert_eq!(t.len, m.len());
            for probe in [item, item + 64, item.wrapping_sub(64)] {
                assert_eq!(t.get(probe), m.get(&probe).copied().unwrap_or(NIL));
            }
        }
        for k in 0..300u32 {
            assert_eq!(t.get(k * 64), m.get(&(k * 64)).copied().unwrap_or(NIL));
        }
    }

    #[test]
    fn evicts_the_least_recently_used() {
        for dense in [true, false] {
            let mut l = Lru::new(2, false, 10, dense);
            l.insert(1, 1000);
            l.insert(2, 1000);
            assert!(l.touch(1));
            l.insert(3, 1000);
            assert!(l.contains(1) && l.contains(3) && !l.contains(2));
            assert!(!l.touch(2));
        }
    }

    #[test]
    fn byte_capacity_evicts_until_it_fits_and_refuses_giants() {
        let mut l = Lru::new(100, true, 5, true);
        l.insert(0, 40);
        l.insert(1, 40);
        l.insert(4, 101);
        assert!(!l.contains(4) && l.contains(0) && l.contains(1));
        l.insert(3, 90);
        assert!(l.contains(3) && !l.contains(0) && !l.contains(1));
        l.insert(2, 40);
        assert!(l.contains(2) && !l.contains(3));
    }
}
