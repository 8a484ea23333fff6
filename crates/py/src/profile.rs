//! `profile_run`: the profile engine, driven from Python.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use cachelab_client::Options;
use cachelab_profile::{Protocol, Spec};

use crate::convert::to_py;
use crate::errors::{client_error, field, parse_address, raise, start_error};
use crate::tls::{tls_field, tls_from};

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

fn item<'py, T: for<'a> FromPyObject<'a, 'py>>(
    spec: &Bound<'py, PyDict>,
    name: &str,
) -> PyResult<T> {
    field(spec, "profile", name)
}

fn spec_from(spec: &Bound<'_, PyDict>) -> PyResult<Spec> {
    let py = spec.py();
    let protocol = match item::<String>(spec, "protocol")?.as_str() {
        "text" => Protocol::Text,
        "meta" => Protocol::Meta,
        other => {
            return Err(raise(
                py,
                "UsageError",
                format!("protocol {other:?} is not one of: text, meta"),
            ))
        }
    };
    let timeout: f64 = item(spec, "timeout")?;
    let connect_timeout: f64 = item(spec, "connect_timeout")?;
    let give_up: f64 = item(spec, "give_up_after")?;
    for (name, v) in [
        ("timeout", timeout),
        ("connect_timeout", connect_timeout),
        ("give_up_after", give_up),
    ] {
        if !(v.is_finite() && v > 0.0 && v <= 3600.0) {
            return Err(raise(
                py,
                "UsageError",
                format!("{name} must be between 0 and 3600 seconds"),
            ));
        }
    }
    Ok(Spec {
        address: parse_address(py, &item::<String>(spec, "address")?)?,
        sizes: item(spec, "sizes")?,
        key_counts: item(spec, "key_counts")?,
        multi_value_size: item(spec, "multi_value_size")?,
        samples: item(spec, "samples")?,
        warmup: item(spec, "warmup")?,
        concurrency: item(spec, "concurrency")?,
        protocol,
        options: Options {
            connect_timeout: Duration::from_secs_f64(connect_timeout),
            request_timeout: Duration::from_secs_f64(timeout),
            tls: tls_field(spec)?,
        },
        seed: item(spec, "seed")?,
        prefix: item(spec, "prefix")?,
        give_up_after: Duration::from_secs_f64(give_up),
        proxy: item(spec, "proxy")?,
    })
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
    for (name, v) in [("connect_timeout", connect_timeout), ("timeout", timeout)] {
        if !(v.is_finite() && v > 0.0 && v <= 3600.0) {
            return Err(raise(
                py,
                "UsageError",
                format!("{name} must be between 0 and 3600 seconds"),
            ));
        }
    }
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
    m.add_function(wrap_pyfunction!(profile_run, m)?)?;
    m.add_function(wrap_pyfunction!(connection_cost, m)?)?;
    Ok(())
}
