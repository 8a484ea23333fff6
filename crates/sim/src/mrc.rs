//! LRU miss-ratio curves in one pass, from stack (reuse) distances.
//!
//! The stack distance of a request is the amount of distinct data touched since the previous
//! request to the same object, the object itself included: a count of objects
//! ([`Unit::Objects`]) or a sum of their sizes ([`Unit::Bytes`]). An LRU cache of capacity `C`
//! hits exactly the requests whose distance is at most `C`, so one pass gives the miss ratio
//! at every capacity.
//!
//! * **Objects**: exact — equal to simulating [`crate::policy`]'s LRU at each capacity.
//! * **Bytes**: exact when every object keeps one size and none is larger than the capacity
//!   (LRU then always holds the longest prefix of the recency stack that fits). An object
//!   larger than the capacity is never cached by LRU but still counts here, so with such
//!   objects, or with size changes (each access counts the object at its current size), the
//!   curve is an approximation.
//!
//! Distances are computed with a Fenwick tree over access times holding each object's weight
//! at its most recent access; the tree is compacted whenever it fills, so it needs about two
//! slots per distinct object, not one per request: O(n log m) time, O(m) memory.
//!
//! **SHARDS** (Waldspurger et al., FAST '15, fixed-rate variant): only objects whose key hash
//! falls below `R · 2^24` (of `2^24`) are tracked, and their distances are scaled by `1/R`;
//! miss ratios are over the sampled requests. Memory and time shrink by about `R`.

use crate::flat::{FlatTrace, SimTrace};
use crate::policy::Unit;

/// A miss-ratio curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Mrc {
    pub unit: Unit,
    /// 1.0 for the exact curve, else the SHARDS rate.
    pub sample_rate: f64,
    /// Requests counted (the sampled ones under SHARDS).
    pub requests: u64,
    /// Bytes of the counted requests.
    pub bytes: u64,
    /// Capacities, ascending.
    pub capacities: Vec<u64>,
    /// Misses at each capacity.
    pub misses: Vec<u64>,
    /// Missed bytes at each capacity.
    pub miss_bytes: Vec<u64>,
}

impl Mrc {
    pub fn miss_ratios(&self) -> Vec<f64> {
        self.misses
            .iter()
            .map(|&m| m as f64 / self.requests.max(1) as f64)
            .collect()
    }

    pub fn byte_miss_ratios(&self) -> Vec<f64> {
        self.miss_bytes
            .iter()
            .map(|&m| m as f64 / self.bytes.max(1) as f64)
            .collect()
    }
}

/// `points` capacities spaced evenly on a log scale from `max / 1000` (at least 1) to `max`,
/// deduplicated, ascending.
pub fn log_capacities(max: u64, points: usize) -> Vec<u64> {
    let max = max.max(1);
    let lo = (max as f64 / 1000.0).max(1.0);
    let points = points.max(2);
    let mut v: Vec<u64> = (0..points)
        .map(|i| {
            let f = i as f64 / (points - 1) as f64;
            (lo * (max as f64 / lo).powf(f)).round() as u64
        })
        .collect();
    v.push(max);
    v.sort_unstable();
    v.dedup();
    v
}

/// SHARDS's sampling decision for a key: its hash modulo 2^24 below `rate * 2^24`.
fn sampled(id: u64, threshold: u64) -> bool {
    let h = (u128::from(id) * 0x9e37_79b9_7f4a_7c15u128) as u64;
    let h = (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (h >> 40) < threshold
}

/// Fenwick tree of weights at time positions, compacted when full.
struct Stack {
    tree: Vec<u64>,
    /// Live position of each object (u32::MAX = none).
    pos: Vec<u32>,
    /// Weight of each object at its live position.
    weight: Vec<u64>,
    next: usize,
    total: u64,
}

impl Stack {
    fn new(n_objects: usize) -> Stack {
        Stack {
            tree: vec![0; 2 * n_objects + 1024 + 1],
            pos: vec![u32::MAX; n_objects],
            weight: vec![0; n_objects],
            next: 0,
            total: 0,
        }
    }

    fn add(&mut self, p: usize, w: i64) {
        let mut i = p + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(w);
            i += i & i.wrapping_neg();
        }
    }

    fn prefix(&self, p: usize) -> u64 {
        let mut i = p + 1;
        let mut s = 0u64;
        while i > 0 {
            s = s.wrapping_add(self.tree[i]);
            i -= i & i.wrapping_neg();
        }
        s
    }

    /// Renumbers the live positions 0.. in order and rebuilds the tree.
    fn compact(&mut self) {
        let mut live: Vec<(u32, u32)> = self
            .pos
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != u32::MAX)
            .map(|(x, &p)| (p, x as u32))
            .collect();
        live.sort_unstable();
        self.tree.iter_mut().for_each(|t| *t = 0);
        for (i, &(_, x)) in live.iter().enumerate() {
            self.pos[x as usize] = i as u32;
            self.tree[i + 1] = self.weight[x as usize];
        }
        // Linear-time Fenwick build.
        for i in 1..self.tree.len() {
            let j = i + (i & i.wrapping_neg());
            if j < self.tree.len() {
                self.tree[j] = self.tree[j].wrapping_add(self.tree[i]);
            }
        }
        self.next = live.len();
    }

    /// Records an access to `x` with weight `w`; returns its stack distance (None = first).
    fn access(&mut self, x: usize, w: u64) -> Option<u64> {
        let p = self.pos[x];
        let d = if p == u32::MAX {
            None
        } else {
            let p = p as usize;
            let d = self.total - self.prefix(p) + w;
            self.add(p, -(self.weight[x] as i64));
            self.total -= self.weight[x];
            Some(d)
        };
        if self.next + 1 >= self.tree.len() {
            self.pos[x] = u32::MAX;
            self.compact();
        }
        let q = self.next;
        self.next += 1;
        self.pos[x] = q as u32;
        self.weight[x] = w;
        self.add(q, w as i64);
        self.total += w;
        d
    }
}

/// The LRU miss-ratio curve of `trace` at `capacities` (any order; returned ascending).
/// `sample_rate` in (0, 1) uses SHARDS; `None` or 1.0 is exact. Skipped requests (size 0,
/// deletes) are ignored, as in simulation.
pub fn lru_mrc(trace: &FlatTrace, unit: Unit, capacities: &[u64], sample_rate: Option<f64>) -> Mrc {
    let rate = sample_rate.unwrap_or(1.0).clamp(f64::MIN_POSITIVE, 1.0);
    let threshold = (rate * f64::from(1u32 << 24)).ceil() as u64;
    let st = SimTrace::new(trace);
    let mut caps: Vec<u64> = capacities.to_vec();
    caps.sort_unstable();
    caps.dedup();
    // Scaled comparison: a sampled distance d hits at capacity C when d <= C * rate.
    let scaled: Vec<f64> = caps.iter().map(|&c| c as f64 * rate).collect();
    // bucket[i] = requests whose distance exceeds exactly the first i capacities.
    let k = caps.len();
    let mut count = vec![0u64; k + 1];
    let mut count_bytes = vec![0u64; k + 1];
    let mut stack = Stack::new(st.n_objects);
    let (mut requests, mut bytes) = (0u64, 0u64);
    for t in 0..st.len() {
        if st.skipped(t) || (rate < 1.0 && !sampled(trace.ids[t], threshold)) {
            continue;
        }
        let size = st.sizes[t];
        let w = match unit {
            Unit::Objects => 1,
            Unit::Bytes => u64::from(size),
        };
        requests += 1;
        bytes += u64::from(size);
        let i = match stack.access(st.slots[t] as usize, w) {
            None => k,
            Some(d) => scaled.partition_point(|&c| c < d as f64),
        };
        count[i] += 1;
        count_bytes[i] += u64::from(size);
    }
    // Misses at capacity j: requests whose distance exceeds capacity j, i.e. bucket > j.
    let mut misses = vec![0u64; k];
    let mut miss_bytes = vec![0u64; k];
    let (mut m, mut mb) = (count[k], count_bytes[k]);
    for j in (0..k).rev() {
        misses[j] = m;
        miss_bytes[j] = mb;
        m += count[j];
        mb += count_bytes[j];
    }
    Mrc {
        unit,
        sample_rate: rate,
        requests,
        bytes,
        capacities: caps,
        misses,
        miss_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_distances() {
        // 3 objects, many requests: the tree (2*3+1024 slots) compacts several times.
        let mut t = FlatTrace::default();
        for i in 0..5000u64 {
            t.push(0, i % 3, 1);
        }
        let m = lru_mrc(&t, Unit::Objects, &[1, 2, 3], None);
        assert_eq!(m.misses, vec![5000, 5000, 3]);
    }

    #[test]
    fn log_capacities_are_sorted_and_end_at_max() {
        let v = log_capacities(48_974, 50);
        assert!(v.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*v.last().unwrap(), 48_974);
        assert_eq!(v[0], 49);
    }
}
