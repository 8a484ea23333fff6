//! `load_run`: the load generator, driven from Python (see the `cachelab.load` package).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use cachelab_load::{Spec, DEFAULTS, LIMITS};

use crate::convert::to_py;
use crate::errors::start_error;

/// Progress of a running load: `done` of `total` (ms of a timed run, or requests of a counted
/// one), the latest interval's rate and p99, errors so far; `cancel()` stops it early.
#[pyclass(module = "cachelab._core", frozen)]
pub struct LoadProgress(Arc<cachelab_load::Progress>);

#[pymethods]
impl LoadProgress {
    #[new]
    /// `keep_histograms`: keep each finished interval's histogram for
    /// [`interval_histograms`](LoadProgress::interval_histograms) (`load --precision`).
    #[pyo3(signature = (keep_histograms = false))]
    fn new(keep_histograms: bool) -> LoadProgress {
        let p = cachelab_load::Progress::new();
        p.keep_histograms.store(keep_histograms, Ordering::Relaxed);
        LoadProgress(p)
    }

    #[getter]
    fn done(&self) -> u64 {
        self.0.done.load(Ordering::Relaxed)
    }

    #[getter]
    fn total(&self) -> u64 {
        self.0.total.load(Ordering::Relaxed)
    }

    #[getter]
    fn last_rate(&self) -> u64 {
        self.0.last_rate.load(Ordering::Relaxed)
    }

    #[getter]
    fn last_p99_ns(&self) -> u64 {
        self.0.last_p99_ns.load(Ordering::Relaxed)
    }

    #[getter]
    fn errors(&self) -> u64 {
        self.0.errors.load(Ordering::Relaxed)
    }

    /// The finished intervals from the `since`-th on (in the order they finished), each as
    /// `(index, histogram)`: the encoded histogram its p99 is read from.
    fn interval_histograms(&self, since: usize) -> Vec<(u64, String)> {
        self.0
            .histograms
            .lock()
            .map(|all| all.iter().skip(since).cloned().collect())
            .unwrap_or_default()
    }

    /// Stops sending; replies in flight are awaited (up to the timeout); results are kept.
    fn cancel(&self) {
        self.0.cancel();
    }

    #[getter]
    fn cancelled(&self) -> bool {
        self.0.cancelled()
    }
}

/// The engine's spec from the dict `LoadSpec.to_core` makes.
fn spec_from(d: &Bound<'_, PyDict>) -> PyResult<Spec> {
    crate::spec::spec_from("load", d, LIMITS)
}

/// Runs a load with the GIL released. `spec` is a dict (see cachelab.load); returns a dict of
/// intervals, totals, the steady-state window, server stats and clean-up counts: the
/// outcome's record (its names and figures are set out in cachelab_load's `record` module).
#[pyfunction]
fn load_run<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyDict>,
    progress: &LoadProgress,
) -> PyResult<Bound<'py, PyAny>> {
    let spec = spec_from(spec)?;
    let shared = Arc::clone(&progress.0);
    let outcome = py
        .detach(|| cachelab_load::run(&spec, &shared))
        .map_err(|e| start_error(py, e))?;
    to_py(py, &outcome)
}

/// Checks a load spec dict against the engine's caps without running it (UsageError naming
/// the first bad field): run before anything else looks at the server.
#[pyfunction]
fn load_check(py: Python<'_>, spec: &Bound<'_, PyDict>) -> PyResult<()> {
    spec_from(spec)?.validate().map_err(|e| start_error(py, e))
}

/// A failure drill's prediction (`simulate --drill`): for a load spec dict and the
/// workload's requests per interval, the keys asked by gets and those found in each interval,
/// from the run's own route tables (see `cachelab_load::predict`).
#[pyfunction]
fn load_predict(
    py: Python<'_>,
    spec: &Bound<'_, PyDict>,
    requests: Vec<u64>,
) -> PyResult<Vec<(u64, u64)>> {
    let spec = spec_from(spec)?;
    let p = py
        .detach(|| cachelab_load::predict(&spec, &requests))
        .map_err(|e| start_error(py, e))?;
    Ok(p.into_iter().map(|x| (x.keys, x.hits)).collect())
}

/// A master's `host:port` and the slot ranges it serves.
type Master = (String, Vec<(u16, u16)>);

/// A Redis Cluster's masters as `seed` (`host:port`, one of its nodes) tells: each
/// master's `host:port` and the slot ranges (inclusive) it serves, masters in the order of
/// their first slot. A node that is no cluster node raises `ServerError`; one that cannot be
/// reached the connection's error.
#[pyfunction]
#[pyo3(signature = (seed, *, user = None, password = None, connect_timeout = 2.0,
                    timeout = 2.0, tls = None))]
#[allow(clippy::too_many_arguments)]
fn load_cluster_masters(
    py: Python<'_>,
    seed: &str,
    user: Option<String>,
    password: Option<String>,
    connect_timeout: f64,
    timeout: f64,
    tls: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Master>> {
    use cachelab_client::resp::{Auth, ClusterOptions, RespCluster, RespOptions};
    let address = crate::errors::parse_address(py, seed)?;
    let options = crate::client::options(py, connect_timeout, timeout, tls)?;
    let auth = password.map(|p| Auth {
        user,
        ..Auth::password(p)
    });
    let cluster = ClusterOptions {
        resp: RespOptions {
            auth,
            ..RespOptions::default()
        },
        ..ClusterOptions::default()
    };
    let c = py
        .detach(|| RespCluster::connect(&[address], options, &cluster))
        .map_err(|e| crate::errors::client_error(py, e))?;
    let mut masters: Vec<Master> = c
        .slot_map()
        .nodes()
        .iter()
        .filter(|n| !n.slots.is_empty())
        .map(|n| {
            let mut slots = n.slots.clone();
            slots.sort_unstable();
            (n.address.to_string(), slots)
        })
        .collect();
    masters.sort_by_key(|(_, s)| s[0]);
    Ok(masters)
}

/// A Redis Cluster's hash slot of `key` (CRC16 of its hash tag, or of the whole key), as the
/// engine routes it.
#[pyfunction]
fn load_key_slot(key: &str) -> u16 {
    cachelab_client::resp::key_slot(key.as_bytes())
}

/// How many of the keys `<prefix>:0` to `<prefix>:<key_space - 1>` each of `members`
/// masters holds, by hash slot, the slots given as `(start, end, member)`.
#[pyfunction]
fn load_cluster_key_counts(
    slots: Vec<(u16, u16, usize)>,
    members: usize,
    prefix: &str,
    key_space: u64,
) -> PyResult<Vec<u64>> {
    let mut owner = vec![usize::MAX; cachelab_client::resp::slot::SLOTS as usize];
    for (start, end, m) in slots {
        if m >= members || start > end || end as usize >= owner.len() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "({start}, {end}, {m}) is not a slot range of one of {members} members"
            )));
        }
        owner[start as usize..=end as usize].fill(m);
    }
    let mut counts = vec![0u64; members];
    for i in 0..key_space {
        let key = format!("{prefix}:{i}");
        let o = owner[cachelab_client::resp::key_slot(key.as_bytes()) as usize];
        if o != usize::MAX {
            counts[o] += 1;
        }
    }
    Ok(counts)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LoadProgress>()?;
    // Each numeric field's range: {field: {"lo", "hi", "above", "unit"}}.
    m.add("LOAD_LIMITS", crate::spec::limits(m.py(), LIMITS)?)?;
    // The pool's member failure settings by default (LoadSpec's defaults).
    m.add("LOAD_DEFAULTS", to_py(m.py(), &DEFAULTS)?)?;
    m.add_function(wrap_pyfunction!(load_predict, m)?)?;
    m.add_function(wrap_pyfunction!(load_run, m)?)?;
    m.add_function(wrap_pyfunction!(load_check, m)?)?;
    m.add_function(wrap_pyfunction!(load_cluster_masters, m)?)?;
    m.add_function(wrap_pyfunction!(load_cluster_key_counts, m)?)?;
    m.add_function(wrap_pyfunction!(load_key_slot, m)?)?;
    Ok(())
}
