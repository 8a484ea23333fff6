//! The in-process LRU of one app instance, capacity in items or bytes.
//!
//! One open-addressing table holds everything: a slot is the item, the links of the recency
//! list (slot numbers) and the item's weight, 16 bytes, four to a cache line. Finding an item
//! and reaching its list node is one probe, usually one cache line; moving it to the front
//! writes its two neighbours. Linear probing from a Fibonacci hash, at most a quarter full, growing
//! by doubling; deletion shifts later entries of the probe run back and repoints their
//! neighbours' links. The table starts small and grows with what the instance actually holds,
//! so 50 instances of a cache the size of the catalog cost what they contain, not 50 catalogs.

const NIL: u32 = u32::MAX;
/// `Slot::item` of an empty slot (item indices are below `u32::MAX`).
const EMPTY: u32 = u32::MAX;
/// Slots of a new table.
const MIN_SLOTS: usize = 64;
/// The table is at most 1 / `LOAD` full: short probe runs make lookups of absent items and
/// deletions (which shift the rest of a run back) cheap.
const LOAD: usize = 4;

#[derive(Clone, Copy)]
struct Slot {
    item: u32,
    /// Towards the most recently used.
    prev: u32,
    /// Towards the least recently used.
    next: u32,
    /// Value bytes (byte capacity; saturated, see [`Lru::giants`]) or 1.
    weight: u32,
}

const FREE: Slot = Slot {
    item: EMPTY,
    prev: NIL,
    next: NIL,
    weight: 0,
};

/// One instance's LRU. Weights are 1 per item (item capacity) or the value size (byte capacity).
pub(crate) struct Lru {
    capacity: u64,
    by_bytes: bool,
    used: u64,
    len: usize,
    /// Most recently used slot, or `NIL`.
    head: u32,
    /// Least recently used slot, or `NIL`.
    tail: u32,
    slots: Vec<Slot>,
    shift: u32,
    /// Exact weights of cached items of `u32::MAX` bytes or more (their slot says `u32::MAX`).
    giants: Vec<(u32, u64)>,
}

impl Lru {
    /// An empty LRU.
    pub(crate) fn new(capacity: u64, by_bytes: bool) -> Lru {
        Lru {
            capacity,
            by_bytes,
            used: 0,
            len: 0,
            head: NIL,
            tail: NIL,
            slots: vec![FREE; MIN_SLOTS],
            shift: 64 - MIN_SLOTS.trailing_zeros(),
            giants: Vec::new(),
        }
    }

    #[inline]
    fn home(&self, item: u32) -> usize {
        (u64::from(item).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `item`, or `NIL`.
    #[inline]
    fn find(&self, item: u32) -> u32 {
        let mask = self.mask();
        let mut i = self.home(item);
        loop {
            let s = self.slots[i].item;
            if s == item {
                return i as u32;
            }
            if s == EMPTY {
                return NIL;
            }
            i = (i + 1) & mask;
        }
    }

    /// Reads the cache line where a lookup of `item` starts, so that a burst of these for the
    /// items of a request overlaps their memory latencies; returns something to keep the read.
    #[inline]
    pub(crate) fn warm(&self, item: u32) -> u32 {
        self.slots[self.home(item)].item
    }

    /// Reads the least recently used slot, the next one a miss evicts (see [`Lru::warm`]).
    #[inline]
    pub(crate) fn warm_tail(&self) -> u32 {
        if self.tail == NIL {
            0
        } else {
            self.slots[self.tail as usize].prev
        }
    }

    #[inline]
    fn unlink(&mut self, n: u32) {
        let Slot { prev, next, .. } = self.slots[n as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
    }

    #[inline]
    fn push_front(&mut self, n: u32) {
        let old = self.head;
        let s = &mut self.slots[n as usize];
        s.prev = NIL;
        s.next = old;
        if old != NIL {
            self.slots[old as usize].prev = n;
        } else {
            self.tail = n;
        }
        self.head = n;
    }

    /// True when `item` is cached; it becomes the most recently used.
    #[inline]
    pub(crate) fn touch(&mut self, item: u32) -> bool {
        let n = self.find(item);
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
        self.find(item) != NIL
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
            self.evict_tail();
        }
        if (self.len + 1) * LOAD > self.slots.len() {
            self.grow();
        }
        let mut i = self.home(item);
        while self.slots[i].item != EMPTY {
            i = (i + 1) & self.mask();
        }
        let weight = u32::try_from(w).unwrap_or(u32::MAX);
        if weight == u32::MAX {
            self.giants.push((item, w));
        }
        self.slots[i] = Slot {
            item,
            prev: NIL,
            next: NIL,
            weight,
        };
        self.push_front(i as u32);
        self.len += 1;
        self.used += w;
    }

    fn weight_of(&mut self, s: Slot) -> u64 {
        if s.weight != u32::MAX {
            return u64::from(s.weight);
        }
        let k = self
            .giants
            .iter()
            .position(|g| g.0 == s.item)
            .expect("a saturated weight has an exact entry");
        self.giants.swap_remove(k).1
    }

    fn evict_tail(&mut self) {
        let t = self.tail;
        let victim = self.slots[t as usize];
        self.unlink(t);
        self.used -= self.weight_of(victim);
        self.len -= 1;
        self.remove_slot(t as usize);
    }

    /// Empties slot `hole` (already unlinked), shifting later entries of its probe run back
    /// when that keeps them reachable from their home slot, and repointing their links.
    fn remove_slot(&mut self, mut hole: usize) {
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.item == EMPTY {
                break;
            }
            let home = self.home(s.item);
            // Distance from home to j versus from the hole to j, cyclically.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                let to = hole as u32;
                if s.prev == NIL {
                    self.head = to;
                } else {
                    self.slots[s.prev as usize].next = to;
                }
                if s.next == NIL {
                    self.tail = to;
                } else {
                    self.slots[s.next as usize].prev = to;
                }
                hole = j;
            }
        }
        self.slots[hole] = FREE;
    }

    /// Doubles the table, keeping the recency order.
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![FREE; n]);
        self.shift = 64 - n.trailing_zeros();
        let (mut at, mut newer) = (self.head, NIL);
        self.head = NIL;
        self.tail = NIL;
        // Walk from the most recent, appending each at the tail.
        while at != NIL {
            let s = old[at as usize];
            let mut i = self.home(s.item);
            while self.slots[i].item != EMPTY {
                i = (i + 1) & self.mask();
            }
            self.slots[i] = Slot {
                prev: newer,
                next: NIL,
                ..s
            };
            if newer == NIL {
                self.head = i as u32;
            } else {
                self.slots[newer as usize].next = i as u32;
            }
            newer = i as u32;
            at = s.next;
        }
        self.tail = newer;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A slow, obviously right LRU: the front of the deque is the most recent.
    struct Naive {
        capacity: u64,
        by_bytes: bool,
        order: VecDeque<(u32, u64)>,
    }

    impl Naive {
        fn touch(&mut self, item: u32) -> bool {
            match self.order.iter().position(|e| e.0 == item) {
                Some(k) => {
                    let e = self.order.remove(k).unwrap();
                    self.order.push_front(e);
                    true
                }
                None => false,
            }
        }
        fn insert(&mut self, item: u32, size: u64) {
            let w = if self.by_bytes { size } else { 1 };
            if w > self.capacity {
                return;
            }
            while self.order.iter().map(|e| e.1).sum::<u64>() + w > self.capacity {
                self.order.pop_back();
            }
            self.order.push_front((item, w));
        }
    }

    /// The list, most recent first, read through the links.
    fn items(l: &Lru) -> Vec<u32> {
        let mut v = Vec::new();
        let mut at = l.head;
        while at != NIL {
            v.push(l.slots[at as usize].item);
            at = l.slots[at as usize].next;
        }
        v
    }

    #[test]
    fn agrees_with_a_naive_lru() {
        // A deterministic mix of touches and inserts over a small key space, with growth,
        // evictions and long probe runs (keys that share a home slot); giant weights too.
        for (capacity, by_bytes) in [(1, false), (7, false), (300, false), (50_000, true)] {
            let mut l = Lru::new(capacity, by_bytes);
            let mut n = Naive {
                capacity,
                by_bytes,
                order: VecDeque::new(),
            };
            let mut x: u64 = capacity;
            for _ in 0..20_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let item = ((x >> 33) % 500) as u32 * 64;
                let size = (x >> 20) % 3000;
                if !n.touch(item) {
                    assert!(!l.touch(item));
                    n.insert(item, size);
                    l.insert(item, size);
                } else {
                    assert!(l.touch(item));
                }
                assert_eq!(l.len, n.order.len());
            }
            let want: Vec<u32> = n.order.iter().map(|e| e.0).collect();
            assert_eq!(items(&l), want);
            let mut back = Vec::new();
            let mut at = l.tail;
            while at != NIL {
                back.push(l.slots[at as usize].item);
                at = l.slots[at as usize].prev;
            }
            back.reverse();
            assert_eq!(back, want);
        }
    }

    #[test]
    fn evicts_the_least_recently_used() {
        let mut l = Lru::new(2, false);
        l.insert(1, 1000);
        l.insert(2, 1000);
        assert!(l.touch(1));
        l.insert(3, 1000);
        assert!(l.contains(1) && l.contains(3) && !l.contains(2));
        assert!(!l.touch(2));
    }

    #[test]
    fn byte_capacity_evicts_until_it_fits_and_refuses_giants() {
        let mut l = Lru::new(100, true);
        l.insert(0, 40);
        l.insert(1, 40);
        l.insert(4, 101);
        assert!(!l.contains(4) && l.contains(0) && l.contains(1));
        l.insert(3, 90);
        assert!(l.contains(3) && !l.contains(0) && !l.contains(1));
        l.insert(2, 40);
        assert!(l.contains(2) && !l.contains(3));
    }

    #[test]
    fn weights_beyond_32_bits_are_kept_exactly() {
        let big = 5u64 << 32;
        let mut l = Lru::new(big + 10, true);
        l.insert(1, big);
        l.insert(2, 10);
        assert_eq!(l.used, big + 10);
        l.insert(3, 1);
        assert!(!l.contains(1) && l.contains(2) && l.contains(3));
        assert_eq!(l.used, 11);
        assert!(l.giants.is_empty());
    }
}
