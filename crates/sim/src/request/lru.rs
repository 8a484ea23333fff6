//! The in-process LRU of one app instance, capacity in items or bytes.
//!
//! A run visits the trace instance by instance (see `Plan::run_order`), so only one instance's
//! LRU is alive at a time, and one `Lru` serves them all in turn ([`Lru::clear`] between
//! instances). That lets the item → node map be a plain array over the catalog instead of a
//! hash table, with no probing, and removing an item shifts nothing. The map is never cleaned:
//! an entry counts only when the node it names holds that item back (a "sparse set"), so an
//! eviction or [`Lru::clear`] writes nothing outside the small node array, where clearing the
//! evicted item's entry would cost a cache miss of its own.
//!
//! The recency list is intrusive over a dense array of nodes (item, links as node numbers,
//! weight: 16 bytes, four to a cache line), as many as the LRU has ever held at once, so the
//! list of a cache of 1000 items lives in 16 KB. An item-capacity eviction hands its node
//! straight to the item that caused it; a byte-capacity one may free several, kept on a free
//! list.

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    item: u32,
    /// Towards the most recently used.
    prev: u32,
    /// Towards the least recently used.
    next: u32,
    /// Value bytes (byte capacity; saturated, see [`Lru::giants`]) or 1.
    weight: u32,
}

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
    nodes: Vec<Node>,
    /// Nodes that byte-capacity evictions emptied.
    free: Vec<u32>,
    /// By catalog item: its node, when that node holds it (else stale or `NIL`).
    node_of: Vec<u32>,
    /// Exact weights of cached items of `u32::MAX` bytes or more (their node says `u32::MAX`).
    giants: Vec<(u32, u64)>,
}

impl Lru {
    /// An empty LRU over a catalog of `n_items` items.
    pub(crate) fn new(capacity: u64, by_bytes: bool, n_items: usize) -> Lru {
        Lru {
            capacity,
            by_bytes,
            used: 0,
            head: NIL,
            tail: NIL,
            nodes: Vec::new(),
            free: Vec::new(),
            node_of: vec![NIL; n_items],
            giants: Vec::new(),
        }
    }

    /// Empties the LRU (for the next instance), keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.nodes.clear();
        self.free.clear();
        self.giants.clear();
        self.used = 0;
        self.head = NIL;
        self.tail = NIL;
    }

    /// Items cached.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// The node holding `item`, if it is cached.
    #[inline]
    fn node(&self, item: u32) -> Option<u32> {
        let n = self.node_of[item as usize];
        self.nodes
            .get(n as usize)
            .is_some_and(|x| x.item == item)
            .then_some(n)
    }

    /// True when `item` is cached (no change of order).
    #[cfg(test)]
    pub(crate) fn contains(&self, item: u32) -> bool {
        self.node(item).is_some()
    }

    /// Reads where a lookup of `item` starts, so that a burst of these for the items of a
    /// request overlaps their memory latencies; returns something to keep the read.
    #[inline]
    pub(crate) fn warm(&self, item: u32) -> u32 {
        self.node_of[item as usize]
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
        let old = self.head;
        let s = &mut self.nodes[n as usize];
        s.prev = NIL;
        s.next = old;
        if old != NIL {
            self.nodes[old as usize].prev = n;
        } else {
            self.tail = n;
        }
        self.head = n;
    }

    /// True when `item` is cached; it becomes the most recently used.
    #[inline]
    pub(crate) fn touch(&mut self, item: u32) -> bool {
        let Some(n) = self.node(item) else {
            return false;
        };
        if self.head != n {
            self.unlink(n);
            self.push_front(n);
        }
        true
    }

    /// Adds `item` (not cached, `size` bytes) as the most recently used, evicting from the
    /// tail until it fits. An item heavier than the whole capacity is not admitted.
    #[inline(always)]
    pub(crate) fn insert(&mut self, item: u32, size: u64) {
        let w = if self.by_bytes { size } else { 1 };
        if w > self.capacity {
            return;
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
            self.nodes.push(Node {
                item: NIL,
                prev: NIL,
                next: NIL,
                weight: 0,
            });
            (self.nodes.len() - 1) as u32
        };
        if weight == u32::MAX {
            self.giants.push((item, w));
        }
        let node = &mut self.nodes[n as usize];
        node.item = item;
        node.weight = weight;
        self.push_front(n);
        self.node_of[item as usize] = n;
        self.used += w;
    }

    fn weight_of(&mut self, s: Node) -> u64 {
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

    /// Removes the least recently used item (there is one) and returns its emptied node.
    #[inline(always)]
    fn evict_tail(&mut self) -> u32 {
        let t = self.tail;
        let victim = self.nodes[t as usize];
        self.unlink(t);
        self.used -= self.weight_of(victim);
        self.nodes[t as usize].item = NIL;
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

    /// The list, most recent first, read through the links.
    fn items(l: &Lru) -> Vec<u32> {
        let mut v = Vec::new();
        let mut at = l.head;
        while at != NIL {
            v.push(l.nodes[at as usize].item);
            at = l.nodes[at as usize].next;
        }
        v
    }

    #[test]
    fn agrees_with_a_naive_lru() {
        // A deterministic mix of touches and inserts over a small key space, with evictions
        // of one and of several items, node reuse, and clearing between "instances".
        for (capacity, by_bytes) in [(1, false), (7, false), (300, false), (50_000, true)] {
            let mut l = Lru::new(capacity, by_bytes, 500 * 64);
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
                    assert_eq!(l.len(), n.order.len());
                }
                let want: Vec<u32> = n.order.iter().map(|e| e.0).collect();
                assert_eq!(items(&l), want);
                let mut back = Vec::new();
                let mut at = l.tail;
                while at != NIL {
                    back.push(l.nodes[at as usize].item);
                    at = l.nodes[at as usize].prev;
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
        let mut l = Lru::new(2, false, 4);
        l.insert(1, 1000);
        l.insert(2, 1000);
        assert!(l.touch(1));
        l.insert(3, 1000);
        assert!(l.contains(1) && l.contains(3) && !l.contains(2));
        assert!(!l.touch(2));
    }

    #[test]
    fn clear_forgets_everything() {
        let mut l = Lru::new(2, false, 4);
        l.insert(1, 1000);
        l.insert(2, 1000);
        l.clear();
        assert!(!l.contains(1) && !l.contains(2) && !l.touch(1));
        l.insert(3, 1000);
        l.insert(0, 1000);
        assert!(l.contains(3) && l.contains(0));
        assert_eq!(items(&l), [0, 3]);
    }

    #[test]
    fn byte_capacity_evicts_until_it_fits_and_refuses_giants() {
        let mut l = Lru::new(100, true, 5);
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
        let mut l = Lru::new(big + 10, true, 4);
        l.insert(1, big);
        l.insert(2, 10);
        assert_eq!(l.used, big + 10);
        l.insert(3, 1);
        assert!(!l.contains(1) && l.contains(2) && l.contains(3));
        assert_eq!(l.used, 11);
        assert!(l.giants.is_empty());
    }
}
