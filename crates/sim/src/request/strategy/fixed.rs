//! `fixed:N` / `fixed:SIZE`: a hot set chosen once, from the training window, and always
//! present. The walk marks its items (`ItemState::is_fixed`) and finds them in L1 before
//! anything else is looked up.

use super::super::trace::RequestTrace;
use super::Capacity;

/// Items by how many training requests (those not `evaluated`) touch them, most first, ties
/// by index; items no training request touches are left out. A request counts once however
/// often it touches an item.
pub(crate) fn training_ranking(t: &RequestTrace, evaluated: &[bool]) -> Vec<u32> {
    // By item: (the last request that touched it, how many requests did), side by side so
    // that a touch reads one place.
    let mut seen_count = vec![(u32::MAX, 0u32); t.n_items()];
    for r in (0..t.len()).filter(|&r| !evaluated[r]) {
        for &i in t.touches(r) {
            let e = &mut seen_count[i as usize];
            if e.0 != r as u32 {
                *e = (r as u32, e.1 + 1);
            }
        }
    }
    ranking(&seen_count)
}

/// Items by `seen_count[i].1` (the requests that touched item `i`), most first, ties by index;
/// items no request touched are left out.
pub(crate) fn ranking(seen_count: &[(u32, u32)]) -> Vec<u32> {
    // Sort keys that order by count (most first), then by index: all distinct, so an unstable
    // sort of plain integers gives the same order as a stable sort by both.
    let mut keys: Vec<u64> = seen_count
        .iter()
        .enumerate()
        .filter(|(_, e)| e.1 > 0)
        .map(|(i, e)| u64::from(u32::MAX - e.1) << 32 | i as u64)
        .collect();
    keys.sort_unstable();
    keys.into_iter().map(|k| k as u32).collect()
}

/// The fixed hot set of `capacity` from a [`training_ranking`], in ranking order: the first N
/// items, or, for a byte capacity, the items in ranking order that still fit (an item too
/// large for what is left is skipped and smaller ones after it can still be taken).
pub(crate) fn fixed_items(trace: &RequestTrace, ranking: &[u32], capacity: Capacity) -> Vec<u32> {
    match capacity {
        Capacity::Items(n) => ranking
            .iter()
            .take(usize::try_from(n).unwrap_or(usize::MAX))
            .copied()
            .collect(),
        Capacity::Bytes(mut left) => ranking
            .iter()
            .copied()
            .filter(|&i| {
                let s = trace.size(i);
                let fits = s <= left;
                if fits {
                    left -= s;
                }
                fits
            })
            .collect(),
    }
}

/// [`fixed_items`] as a membership mask by item.
pub(crate) fn fixed_mask(trace: &RequestTrace, ranking: &[u32], capacity: Capacity) -> Vec<bool> {
    let mut set = vec![false; trace.n_items()];
    for i in fixed_items(trace, ranking, capacity) {
        set[i as usize] = true;
    }
    set
}
