//! What a run knows about each catalog item, packed so that a touch reads one cache line: the
//! shared walk (`engine`) and every strategy (`strategy`) read and write it.

use super::latency::Bracket;
use super::trace::RequestTrace;

/// One item's state in a run, 16 bytes: the request stamp, the item's LRU node, flags, the get
/// bracket, and the size (saturated; the trace and the get brackets have the exact values).
#[derive(Clone, Copy)]
pub(crate) struct ItemState {
    /// `2s`: present in request `s` (prefetched, not yet touched); `2s + 1`: touched in it.
    /// See [`Marks`].
    pub mark: u32,
    /// The node the LRU last gave the item: a hint, right only when that node holds the item
    /// back (see the `lru` module).
    pub node: u32,
    /// The get bracket's blend weight.
    t: f32,
    /// [`FIXED`], [`TOPIC`], the get bracket's lower row (6 bits, [`ROW_MASK`] when it does
    /// not fit) and the size (24 bits, [`SIZE_MASK`] when it does not fit).
    packed: u32,
}

const FIXED: u32 = 1 << 31;
const TOPIC: u32 = 1 << 30;
const ROW_SHIFT: u32 = 24;
const ROW_MASK: u32 = 0x3f;
const SIZE_MASK: u32 = (1 << ROW_SHIFT) - 1;

impl ItemState {
    /// A fresh state: not marked in any request, no LRU node.
    pub(crate) fn new(size: u64, bracket: Bracket, fixed: bool, topic: bool) -> ItemState {
        let row = if bracket.lo < ROW_MASK {
            bracket.lo
        } else {
            ROW_MASK
        };
        let size = u32::try_from(size).map_or(SIZE_MASK, |s| s.min(SIZE_MASK));
        let mut packed = row << ROW_SHIFT | size;
        if fixed {
            packed |= FIXED;
        }
        if topic {
            packed |= TOPIC;
        }
        ItemState {
            mark: 0,
            node: u32::MAX,
            t: bracket.t,
            packed,
        }
    }

    /// In the strategy's fixed hot set (always an L1 hit).
    #[inline]
    pub(crate) fn is_fixed(self) -> bool {
        self.packed & FIXED != 0
    }

    /// A topic (an item with children): where a prefetch starts.
    #[inline]
    pub(crate) fn is_topic(self) -> bool {
        self.packed & TOPIC != 0
    }

    /// The item's get-latency bracket; `brackets` holds every item's exact one.
    #[inline]
    pub(crate) fn bracket(self, brackets: &[Bracket], item: u32) -> Bracket {
        let lo = (self.packed >> ROW_SHIFT) & ROW_MASK;
        if lo == ROW_MASK {
            brackets[item as usize]
        } else {
            Bracket { lo, t: self.t }
        }
    }

    /// The item's value size in bytes.
    #[inline]
    pub(crate) fn size(self, trace: &RequestTrace, item: u32) -> u64 {
        let s = self.packed & SIZE_MASK;
        if s == SIZE_MASK {
            trace.size(item)
        } else {
            u64::from(s)
        }
    }
}

/// The two marks of the current request in [`ItemState::mark`].
#[derive(Clone, Copy)]
pub(crate) struct Marks {
    /// Fetched by the request's prefetch, not yet touched.
    pub present: u32,
    /// Touched by the request (looked up once).
    pub touched: u32,
}
