//! `lru:N` / `lru:SIZE`: each app instance has an LRU of N items or SIZE bytes of values.
//!
//! The walk visits the trace instance by instance, so one LRU is alive at a time: emptied for
//! the next instance once its requests are done, or, when later parts of the trace follow,
//! parked until that instance's requests in the next part.

use std::collections::HashMap;

use super::super::lru::Lru;
use super::{Cache, Caches, Capacity, ItemState};

impl Cache for Lru {
    const HOLDS: bool = true;

    #[inline(always)]
    fn lookup(&mut self, item: u32, hint: u32) -> bool {
        self.touch(item, hint)
    }

    #[inline(always)]
    fn fill(&mut self, item: u32, size: u64) -> u32 {
        self.insert(item, size)
    }
}

/// The LRUs of a run's instances.
pub(crate) struct Lrus {
    capacity: Capacity,
    /// LRUs of instances seen in an earlier part, by the caller's instance code.
    parked: HashMap<u32, Lru>,
    /// An emptied LRU to reuse.
    spare: Option<Lru>,
}

impl Lrus {
    pub(crate) fn new(capacity: Capacity) -> Lrus {
        Lrus {
            capacity,
            parked: HashMap::new(),
            spare: None,
        }
    }
}

impl Caches for Lrus {
    type One = Lru;

    /// The parked LRU of instance `code`, with every cached item's hint pointed back at its
    /// node (hints are shared by all instances, and another instance's run moved them), or an
    /// empty one.
    fn enter(&mut self, code: u32, items: &mut [ItemState]) -> Lru {
        if let Some(l) = self.parked.remove(&code) {
            l.for_each_cached(|item, node| items[item as usize].node = node);
            return l;
        }
        let capacity = self.capacity;
        let mut l = self.spare.take().unwrap_or_else(|| match capacity {
            Capacity::Items(n) => Lru::new(n, false),
            Capacity::Bytes(n) => Lru::new(n, true),
        });
        l.clear();
        l
    }

    fn leave(&mut self, code: u32, cache: Lru, last: bool) {
        if last {
            self.spare = Some(cache);
        } else {
            self.parked.insert(code, cache);
        }
    }
}
