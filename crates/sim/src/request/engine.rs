//! One run of one strategy with one latency draw over a trace: the walk every strategy shares
//! (the order of requests, touches, gets, latency draws, the accounts); what differs between
//! strategies is in the `strategy` module.

use super::item::{ItemState, Marks};
use super::latency::{Bracket, LatencyModel};
use super::strategy::{self, training_ranking, Cache, Caches, Kept, Prefetch, Strategy, Walk};
use super::trace::RequestTrace;
use super::tree::Descendants;

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

/// What a run of one strategy and draw carries from one part of a trace to the next: each
/// item's state, what the strategy keeps (the LRUs of the instances seen so far, one parked
/// per instance between parts; see [`RunState::run`]), the request stamp and the totals.
pub(crate) struct RunState {
    items: Vec<ItemState>,
    stamp: u32,
    kept: Kept,
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
        RunState {
            items,
            stamp: 0,
            kept: Kept::new(strategy, n_items),
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
        sink: impl FnMut(RequestCost),
    ) {
        let depth = strategy.prefetch_depth;
        let listed = (depth > 0).then(|| plan.descendants(depth)).flatten();
        let RunState {
            items,
            stamp,
            kept,
            counts,
        } = self;
        let walk = Run {
            plan,
            items,
            stamp,
            counts,
            seed,
            last,
            sink,
        };
        strategy::dispatch(strategy, kept, plan.trace, listed, walk);
    }
}

/// The shared walk of one part of a trace (see [`RunState::run`]), the same for every
/// strategy: the strategy's parts (see the `strategy` module) decide what is found in L1 and
/// what is prefetched; the walk marks touches, sends the gets of what is missing, draws every
/// latency and keeps the accounts.
struct Run<'a, 'p, F> {
    plan: &'a Plan<'p>,
    items: &'a mut Vec<ItemState>,
    stamp: &'a mut u32,
    counts: &'a mut Counts,
    seed: u64,
    last: bool,
    sink: F,
}

impl<F: FnMut(RequestCost)> Walk for Run<'_, '_, F> {
    fn walk<C: Caches, P: Prefetch>(self, caches: &mut C, mut prefetch: P) {
        let Run {
            plan,
            items: items_at,
            stamp: stamp_at,
            counts,
            seed,
            last,
            mut sink,
        } = self;
        let trace = plan.trace;
        let get_table = plan.model.get();
        let multi_table = plan.model.multiget();
        let sequence = plan.model.sequence();
        let brackets = &plan.get_brackets[..];
        // The items' state and the stamp as locals for the loop (put back at the end).
        let mut items = std::mem::take(items_at);
        let mut stamp = *stamp_at;

        let mut c = Counts::default();
        let spans = &plan.run_spans;
        let (mut gathered, mut gathered_ends) = (Vec::new(), Vec::with_capacity(CHUNK));
        for (i, bounds) in plan.run_starts.windows(2).enumerate() {
            if bounds[0] == bounds[1] {
                continue;
            }
            let code = trace.instance_codes[i];
            let mut cache = caches.enter(code, &mut items);
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
                    if k + 1 < chunk_end {
                        prefetch.ahead::<C::One>(&items, gathered_span(j + 1));
                    }
                    stamp += 1;
                    if stamp >= (u32::MAX >> 1) - 1 {
                        items.iter_mut().for_each(|s| s.mark = 0);
                        stamp = 1;
                    }
                    let marks = Marks {
                        present: stamp << 1,
                        touched: stamp << 1 | 1,
                    };
                    let key = request_key(seed, plan.first + r);
                    // With a rank sequence, the request's draws are consecutive ranks from a start
                    // picked by the request's key; otherwise each op has its own uniform.
                    let mut ranks = sequence.map(|s| s.cursor(splitmix64(key ^ TAG_SEQUENCE)));
                    let touches = gathered_span(j);
                    let (mut added_us, mut round_trips) = (0.0f64, 0u32);
                    let (mut lookups, mut l1_hits, mut prefetch_hits) = (0u64, 0u64, 0u64);
                    let (mut gets, mut multigets, mut multiget_keys, mut bytes) =
                        (0u64, 0u64, 0u64, 0u64);
                    prefetch.start();

                    for (pos, &item) in touches.iter().enumerate() {
                        let st = items[item as usize];
                        if st.mark == marks.touched {
                            continue;
                        }
                        items[item as usize].mark = marks.touched;
                        lookups += 1;
                        // A fixed item may be marked present (by a prefetch that does not
                        // look), but is an L1 hit.
                        let missing = if st.is_fixed() {
                            l1_hits += 1;
                            false
                        } else if st.mark == marks.present {
                            prefetch_hits += 1;
                            false
                        } else if cache.lookup(item, st.node) {
                            l1_hits += 1;
                            false
                        } else {
                            true
                        };

                        if let Some(fetch) =
                            prefetch.at(&mut cache, &mut items, marks, item, st, missing)
                        {
                            if fetch.keys > 0 {
                                round_trips += 1;
                                multigets += 1;
                                multiget_keys += fetch.keys;
                                bytes += fetch.bytes;
                                if eval {
                                    let br = multi_table.bracket(fetch.keys);
                                    let u = match ranks.as_mut() {
                                        Some(c) => c.next(),
                                        None => uniform(key, pos, TAG_MULTIGET),
                                    };
                                    added_us += multi_table.draw(br, u);
                                }
                            }
                            continue;
                        }
                        if missing {
                            let size = st.size(trace, item);
                            round_trips += 1;
                            gets += 1;
                            bytes += size;
                            if <C::One as Cache>::HOLDS {
                                items[item as usize].node = cache.fill(item, size);
                            }
                            if eval {
                                let br = st.bracket(brackets, item);
                                let u = match ranks.as_mut() {
                                    Some(c) => c.next(),
                                    None => uniform(key, pos, TAG_GET),
                                };
                                added_us += get_table.draw(br, u);
                            }
                        }
                    }

                    if eval {
                        let (walked, topic_hit) = prefetch.record();
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
            caches.leave(code, cache, last);
        }
        *items_at = items;
        *stamp_at = stamp;
        counts.add(&c);
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
