//! `profile_run`: the profile engine, driven from Python.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use cachelab_client::Options;
use cachelab_profile::{limits, Spec, LIMITS};

use crate::convert::to_py;
use crate::errors::{client_error, parse_address, raise, start_error};
use crate::tls::tls_from;

/// Progress of a running profile: `done` of `total` samples; `cancel()` stops it early.
///
/// Shared with the run, so another Python thread can poll it while the run holds no GIL.
#[pyclass(module = "cachelab._core", frozen)]
pub(crate) struct Progress(Arc<cachelab_profile::Progress>);

#[pymethods]
impl Progress {
    #[new]
    fn new() -> Progress {
        Progress(cachelab_profile::Progress::new())
    }

    #[getter]
    fn done(&self) -> u64 {
        self.0.done.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[getter]
    fn total(&self) -> u64 {
        self.0.total.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Asks the run to stop after the samples in flight; partial results are returned.
    fn cancel(&self) {
        self.0.cancel();
    }

    #[getter]
    fn cancelled(&self) -> bool {
        self.0.cancelled()
    }
}

/// The engine's spec from the dict `ProfileSpec.to_core` makes.
fn spec_from(spec: &Bound<'_, PyDict>) -> PyResult<Spec> {
    crate::spec::spec_from("profile", spec, LIMITS)
}

/// Checks a profile spec dict against the engine's ranges without running it (UsageError
/// naming the first bad field): `ProfileSpec.check`, before anything looks at the server.
#[pyfunction]
fn profile_check(py: Python<'_>, spec: &Bound<'_, PyDict>) -> PyResult<()> {
    spec_from(spec)?.validate().map_err(|e| start_error(py, e))
}

/// Runs a latency profile with the GIL released. `spec` is a dict (see cachelab.profile);
/// returns a dict of cells with encoded histograms, error counts and server facts: the
/// outcome's record (set out in cachelab_profile's `outcome` module).
#[pyfunction]
fn profile_run<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyDict>,
    progress: &Progress,
) -> PyResult<Bound<'py, PyAny>> {
    let spec = spec_from(spec)?;
    let shared = Arc::clone(&progress.0);
    let outcome = py
        .detach(|| cachelab_profile::run(&spec, &shared))
        .map_err(|e| start_error(py, e))?;
    to_py(py, &outcome)
}

/// The cost of a new connection, `n` times over: connect (and the TLS handshake, with `tls`)
/// to the first reply of the floor's command. Returns the histogram (ns), V2-encoded, base64.
/// The GIL is released while connecting.
#[pyfunction]
#[pyo3(signature = (address, n, *, tls = None, connect_timeout = 2.0, timeout = 1.0))]
fn connection_cost(
    py: Python<'_>,
    address: &str,
    n: u64,
    tls: Option<&Bound<'_, PyAny>>,
    connect_timeout: f64,
    timeout: f64,
) -> PyResult<String> {
    let address = parse_address(py, address)?;
    limits::CONNECT_TIMEOUT
        .check(connect_timeout)
        .and_then(|()| limits::TIMEOUT.check(timeout))
        .map_err(|m| raise(py, "UsageError", m))?;
    if !(1..=1_000_000).contains(&n) {
        return Err(raise(
            py,
            "UsageError",
            "connections to time must be between 1 and 1000000".into(),
        ));
    }
    let options = Options {
        connect_timeout: Duration::from_secs_f64(connect_timeout),
        request_timeout: Duration::from_secs_f64(timeout),
        tls: tls_from(py, tls)?,
    };
    let hist = py
        .detach(|| cachelab_profile::connection_cost(&address, &options, n))
        .map_err(|e| client_error(py, e))?;
    Ok(cachelab_metrics::encode(&hist))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Progress>()?;
    // Each numeric field's range: {field: {"lo", "hi", "above", "unit"}}.
    m.add("PROFILE_LIMITS", crate::spec::limits(m.py(), LIMITS)?)?;
    m.add_function(wrap_pyfunction!(profile_check, m)?)?;
    m.add_function(wrap_pyfunction!(profile_run, m)?)?;
    m.add_function(wrap_pyfunction!(connection_cost, m)?)?;
    Ok(())
}
