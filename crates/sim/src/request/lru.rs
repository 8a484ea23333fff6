//! The in-process LRU of one app instance, capacity in items or bytes.
//!
//! A run visits the trace instance by instance (see `Plan::run_order`), so only one instance's
//! LRU is alive at a time, and one `Lru` serves them all in turn ([`Lru::clear`] between
//! instances). The item → node map is not kept here: the caller keeps each item's node number
//! beside the rest of the item's state (one cache line per touch instead of two) and passes it
//! as a *hint*. Hints are never cleaned: one counts only when the node it names holds that
//! item back (a "sparse set"), so an eviction or [`Lru::clear`] writes nothing outside the
//! small node arrays, where clearing the evicted item's hint would cost a cache miss of its own.
//!
//! The recency list is intrusive over dense arrays by node number, as many nodes as the LRU
//! has ever held at once: the item each holds (4 bytes), its links (8 bytes), and, for a byte
//! capacity only, its weight (4 bytes). A hit reads the first and rewrites links, so for a
//! cache of 1000 items that is 12 KB. An item-capacity eviction hands its node straight to the
//! item that caused it; a byte-capacity one may free several, kept on a free list.

const NIL: u32 = u32::MAX;

/// One instance's LRU at a time. Weights are 1 per item (item capacity) or the value size
/// (byte capacity).
pub(crate) struct Lru {
    capacity: u64,
    by_bytes: bool,
    used: u64,
    /// Most recently used node, or `NIL`.
    head: u32,
    /// Least recently used node, or `NIL`.
    tail: u32,
    /// By node: the item it holds, or `NIL`.
    held: Vec<u32>,
    /// By node: the next node towards the most recently used, and towards the least.
    links: Vec<[u32; 2]>,
    /// By node, byte capacity only: value bytes (saturated, see [`Lru::giants`]).
    weights: Vec<u32>,
    /// Nodes that byte-capacity evictions emptied.
    free: Vec<u32>,
    /// Exact weights of cached items of `u32::MAX` bytes or more (their node says `u32::MAX`).
    giants: Vec<(u32, u64)>,
}

impl Lru {
    /// An empty LRU.
    pub(crate) fn new(capacity: u64, by_bytes: bool) -> Lru {
        Lru {
            capacity,
            by_bytes,
            used: 0,
            head: NIL,
            tail: NIL,
            held: Vec::new(),
            links: Vec::new(),
            weights: Vec::new(),
            free: Vec::new(),
            giants: Vec::new(),
        }
    }

    /// Empties the LRU (for the next instance), keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.held.clear();
        self.links.clear();
        self.weights.clear();
        self.free.clear();
        self.giants.clear();
        self.used = 0;
        self.head = NIL;
        self.tail = NIL;
    }

    /// Calls `f(item, node)` for every cached item.
    pub(crate) fn for_each_cached(&self, mut f: impl FnMut(u32, u32)) {
        for (node, &item) in self.held.iter().enumerate() {
            if item != NIL {
                f(item, node as u32);
            }
        }
    }

    /// Items cached.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.len() - self.free.len()
    }

    /// `hint`, if that node holds `item` (then `item` is cached there).
    #[inline]
    fn node(&self, item: u32, hint: u32) -> Option<u32> {
        (self.held.get(hint as usize) == Some(&item)).then_some(hint)
    }

    #[inline]
    fn unlink(&mut self, n: u32) {
        let [prev, next] = self.links[n as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.links[prev as usize][1] = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.links[next as usize][0] = prev;
        }
    }

    #[inline]
    fn push_front(&mut self, n: u32) {
        let old = self.head;
        self.links[n as usize] = [NIL, old];
        if old != NIL {
            self.links[old as usize][0] = n;
        } else {
            self.tail = n;
        }
        self.head = n;
    }

    /// True when `item` is cached (`hint`: the node [`Lru::insert`] last gave it, or
    /// anything); it becomes the most recently used.
    #[inline]
    pub(crate) fn touch(&mut self, item: u32, hint: u32) -> bool {
        let Some(n) = self.node(item, hint) else {
            return false;
        };
        if self.head != n {
            self.unlink(n);
            self.push_front(n);
        }
        true
    }

    /// Adds `item` (not cached, `size` bytes) as the most recently used, evicting from the
    /// tail until it fits, and returns its node (the hint for later lookups). An item heavier
    /// than the whole capacity is not admitted (and the hint it gets holds nothing).
    #[inline(always)]
    pub(crate) fn insert(&mut self, item: u32, size: u64) -> u32 {
        let w = if self.by_bytes { size } else { 1 };
        if w > self.capacity {
            return NIL;
        }
        let weight = u32::try_from(w).unwrap_or(u32::MAX);
        let n = if self.used + w > self.capacity {
            // The first eviction's node is the new item's; any further ones are freed.
            let n = self.evict_tail();
            while self.used + w > self.capacity {
                let m = self.evict_tail();
                self.free.push(m);
            }
            n
        } else if let Some(m) = self.free.pop() {
            m
        } else {
            self.held.push(NIL);
            self.links.push([NIL, NIL]);
            if self.by_bytes {
                self.weights.push(0);
            }
            (self.held.len() - 1) as u32
        };
        self.held[n as usize] = item;
        if self.by_bytes {
            if weight == u32::MAX {
                self.giants.push((item, w));
            }
            self.weights[n as usize] = weight;
        }
        self.push_front(n);
        self.used += w;
        n
    }

    /// The weight of node `n`, which holds an item.
    fn weight_of(&mut self, n: u32) -> u64 {
        if !self.by_bytes {
            return 1;
        }
        let w = self.weights[n as usize];
        if w != u32::MAX {
            return u64::from(w);
        }
        let item = self.held[n as usize];
        let k = self
            .giants
            .iter()
            .position(|g| g.0 == item)
            .expect("a saturated weight has an exact entry");
        self.giants.swap_remove(k).1
    }

    /// Removes the least recently used item (there is one) and returns its emptied node.
    #[inline(always)]
    fn evict_tail(&mut self) -> u32 {
        let t = self.tail;
        self.unlink(t);
        self.used -= self.weight_of(t);
        self.held[t as usize] = NIL;
        t
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

    /// An LRU with the item → node hints kept the way the engine keeps them (never cleaned).
    struct Mapped {
        l: Lru,
        hint: Vec<u32>,
    }

    impl Mapped {
        fn new(capacity: u64, by_bytes: bool, n_items: usize) -> Mapped {
            Mapped {
                l: Lru::new(capacity, by_bytes),
                hint: vec![NIL; n_items],
            }
        }
        fn touch(&mut self, item: u32) -> bool {
            self.l.touch(item, self.hint[item as usize])
        }
        fn insert(&mut self, item: u32, size: u64) {
            self.hint[item as usize] = self.l.insert(item, size);
        }
        fn contains(&self, item: u32) -> bool {
            self.l.node(item, self.hint[item as usize]).is_some()
        }
        fn clear(&mut self) {
            self.l.clear();
        }
    }

    /// The list, most recent first, read through the links.
    fn items(l: &Lru) -> Vec<u32> {
        let mut v = Vec::new();
        let mut at = l.head;
        while at != NIL {
            v.push(l.held[at as usize]);
            at = l.links[at as usize][1];
        }
        v
    }

    #[test]
    fn agrees_with_a_naive_lru() {
        // A deterministic mix of touches and inserts over a small key space, with evictions
        // of one and of several items, node reuse, and clearing between "instances".
        for (capacity, by_bytes) in [(1, false), (7, false), (300, false), (50_000, true)] {
            let mut l = Mapped::new(capacity, by_bytes, 500 * 64);
            let mut x: u64 = capacity;
            for _instance in 0..3 {
                l.clear();
                let mut n = Naive {
                    capacity,
                    by_bytes,
                    order: VecDeque::new(),
                };
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
                    assert_eq!(l.l.len(), n.order.len());
                }
                let want: Vec<u32> = n.order.iter().map(|e| e.0).collect();
                assert_eq!(items(&l.l), want);
                let mut back = Vec::new();
                let mut at = l.l.tail;
                while at != NIL {
                    back.push(l.l.held[at as usize]);
                    at = l.l.links[at as usize][0];
                }
                back.reverse();
                assert_eq!(back, want);
                let cached: Vec<u32> = (0..500 * 64).filter(|&i| l.contains(i)).collect();
                let mut sorted = want.clone();
                sorted.sort_unstable();
                assert_eq!(cached, sorted);
            }
        }
    }

    #[test]
    fn evicts_the_least_recently_used() {
        let mut l = Mapped::new(2, false, 4);
        l.insert(1, 1000);
        l.insert(2, 1000);
        assert!(l.touch(1));
        l.insert(3, 1000);
        assert!(l.contains(1) && l.contains(3) && !l.contains(2));
        assert!(!l.touch(2));
    }

    #[test]
    fn clear_forgets_everything() {
        let mut l = Mapped::new(2, false, 4);
        l.insert(1, 1000);
        l.insert(2, 1000);
        l.clear();
        assert!(!l.contains(1) && !l.contains(2) && !l.touch(1));
        l.insert(3, 1000);
        l.insert(0, 1000);
        assert!(l.contains(3) && l.contains(0));
        assert_eq!(items(&l.l), [0, 3]);
    }

    #[test]
    fn byte_capacity_evicts_until_it_fits_and_refuses_giants() {
        let mut l = Mapped::new(100, true, 5);
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
        let mut l = Mapped::new(big + 10, true, 4);
        l.insert(1, big);
        l.insert(2, 10);
        assert_eq!(l.l.used, big + 10);
        l.insert(3, 1);
        assert!(!l.contains(1) && l.contains(2) && l.contains(3));
        assert_eq!(l.l.used, 11);
        assert!(l.l.giants.is_empty());
    }
}
