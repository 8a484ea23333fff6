//! LRU, as libCacheSim's `LRU.c`: a hit moves the object to the head; a miss evicts from the
//! tail until the new object fits and inserts it at the head.

use super::{Links, List, Policy, Runner, Space};

// A slot is cached when its node's size is not 0 (simulated sizes never are).
use crate::flat::SimTrace;

pub(crate) struct Lru {
    links: Links,
    list: List,
    space: Space,
}

pub(crate) fn build(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    Box::new(Lru {
        links: Links::new(trace.n_objects),
        list: List::default(),
        space: Space::new(capacity),
    })
}

impl Policy for Lru {
    #[inline]
    fn touch(&self, slot: u32) -> u32 {
        self.links.size(slot)
    }

    fn grow(&mut self, n: usize) {
        self.links.grow(n);
    }

    #[inline]
    fn access(&mut self, _t: usize, x: u32, size: u32) -> bool {
        if self.links.size(x) != 0 {
            self.links.move_to_front(&mut self.list, x);
            return true;
        }
        if !self.space.admits(size) {
            return false;
        }
        while !self.space.fits(size) {
            let victim = self.list.tail;
            self.links.remove(&mut self.list, victim);
            self.space.used -= u64::from(std::mem::take(&mut self.links.node(victim).size));
        }
        self.links.push_front(&mut self.list, x);
        self.links.node(x).size = size;
        self.space.used += u64::from(size);
        false
    }
}
