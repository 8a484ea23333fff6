//! `none`: no in-process cache and no prefetch; also the missing part of any strategy without
//! an `lru:` or a `prefetch` component.

use super::{Cache, Caches, Fetch, ItemState, Marks, Prefetch};

/// An in-process cache that holds nothing: every lookup misses.
pub(crate) struct NoCache;

impl Cache for NoCache {
    const HOLDS: bool = false;

    #[inline]
    fn lookup(&mut self, _item: u32, _hint: u32) -> bool {
        false
    }

    #[inline]
    fn fill(&mut self, _item: u32, _size: u64) -> u32 {
        u32::MAX
    }
}

impl Caches for NoCache {
    type One = NoCache;

    fn enter(&mut self, _code: u32, _items: &mut [ItemState]) -> NoCache {
        NoCache
    }

    fn leave(&mut self, _code: u32, _cache: NoCache, _last: bool) {}
}

/// No prefetch: every missing item is a get of its own.
pub(crate) struct NoPrefetch;

impl Prefetch for NoPrefetch {
    #[inline]
    fn start(&mut self) {}

    #[inline]
    fn at<C: Cache>(
        &mut self,
        _cache: &mut C,
        _items: &mut [ItemState],
        _marks: Marks,
        _item: u32,
        _st: ItemState,
        _missing: bool,
    ) -> Option<Fetch> {
        None
    }

    #[inline]
    fn ahead<C: Cache>(&self, _items: &[ItemState], _next: &[u32]) {}

    #[inline]
    fn record(&self) -> (u32, bool) {
        (0, false)
    }
}
