//! The request-level simulation of a time-ordered trace fed in parts, in memory that does not
//! grow with the number of requests.
//!
//! A [`Stream`] holds the catalog and, per strategy and draw, the state a run carries from one
//! request to the next (each item's state, one LRU per app instance) and a [`DrawAcc`] of its
//! results; each part of the trace (its requests' columns) is simulated by every run and then
//! dropped. The results are the same, bit for bit, as [`super::simulate`]'s over the whole
//! trace, as long as the values behind the percentiles fit the accumulators' exact limit (past
//! it they come from a histogram: see the `summary` module):
//!
//! * the trace must be in time order (each part, and part after part): the whole-trace
//!   simulation orders requests by time, and here the file order is the time order;
//! * the windows are set by the total number of requests, given up front;
//! * `fixed:` strategies need the training window's ranking before the first part is run:
//!   the caller feeds the training window to [`Stream::train`] first (a first pass);
//! * every part but the last holds a multiple of 4,096 requests, the blocks in which the
//!   whole-trace simulation sums results, so sums are taken in the same order.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::engine::RequestCost;
use super::engine::{self, draw_seed, Plan, RunState};
use super::strategy::{self, fixed_mask};
use super::summary::DrawAcc;
use super::{
    check_args, combine, curve_percentiles, plan, LatencyModel, RequestTrace, SimError, Strategy,
    StrategyResult, TraceColumns,
};

/// Requests per part must be a multiple of this (but for the last part).
pub const PART_MULTIPLE: usize = engine::BLOCK;

/// One part of a trace: the request columns of [`TraceColumns`] (route codes must mean the
/// same route in every part).
#[derive(Debug, Clone, Default)]
pub struct Part {
    pub time: Vec<f64>,
    pub instance: Vec<u32>,
    pub route: Vec<u32>,
    pub base_ms: Vec<f64>,
    pub touch_offsets: Vec<u64>,
    pub touch_items: Vec<u32>,
}

struct Task {
    state: Option<RunState>,
    acc: DrawAcc,
    /// CPU seconds this task's thread spent running it.
    cpu_s: f64,
}

/// The calling thread's CPU time in seconds (Linux: `/proc/thread-self/schedstat`; 0
/// elsewhere).
fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

/// A simulation fed part by part (see the module docs).
pub struct Stream {
    catalog: TraceColumns,
    model: LatencyModel,
    strategies: Vec<Strategy>,
    draws: u32,
    seed: u64,
    threads: usize,
    requests: usize,
    n_train: usize,
    /// Requests run, and requests of the training window counted, so far.
    fed: usize,
    trained: usize,
    last_time: f64,
    /// By item: (the last training request that touched it, how many did).
    seen_count: Vec<(u32, u32)>,
    fixed: Option<Vec<Option<Vec<bool>>>>,
    tasks: Vec<Mutex<Task>>,
    /// Route codes in order of first appearance; `slots[code]` is the index.
    route_codes: Vec<u32>,
    slots: HashMap<u32, usize>,
    /// Instance codes by dense index (first appearance in the whole trace), and back.
    instance_codes: Vec<u32>,
    instances: HashMap<u32, u32>,
    /// With `keep_costs`: the last part, and the cost of each of its evaluated requests
    /// under each strategy's first draw, by request.
    keep_costs: bool,
    part: Option<RequestTrace>,
    costs: Vec<Mutex<Vec<RequestCost>>>,
}

impl Stream {
    /// A stream over a trace of `requests` requests with this catalog (`item_sizes`,
    /// `child_offsets`, `child_items` of `catalog`; its request columns are ignored). `limit`:
    /// fractional increases kept exactly per strategy and draw (see the `summary` module).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        catalog: TraceColumns,
        model: LatencyModel,
        strategies: &[Strategy],
        requests: usize,
        train: f64,
        draws: u32,
        seed: u64,
        threads: usize,
        limit: usize,
    ) -> Result<Stream, SimError> {
        if strategies.is_empty() {
            return Err(SimError::Usage("no strategies to simulate".into()));
        }
        if draws == 0 {
            return Err(SimError::Usage("draws must be at least 1".into()));
        }
        if requests >= u32::MAX as usize {
            return Err(SimError::Input(format!(
                "{requests} requests is more than the 2^32 - 2 supported"
            )));
        }
        let catalog = TraceColumns {
            item_sizes: catalog.item_sizes,
            child_offsets: catalog.child_offsets,
            child_items: catalog.child_items,
            ..TraceColumns::default()
        };
        let n_train = check_args(requests, &model, strategies, train)?;
        if n_train == requests {
            return Err(SimError::Usage(format!(
                "the evaluation window is empty (train = {train} of {requests} requests)"
            )));
        }
        let n_items = catalog.item_sizes.len();
        let tasks = strategies.len() * draws as usize;
        let per_task = (limit / tasks).max(1);
        Ok(Stream {
            catalog,
            model,
            strategies: strategies.to_vec(),
            draws,
            seed,
            threads,
            requests,
            n_train,
            fed: 0,
            trained: 0,
            last_time: f64::NEG_INFINITY,
            seen_count: vec![(u32::MAX, 0); n_items],
            fixed: None,
            tasks: (0..tasks)
                .map(|_| {
                    Mutex::new(Task {
                        state: None,
                        acc: DrawAcc::new(per_task),
                        cpu_s: 0.0,
                    })
                })
                .collect(),
            route_codes: Vec::new(),
            slots: HashMap::new(),
            instance_codes: Vec::new(),
            instances: HashMap::new(),
            keep_costs: false,
            part: None,
            costs: strategies.iter().map(|_| Mutex::new(Vec::new())).collect(),
        })
    }

    /// Keep the last part's costs under each strategy's first draw (see [`Stream::costs`]).
    pub fn keep_costs(mut self) -> Stream {
        self.keep_costs = true;
        self
    }

    /// With [`Stream::keep_costs`]: the last part fed, and the costs of its evaluated requests
    /// under strategy `s`'s first draw, by request (index in the part), as
    /// [`super::request_costs`] gives them.
    pub fn costs(&self, s: usize) -> Option<(&RequestTrace, Vec<RequestCost>)> {
        let part = self.part.as_ref()?;
        let costs = self
            .costs
            .get(s)?
            .lock()
            .expect("no worker panicked")
            .clone();
        Some((part, costs))
    }

    /// Requests in the training window.
    pub fn n_train(&self) -> usize {
        self.n_train
    }

    /// True when a strategy needs the training window fed to [`Stream::train`] first.
    pub fn needs_training(&self) -> bool {
        self.strategies.iter().any(|s| s.fixed.is_some())
    }

    /// CPU seconds spent simulating each strategy so far (all its draws; Linux only, else 0).
    pub fn cpu_s(&self) -> Vec<f64> {
        let draws = self.draws as usize;
        self.tasks
            .chunks(draws)
            .map(|c| {
                c.iter()
                    .map(|t| t.lock().expect("no worker panicked").cpu_s)
                    .sum()
            })
            .collect()
    }

    /// True once any percentile accumulator went past its exact limit into a histogram.
    pub fn histograms(&self) -> bool {
        self.tasks.iter().any(|t| {
            t.lock()
                .expect("no worker panicked")
                .acc
                .fracs
                .is_histogram()
        })
    }

    fn trace_of(&mut self, part: Part, at: usize) -> Result<RequestTrace, SimError> {
        let n = part.time.len();
        if at + n > self.requests {
            return Err(SimError::Input(format!(
                "the trace has more requests than the {} it was said to have",
                self.requests
            )));
        }
        let mut last = if at == 0 {
            f64::NEG_INFINITY
        } else {
            self.last_time
        };
        if let Some(i) = part.time.iter().position(|&t| {
            let back = t < last;
            last = t;
            back
        }) {
            return Err(SimError::Input(format!(
                "request {} (0-based, in file order) is earlier than the one before it: the trace \
                 is not in time order",
                at + i
            )));
        }
        // Instances numbered by first appearance in the whole trace, as the whole-trace
        // simulation numbers them: each block's requests are summed instance by instance.
        RequestTrace::part(
            TraceColumns {
                time: part.time,
                instance: part.instance,
                route: part.route,
                base_ms: part.base_ms,
                touch_offsets: part.touch_offsets,
                touch_items: part.touch_items,
                ..self.catalog.clone()
            },
            &mut self.instances,
            &mut self.instance_codes,
        )
        .map_err(SimError::Input)
    }

    /// Counts the training requests of the next part of the first pass (parts in file order,
    /// from the first); returns true while more of the training window is wanted.
    pub fn train(&mut self, part: Part) -> Result<bool, SimError> {
        let at = self.trained;
        let t = self.trace_of(part, at)?;
        self.last_time = t.time.last().copied().unwrap_or(self.last_time);
        for r in 0..t.len().min(self.n_train.saturating_sub(at)) {
            let g = (at + r) as u32;
            for &i in t.touches(r) {
                let e = &mut self.seen_count[i as usize];
                if e.0 != g {
                    *e = (g, e.1 + 1);
                }
            }
        }
        self.trained += t.len();
        Ok(self.trained < self.n_train)
    }

    /// Simulates the next part (parts in file order, from the first) under every strategy and
    /// draw, on up to `threads` threads.
    pub fn feed(&mut self, part: Part) -> Result<(), SimError> {
        let at = self.fed;
        let n = part.time.len();
        if at + n < self.requests && !n.is_multiple_of(PART_MULTIPLE) {
            return Err(SimError::Usage(format!(
                "a part but the last must hold a multiple of {PART_MULTIPLE} requests, not {n}"
            )));
        }
        if self.fixed.is_none() && self.needs_training() && self.trained < self.n_train {
            return Err(SimError::Usage(
                "fixed: strategies need the training window fed to train() first".into(),
            ));
        }
        let trace = self.trace_of(part, at)?;
        let n_train = self.n_train.saturating_sub(at).min(trace.len());
        let mut plan = plan(&trace, &self.model, &self.strategies, n_train);
        plan.first = at;
        if self.fixed.is_none() {
            let ranking = strategy::ranking(&self.seen_count);
            self.seen_count = Vec::new();
            self.fixed = Some(
                self.strategies
                    .iter()
                    .map(|s| s.fixed.map(|c| fixed_mask(&trace, &ranking, c)))
                    .collect(),
            );
        }
        let slots: Vec<usize> = trace
            .route_codes
            .iter()
            .map(|&code| {
                *self.slots.entry(code).or_insert_with(|| {
                    self.route_codes.push(code);
                    self.route_codes.len() - 1
                })
            })
            .collect();
        self.run_tasks(&plan, &slots);
        drop(plan);
        self.fed += trace.len();
        self.last_time = trace.time.last().copied().unwrap_or(self.last_time);
        if self.keep_costs {
            for c in &self.costs {
                c.lock()
                    .expect("no worker panicked")
                    .sort_unstable_by_key(|c| c.request);
            }
            self.part = Some(trace);
        }
        Ok(())
    }

    fn run_tasks(&self, plan: &Plan<'_>, slots: &[usize]) {
        let fixed = self.fixed.as_deref().unwrap_or(&[]);
        let draws = self.draws as usize;
        let threads = if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.threads
        }
        .clamp(1, self.tasks.len());
        let next = AtomicUsize::new(0);
        let work = || loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= self.tasks.len() {
                break;
            }
            let (s, d) = (k / draws, (k % draws) as u32);
            let strategy = &self.strategies[s];
            let started = thread_cpu_s();
            let mut task = self.tasks[k].lock().expect("no worker panicked");
            let Task { state, acc, cpu_s } = &mut *task;
            let state = state.get_or_insert_with(|| {
                RunState::new(plan, strategy, fixed.get(s).and_then(|f| f.as_deref()))
            });
            let seed = draw_seed(self.seed, d);
            let mut costs = (self.keep_costs && d == 0)
                .then(|| self.costs[s].lock().expect("no worker panicked"));
            if let Some(c) = costs.as_mut() {
                c.clear();
            }
            let keep = |c: &RequestCost| {
                if let Some(v) = costs.as_mut() {
                    v.push(*c);
                }
            };
            super::add_part(plan, strategy, seed, false, state, acc, |r| slots[r], keep);
            *cpu_s += thread_cpu_s() - started;
        };
        std::thread::scope(|scope| {
            for _ in 1..threads {
                scope.spawn(work);
            }
            work();
        });
    }

    /// The results, once every request was fed: one per strategy, as [`super::simulate`]'s.
    pub fn finish(self) -> Result<Vec<StrategyResult>, SimError> {
        if self.fed != self.requests {
            return Err(SimError::Input(format!(
                "the trace ended after {} of the {} requests it was said to have",
                self.fed, self.requests
            )));
        }
        let grid = curve_percentiles();
        let mut tasks = self.tasks.into_iter().map(|t| {
            let Task { state, mut acc, .. } = t.into_inner().expect("no worker panicked");
            acc.counts = state.map(|s| s.counts).unwrap_or_default();
            acc.finish(&grid, self.route_codes.len())
        });
        Ok(self
            .strategies
            .iter()
            .map(|s| {
                let draws = tasks.by_ref().take(self.draws as usize).collect();
                combine(*s, &self.route_codes, &grid, draws)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::simulate;
    use super::*;

    /// A seeded trace of `n` requests over 300 items of mixed sizes (items 0..30 topics with
    /// ten children each), 7 instances, 3 routes, in time order with ties.
    fn columns(n: usize) -> TraceColumns {
        let mut x = 12345u64;
        let mut next = |m: u64| {
            x = engine::splitmix64(x);
            x % m
        };
        let items = 300u32;
        let mut child_offsets = vec![0u32];
        let mut child_items = Vec::new();
        for i in 0..items {
            if i < 30 {
                child_items.extend((0..10).map(|k| 30 + (i * 10 + k) % (items - 30)));
            }
            child_offsets.push(child_items.len() as u32);
        }
        let (mut touch_offsets, mut touch_items) = (vec![0u64], Vec::new());
        for _ in 0..n {
            for _ in 0..1 + next(12) {
                // Skewed: low items are popular.
                touch_items.push((next(u64::from(items)) * next(100) / 100) as u32);
            }
            touch_offsets.push(touch_items.len() as u64);
        }
        TraceColumns {
            item_sizes: (0..items).map(|i| 100 + u64::from(i % 17) * 300).collect(),
            child_offsets,
            child_items,
            time: (0..n).map(|r| (r / 3) as f64).collect(),
            instance: (0..n).map(|_| 100 + next(7) as u32).collect(),
            route: (0..n).map(|_| 5 + next(3) as u32).collect(),
            base_ms: (0..n).map(|_| 5.0 + next(50) as f64).collect(),
            touch_offsets,
            touch_items,
        }
    }

    fn model() -> LatencyModel {
        LatencyModel::new(
            vec![
                (100, vec![200.0, 400.0, 900.0]),
                (5000, vec![300.0, 700.0, 2000.0]),
            ],
            vec![
                (1, vec![250.0, 500.0, 1000.0]),
                (20, vec![600.0, 1200.0, 3000.0]),
            ],
        )
        .unwrap()
    }

    fn parts(c: &TraceColumns, size: usize) -> Vec<Part> {
        (0..c.time.len())
            .step_by(size)
            .map(|a| {
                let b = (a + size).min(c.time.len());
                let (lo, hi) = (c.touch_offsets[a], c.touch_offsets[b]);
                Part {
                    time: c.time[a..b].to_vec(),
                    instance: c.instance[a..b].to_vec(),
                    route: c.route[a..b].to_vec(),
                    base_ms: c.base_ms[a..b].to_vec(),
                    touch_offsets: c.touch_offsets[a..=b].iter().map(|o| o - lo).collect(),
                    touch_items: c.touch_items[lo as usize..hi as usize].to_vec(),
                }
            })
            .collect()
    }

    fn streamed(c: &TraceColumns, strategies: &[Strategy], size: usize, limit: usize) -> Stream {
        let mut s = Stream::new(
            c.clone(),
            model(),
            strategies,
            c.time.len(),
            0.4,
            3,
            9,
            2,
            limit,
        )
        .unwrap();
        if s.needs_training() {
            for p in parts(c, size) {
                if !s.train(p).unwrap() {
                    break;
                }
            }
        }
        for p in parts(c, size) {
            s.feed(p).unwrap();
        }
        s
    }

    fn strategies() -> Vec<Strategy> {
        [
            "none",
            "lru:40",
            "lru:20KB",
            "fixed:25",
            "fixed:25+prefetch-children",
            "lru:30+prefetch:depth=2",
            "fixed:10+lru:20+prefetch-children",
        ]
        .iter()
        .map(|s| Strategy::parse(s).unwrap())
        .collect()
    }

    #[test]
    fn parts_give_the_whole_traces_results_bit_for_bit() {
        let c = columns(3 * PART_MULTIPLE + 1000);
        let whole = RequestTrace::new(c.clone()).unwrap();
        let want = simulate(&whole, &model(), &strategies(), 0.4, 3, 9, 2).unwrap();
        for size in [PART_MULTIPLE, 2 * PART_MULTIPLE] {
            let s = streamed(&c, &strategies(), size, usize::MAX);
            assert!(!s.histograms());
            assert_eq!(s.finish().unwrap(), want, "parts of {size}");
        }
    }

    #[test]
    fn past_the_exact_limit_percentiles_come_from_the_histogram() {
        let c = columns(2 * PART_MULTIPLE);
        let whole = RequestTrace::new(c.clone()).unwrap();
        let some = &strategies()[..2];
        let want = simulate(&whole, &model(), some, 0.4, 3, 9, 2).unwrap();
        let s = streamed(&c, some, PART_MULTIPLE, 600);
        assert!(s.histograms());
        let got = s.finish().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                (g.counts, &g.slowed, g.mean_added_ms),
                (w.counts, &w.slowed, w.mean_added_ms)
            );
            for ((_, a), (_, b)) in g.percentiles.iter().zip(&w.percentiles) {
                assert!(
                    (a.median - b.median).abs() <= b.median * 2f64.powi(-11),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn refuses_disorder_odd_parts_and_a_short_trace() {
        let mut c = columns(PART_MULTIPLE + 10);
        let one = [Strategy::parse("lru:10").unwrap()];
        let new = |c: &TraceColumns| {
            Stream::new(c.clone(), model(), &one, c.time.len(), 0.5, 1, 0, 1, 1000).unwrap()
        };
        let e = new(&c).feed(parts(&c, 100).remove(0)).unwrap_err();
        assert!(e.to_string().contains("multiple of 4096"), "{e}");
        c.time[PART_MULTIPLE + 3] = 0.5;
        let mut s = new(&c);
        let mut p = parts(&c, PART_MULTIPLE).into_iter();
        s.feed(p.next().unwrap()).unwrap();
        let e = s.feed(p.next().unwrap()).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("request {}", PART_MULTIPLE + 3)),
            "{e}"
        );
        let mut s = new(&c);
        s.feed(parts(&c, PART_MULTIPLE).remove(0)).unwrap();
        assert!(s
            .finish()
            .unwrap_err()
            .to_string()
            .contains("ended after 4096 of"));
        let fixed = [Strategy::parse("fixed:3").unwrap()];
        let mut s = Stream::new(c.clone(), model(), &fixed, c.time.len(), 0.5, 1, 0, 1, 9).unwrap();
        let e = s.feed(parts(&c, PART_MULTIPLE).remove(0)).unwrap_err();
        assert!(e.to_string().contains("train() first"), "{e}");
    }
}
