//! One run of one strategy with one latency draw over the whole trace.

use std::collections::HashMap;

use super::latency::{Bracket, LatencyModel};
use super::lru::Lru;
use super::strategy::{Capacity, Strategy};
use super::trace::RequestTrace;
use super::tree::{Descendants, Walker};

/// Requests per block of [`Plan::order`].
pub(crate) const BLOCK: usize = 4096;

/// Requests whose touches a run gathers at a time (see [`run`]). 16 rather than 32 leaves
/// room in the nearest cache for the LRU's nodes (measured, see benches/runs).
const CHUNK: usize = 16;

/// Op tags of the common random numbers: a get for a touch and a multi-get for a touch draw
/// different uniforms.
const TAG_GET: u64 = 0;
const TAG_MULTIGET: u64 = 1;
/// The tag of the hash that picks where in a [`super::latency::RankSequence`] a request
/// starts (positions are even or odd-tagged above, so no touch's uniform shares it).
const TAG_SEQUENCE: u64 = u64::MAX;

/// SplitMix64's output function: a bijective mixer of 64-bit integers.
#[inline]
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of draw `d` of a simulation seeded with `seed`.
pub(crate) fn draw_seed(seed: u64, d: u32) -> u64 {
    splitmix64(splitmix64(seed) ^ u64::from(d))
}

/// The part of the uniform's hash fixed by the draw and the request.
#[inline]
fn request_key(draw_seed: u64, request: usize) -> u64 {
    splitmix64(draw_seed ^ splitmix64(request as u64))
}

/// The uniform in [0, 1) of the op `tag` at touch `position` of a request (53 random bits).
#[inline]
fn uniform(request_key: u64, position: usize, tag: u64) -> f64 {
    let h = splitmix64(request_key ^ ((position as u64) << 1 | tag));
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Shared, read-only inputs of all runs.
pub(crate) struct Plan<'a> {
    pub trace: &'a RequestTrace,
    pub model: &'a LatencyModel,
    /// The order results are summed in (sums of floating-point numbers depend on it):
    /// blocks of [`BLOCK`] consecutive requests by time (ties by index), each grouped by
    /// instance, in time order within an instance.
    pub order: Vec<u32>,
    /// The order a run visits requests: instance by instance (by dense index, which is the order
    /// of first appearance in the trace), in time order within each. The cost of a request depends only on its
    /// own instance's L1 and that instance's earlier requests, so this gives the same costs
    /// as time order, while each instance's LRU is built, used and dropped in one go: only
    /// one is alive at a time, and it stays in the CPU cache for all of its requests.
    pub run_order: Vec<u32>,
    /// By position in `run_order`: where the request's items are in the trace's touch
    /// column, and whether it is evaluated. Read in sequence, these spare the run a random
    /// read of the trace's per-request columns for every request.
    pub run_spans: Vec<(u64, u64)>,
    pub run_eval: Vec<bool>,
    /// Instance `i`'s requests are `run_order[run_starts[i]..run_starts[i + 1]]`.
    pub run_starts: Vec<usize>,
    /// By request: in the evaluation window (not among the first `n_train` by time).
    pub evaluated: Vec<bool>,
    /// Requests in the training window.
    pub n_train: usize,
    /// The index in the whole trace of this trace's first request (0 unless it is a part of
    /// a longer one): the common random numbers hash the index in the whole trace.
    pub first: usize,
    /// Get-latency bracket of each item.
    pub get_brackets: Vec<Bracket>,
    /// For each prefetch depth the strategies use, the descendants of the topics requests
    /// prefetch, listed once instead of walked on every prefetch.
    pub descendants: Vec<Descendants>,
}

impl Plan<'_> {
    pub(crate) fn n_eval(&self) -> usize {
        self.order.len() - self.n_train
    }

    /// The lists of descendants to `depth`, if the plan has them.
    fn descendants(&self, depth: u32) -> Option<&Descendants> {
        self.descendants.iter().find(|d| d.depth == depth)
    }

    /// Items by how many training requests touch them (see [`training_ranking`]).
    pub(crate) fn training_ranking(&self) -> Vec<u32> {
        training_ranking(self.trace, &self.evaluated)
    }
}

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

/// Totals over the evaluation window; the same for every draw of a strategy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Requests evaluated.
    pub requests: u64,
    /// Item touches in them.
    pub touches: u64,
    /// First touches of an item within a request (each is an L1 lookup).
    pub lookups: u64,
    /// Lookups found in L1 (the fixed set or the instance's LRU).
    pub l1_hits: u64,
    /// Lookups of items this request's own prefetch had already fetched.
    pub prefetch_hits: u64,
    /// Single gets sent to memcached.
    pub gets: u64,
    /// Multi-gets sent to memcached.
    pub multigets: u64,
    /// Keys in those multi-gets.
    pub multiget_keys: u64,
    /// Value bytes fetched from memcached.
    pub bytes: u64,
}

impl Counts {
    /// Adds `other`'s totals to these.
    pub fn add(&mut self, other: &Counts) {
        self.requests += other.requests;
        self.touches += other.touches;
        self.lookups += other.lookups;
        self.l1_hits += other.l1_hits;
        self.prefetch_hits += other.prefetch_hits;
        self.gets += other.gets;
        self.multigets += other.multigets;
        self.multiget_keys += other.multiget_keys;
        self.bytes += other.bytes;
    }
}

/// What one evaluated request cost, and what it did (its share of [`Counts`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestCost {
    /// The request's index in the trace.
    pub request: u32,
    /// Memcached time added to the request, µs.
    pub added_us: f64,
    /// Memcached operations (gets and multi-gets) it sent.
    pub round_trips: u32,
    /// Item touches.
    pub touches: u32,
    /// First touches of an item (L1 lookups).
    pub lookups: u32,
    /// Lookups found in L1 (the fixed set or the instance's LRU).
    pub l1_hits: u32,
    /// Lookups of items this request's prefetch had fetched.
    pub prefetch_hits: u32,
    /// Single gets sent.
    pub gets: u32,
    /// Multi-gets sent (0 or 1: a request prefetches once).
    pub multigets: u32,
    /// Keys in the multi-get.
    pub multiget_keys: u32,
    /// Value bytes fetched.
    pub bytes: u64,
    /// Items the request's prefetch walked: its topic and the topic's descendants to the
    /// prefetch depth, each once (0: the request did not prefetch).
    pub prefetch_walked: u32,
    /// The prefetch's topic was found in L1 (its lookup is one of `l1_hits`); otherwise it
    /// was one of the multi-get's keys.
    pub prefetch_topic_hit: bool,
}

/// What the inner loop needs to know about an item, packed into 16 bytes so a touch costs one
/// cache line: the request stamp, the item's LRU node, flags, the get bracket, and the size
/// (saturated; the trace and the plan have the exact values).
#[derive(Clone, Copy)]
struct ItemState {
    /// `2s`: present in request `s` (prefetched, not yet touched); `2s + 1`: touched in it.
    mark: u32,
    /// The node the LRU last gave the item: a hint, right only when that node holds the item
    /// back (see the `lru` module).
    node: u32,
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
    fn new(size: u64, bracket: Bracket, fixed: bool, topic: bool) -> ItemState {
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

    #[inline]
    fn bracket(self, plan: &Plan<'_>, item: u32) -> Bracket {
        let lo = (self.packed >> ROW_SHIFT) & ROW_MASK;
        if lo == ROW_MASK {
            plan.get_brackets[item as usize]
        } else {
            Bracket { lo, t: self.t }
        }
    }

    #[inline]
    fn size(self, trace: &RequestTrace, item: u32) -> u64 {
        let s = self.packed & SIZE_MASK;
        if s == SIZE_MASK {
            trace.size(item)
        } else {
            u64::from(s)
        }
    }
}

/// The number and bytes of the descendants in `list` that are not in the fixed set.
fn unfixed_totals(items: &[ItemState], trace: &RequestTrace, list: &[u32]) -> (u32, u64) {
    let (mut keys, mut bytes) = (0u32, 0u64);
    for &ch in list {
        let s = items[ch as usize];
        if s.packed & FIXED == 0 {
            keys += 1;
            bytes += s.size(trace, ch);
        }
    }
    (keys, bytes)
}

/// Runs `strategy` once over the whole trace of `plan` (training window for warm-up,
/// uncounted), with the latency draw seeded by `seed`, feeding each evaluated request to
/// `sink` (in the order of [`Plan::run_order`]).
pub(crate) fn run(
    plan: &Plan<'_>,
    strategy: &Strategy,
    fixed: Option<&[bool]>,
    seed: u64,
    sink: impl FnMut(RequestCost),
) -> Counts {
    let mut state = RunState::new(plan, strategy, fixed);
    state.run(plan, strategy, seed, true, sink);
    state.counts
}

/// The LRU of instance `code`: its parked one, with every cached item's hint pointed back at
/// its node (hints are shared by all instances, and another instance's run moved them), or an
/// empty one.
fn take_lru(
    parked: &mut HashMap<u32, Lru>,
    spare: &mut Option<Lru>,
    items: &mut [ItemState],
    code: u32,
    capacity: Capacity,
) -> Lru {
    if let Some(l) = parked.remove(&code) {
        l.for_each_cached(|item, node| items[item as usize].node = node);
        return l;
    }
    let mut l = spare.take().unwrap_or_else(|| match capacity {
        Capacity::Items(n) => Lru::new(n, false),
        Capacity::Bytes(n) => Lru::new(n, true),
    });
    l.clear();
    l
}

/// What a run of one strategy and draw carries from one part of a trace to the next: each
/// item's state, the LRUs of the instances seen so far (one parked per instance between
/// parts; see [`RunState::run`]), the request stamp and the totals.
pub(crate) struct RunState {
    items: Vec<ItemState>,
    stamp: u32,
    walker: Walker,
    /// LRUs of instances seen in an earlier part, by the caller's instance code.
    parked: HashMap<u32, Lru>,
    /// An emptied LRU to reuse.
    spare: Option<Lru>,
    /// Evaluation-window totals so far.
    pub counts: Counts,
}

impl RunState {
    /// A fresh state: nothing cached, no request seen. `fixed` marks the fixed set by item.
    pub(crate) fn new(plan: &Plan<'_>, strategy: &Strategy, fixed: Option<&[bool]>) -> RunState {
        let trace = plan.trace;
        let n_items = trace.n_items();
        let items = (0..n_items)
            .map(|i| {
                ItemState::new(
                    trace.item_sizes[i],
                    plan.get_brackets[i],
                    fixed.is_some_and(|f| f[i]),
                    trace.is_topic(i as u32),
                )
            })
            .collect();
        let depth = strategy.prefetch_depth;
        RunState {
            items,
            stamp: 0,
            walker: Walker::new(if depth > 0 { n_items } else { 0 }),
            parked: HashMap::new(),
            spare: None,
            counts: Counts::default(),
        }
    }

    /// Runs `strategy` over the requests of `plan` (a whole trace, or one part of a
    /// time-ordered trace, parts fed in order), with the latency draw seeded by `seed`,
    /// feeding each evaluated request to `sink` (in the order of [`Plan::run_order`]), and
    /// adds to [`RunState::counts`]. With `last`, no later part follows: an instance's LRU is
    /// emptied for the next instance once its requests are done (only one is alive at a
    /// time); otherwise it is parked for the instance's requests in the next part.
    pub(crate) fn run(
        &mut self,
        plan: &Plan<'_>,
        strategy: &Strategy,
        seed: u64,
        last: bool,
        mut sink: impl FnMut(RequestCost),
    ) {
        let trace = plan.trace;
        let get_table = plan.model.get();
        let multi_table = plan.model.multiget();
        let sequence = plan.model.sequence();
        let depth = strategy.prefetch_depth;
        let mut items = std::mem::take(&mut self.items);
        let mut stamp = self.stamp;
        let mut walker = std::mem::replace(&mut self.walker, Walker::new(0));
        let (mut scratch, mut batch) = (Vec::new(), Vec::new());
        // Without an LRU, a prefetch does not read the state of the descendants it fetches: it
        // takes the number and bytes of those not in the fixed set (summed once per topic and
        // run), less those this request already looked up, and marks them all present without
        // looking (a lookup checks the fixed set first). With an LRU each descendant is looked
        // up in it (refreshing hits) and only the fetched ones are marked present.
        let listed = (depth > 0).then(|| plan.descendants(depth)).flatten();
        let mut unfixed: Vec<(u32, u64)> = match (strategy.lru, listed) {
            (None, Some(d)) => vec![(u32::MAX, 0); d.len()],
            _ => Vec::new(),
        };
        // Items looked up in the request before its prefetch (strategies without an LRU).
        let mut firsts: Vec<u32> = Vec::new();

        let mut c = Counts::default();
        let spans = &plan.run_spans;
        let (mut gathered, mut gathered_ends) = (Vec::new(), Vec::with_capacity(CHUNK));
        for (i, bounds) in plan.run_starts.windows(2).enumerate() {
            if bounds[0] == bounds[1] {
                continue;
            }
            let code = trace.instance_codes[i];
            let mut lru = strategy
                .lru
                .map(|cap| take_lru(&mut self.parked, &mut self.spare, &mut items, code, cap));
            let (first, end) = (bounds[0], bounds[1]);
            for chunk in (first..end).step_by(CHUNK) {
                let chunk_end = (chunk + CHUNK).min(end);
                // Copy the touches of the next CHUNK requests of this instance into one buffer
                // read in sequence, and read the state of each touched item. In run order the
                // requests' touches are scattered over the trace; gathered in a loop of independent
                // reads, their memory latencies overlap, where read one request at a time inside
                // the simulation they would stall it once per request. The first loop reads the
                // start, middle and end of each request's touches (no calls, so its reads overlap
                // better than the copies').
                gathered.clear();
                gathered_ends.clear();
                let mut keep = 0u32;
                for &(a, b) in &spans[chunk..chunk_end] {
                    if a < b {
                        let t = &trace.touch_items;
                        keep ^= t[a as usize] ^ t[((a + b) / 2) as usize] ^ t[b as usize - 1];
                    }
                }
                for &(a, b) in &spans[chunk..chunk_end] {
                    gathered.extend_from_slice(&trace.touch_items[a as usize..b as usize]);
                    gathered_ends.push(gathered.len());
                }
                for &a in &gathered {
                    keep ^= items[a as usize].mark;
                }
                std::hint::black_box(keep);
                let gathered_span = |j: usize| {
                    let a = if j == 0 { 0 } else { gathered_ends[j - 1] };
                    &gathered[a..gathered_ends[j]]
                };
                for k in chunk..chunk_end {
                    let j = k - chunk;
                    let r = plan.run_order[k] as usize;
                    let eval = plan.run_eval[k];
                    // With an LRU, the prefetch of the next request (at its first topic) reads the
                    // state of each listed descendant: start loading them in one burst.
                    if let (Some(_), Some(d), true) = (lru.as_ref(), listed, k + 1 < chunk_end) {
                        let next = gathered_span(j + 1);
                        let topic = next
                            .iter()
                            .find(|&&a| items[a as usize].packed & TOPIC != 0);
                        if let Some(list) = topic.and_then(|&t| d.find(t)).map(|t| d.list(t)) {
                            let mut keep = 0;
                            for &ch in list {
                                keep ^= items[ch as usize].mark;
                            }
                            std::hint::black_box(keep);
                        }
                    }
                    stamp += 1;
                    if stamp >= (u32::MAX >> 1) - 1 {
                        items.iter_mut().for_each(|s| s.mark = 0);
                        stamp = 1;
                    }
                    let present = stamp << 1;
                    let touched = present | 1;
                    let key = request_key(seed, plan.first + r);
                    // With a rank sequence, the request's draws are consecutive ranks from a start
                    // picked by the request's key; otherwise each op has its own uniform.
                    let mut ranks = sequence.map(|s| s.cursor(splitmix64(key ^ TAG_SEQUENCE)));
                    let touches = gathered_span(j);
                    let (mut added_us, mut round_trips) = (0.0f64, 0u32);
                    let (mut lookups, mut l1_hits, mut prefetch_hits) = (0u64, 0u64, 0u64);
                    let (mut gets, mut multigets, mut multiget_keys, mut bytes) =
                        (0u64, 0u64, 0u64, 0u64);
                    // Prefetch happens once per request, at its first topic: the page's own topic.
                    let mut prefetched = false;
                    let (mut walked, mut topic_hit) = (0u32, false);
                    firsts.clear();

                    for (pos, &item) in touches.iter().enumerate() {
                        let st = items[item as usize];
                        if st.mark == touched {
                            continue;
                        }
                        items[item as usize].mark = touched;
                        lookups += 1;
                        // A fixed item may be marked present (see above), but is an L1 hit.
                        let missing = if st.packed & FIXED != 0 {
                            l1_hits += 1;
                            false
                        } else if st.mark == present {
                            prefetch_hits += 1;
                            false
                        } else if lru.as_mut().is_some_and(|l| l.touch(item, st.node)) {
                            l1_hits += 1;
                            false
                        } else {
                            true
                        };

                        if depth > 0 && !prefetched && st.packed & TOPIC != 0 {
                            // One multi-get: the topic if missing, plus its missing descendants.
                            prefetched = true;
                            topic_hit = !missing;
                            let (mut keys, mut fetched) = (0u64, 0u64);
                            if missing {
                                keys += 1;
                                fetched += st.size(trace, item);
                            }
                            match lru.as_mut() {
                                None => {
                                    let found = listed.and_then(|d| d.find(item));
                                    let (list, (n, b)) = match (listed, found) {
                                        (Some(d), Some(t)) => {
                                            let list = d.list(t);
                                            if unfixed[t].0 == u32::MAX {
                                                unfixed[t] = unfixed_totals(&items, trace, list);
                                            }
                                            (list, unfixed[t])
                                        }
                                        _ => {
                                            scratch.clear();
                                            walker.walk(trace, item, depth, &mut scratch);
                                            (&scratch[..], unfixed_totals(&items, trace, &scratch))
                                        }
                                    };
                                    walked = 1 + list.len() as u32;
                                    // Nothing is evicted, so a descendant is fetched unless it is
                                    // fixed or this request looked it up before (the topic itself
                                    // is not among its descendants). Mark them all present; of
                                    // the items looked up before, those now marked are in the
                                    // list: not fetched again, and marked touched back.
                                    for &ch in list {
                                        items[ch as usize].mark = present;
                                    }
                                    let (mut n, mut b) = (u64::from(n), b);
                                    for &x in &firsts {
                                        let sx = &mut items[x as usize];
                                        if sx.mark == present {
                                            sx.mark = touched;
                                            if sx.packed & FIXED == 0 {
                                                n -= 1;
                                                b -= sx.size(trace, x);
                                            }
                                        }
                                    }
                                    keys += n;
                                    fetched += b;
                                }
                                Some(l) => {
                                    let list = match listed.and_then(|d| d.find(item)) {
                                        Some(t) => listed.map_or(&[][..], |d| d.list(t)),
                                        None => {
                                            scratch.clear();
                                            walker.walk(trace, item, depth, &mut scratch);
                                            &scratch[..]
                                        }
                                    };
                                    walked = 1 + list.len() as u32;
                                    // Check every descendant (refreshing LRU hits) before any
                                    // insert can evict one.
                                    batch.clear();
                                    if missing {
                                        batch.push(item);
                                    }
                                    for &ch in list {
                                        let sc = items[ch as usize];
                                        if (sc.mark | 1) == touched || sc.packed & FIXED != 0 {
                                            continue;
                                        }
                                        if !l.touch(ch, sc.node) {
                                            batch.push(ch);
                                        }
                                    }
                                    keys = batch.len() as u64;
                                    for (x, &b) in batch.iter().enumerate() {
                                        let sb = &mut items[b as usize];
                                        let size = sb.size(trace, b);
                                        // The topic (first, when missing) is counted above.
                                        if x > 0 || !missing {
                                            fetched += size;
                                            sb.mark = present;
                                        }
                                        sb.node = l.insert(b, size);
                                    }
                                }
                            }
                            if keys > 0 {
                                round_trips += 1;
                                multigets += 1;
                                multiget_keys += keys;
                                bytes += fetched;
                                if eval {
                                    let br = multi_table.bracket(keys);
                                    let u = match ranks.as_mut() {
                                        Some(c) => c.next(),
                                        None => uniform(key, pos, TAG_MULTIGET),
                                    };
                                    added_us += multi_table.draw(br, u);
                                }
                            }
                            continue;
                        }
                        if depth > 0 && !prefetched && lru.is_none() {
                            firsts.push(item);
                        }
                        if missing {
                            let size = st.size(trace, item);
                            round_trips += 1;
                            gets += 1;
                            bytes += size;
                            if let Some(l) = lru.as_mut() {
                                items[item as usize].node = l.insert(item, size);
                            }
                            if eval {
                                let br = st.bracket(plan, item);
                                let u = match ranks.as_mut() {
                                    Some(c) => c.next(),
                                    None => uniform(key, pos, TAG_GET),
                                };
                                added_us += get_table.draw(br, u);
                            }
                        }
                    }

                    if eval {
                        c.requests += 1;
                        c.touches += touches.len() as u64;
                        c.lookups += lookups;
                        c.l1_hits += l1_hits;
                        c.prefetch_hits += prefetch_hits;
                        c.gets += gets;
                        c.multigets += multigets;
                        c.multiget_keys += multiget_keys;
                        c.bytes += bytes;
                        sink(RequestCost {
                            request: r as u32,
                            added_us,
                            round_trips,
                            touches: touches.len() as u32,
                            lookups: lookups as u32,
                            l1_hits: l1_hits as u32,
                            prefetch_hits: prefetch_hits as u32,
                            gets: gets as u32,
                            multigets: multigets as u32,
                            multiget_keys: multiget_keys as u32,
                            bytes,
                            prefetch_walked: walked,
                            prefetch_topic_hit: topic_hit,
                        });
                    }
                }
            }
            if let Some(l) = lru {
                if last {
                    self.spare = Some(l);
                } else {
                    self.parked.insert(code, l);
                }
            }
        }
        self.items = items;
        self.stamp = stamp;
        self.walker = walker;
        self.counts.add(&c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniforms_cover_the_unit_interval_evenly() {
        let key = request_key(42, 7);
        let n = 100_000;
        let mut buckets = [0u32; 10];
        for pos in 0..n {
            let u = uniform(key, pos, TAG_GET);
            assert!((0.0..1.0).contains(&u));
            buckets[(u * 10.0) as usize] += 1;
        }
        for b in buckets {
            // 10,000 expected per bucket; sd = 95; 6 sd either side.
            assert!((9_430..=10_570).contains(&b), "{buckets:?}");
        }
        assert_ne!(uniform(key, 3, TAG_GET), uniform(key, 3, TAG_MULTIGET));
    }
}
