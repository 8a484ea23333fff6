//! Request-level simulation of caching strategies in front of memcached, after "Profiling App
//! Engine Memcached" (Khan Academy, 2017): how much slower does each web request get if the
//! content items it touches come from memcached, and how much do an in-process cache and
//! prefetching win back?
//!
//! # Inputs
//! * A [`RequestTrace`]: a catalog of items (value size, children; an item with children is a
//!   *topic*) and requests (time, app instance, route, base latency in ms, the ordered items it
//!   touches), as integer columns.
//! * A [`LatencyModel`]: get latency by value size, multi-get latency by key count.
//! * [`Strategy`]s, written in the spec language of [`strategy`] (`lru:64MB+prefetch-children`).
//!
//! # Semantics
//! * **Windows.** Requests are ordered by time (ties by trace order). The first
//!   `floor(train × requests)` are the *training window*, the rest the *evaluation window*.
//!   Every strategy is reported on the evaluation window only, the same requests for all.
//!   Every strategy also runs through the training window first, uncounted and without latency
//!   draws, so LRUs start warm; `fixed:` picks its hot set from it. `train = 0` means no
//!   training window (cold LRUs; `fixed:` is then refused).
//! * **Touches.** The first touch of an item within a request is an L1 *lookup*. It is free when
//!   the item is in the fixed set, in the instance's LRU (which makes it the most recently
//!   used) or was already fetched by this request's prefetch; otherwise it costs one memcached
//!   get, drawn from the model for the item's size (each measured size's quantile table is
//!   read by interpolating on the log of latency, sizes in between blended on a log scale,
//!   sizes beyond the largest extrapolated by its per-byte slope: see the `latency` module),
//!   and the item goes into the LRU. Later
//!   touches of the same item in the request are free and are not lookups.
//! * **L1.** One LRU per app instance (`instance` column), capacity in items or value bytes;
//!   an item larger than a byte capacity is never admitted. `fixed:N` holds the N items that
//!   the most training requests touch (counted once per request, since repeats within a
//!   request are free; ties by item index); `fixed:SIZE` takes items in that order, skipping
//!   any that no longer fit. Fixed items cost nothing and never enter the LRU. With both, the
//!   fixed set is checked first.
//! * **Prefetch.** Once per request, at the first topic it touches (the page's own topic, as
//!   in the seed: "whenever we loaded a topic page, we pulled in all descendants of that
//!   topic"), one multi-get fetches the topic (if missing) and every missing descendant to
//!   depth d (children are depth 1); later topics in the request are looked up like any
//!   item. The multi-get costs one
//!   draw from the multi-get model for that key count; nothing missing, no multi-get. Walking
//!   the tree looks descendants up in L1 (refreshing LRU hits), but those are not counted as
//!   lookups. Fetched items are present for the rest of the request and go into the LRU.
//! * **Hit ratios.** `hit_ratio` = L1 hits / lookups; items that this request's prefetch
//!   fetched are *not* L1 hits but count in `prefetch_hit_ratio` = prefetch hits / lookups.
//! * **Common random numbers.** The uniform behind an operation is a hash (SplitMix64) of the
//!   draw's seed, the request index, the touch position in the request, and the operation
//!   kind, so every strategy sees the same latency for the same get in the same draw. Draw `d`
//!   of a simulation seeded with `seed` has its own seed derived from both.
//! * **Per request** the added time is the sum of its memcached operations; its fractional
//!   increase is added ms / base ms.
//!
//! # Results
//! [`simulate`] runs every (strategy, draw) pair, in parallel, and gives a [`StrategyResult`]
//! per strategy: percentiles of the fractional increase (by nearest rank) and the shares of
//! requests slowed by at least 10 / 25 / 50 %, each as a [`Band`] over the draws (the median,
//! and the range: min to max for fewer than 20 draws, the 2.5th to 97.5th percentile of the
//! draws from 20 on); the same on a 200-point grid of inverted percentiles for plots;
//! hit ratios, round trips and bytes per request (the same in every draw); and the routes that
//! hurt most.

mod engine;
mod item;
mod latency;
mod lru;
pub mod strategy;
mod stream;
mod summary;
mod trace;
mod tree;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

pub use engine::{Counts, RequestCost};
pub use latency::{Bracket, LatencyModel, RankSequence, Table};
pub use strategy::{Capacity, Strategy};
pub use stream::{Part, Stream, PART_MULTIPLE};
pub use trace::{RequestTrace, TraceColumns};

use engine::{draw_seed, run, Plan, RunState};
use strategy::fixed_mask;
use summary::{DrawAcc, DrawSummary};
use tree::{Descendants, Walker};

/// Percentiles of the fractional increase that every result reports.
pub const PERCENTILES: [f64; 6] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9];

/// "Slowed by at least" thresholds, as fractions (10 %, 25 %, 50 %).
pub const SLOWED: [f64; 3] = [0.10, 0.25, 0.50];

/// Points on the plotting grid of [`curve_percentiles`].
pub const CURVE_POINTS: usize = 200;

/// From this many draws on, a band is the 2.5th to 97.5th percentile of the draws instead of
/// their min to max.
pub const CENTRAL_BAND_DRAWS: u32 = 20;

/// The percentiles of the plotting grid: `100 - x` for `x` log-spaced from 50 down to 0.01
/// (so p50 to p99.99), for a plot with x = 100 - percentile on a log axis.
pub fn curve_percentiles() -> Vec<f64> {
    let (hi, lo) = (50.0f64, 0.01f64);
    (0..CURVE_POINTS)
        .map(|k| {
            let x = hi * (lo / hi).powf(k as f64 / (CURVE_POINTS - 1) as f64);
            100.0 - x
        })
        .collect()
}

/// Why a simulation could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// A bad argument: a strategy, window, draw count, or a strategy the model cannot serve.
    Usage(String),
    /// Inputs that do not fit together (an empty trace).
    Input(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Usage(m) | SimError::Input(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SimError {}

/// A statistic over the draws: the median and a range (see [`CENTRAL_BAND_DRAWS`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Band {
    pub median: f64,
    pub low: f64,
    pub high: f64,
}

impl Band {
    /// Median (mean of the middle two for an even count) and range of `values`, not empty.
    pub fn of(values: &mut [f64]) -> Band {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        if n >= CENTRAL_BAND_DRAWS as usize {
            Band {
                median,
                low: nearest_rank(values, 2.5),
                high: nearest_rank(values, 97.5),
            }
        } else {
            Band {
                median,
                low: values[0],
                high: values[n - 1],
            }
        }
    }
}

/// The p-th percentile (0-100) of sorted, non-empty `values` by nearest rank: the smallest
/// value with at least p % of the values at or below it.
pub fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let x = n as f64 * p.clamp(0.0, 100.0) / 100.0;
    // p / 100 in floating point can land just above the exact rank (99.9 / 100 * 1000 is
    // 999.0000000000001); step back by far less than one rank.
    let rank = (x * (1.0 - 1e-12)).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// How one route fared (in the median over draws, each figure taken separately).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteResult {
    /// The caller's route code.
    pub route: u32,
    /// Evaluated requests of this route.
    pub requests: u64,
    pub mean_added_ms: f64,
    pub mean_increase: f64,
    pub total_added_ms: f64,
}

/// Everything reported for one strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyResult {
    pub strategy: Strategy,
    pub draws: u32,
    /// `(percentile, fractional increase)` at each of [`PERCENTILES`].
    pub percentiles: Vec<(f64, Band)>,
    /// `(percentile, fractional increase)` at each of [`curve_percentiles`].
    pub curve: Vec<(f64, Band)>,
    /// `(threshold, share of requests with an increase >= threshold)` for each of [`SLOWED`].
    pub slowed: Vec<(f64, Band)>,
    /// Mean fractional increase per request.
    pub mean_increase: Band,
    /// Mean added memcached time per request, ms.
    pub mean_added_ms: Band,
    /// Evaluation-window totals (the same in every draw).
    pub counts: Counts,
    /// Routes by total added time, most first.
    pub routes: Vec<RouteResult>,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl StrategyResult {
    /// What the bands' ranges are: `"min-max"` below [`CENTRAL_BAND_DRAWS`] draws,
    /// `"p2.5-p97.5"` from there on.
    pub fn band_kind(&self) -> &'static str {
        if self.draws >= CENTRAL_BAND_DRAWS {
            "p2.5-p97.5"
        } else {
            "min-max"
        }
    }

    /// L1 hits / lookups (prefetched items are not L1 hits).
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.counts.l1_hits, self.counts.lookups)
    }

    /// Lookups served by this request's own prefetch / lookups.
    pub fn prefetch_hit_ratio(&self) -> f64 {
        ratio(self.counts.prefetch_hits, self.counts.lookups)
    }

    /// Memcached operations (gets + multi-gets) per evaluated request.
    pub fn round_trips_per_request(&self) -> f64 {
        ratio(
            self.counts.gets + self.counts.multigets,
            self.counts.requests,
        )
    }

    /// Value bytes fetched from memcached per evaluated request.
    pub fn bytes_per_request(&self) -> f64 {
        ratio(self.counts.bytes, self.counts.requests)
    }
}

/// The training window's length (`floor(train × requests)`), once the window and the
/// strategies' need of it are checked.
fn check_window(requests: usize, strategies: &[Strategy], train: f64) -> Result<usize, SimError> {
    if requests == 0 {
        return Err(SimError::Input("the trace has no requests".into()));
    }
    if !(0.0..1.0).contains(&train) {
        return Err(SimError::Usage(format!(
            "train must be a fraction in [0, 1), got {train}"
        )));
    }
    let n_train = (train * requests as f64).floor() as usize;
    for s in strategies {
        if s.fixed.is_some() && n_train == 0 {
            return Err(SimError::Usage(format!(
                "strategy {s} needs a training window to choose its fixed set, but it is empty \
                 (train = {train} of {} requests)",
                requests
            )));
        }
    }
    Ok(n_train)
}

pub(crate) fn check_args(
    requests: usize,
    model: &LatencyModel,
    strategies: &[Strategy],
    train: f64,
) -> Result<usize, SimError> {
    let n_train = check_window(requests, strategies, train)?;
    for s in strategies {
        if s.prefetch_depth > 0 && model.multiget().is_empty() {
            return Err(SimError::Usage(format!(
                "strategy {s} prefetches, but the latency model has no multi-get table"
            )));
        }
    }
    Ok(n_train)
}

/// Requests by time (ties by index), and by request whether it is in the evaluation window
/// (not among the first `n_train` by time).
fn windows(trace: &RequestTrace, n_train: usize) -> (Vec<u32>, Vec<bool>) {
    let mut order: Vec<u32> = (0..trace.len() as u32).collect();
    // Times are finite (checked when the trace was built); -0.0 and 0.0 tie.
    order.sort_by(|&a, &b| {
        let (ta, tb) = (trace.time[a as usize], trace.time[b as usize]);
        ta.partial_cmp(&tb).unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut evaluated = vec![true; trace.len()];
    for &r in &order[..n_train] {
        evaluated[r as usize] = false;
    }
    (order, evaluated)
}

pub(crate) fn plan<'a>(
    trace: &'a RequestTrace,
    model: &'a LatencyModel,
    strategies: &[Strategy],
    n_train: usize,
) -> Plan<'a> {
    let (mut order, evaluated) = windows(trace, n_train);
    // Within each block of consecutive requests, instance-major (the sort is stable): a
    // counting sort when there are no more instances than requests in a block.
    let n_instances = trace.n_instances();
    if n_instances <= engine::BLOCK {
        let mut at = vec![0usize; n_instances + 1];
        let mut sorted = vec![0u32; engine::BLOCK];
        for block in order.chunks_mut(engine::BLOCK) {
            at.fill(0);
            for &r in block.iter() {
                at[trace.instance[r as usize] as usize + 1] += 1;
            }
            for i in 0..n_instances {
                at[i + 1] += at[i];
            }
            for &r in block.iter() {
                let a = &mut at[trace.instance[r as usize] as usize];
                sorted[*a] = r;
                *a += 1;
            }
            block.copy_from_slice(&sorted[..block.len()]);
        }
    } else {
        for block in order.chunks_mut(engine::BLOCK) {
            block.sort_by_key(|&r| trace.instance[r as usize]);
        }
    }
    // Instance-major, time order within an instance (a stable counting sort of `order`).
    let mut run_starts = vec![0usize; trace.n_instances() + 1];
    for &i in &trace.instance {
        run_starts[i as usize + 1] += 1;
    }
    for i in 0..trace.n_instances() {
        run_starts[i + 1] += run_starts[i];
    }
    // Requests are read in `order` (near trace order), so the trace's columns are read close
    // to in sequence, and written to one cursor per instance.
    let mut next = run_starts.clone();
    let mut run_order = vec![0u32; trace.len()];
    let mut run_spans = vec![(0u64, 0u64); trace.len()];
    let mut run_eval = vec![false; trace.len()];
    for &r in &order {
        let at = &mut next[trace.instance[r as usize] as usize];
        let r = r as usize;
        run_order[*at] = r as u32;
        run_spans[*at] = (trace.touch_offsets[r], trace.touch_offsets[r + 1]);
        run_eval[*at] = evaluated[r];
        *at += 1;
    }
    let get_brackets = trace
        .item_sizes
        .iter()
        .map(|&s| model.get().bracket(s))
        .collect();
    let mut depths: Vec<u32> = strategies
        .iter()
        .map(|s| s.prefetch_depth)
        .filter(|&d| d > 0)
        .collect();
    depths.sort_unstable();
    depths.dedup();
    // The lists of one depth take at most an eighth of the memory of the trace's touch column
    // (or one entry per catalog item); topics beyond that are walked when prefetched.
    let budget = (trace.n_touches() / 8).max(trace.n_items());
    let descendants = depths
        .into_iter()
        .map(|d| Descendants::new(trace, d, budget))
        .collect();
    Plan {
        trace,
        model,
        order,
        run_order,
        run_spans,
        run_eval,
        run_starts,
        evaluated,
        n_train,
        first: 0,
        get_brackets,
        descendants,
    }
}

/// The fixed sets the strategies need, one per strategy (`None` without `fixed:`).
fn fixed_sets(plan: &Plan<'_>, strategies: &[Strategy]) -> Vec<Option<Vec<bool>>> {
    let ranking = strategies
        .iter()
        .any(|s| s.fixed.is_some())
        .then(|| plan.training_ranking());
    strategies
        .iter()
        .map(|s| {
            s.fixed
                .map(|c| fixed_mask(plan.trace, ranking.as_deref().unwrap_or(&[]), c))
        })
        .collect()
}

/// The cost of every evaluated request (ordered by request index) under `strategy`, for one
/// draw seeded with `draw_seed` (draw `d` of [`simulate`] with seed `s` uses
/// [`draw_seed_of`]`(s, d)`), and the evaluation-window totals. Keeps one entry per evaluated
/// request.
pub fn request_costs(
    trace: &RequestTrace,
    model: &LatencyModel,
    strategy: &Strategy,
    train: f64,
    draw_seed: u64,
) -> Result<(Vec<RequestCost>, Counts), SimError> {
    let n_train = check_args(trace.len(), model, std::slice::from_ref(strategy), train)?;
    let plan = plan(trace, model, std::slice::from_ref(strategy), n_train);
    let fixed = fixed_sets(&plan, std::slice::from_ref(strategy))
        .pop()
        .flatten();
    let mut costs = Vec::with_capacity(plan.n_eval());
    let counts = run(&plan, strategy, fixed.as_deref(), draw_seed, |c| {
        costs.push(c)
    });
    costs.sort_unstable_by_key(|c| c.request);
    Ok((costs, counts))
}

/// The fixed hot set `strategy` holds over `trace` with training share `train`, in ranking
/// order (most training requests first, ties by index; for a byte capacity, the items of
/// that order that still fit): the set every run of the strategy uses. `None` when the
/// strategy has no `fixed:` part.
pub fn fixed_set(
    trace: &RequestTrace,
    strategy: &Strategy,
    train: f64,
) -> Result<Option<Vec<u32>>, SimError> {
    let n_train = check_window(trace.len(), std::slice::from_ref(strategy), train)?;
    let Some(capacity) = strategy.fixed else {
        return Ok(None);
    };
    let (_, evaluated) = windows(trace, n_train);
    let ranking = strategy::training_ranking(trace, &evaluated);
    Ok(Some(strategy::fixed_items(trace, &ranking, capacity)))
}

/// For each of `topics`, the descendants to `depth` (children are depth 1) that a prefetch at
/// it walks, in the order it walks them: level by level, children in catalog order, each item
/// once, the topic itself left out. A prefetch walks `1 + descendants(..)[k].len()` items.
///
/// # Panics
/// If a topic is not an item of `trace`.
pub fn descendants(trace: &RequestTrace, topics: &[u32], depth: u32) -> Vec<Vec<u32>> {
    let mut walker = Walker::new(trace.n_items());
    topics
        .iter()
        .map(|&topic| {
            assert!(
                (topic as usize) < trace.n_items(),
                "item {topic} is not in the catalog"
            );
            let mut out = Vec::new();
            walker.walk(trace, topic, depth, &mut out);
            out
        })
        .collect()
}

/// The seed [`simulate`] gives draw `d` when seeded with `seed`.
pub fn draw_seed_of(seed: u64, d: u32) -> u64 {
    draw_seed(seed, d)
}

fn run_draw(
    plan: &Plan<'_>,
    strategy: &Strategy,
    fixed: Option<&[bool]>,
    seed: u64,
    grid: &[f64],
) -> DrawSummary {
    let trace = plan.trace;
    let mut acc = DrawAcc::new(usize::MAX);
    let mut state = RunState::new(plan, strategy, fixed);
    add_part(
        plan,
        strategy,
        seed,
        true,
        &mut state,
        &mut acc,
        |r| r,
        |_| {},
    );
    acc.counts = state.counts;
    acc.finish(grid, trace.route_codes.len())
}

/// Runs one part of a trace (`plan`) and adds its evaluated requests to `acc`, summed in the
/// order of [`Plan::order`]; `slot` maps a dense route index of the part to `acc`'s route
/// slot; `keep` sees each evaluated request's cost.
#[allow(clippy::too_many_arguments)]
pub(crate) fn add_part(
    plan: &Plan<'_>,
    strategy: &Strategy,
    seed: u64,
    last: bool,
    state: &mut RunState,
    acc: &mut DrawAcc,
    slot: impl Fn(usize) -> usize,
    mut keep: impl FnMut(&RequestCost),
) {
    let trace = plan.trace;
    // Added ms by request, then every sum in the order of `Plan::order`.
    let mut added_ms = vec![0.0f64; trace.len()];
    state.run(plan, strategy, seed, last, |c| {
        added_ms[c.request as usize] = c.added_us / 1000.0;
        keep(&c);
    });
    for &r in plan.order.iter().filter(|&&r| plan.evaluated[r as usize]) {
        let r = r as usize;
        acc.add(added_ms[r], trace.base_ms[r], slot(trace.route[r] as usize));
    }
}

pub(crate) fn combine(
    strategy: Strategy,
    route_codes: &[u32],
    grid: &[f64],
    draws: Vec<DrawSummary>,
) -> StrategyResult {
    let band = |f: &dyn Fn(&DrawSummary) -> f64| {
        let mut v: Vec<f64> = draws.iter().map(f).collect();
        Band::of(&mut v)
    };
    let median = |f: &dyn Fn(&DrawSummary) -> f64| band(f).median;
    let mut routes: Vec<RouteResult> = route_codes
        .iter()
        .enumerate()
        .filter(|&(i, _)| draws[0].routes[i].0 > 0)
        .map(|(i, &code)| {
            let requests = draws[0].routes[i].0;
            let total = median(&|d| d.routes[i].1);
            RouteResult {
                route: code,
                requests,
                mean_added_ms: total / requests as f64,
                mean_increase: median(&|d| d.routes[i].2) / requests as f64,
                total_added_ms: total,
            }
        })
        .collect();
    routes.sort_by(|a, b| {
        b.total_added_ms
            .total_cmp(&a.total_added_ms)
            .then(a.route.cmp(&b.route))
    });
    StrategyResult {
        strategy,
        draws: draws.len() as u32,
        percentiles: PERCENTILES
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, band(&|d| d.percentiles[i])))
            .collect(),
        curve: grid
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, band(&|d| d.curve[i])))
            .collect(),
        slowed: SLOWED
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, band(&|d| d.slowed[i])))
            .collect(),
        mean_increase: band(&|d| d.mean_increase),
        mean_added_ms: band(&|d| d.mean_added_ms),
        counts: draws[0].counts,
        routes,
    }
}

/// Runs every strategy `draws` times over `trace` and summarizes each (see the module docs).
///
/// `train` is the training fraction in [0, 1); `threads = 0` uses every available core. The
/// result is the same for the same inputs and `seed`, whatever the thread count.
pub fn simulate(
    trace: &RequestTrace,
    model: &LatencyModel,
    strategies: &[Strategy],
    train: f64,
    draws: u32,
    seed: u64,
    threads: usize,
) -> Result<Vec<StrategyResult>, SimError> {
    if strategies.is_empty() {
        return Err(SimError::Usage("no strategies to simulate".into()));
    }
    if draws == 0 {
        return Err(SimError::Usage("draws must be at least 1".into()));
    }
    let n_train = check_args(trace.len(), model, strategies, train)?;
    let plan = plan(trace, model, strategies, n_train);
    if plan.n_eval() == 0 {
        return Err(SimError::Usage(format!(
            "the evaluation window is empty (train = {train} of {} requests)",
            trace.len()
        )));
    }
    let fixed = fixed_sets(&plan, strategies);
    let grid = curve_percentiles();
    let tasks = strategies.len() * draws as usize;
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    }
    .clamp(1, tasks);

    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<DrawSummary>>> = Mutex::new((0..tasks).map(|_| None).collect());
    let work = || loop {
        let t = next.fetch_add(1, Ordering::Relaxed);
        if t >= tasks {
            break;
        }
        let (s, d) = (t / draws as usize, (t % draws as usize) as u32);
        let summary = run_draw(
            &plan,
            &strategies[s],
            fixed[s].as_deref(),
            draw_seed(seed, d),
            &grid,
        );
        done.lock().expect("no worker panicked")[t] = Some(summary);
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });

    let mut done = done.into_inner().expect("no worker panicked").into_iter();
    Ok(strategies
        .iter()
        .map(|s| {
            let draws: Vec<DrawSummary> = done
                .by_ref()
                .take(draws as usize)
                .map(|d| d.expect("every task ran"))
                .collect();
            combine(*s, &trace.route_codes, &grid, draws)
        })
        .collect())
}

#[cfg(test)]
mod tests;
