//! Caching strategies: their spec language, and what each part of one decides for a request.
//!
//! A spec is one or more components joined with `+`:
//!
//! | component | meaning |
//! |---|---|
//! | `none` | no in-process cache, no prefetch (only on its own) |
//! | `lru:1000` / `lru:64MB` | a per-instance LRU holding 1000 items / 64 MB of values |
//! | `fixed:5000` / `fixed:32MB` | the 5000 items / 32 MB most touched in the training window, always present |
//! | `prefetch-children` | same as `prefetch:depth=1` |
//! | `prefetch:depth=2` | on a topic's first touch, one multi-get for the topic and its descendants to depth 2 |
//!
//! A capacity that is a plain whole number counts items; anything with a unit is a byte size:
//! `K`, `M`, `G` are powers of 1000, `Ki`, `Mi`, `Gi` powers of 1024, a trailing `B` is optional
//! and letters are case-insensitive (`64MB`, `64m`, `1.5K`, `4KiB`, `100B`) — the rules of
//! `cachelab.units.parse_size`. Components may come in any order but each kind at most once;
//! [`Strategy`]'s `Display` gives the canonical form (fixed, then lru, then prefetch), which
//! parses back to the same strategy.
//!
//! # One file per part
//!
//! The engine's walk (the `engine` module) goes through the trace, draws latencies and keeps
//! the accounts; a strategy decides the rest, in three parts, each behind one trait:
//!
//! * the **fixed set** (`fixed.rs`): chosen once from the training window, marked on the
//!   items; a lookup of a fixed item is an L1 hit, checked first;
//! * the **in-process cache** of each app instance ([`Caches`] and [`Cache`]): what a lookup
//!   finds there (after the fixed set and the request's own prefetch) and what a fetched item
//!   leaves in it — `none.rs` holds nothing, `lru.rs` is the per-instance LRU;
//! * the **prefetch** ([`Prefetch`]): at which touch a request sends its one multi-get, and
//!   which keys it carries — `none.rs` never prefetches, `prefetch.rs` fetches a topic's
//!   descendants to a depth (`prefetch-children` is depth 1).
//!
//! [`dispatch`] is the registry: it picks each part's implementation from the spec and hands
//! them to the walk, which is compiled once per combination (every call is direct, as in a
//! loop written for that strategy). A new kind of cache or prefetch is one file implementing
//! its trait, a component in the parser (`spec.rs`) and one arm here.

mod fixed;
mod lru;
mod none;
mod prefetch;
mod spec;

pub use spec::{format_size, parse_size, Capacity, Strategy, MAX_PREFETCH_DEPTH};

pub(crate) use fixed::{fixed_items, fixed_mask, ranking, training_ranking};

use super::item::{ItemState, Marks};
use super::trace::RequestTrace;
use super::tree::{Descendants, Walker};
use lru::Lrus;
use none::{NoCache, NoPrefetch};
use prefetch::Depth;

/// The in-process cache of one app instance (its L1), during that instance's requests.
pub(crate) trait Cache {
    /// False for a cache that never holds anything: a prefetch then need not read the state
    /// of the descendants it fetches, and nothing is filled.
    const HOLDS: bool;

    /// Whether `item` is held (then it becomes the most recently used). `hint` is the node
    /// [`Cache::fill`] last returned for the item, or anything.
    fn lookup(&mut self, item: u32, hint: u32) -> bool;

    /// Holds `item` (not held, `size` bytes), just fetched; returns its node, the hint for
    /// later lookups.
    fn fill(&mut self, item: u32, size: u64) -> u32;
}

/// The caches of all app instances in a run: the walk visits the trace instance by instance,
/// so one is in use at a time.
pub(crate) trait Caches {
    type One: Cache;

    /// The cache of instance `code` (the caller's instance code), as an earlier part of the
    /// trace left it, or empty; with every held item's hint in `items` pointing back at it.
    fn enter(&mut self, code: u32, items: &mut [ItemState]) -> Self::One;

    /// Instance `code`'s requests in this part are done; with `last`, no later part follows.
    fn leave(&mut self, code: u32, cache: Self::One, last: bool);
}

/// What a multi-get carries: keys and value bytes.
pub(crate) struct Fetch {
    pub keys: u64,
    pub bytes: u64,
}

/// When a request prefetches, and what.
pub(crate) trait Prefetch {
    /// A request starts.
    fn start(&mut self);

    /// The request's first touch of `item`, whose state was `st` before it, has just been
    /// looked up (`missing`: neither the fixed set, the request's prefetch nor `cache` had
    /// it). `Some` when the request prefetches here: one multi-get of what it carries (no
    /// keys: nothing sent), which includes `item` when missing (the item then needs no get of
    /// its own). Marks what it fetches present in `items` and fills `cache` with it.
    fn at<C: Cache>(
        &mut self,
        cache: &mut C,
        items: &mut [ItemState],
        marks: Marks,
        item: u32,
        st: ItemState,
        missing: bool,
    ) -> Option<Fetch>;

    /// Reads, without using it, the state a prefetch in the request touching `next` will
    /// read, so that its cache misses overlap the current request's work.
    fn ahead<C: Cache>(&self, items: &[ItemState], next: &[u32]);

    /// What the request's prefetch walked (its topic and the topic's descendants, each once;
    /// 0 without a prefetch), and whether its topic was found in L1.
    fn record(&self) -> (u32, bool);
}

/// The walk of one part of a trace under one strategy, compiled for each combination of
/// parts (see [`dispatch`]).
pub(crate) trait Walk {
    fn walk<C: Caches, P: Prefetch>(self, caches: &mut C, prefetch: P);
}

/// What a run of one strategy keeps from one part of a trace to the next.
pub(crate) struct Kept {
    /// The LRUs of the instances (`lru:`).
    lrus: Option<Lrus>,
    /// The prefetch's walks of the topic tree (`prefetch`), with room for every item.
    walker: Walker,
}

impl Kept {
    pub(crate) fn new(strategy: &Strategy, n_items: usize) -> Kept {
        let depth = strategy.prefetch_depth;
        Kept {
            lrus: strategy.lru.map(Lrus::new),
            walker: Walker::new(if depth > 0 { n_items } else { 0 }),
        }
    }
}

/// Runs `walk` with the parts of `strategy`: the registry of caches and prefetches.
/// `listed`: the descendants to the strategy's prefetch depth that the plan lists, if any.
pub(crate) fn dispatch<W: Walk>(
    strategy: &Strategy,
    kept: &mut Kept,
    trace: &RequestTrace,
    listed: Option<&Descendants>,
    walk: W,
) {
    let walker = &mut kept.walker;
    match kept.lrus.as_mut() {
        None => with_prefetch(strategy, &mut NoCache, walker, trace, listed, walk),
        Some(lrus) => with_prefetch(strategy, lrus, walker, trace, listed, walk),
    }
}

fn with_prefetch<C: Caches, W: Walk>(
    strategy: &Strategy,
    caches: &mut C,
    walker: &mut Walker,
    trace: &RequestTrace,
    listed: Option<&Descendants>,
    walk: W,
) {
    match strategy.prefetch_depth {
        0 => walk.walk(caches, NoPrefetch),
        depth => {
            let holds = <C::One as Cache>::HOLDS;
            walk.walk(caches, Depth::new(depth, trace, listed, walker, holds));
        }
    }
}
