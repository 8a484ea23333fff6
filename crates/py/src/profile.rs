//! `profile_run`: the profile engine, driven from Python.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use cachelab_client::Options;
use cachelab_profile::{Protocol, Spec, SpecError};

use crate::{client_error, parse_address, raise};

/// Progress of a running profile: `done` of `total` samples; `cancel()` stops it early.
///
/// Shared with the run, so another Python thread can poll it while the run holds no GIL.
#[pyclass(module = "cachelab._core", frozen)]
pub struct Progress(pub Arc<cachelab_profile::Progress>);

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
    let py = spec.py();
    let v = spec.get_item(name)?.ok_or_else(|| {
        raise(
            py,
            "UsageError",
            format!("profile spec is missing {name:?}"),
        )
    })?;
    v.extract::<T>().map_err(|_| {
        raise(
            py,
            "UsageError",
            format!("profile spec field {name:?} has the wrong type"),
        )
    })
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
        },
        seed: item(spec, "seed")?,
        prefix: item(spec, "prefix")?,
        give_up_after: Duration::from_secs_f64(give_up),
    })
}

/// Runs a latency profile with the GIL released. `spec` is a dict (see cachelab.profile);
/// returns a dict of cells with encoded histograms, error counts and server facts.
#[pyfunction]
pub fn profile_run<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyDict>,
    progress: &Progress,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = spec_from(spec)?;
    let shared = Arc::clone(&progress.0);
    let outcome = py
        .detach(|| cachelab_profile::run(&spec, &shared))
        .map_err(|e| match e {
            SpecError::Invalid(m) => raise(py, "UsageError", m),
            SpecError::Server(e) => client_error(py, e),
        })?;

    let out = PyDict::new(py);
    let cells = PyList::empty(py);
    for c in &outcome.cells {
        let d = PyDict::new(py);
        d.set_item("op", c.op.as_str())?;
        d.set_item("value_size", c.value_size)?;
        d.set_item("keys", c.keys)?;
        d.set_item("samples", c.hist.len())?;
        d.set_item("histogram", cachelab_metrics::encode(&c.hist))?;
        let errors = PyDict::new(py);
        for (k, n) in &c.errors {
            errors.set_item(k.as_str(), n)?;
        }
        d.set_item("errors", errors)?;
        d.set_item("mismatches", c.mismatches)?;
        d.set_item("misses", c.misses)?;
        cells.append(d)?;
    }
    out.set_item("cells", cells)?;
    let server = PyDict::new(py);
    server.set_item("version", &outcome.server.version)?;
    server.set_item(
        "settings",
        outcome
            .server
            .settings
            .iter()
            .cloned()
            .collect::<std::collections::BTreeMap<_, _>>(),
    )?;
    server.set_item(
        "stats",
        outcome
            .server
            .stats
            .iter()
            .cloned()
            .collect::<std::collections::BTreeMap<_, _>>(),
    )?;
    out.set_item("server", server)?;
    out.set_item("floor_command", outcome.floor_command)?;
    out.set_item("leftover_keys", outcome.leftover_keys)?;
    out.set_item("cleaned_up_keys", outcome.cleaned_up_keys)?;
    out.set_item("cancelled", outcome.cancelled)?;
    out.set_item("aborted", outcome.aborted.as_deref())?;
    out.set_item("elapsed_s", outcome.elapsed.as_secs_f64())?;
    Ok(out)
}
