//! The request-level strategy simulator (`cachelab_sim::request`) for Python.
//!
//! ```text
//! RequestTrace(*, item_sizes, child_offsets, child_items, time, instance, route, base_ms,
//!              touch_offsets, touch_items)
//!     len(trace), .n_items, .n_touches, .n_instances
//!     .descendants(items, depth) -> list[list[int]]     (what a prefetch at each walks)
//! LatencyModel(get: list[tuple[int, list[float]]], multiget: list[tuple[int, list[float]]],
//!              sequence=None, segments=None)
//!     .draw_get(size, u) -> float, .draw_multiget(count, u) -> float      (µs)
//!     .sequence_length -> int (0 without a rank sequence)
//!     .adjusted -> (int, int), .points -> (int, int)   (the monotone fit: docs of `latency`)
//! simulate_requests(trace, model, strategies, train=0.5, draws=5, seed=0, threads=0) -> list[dict]
//! request_costs(trace, model, strategy, train=0.5, seed=0, draw=0) -> dict[str, list]
//! fixed_set(trace, strategy, train=0.5) -> list[int] | None
//! RequestStream(*, item_sizes, child_offsets, child_items, model, strategies, requests,
//!               train=0.5, draws=5, seed=0, threads=0, exact_limit=4194304, costs=False)
//!     .n_train, .needs_training, .histograms, .cpu_s (per strategy)
//!     .train(*, time, instance, route, base_ms, touch_offsets, touch_items) -> bool (more?)
//!     .feed(*, time, instance, route, base_ms, touch_offsets, touch_items)
//!     .part_costs(k) -> dict[str, list]   (request_costs' columns for the last part)
//!     .finish() -> list[dict]             (simulate_requests' results)
//! parse_strategy(spec) -> str
//! Strategy(spec)
//!     .fixed_items, .fixed_bytes, .lru_items, .lru_bytes -> int | None
//!     .prefetch_depth -> int, .l1 -> "none" | "lru" | "fixed" | "fixed+lru", str() canonical
//! ```
//!
//! **Columns.** Each column of `RequestTrace` is either a sequence of numbers (a list, or a
//! numpy array's `.tolist()`) or `bytes` holding the little-endian array
//! (`np.asarray(a, dtype="<u4").tobytes()`): `item_sizes` u64 (bytes), `child_offsets` u32
//! (items + 1 entries; `[]` with `child_items=[]` means no children), `child_items` u32,
//! `time` f64 (seconds), `instance` u32, `route` u32 (codes; names stay in Python), `base_ms`
//! f64 (> 0), `touch_offsets` u64 (requests + 1 entries), `touch_items` u32. Bytes are the fast
//! path for big traces: no Python object per value. Inconsistent columns raise InputError.
//!
//! **Errors.** A bad strategy spec, train fraction, draw count or `u` raises UsageError; a
//! bad latency table or trace column raises InputError.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use cachelab_sim::record::CostColumns;
use cachelab_sim::request::{
    self, draw_seed_of, Capacity, LatencyModel, Part, RankSequence, RequestTrace, SimError,
    Strategy, Stream, TraceColumns,
};

use crate::convert::to_py;
use crate::errors::raise;

/// One column: `bytes` of little-endian `N`-byte values, or any sequence of numbers.
fn column<'py, T, const N: usize>(
    obj: &Bound<'py, PyAny>,
    name: &str,
    from_le: impl Fn([u8; N]) -> T,
) -> PyResult<Vec<T>>
where
    T: for<'a> FromPyObject<'a, 'py>,
{
    let py = obj.py();
    if let Ok(b) = obj.cast::<PyBytes>() {
        let bytes = b.as_bytes();
        if bytes.len() % N != 0 {
            return Err(raise(
                py,
                "InputError",
                format!(
                    "column {name}: {} bytes is not a whole number of {N}-byte values",
                    bytes.len()
                ),
            ));
        }
        return Ok(bytes
            .chunks_exact(N)
            .map(|c| from_le(c.try_into().expect("chunks of N bytes")))
            .collect());
    }
    obj.extract::<Vec<T>>().map_err(|e| {
        raise(
            py,
            "InputError",
            format!("column {name}: expected a sequence of numbers or little-endian bytes ({e})"),
        )
    })
}

/// A request trace held in Rust: catalog (sizes, children) and requests as integer columns.
#[pyclass(module = "cachelab._core", name = "RequestTrace", frozen)]
pub struct PyRequestTrace {
    inner: Arc<RequestTrace>,
}

#[pymethods]
impl PyRequestTrace {
    /// Builds a trace from columns (lists or little-endian bytes; see the module docs).
    #[new]
    #[pyo3(signature = (*, item_sizes, child_offsets, child_items, time, instance, route, base_ms, touch_offsets, touch_items))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        item_sizes: &Bound<'_, PyAny>,
        child_offsets: &Bound<'_, PyAny>,
        child_items: &Bound<'_, PyAny>,
        time: &Bound<'_, PyAny>,
        instance: &Bound<'_, PyAny>,
        route: &Bound<'_, PyAny>,
        base_ms: &Bound<'_, PyAny>,
        touch_offsets: &Bound<'_, PyAny>,
        touch_items: &Bound<'_, PyAny>,
    ) -> PyResult<PyRequestTrace> {
        let columns = TraceColumns {
            item_sizes: column(item_sizes, "item_sizes", u64::from_le_bytes)?,
            child_offsets: column(child_offsets, "child_offsets", u32::from_le_bytes)?,
            child_items: column(child_items, "child_items", u32::from_le_bytes)?,
            time: column(time, "time", f64::from_le_bytes)?,
            instance: column(instance, "instance", u32::from_le_bytes)?,
            route: column(route, "route", u32::from_le_bytes)?,
            base_ms: column(base_ms, "base_ms", f64::from_le_bytes)?,
            touch_offsets: column(touch_offsets, "touch_offsets", u64::from_le_bytes)?,
            touch_items: column(touch_items, "touch_items", u32::from_le_bytes)?,
        };
        let trace = py
            .detach(move || RequestTrace::new(columns))
            .map_err(|m| raise(py, "InputError", format!("request trace: {m}")))?;
        Ok(PyRequestTrace {
            inner: Arc::new(trace),
        })
    }

    /// Number of requests.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Number of catalog items.
    #[getter]
    fn n_items(&self) -> usize {
        self.inner.n_items()
    }

    /// Number of item touches over all requests.
    #[getter]
    fn n_touches(&self) -> usize {
        self.inner.n_touches()
    }

    /// Number of distinct app instances.
    #[getter]
    fn n_instances(&self) -> usize {
        self.inner.n_instances()
    }

    /// For each of `items`, the items a prefetch at it to `depth` walks besides the item
    /// itself, in the simulator's order: level by level, children in catalog order, each
    /// once (a prefetch walks `1 + len(...)` items). UsageError for an item not in the
    /// catalog.
    fn descendants(&self, py: Python<'_>, items: Vec<u32>, depth: u32) -> PyResult<Vec<Vec<u32>>> {
        let n = self.inner.n_items();
        if let Some(bad) = items.iter().find(|&&i| i as usize >= n) {
            return Err(raise(
                py,
                "UsageError",
                format!("item {bad} is not in the catalog of {n} items"),
            ));
        }
        let t = self.inner.clone();
        Ok(py.detach(move || request::descendants(&t, &items, depth)))
    }

    fn __repr__(&self) -> String {
        format!(
            "RequestTrace({} requests, {} items, {} touches, {} instances)",
            self.inner.len(),
            self.inner.n_items(),
            self.inner.n_touches(),
            self.inner.n_instances()
        )
    }
}

/// Get latency by value size and multi-get latency by key count: per measured size (count),
/// the latency in µs at probabilities i / (n - 1), i = 0..n-1.
#[pyclass(module = "cachelab._core", name = "LatencyModel", frozen)]
pub struct PyLatencyModel {
    inner: Arc<LatencyModel>,
}

fn check_u(py: Python<'_>, u: f64) -> PyResult<()> {
    if (0.0..=1.0).contains(&u) {
        Ok(())
    } else {
        Err(raise(
            py,
            "UsageError",
            format!("u must be in [0, 1], got {u}"),
        ))
    }
}

#[pymethods]
impl PyLatencyModel {
    /// `sequence`: ranks (quantiles in [0, 1) within their own cell) of the profile's samples
    /// in the order they were taken, cut into `segments` (lengths; default: one segment) —
    /// a request's draws then read consecutive ranks instead of independent uniforms.
    #[new]
    #[pyo3(signature = (get, multiget, sequence=None, segments=None))]
    fn new(
        py: Python<'_>,
        get: Vec<(u64, Vec<f64>)>,
        multiget: Vec<(u32, Vec<f64>)>,
        sequence: Option<Vec<f64>>,
        segments: Option<Vec<usize>>,
    ) -> PyResult<PyLatencyModel> {
        let bad = |m: String| raise(py, "InputError", format!("latency model: {m}"));
        let mut m = LatencyModel::new(get, multiget).map_err(bad)?;
        match (sequence, segments) {
            (Some(ranks), segments) => {
                let segments = segments.unwrap_or_else(|| vec![ranks.len()]);
                m = m.with_sequence(RankSequence::new(ranks, &segments).map_err(bad)?);
            }
            (None, Some(_)) => {
                return Err(raise(
                    py,
                    "UsageError",
                    "segments were given without a sequence".into(),
                ))
            }
            (None, None) => {}
        }
        Ok(PyLatencyModel { inner: Arc::new(m) })
    }

    /// How many ranks the model's rank sequence has (0: draws are independent).
    #[getter]
    fn sequence_length(&self) -> usize {
        self.inner.sequence().map_or(0, |s| s.ranks().len())
    }

    /// Latency (µs) of one get of a `size`-byte value at uniform `u`.
    fn draw_get(&self, py: Python<'_>, size: u64, u: f64) -> PyResult<f64> {
        check_u(py, u)?;
        Ok(self.inner.draw_get(size, u))
    }

    /// Latency (µs) of one multi-get of `count` keys at uniform `u`.
    fn draw_multiget(&self, py: Python<'_>, count: u64, u: f64) -> PyResult<f64> {
        check_u(py, u)?;
        self.inner.draw_multiget(count, u).ok_or_else(|| {
            raise(
                py,
                "UsageError",
                "the latency model has no multi-get table".into(),
            )
        })
    }

    /// The measured value sizes of the get table, ascending.
    #[getter(get_sizes)]
    fn get_sizes(&self) -> Vec<u64> {
        self.inner.get().keys().to_vec()
    }

    /// The measured key counts of the multi-get table, ascending.
    #[getter]
    fn multiget_counts(&self) -> Vec<u64> {
        self.inner.multiget().keys().to_vec()
    }

    /// How many table values the monotone fit moved, `(get, multi-get)`: 0 when the measured
    /// cells were in order (by size, by key count) at every probability.
    #[getter]
    fn adjusted(&self) -> (usize, usize) {
        (
            self.inner.get().adjusted(),
            self.inner.multiget().adjusted(),
        )
    }

    /// Points per row of the get and multi-get tables' grids.
    #[getter]
    fn points(&self) -> (usize, usize) {
        (self.inner.get().points(), self.inner.multiget().points())
    }
}

fn sim_error(py: Python<'_>, e: SimError) -> PyErr {
    match e {
        SimError::Usage(m) => raise(py, "UsageError", m),
        SimError::Input(m) => raise(py, "InputError", m),
    }
}

fn parse(py: Python<'_>, spec: &str) -> PyResult<Strategy> {
    Strategy::parse(spec).map_err(|m| raise(py, "UsageError", m))
}

/// Simulates each strategy `draws` times; one JSON-ready dict per strategy, in order (the
/// record of `cachelab_sim::request::StrategyResult`; its names are set out in
/// cachelab_sim's `record` module).
///
/// Keys: strategy (canonical spec), draws, band ("min-max" or "p2.5-p97.5"), percentiles
/// (list of {percentile, median, low, high} of the fractional increase), curve ({percentile,
/// median, low, high} lists on a 200-point grid from p50 to p99.99), slowed (list of
/// {threshold, median, low, high}: share of requests slowed by >= threshold), mean_increase,
/// mean_added_ms ({median, low, high}), hit_ratio, prefetch_hit_ratio,
/// round_trips_per_request, bytes_per_request, counts ({requests, touches, lookups, l1_hits,
/// prefetch_hits, gets, multigets, multiget_keys, bytes} over the evaluation window), routes
/// (list of {route, requests, mean_added_ms, mean_increase, total_added_ms}, most total
/// added time first).
#[pyfunction]
#[pyo3(signature = (trace, model, strategies, train = 0.5, draws = 5, seed = 0, threads = 0))]
#[allow(clippy::too_many_arguments)]
fn simulate_requests<'py>(
    py: Python<'py>,
    trace: &PyRequestTrace,
    model: &PyLatencyModel,
    strategies: Vec<String>,
    train: f64,
    draws: u32,
    seed: u64,
    threads: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let strategies = strategies
        .iter()
        .map(|s| parse(py, s))
        .collect::<PyResult<Vec<_>>>()?;
    let (t, m) = (trace.inner.clone(), model.inner.clone());
    let results = py
        .detach(move || request::simulate(&t, &m, &strategies, train, draws, seed, threads))
        .map_err(|e| sim_error(py, e))?;
    to_py(py, &results)
}

/// Per evaluated request (by request index) under one strategy and one draw (the same draw
/// `simulate_requests(..., seed=seed)` numbers `draw`), one list per key: "request" (index),
/// "added_ms", "increase" (floats), "round_trips" (gets + multi-gets), and what the request
/// did — its share of `simulate_requests`' counts, the same in every draw: "touches",
/// "lookups", "l1_hits", "prefetch_hits", "gets", "multigets" (0 or 1), "multiget_keys",
/// "bytes"; "prefetch_walked" (items its prefetch walked: the topic and its descendants to
/// the depth; 0 without a prefetch) and "prefetch_topic_hit" (bool: the prefetch's topic was
/// found in L1, one of its l1_hits; otherwise it was a key of the multi-get). The record of
/// `cachelab_sim::record::CostColumns`, a view that computes each value as it is converted.
#[pyfunction]
#[pyo3(signature = (trace, model, strategy, train = 0.5, seed = 0, draw = 0))]
fn request_costs<'py>(
    py: Python<'py>,
    trace: &PyRequestTrace,
    model: &PyLatencyModel,
    strategy: &str,
    train: f64,
    seed: u64,
    draw: u32,
) -> PyResult<Bound<'py, PyAny>> {
    let s = parse(py, strategy)?;
    let (t, m) = (trace.inner.clone(), model.inner.clone());
    let (costs, _) = py
        .detach(move || request::request_costs(&t, &m, &s, train, draw_seed_of(seed, draw)))
        .map_err(|e| sim_error(py, e))?;
    to_py(py, &CostColumns::new(&costs, &trace.inner))
}

/// The fixed hot set `strategy` holds (the one every run of it uses), in ranking order: the
/// items most training requests touch, ties by index; for a byte capacity, the items of that
/// order that still fit. None when the strategy has no `fixed:` part.
#[pyfunction]
#[pyo3(signature = (trace, strategy, train = 0.5))]
fn fixed_set(
    py: Python<'_>,
    trace: &PyRequestTrace,
    strategy: &str,
    train: f64,
) -> PyResult<Option<Vec<u32>>> {
    let s = parse(py, strategy)?;
    let t = trace.inner.clone();
    py.detach(move || request::fixed_set(&t, &s, train))
        .map_err(|e| sim_error(py, e))
}

fn part(
    time: &Bound<'_, PyAny>,
    instance: &Bound<'_, PyAny>,
    route: &Bound<'_, PyAny>,
    base_ms: &Bound<'_, PyAny>,
    touch_offsets: &Bound<'_, PyAny>,
    touch_items: &Bound<'_, PyAny>,
) -> PyResult<Part> {
    Ok(Part {
        time: column(time, "time", f64::from_le_bytes)?,
        instance: column(instance, "instance", u32::from_le_bytes)?,
        route: column(route, "route", u32::from_le_bytes)?,
        base_ms: column(base_ms, "base_ms", f64::from_le_bytes)?,
        touch_offsets: column(touch_offsets, "touch_offsets", u64::from_le_bytes)?,
        touch_items: column(touch_items, "touch_items", u32::from_le_bytes)?,
    })
}

/// A request-level simulation of a time-ordered trace fed part by part, in memory that does
/// not grow with the number of requests (`cachelab_sim::request::Stream`): the catalog up
/// front, the training window to `train` first when `needs_training` (fixed: strategies),
/// then every part to `feed` (each but the last a multiple of 4,096 requests), then `finish`.
/// Columns as `RequestTrace`'s. A trace out of time order raises InputError naming the
/// request (0-based, in file order).
#[pyclass(module = "cachelab._core", name = "RequestStream")]
pub struct PyRequestStream {
    inner: Option<Stream>,
}

impl PyRequestStream {
    fn take(&mut self, py: Python<'_>) -> PyResult<Stream> {
        self.inner.take().ok_or_else(|| {
            raise(
                py,
                "UsageError",
                "the stream is finished (or failed)".into(),
            )
        })
    }
}

#[pymethods]
impl PyRequestStream {
    #[new]
    #[pyo3(signature = (*, item_sizes, child_offsets, child_items, model, strategies, requests, train = 0.5, draws = 5, seed = 0, threads = 0, exact_limit = 1 << 22, costs = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        item_sizes: &Bound<'_, PyAny>,
        child_offsets: &Bound<'_, PyAny>,
        child_items: &Bound<'_, PyAny>,
        model: &PyLatencyModel,
        strategies: Vec<String>,
        requests: usize,
        train: f64,
        draws: u32,
        seed: u64,
        threads: usize,
        exact_limit: usize,
        costs: bool,
    ) -> PyResult<PyRequestStream> {
        let strategies = strategies
            .iter()
            .map(|s| parse(py, s))
            .collect::<PyResult<Vec<_>>>()?;
        let catalog = TraceColumns {
            item_sizes: column(item_sizes, "item_sizes", u64::from_le_bytes)?,
            child_offsets: column(child_offsets, "child_offsets", u32::from_le_bytes)?,
            child_items: column(child_items, "child_items", u32::from_le_bytes)?,
            ..TraceColumns::default()
        };
        let model = (*model.inner).clone();
        let s = Stream::new(
            catalog,
            model,
            &strategies,
            requests,
            train,
            draws,
            seed,
            threads,
            exact_limit,
        )
        .map_err(|e| sim_error(py, e))?;
        Ok(PyRequestStream {
            inner: Some(if costs { s.keep_costs() } else { s }),
        })
    }

    /// Requests in the training window.
    #[getter]
    fn n_train(&self) -> usize {
        self.inner.as_ref().map_or(0, |s| s.n_train())
    }

    /// True when a strategy needs the training window fed to `train` first.
    #[getter]
    fn needs_training(&self) -> bool {
        self.inner.as_ref().is_some_and(|s| s.needs_training())
    }

    /// CPU seconds spent simulating each strategy so far (its draws, every part; Linux).
    #[getter]
    fn cpu_s(&self) -> Vec<f64> {
        self.inner.as_ref().map_or_else(Vec::new, |s| s.cpu_s())
    }

    /// True once the percentiles come from histograms (past the exact limit).
    #[getter]
    fn histograms(&self) -> bool {
        self.inner.as_ref().is_some_and(|s| s.histograms())
    }

    /// Counts the training window in the next part of the first pass; True while more of it
    /// is wanted.
    #[pyo3(signature = (*, time, instance, route, base_ms, touch_offsets, touch_items))]
    #[allow(clippy::too_many_arguments)]
    fn train(
        &mut self,
        py: Python<'_>,
        time: &Bound<'_, PyAny>,
        instance: &Bound<'_, PyAny>,
        route: &Bound<'_, PyAny>,
        base_ms: &Bound<'_, PyAny>,
        touch_offsets: &Bound<'_, PyAny>,
        touch_items: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let p = part(time, instance, route, base_ms, touch_offsets, touch_items)?;
        let mut s = self.take(py)?;
        let (s, out) = py.detach(move || {
            let out = s.train(p);
            (s, out)
        });
        self.inner = Some(s);
        out.map_err(|e| sim_error(py, e))
    }

    /// Simulates the next part under every strategy and draw (GIL released).
    #[pyo3(signature = (*, time, instance, route, base_ms, touch_offsets, touch_items))]
    #[allow(clippy::too_many_arguments)]
    fn feed(
        &mut self,
        py: Python<'_>,
        time: &Bound<'_, PyAny>,
        instance: &Bound<'_, PyAny>,
        route: &Bound<'_, PyAny>,
        base_ms: &Bound<'_, PyAny>,
        touch_offsets: &Bound<'_, PyAny>,
        touch_items: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let p = part(time, instance, route, base_ms, touch_offsets, touch_items)?;
        let mut s = self.take(py)?;
        let (s, out) = py.detach(move || {
            let out = s.feed(p);
            (s, out)
        });
        self.inner = Some(s);
        out.map_err(|e| sim_error(py, e))
    }

    /// With `costs=True`: `request_costs`' columns for the last part fed under strategy `k`'s
    /// first draw ("request" is the index in the part), as lists; with `names`, those columns
    /// only, each as little-endian `f64` bytes: one copy a column, not one Python object a
    /// value.
    #[pyo3(signature = (k, names=None))]
    fn part_costs<'py>(
        &self,
        py: Python<'py>,
        k: usize,
        names: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let found = self.inner.as_ref().and_then(|s| s.costs(k));
        let Some((trace, costs)) = found else {
            return Err(raise(
                py,
                "UsageError",
                "no part costs: the stream keeps them only with costs=True, once a part was fed"
                    .into(),
            ));
        };
        let Some(names) = names else {
            return to_py(py, &CostColumns::new(&costs, trace));
        };
        let columns = CostColumns::new(&costs, trace).named();
        let out = PyDict::new(py);
        for name in names {
            let Some((_, column)) = columns.iter().find(|(n, _)| *n == name) else {
                let known: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
                return Err(raise(
                    py,
                    "UsageError",
                    format!("no cost column {name:?}: one of {}", known.join(", ")),
                ));
            };
            out.set_item(name, PyBytes::new(py, &column.f64_le_bytes()))?;
        }
        Ok(out.into_any())
    }

    /// The results, one dict per strategy, as `simulate_requests` gives them.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = self.take(py)?;
        let results = py
            .detach(move || s.finish())
            .map_err(|e| sim_error(py, e))?;
        to_py(py, &results)
    }
}

/// A caching strategy as the simulator reads it: `Strategy(spec)` parses a spec (UsageError,
/// saying what is allowed, if it is bad); `str()` is its canonical form.
#[pyclass(module = "cachelab._core", name = "Strategy", frozen, eq, hash)]
#[derive(PartialEq, Eq, Hash)]
pub struct PyStrategy {
    inner: Strategy,
}

fn items(c: Option<Capacity>) -> Option<u64> {
    match c {
        Some(Capacity::Items(n)) => Some(n),
        _ => None,
    }
}

fn bytes(c: Option<Capacity>) -> Option<u64> {
    match c {
        Some(Capacity::Bytes(n)) => Some(n),
        _ => None,
    }
}

#[pymethods]
impl PyStrategy {
    #[new]
    fn new(py: Python<'_>, spec: &str) -> PyResult<PyStrategy> {
        Ok(PyStrategy {
            inner: parse(py, spec)?,
        })
    }

    /// Items of the fixed hot set (`fixed:N`), or None.
    #[getter]
    fn fixed_items(&self) -> Option<u64> {
        items(self.inner.fixed)
    }

    /// Value bytes of the fixed hot set (`fixed:SIZE`), or None.
    #[getter]
    fn fixed_bytes(&self) -> Option<u64> {
        bytes(self.inner.fixed)
    }

    /// Items of the per-instance LRU (`lru:N`), or None.
    #[getter]
    fn lru_items(&self) -> Option<u64> {
        items(self.inner.lru)
    }

    /// Value bytes of the per-instance LRU (`lru:SIZE`), or None.
    #[getter]
    fn lru_bytes(&self) -> Option<u64> {
        bytes(self.inner.lru)
    }

    /// Descendant depth of the prefetch; 0 = no prefetch.
    #[getter]
    fn prefetch_depth(&self) -> u32 {
        self.inner.prefetch_depth
    }

    /// The in-process cache: "none", "lru", "fixed" or "fixed+lru" (the fixed set checked
    /// first).
    #[getter]
    fn l1(&self) -> &'static str {
        match (self.inner.fixed.is_some(), self.inner.lru.is_some()) {
            (false, false) => "none",
            (false, true) => "lru",
            (true, false) => "fixed",
            (true, true) => "fixed+lru",
        }
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Strategy('{}')", self.inner)
    }
}

/// The canonical form of a strategy spec; UsageError (saying what is allowed) if it is bad.
#[pyfunction]
fn parse_strategy(py: Python<'_>, spec: &str) -> PyResult<String> {
    Ok(parse(py, spec)?.to_string())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRequestTrace>()?;
    m.add_class::<PyLatencyModel>()?;
    m.add_class::<PyRequestStream>()?;
    m.add_function(wrap_pyfunction!(simulate_requests, m)?)?;
    m.add_function(wrap_pyfunction!(request_costs, m)?)?;
    m.add_function(wrap_pyfunction!(parse_strategy, m)?)?;
    m.add_function(wrap_pyfunction!(fixed_set, m)?)?;
    m.add_class::<PyStrategy>()?;
    Ok(())
}
