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
//!   read by interpolating on the log of latency, sizes in between blended on a log scale: see
//!   the `latency` module), and the item goes into the LRU. Later
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
mod latency;
mod lru;
pub mod strategy;
mod trace;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub use engine::{Counts, RequestCost};
pub use latency::{Bracket, LatencyModel, RankSequence, Table};
pub use strategy::{Capacity, Strategy};
pub use trace::{RequestTrace, TraceColumns};

use engine::{draw_seed, fixed_set, run, Descendants, Plan};

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
#[derive(Debug, Clone, Copy, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
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

/// What one draw of one strategy leaves behind once its per-request array is summarized.
struct DrawSummary {
    percentiles: Vec<f64>,
    curve: Vec<f64>,
    slowed: Vec<f64>,
    mean_increase: f64,
    mean_added_ms: f64,
    /// Per dense route: (requests, added ms, sum of fractional increases).
    routes: Vec<(u64, f64, f64)>,
    counts: Counts,
}

fn check_args(
    trace: &RequestTrace,
    model: &LatencyModel,
    strategies: &[Strategy],
    train: f64,
) -> Result<usize, SimError> {
    if trace.is_empty() {
        return Err(SimError::Input("the trace has no requests".into()));
    }
    if !(0.0..1.0).contains(&train) {
        return Err(SimError::Usage(format!(
            "train must be a fraction in [0, 1), got {train}"
        )));
    }
    let n_train = (train * trace.len() as f64).floor() as usize;
    for s in strategies {
        if s.fixed.is_some() && n_train == 0 {
            return Err(SimError::Usage(format!(
                "strategy {s} needs a training window to choose its fixed set, but it is empty \
                 (train = {train} of {} requests)",
                trace.len()
            )));
        }
        if s.prefetch_depth > 0 && model.multiget().is_empty() {
            return Err(SimError::Usage(format!(
                "strategy {s} prefetches, but the latency model has no multi-get table"
            )));
        }
    }
    Ok(n_train)
}

fn plan<'a>(
    trace: &'a RequestTrace,
    model: &'a LatencyModel,
    strategies: &[Strategy],
    n_train: usize,
) -> Plan<'a> {
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
                .map(|c| fixed_set(plan.trace, ranking.as_deref().unwrap_or(&[]), c))
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
    let n_train = check_args(trace, model, std::slice::from_ref(strategy), train)?;
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
    // Added ms by request, then every sum in the order of `Plan::order`.
    let mut added_ms = vec![0.0f64; trace.len()];
    let counts = run(plan, strategy, fixed, seed, |c| {
        added_ms[c.request as usize] = c.added_us / 1000.0;
    });
    let mut fracs = Vec::with_capacity(plan.n_eval());
    let mut routes = vec![(0u64, 0.0f64, 0.0f64); trace.route_codes.len()];
    let mut total_ms = 0.0;
    for &r in plan.order.iter().filter(|&&r| plan.evaluated[r as usize]) {
        let r = r as usize;
        let ms = added_ms[r];
        let frac = ms / trace.base_ms[r];
        let acc = &mut routes[trace.route[r] as usize];
        acc.0 += 1;
        acc.1 += ms;
        acc.2 += frac;
        total_ms += ms;
        fracs.push(frac);
    }
    drop(added_ms);
    let n = fracs.len() as f64;
    let mean_increase = fracs.iter().sum::<f64>() / n;
    fracs.sort_unstable_by(f64::total_cmp);
    let slowed = SLOWED
        .iter()
        .map(|&t| {
            let below = fracs.partition_point(|&f| f < t);
            (fracs.len() - below) as f64 / n
        })
        .collect();
    DrawSummary {
        percentiles: PERCENTILES
            .iter()
            .map(|&p| nearest_rank(&fracs, p))
            .collect(),
        curve: grid.iter().map(|&p| nearest_rank(&fracs, p)).collect(),
        slowed,
        mean_increase,
        mean_added_ms: total_ms / n,
        routes,
        counts,
    }
}

fn combine(
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
    let n_train = check_args(trace, model, strategies, train)?;
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
mod tests {
    use super::*;

    /// Items 0..4 of 100 bytes; item 0 is a topic with children 1, 2; item 1 has child 3.
    fn trace(touches: Vec<Vec<u32>>, instances: Vec<u32>) -> RequestTrace {
        let n = touches.len();
        let mut offsets = vec![0u64];
        for t in &touches {
            offsets.push(offsets.last().unwrap() + t.len() as u64);
        }
        RequestTrace::new(TraceColumns {
            item_sizes: vec![100; 5],
            child_offsets: vec![0, 2, 3, 3, 3, 3],
            child_items: vec![1, 2, 3],
            time: (0..n).map(|i| i as f64).collect(),
            instance: instances,
            route: vec![0; n],
            base_ms: vec![10.0; n],
            touch_offsets: offsets,
            touch_items: touches.concat(),
        })
        .unwrap()
    }

    /// Every get costs 1 ms, every multi-get 2 ms, whatever u (up to rounding: a draw is
    /// `exp(ln q)`; see [`close`]).
    fn flat_model() -> LatencyModel {
        LatencyModel::new(
            vec![(1, vec![1000.0, 1000.0])],
            vec![(1, vec![2000.0, 2000.0])],
        )
        .unwrap()
    }

    /// Equal up to the rounding of `exp(ln q)` in a draw.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs()
    }

    fn costs(t: &RequestTrace, spec: &str, train: f64) -> (Vec<RequestCost>, Counts) {
        request_costs(t, &flat_model(), &Strategy::parse(spec).unwrap(), train, 1).unwrap()
    }

    /// A get draw at uniform u costs 1001^u µs (two points, read on the log of latency).
    fn sequenced(ranks: Vec<f64>, segments: &[usize]) -> LatencyModel {
        LatencyModel::new(vec![(1, vec![1.0, 1001.0])], vec![(1, vec![1.0, 1001.0])])
            .unwrap()
            .with_sequence(RankSequence::new(ranks, segments).unwrap())
    }

    #[test]
    fn with_a_rank_sequence_a_requests_draws_are_consecutive_ranks() {
        // Three gets read three consecutive ranks of a 3-rank segment, wrapping: all of them,
        // wherever the request starts.
        let t = trace(vec![vec![4, 3, 2]; 20], vec![0; 20]);
        let m = sequenced(vec![0.0, 0.5, 0.9], &[3]);
        let want = 1.0 + 1001f64.powf(0.5) + 1001f64.powf(0.9);
        let (c, _) = request_costs(&t, &m, &Strategy::parse("none").unwrap(), 0.0, 1).unwrap();
        for x in &c {
            assert!(close(x.added_us, want), "{} {want}", x.added_us);
        }
        // The multi-get of a prefetch takes its place in the sequence: topic 0 prefetches
        // itself and 1, 2 (one multi-get), then 3 and 4 are gets.
        let t = trace(vec![vec![0, 1, 2, 3, 4]; 20], vec![0; 20]);
        let (c, _) = request_costs(
            &t,
            &m,
            &Strategy::parse("prefetch-children").unwrap(),
            0.0,
            1,
        )
        .unwrap();
        for x in &c {
            assert_eq!(x.round_trips, 3);
            assert!(close(x.added_us, want), "{} {want}", x.added_us);
        }
    }

    #[test]
    fn with_a_rank_sequence_a_slow_stretch_slows_the_whole_request() {
        // Two segments, one fast and one slow: a request of two gets is all fast or all slow,
        // never mixed, and independent draws would mix them.
        let t = trace(vec![vec![4, 3]; 200], vec![0; 200]);
        let m = sequenced(vec![0.0, 0.0, 0.9, 0.9], &[2, 2]);
        let (fast, slow) = (2.0, 2.0 * 1001f64.powf(0.9));
        let (c, _) = request_costs(&t, &m, &Strategy::parse("none").unwrap(), 0.0, 7).unwrap();
        let n_fast = c.iter().filter(|x| close(x.added_us, fast)).count();
        let n_slow = c.iter().filter(|x| close(x.added_us, slow)).count();
        assert_eq!(n_fast + n_slow, 200);
        assert!((60..=140).contains(&n_fast), "{n_fast}");
    }

    #[test]
    fn first_touches_cost_a_get_and_repeats_are_free() {
        let t = trace(vec![vec![4, 3, 4, 3, 2]], vec![0]);
        let (c, n) = costs(&t, "none", 0.0);
        assert!(close(c[0].added_us, 3000.0), "{}", c[0].added_us);
        assert_eq!(c[0].round_trips, 3);
        assert_eq!((n.touches, n.lookups, n.gets, n.bytes), (5, 3, 3, 300));
    }

    #[test]
    fn lru_state_persists_per_instance_and_is_warmed_by_training() {
        // Requests 0 and 1 train; 2 (instance 0) and 3 (instance 1) are evaluated.
        let t = trace(
            vec![vec![4], vec![3], vec![4, 3], vec![4, 3]],
            vec![0, 0, 0, 1],
        );
        let (c, n) = costs(&t, "lru:10", 0.5);
        assert_eq!(c.iter().map(|c| c.round_trips).collect::<Vec<_>>(), [0, 2]);
        assert_eq!((n.lookups, n.l1_hits), (4, 2));
    }

    #[test]
    fn fixed_takes_the_items_most_training_requests_touch() {
        // Training: item 3 in two requests (three touches in one of them), items 2 and 4 in one.
        let t = trace(
            vec![vec![3, 3, 3], vec![3, 4], vec![2], vec![2, 3, 4]],
            vec![0; 4],
        );
        let (c, n) = costs(&t, "fixed:1", 0.75);
        assert_eq!(c[0].round_trips, 2, "only item 3 is fixed");
        assert_eq!(n.l1_hits, 1);
        // Ties by index: 2 and 4 are both touched once; 2 comes first.
        let (c, _) = costs(&t, "fixed:2", 0.75);
        assert_eq!(c[0].round_trips, 1);
        let (c, _) = costs(&t, "fixed:150B", 0.75);
        assert_eq!(c[0].round_trips, 2, "one 100-byte item fits");
    }

    #[test]
    fn prefetch_fetches_missing_descendants_in_one_multiget() {
        // Touch 2 (get), then topic 0: multi-get of 0, 1 and (depth 2) 3; then 1 and 3 are free.
        let t = trace(vec![vec![2, 0, 1, 3]], vec![0]);
        let (c, n) = costs(&t, "prefetch:depth=2", 0.0);
        assert!(close(c[0].added_us, 1000.0 + 2000.0), "{}", c[0].added_us);
        assert_eq!((n.gets, n.multigets, n.multiget_keys), (1, 1, 3));
        assert_eq!((n.lookups, n.prefetch_hits), (4, 2));
        // Depth 1: get 2, multi-get 0+1; 1 is a topic too, but a request prefetches once, at
        // its first topic: 3 costs a get.
        let (c, n) = costs(&t, "prefetch-children", 0.0);
        assert_eq!(c[0].round_trips, 3);
        assert_eq!((n.gets, n.multigets, n.multiget_keys), (2, 1, 2));
        assert_eq!(n.prefetch_hits, 1);
    }

    #[test]
    fn prefetch_leaves_out_fixed_descendants_and_items_already_looked_up() {
        // Request 0 trains: item 2 is the fixed set. Request 1: get 3; topic 0 multi-gets
        // itself and 1 (2 is fixed, 3 was fetched before); 1 is then present, 2 an L1 hit,
        // and the second 3 a repeat.
        let t = trace(vec![vec![2], vec![3, 0, 1, 2, 3]], vec![0, 0]);
        let (c, n) = costs(&t, "fixed:1+prefetch:depth=2", 0.5);
        assert_eq!(c[0].round_trips, 2);
        assert_eq!(
            (n.gets, n.multigets, n.multiget_keys, n.bytes),
            (1, 1, 2, 300)
        );
        assert_eq!((n.lookups, n.l1_hits, n.prefetch_hits), (4, 1, 1));
    }

    #[test]
    fn prefetch_skips_items_in_l1_and_sends_nothing_when_all_are_there() {
        // Request 0: topic 0 multi-gets 0, 1, 2 (topic 1 is then just present: one prefetch
        // per request). Request 1 finds 0 and its children in the LRU: no multi-get at all.
        let t = trace(vec![vec![0, 1, 2], vec![0, 1, 2]], vec![0, 0]);
        let (c, n) = costs(&t, "lru:10+prefetch-children", 0.0);
        assert_eq!(c[0].round_trips, 1);
        assert_eq!(c[1].round_trips, 0);
        assert_eq!((n.l1_hits, n.prefetch_hits, n.multiget_keys), (3, 2, 3));
    }

    #[test]
    fn nearest_rank_is_exact_despite_float_noise() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 99.9), 999.0);
        assert_eq!(nearest_rank(&v, 50.0), 500.0);
        assert_eq!(nearest_rank(&v, 0.0), 1.0);
        assert_eq!(nearest_rank(&v, 100.0), 1000.0);
        assert_eq!(nearest_rank(&v, 0.05), 1.0);
        assert_eq!(nearest_rank(&v, 0.15), 2.0);
    }

    #[test]
    fn bands_are_min_max_below_twenty_draws_and_central_from_there() {
        let mut few = vec![3.0, 1.0, 2.0, 10.0];
        assert_eq!(
            Band::of(&mut few),
            Band {
                median: 2.5,
                low: 1.0,
                high: 10.0
            }
        );
        let mut many: Vec<f64> = (1..=40).map(f64::from).collect();
        assert_eq!(
            Band::of(&mut many),
            Band {
                median: 20.5,
                low: 1.0,
                high: 39.0
            }
        );
    }

    #[test]
    fn curve_runs_from_p50_to_p9999() {
        let g = curve_percentiles();
        assert_eq!(g.len(), CURVE_POINTS);
        assert!((g[0] - 50.0).abs() < 1e-12 && (g[CURVE_POINTS - 1] - 99.99).abs() < 1e-9);
        assert!(g.windows(2).all(|w| w[1] > w[0]));
    }

    #[test]
    fn rejects_bad_arguments() {
        let t = trace(vec![vec![1], vec![2]], vec![0, 0]);
        let m = flat_model();
        let none = [Strategy::default()];
        let fixed = [Strategy::parse("fixed:1").unwrap()];
        let cases: [(&[Strategy], f64, u32, &str); 5] = [
            (&none, 1.0, 1, "train must be"),
            (&none, -0.1, 1, "train must be"),
            (&none, 0.5, 0, "draws"),
            (&fixed, 0.0, 1, "training window"),
            (&[], 0.5, 1, "no strategies"),
        ];
        for (s, train, draws, why) in cases {
            let e = simulate(&t, &m, s, train, draws, 0, 1).unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
        }
        let no_multi = LatencyModel::new(vec![(1, vec![1.0, 2.0])], vec![]).unwrap();
        let e = simulate(
            &t,
            &no_multi,
            &[Strategy::parse("prefetch-children").unwrap()],
            0.5,
            1,
            0,
            1,
        );
        assert!(matches!(e, Err(SimError::Usage(m)) if m.contains("multi-get")));
    }
}
