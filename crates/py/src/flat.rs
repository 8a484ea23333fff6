//! Flat key traces, eviction policies and LRU miss-ratio curves (`cachelab_sim::flat`,
//! `policy`, `mrc`) for Python.
//!
//! A `FlatTrace` holds its columns in Rust (shared, immutable); simulation and curves run with
//! the GIL released. Results are the records of `SimResult`, `Mrc` and `Inspection`, whose
//! names cachelab_sim's `record` module sets out, converted by `to_py`.

use std::sync::Arc;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt};

use cachelab_sim::flat::{inspect, FlatTrace, Format, SimTrace};
use cachelab_sim::mrc::{log_capacities, lru_mrc};
use cachelab_sim::policy::{self, SimResult, Unit};

use crate::convert::to_py;
use crate::errors::raise;

fn format_arg(py: Python<'_>, format: Option<&str>) -> PyResult<Option<Format>> {
    format
        .map(|f| {
            Format::parse(f).ok_or_else(|| {
                raise(
                    py,
                    "UsageError",
                    format!("unknown trace format {f:?} (csv, oracle, lines)"),
                )
            })
        })
        .transpose()
}

fn unit_arg(py: Python<'_>, unit: &str) -> PyResult<Unit> {
    Unit::parse(unit).ok_or_else(|| {
        raise(
            py,
            "UsageError",
            format!("unit must be \"objects\" or \"bytes\", got {unit:?}"),
        )
    })
}

/// A flat key trace in memory: per request a time (u32), a key id (u64) and a size (u32).
#[pyclass(module = "cachelab._core", name = "FlatTrace", frozen)]
pub struct PyFlatTrace {
    inner: Arc<FlatTrace>,
    /// What the reader doubted in an oracleGeneral file it accepted (a few implausible
    /// records, read as they are), for the caller to show as a warning.
    doubts: Option<String>,
}

fn le_bytes<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    v: &[T],
    f: impl Fn(T) -> [u8; N],
) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(v.len() * N);
    for &x in v {
        out.extend_from_slice(&f(x));
    }
    PyBytes::new(py, &out)
}

#[pymethods]
impl PyFlatTrace {
    /// Reads a trace file; `format` is "csv", "oracle" or "lines", else taken from the
    /// extension. Raises InputError naming the file and line (text) or byte offset (binary).
    #[staticmethod]
    #[pyo3(signature = (path, format = None))]
    fn load(py: Python<'_>, path: &str, format: Option<&str>) -> PyResult<PyFlatTrace> {
        let format = format_arg(py, format)?;
        let path = path.to_string();
        let (t, doubts) = py
            .detach(|| FlatTrace::read(&path, format, true))
            .map_err(|e| raise(py, "InputError", e.to_string()))?;
        Ok(PyFlatTrace {
            inner: Arc::new(t),
            doubts: doubts.map(|d| d.to_string()),
        })
    }

    /// None, or one line saying how many records of the oracleGeneral file this trace was
    /// read from are implausible (and the first of them): they were read as they are.
    #[getter]
    fn doubts(&self) -> Option<String> {
        self.doubts.clone()
    }

    /// A trace from arrays: `ids`, and optionally `sizes` (default 1) and `times`
    /// (default 0), all of the same length.
    #[staticmethod]
    #[pyo3(signature = (ids, sizes = None, times = None))]
    fn from_arrays(
        py: Python<'_>,
        ids: Vec<u64>,
        sizes: Option<Vec<u32>>,
        times: Option<Vec<u32>>,
    ) -> PyResult<PyFlatTrace> {
        let n = ids.len();
        let sizes = sizes.unwrap_or_else(|| vec![1; n]);
        let times = times.unwrap_or_else(|| vec![0; n]);
        if sizes.len() != n || times.len() != n {
            return Err(raise(
                py,
                "UsageError",
                format!(
                    "ids, sizes and times must have one length, got {n}, {}, {}",
                    sizes.len(),
                    times.len()
                ),
            ));
        }
        Ok(PyFlatTrace {
            inner: Arc::new(FlatTrace {
                times,
                ids,
                sizes,
                ops: None,
            }),
            doubts: None,
        })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("<FlatTrace {} requests>", self.inner.len())
    }

    /// Writes the trace atomically; `format` as for `load` ("lines" keeps only the keys).
    #[pyo3(signature = (path, format = None))]
    fn write(&self, py: Python<'_>, path: &str, format: Option<&str>) -> PyResult<()> {
        let format = format_arg(py, format)?;
        if format.is_none() && Format::from_path(std::path::Path::new(path)).is_none() {
            return Err(raise(
                py,
                "UsageError",
                format!("{path}: cannot tell the trace format from the extension; name it"),
            ));
        }
        let t = Arc::clone(&self.inner);
        let p = path.to_string();
        py.detach(move || t.write(&p, format))
            .map_err(|e| PyOSError::new_err(format!("{path}: {e}")))
    }

    /// Requests, unique keys, working set (sum of first sizes), Zipf alpha, top-1 % share,
    /// object size statistics and op counts.
    fn inspect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.inner.is_empty() {
            return Err(raise(py, "InputError", "the trace is empty".into()));
        }
        let t = Arc::clone(&self.inner);
        let i = py.detach(move || inspect(&t));
        to_py(py, &i)
    }

    /// Key ids as little-endian u64 bytes (`numpy.frombuffer(b, "<u8")`).
    fn ids_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, &self.inner.ids, u64::to_le_bytes)
    }

    /// Sizes as little-endian u32 bytes (`numpy.frombuffer(b, "<u4")`).
    fn sizes_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, &self.inner.sizes, u32::to_le_bytes)
    }

    /// Times as little-endian u32 bytes (`numpy.frombuffer(b, "<u4")`).
    fn times_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        le_bytes(py, &self.inner.times, u32::to_le_bytes)
    }
}

/// A cache size as given from Python: an int is a capacity, a float in (0, 1] a fraction of
/// the working set.
enum Size {
    Capacity(u64),
    Fraction(f64),
}

fn size_arg(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Size> {
    if v.is_instance_of::<PyBool>() {
        return Err(raise(py, "UsageError", format!("size {v} is not a number")));
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<u64>().map(Size::Capacity).map_err(|_| {
            raise(
                py,
                "UsageError",
                format!("size {v} must be a non-negative integer"),
            )
        });
    }
    match v.extract::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(Size::Fraction(f)),
        Ok(f) => Err(raise(
            py,
            "UsageError",
            format!("fractional size {f} must be in (0, 1]"),
        )),
        Err(_) => Err(raise(py, "UsageError", format!("size {v} is not a number"))),
    }
}

/// Simulates every (policy, size) pair over one trace on `threads` threads (0 = all cores).
///
/// `trace` is a `FlatTrace` or a path: a path is read straight into simulation form (an
/// oracleGeneral file is streamed, keeping 8 bytes per request, or nothing per request when
/// there is one policy, one integer size and the policy needs no future). An int size is a capacity; a
/// float in (0, 1] is that fraction of the working set (distinct objects, or the sum of their
/// first sizes in bytes), truncated as libCacheSim's cachesim does. One dict per pair,
/// policies outer, sizes inner.
#[pyfunction]
#[pyo3(signature = (trace, policies, sizes, unit = "objects", threads = 0, format = None))]
fn flat_simulate<'py>(
    py: Python<'py>,
    trace: &Bound<'py, PyAny>,
    policies: Vec<String>,
    sizes: Vec<Bound<'py, PyAny>>,
    unit: &str,
    threads: usize,
    format: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let unit = unit_arg(py, unit)?;
    let format = format_arg(py, format)?;
    for p in &policies {
        if policy::lookup(p).is_none() {
            return Err(raise(
                py,
                "UsageError",
                policy::UnknownPolicy(p.clone()).to_string(),
            ));
        }
    }
    let sizes = sizes
        .iter()
        .map(|v| size_arg(py, v))
        .collect::<PyResult<Vec<Size>>>()?;
    let source = match trace.cast::<PyFlatTrace>() {
        Ok(t) => Ok(Arc::clone(&t.get().inner)),
        Err(_) => Err(trace.extract::<std::path::PathBuf>().map_err(|_| {
            raise(
                py,
                "UsageError",
                "trace must be a FlatTrace or a path".into(),
            )
        })?),
    };
    let work = move || -> Result<Vec<SimResult>, String> {
        // One job from a file: stream it, keeping no per-request arrays.
        if let (Err(path), [p], [Size::Capacity(c)]) = (&source, &policies[..], &sizes[..]) {
            if let Some(r) =
                policy::simulate_file(path, format, p, *c, unit).map_err(|e| e.to_string())?
            {
                return Ok(vec![r]);
            }
        }
        let owned;
        let st = match &source {
            Ok(t) => SimTrace::new(t),
            Err(path) => {
                // The policies whose clocks are the trace's timestamps keep them.
                let times = policies
                    .iter()
                    .any(|p| policy::lookup(p).is_some_and(|i| i.clock));
                owned = SimTrace::load_with(path, format, times).map_err(|e| e.to_string())?;
                owned
            }
        };
        let (objects, bytes) = if sizes.iter().any(|s| matches!(s, Size::Fraction(_))) {
            st.working_set()
        } else {
            (0, 0)
        };
        let wss = match unit {
            Unit::Objects => objects,
            Unit::Bytes => bytes,
        };
        let caps: Vec<u64> = sizes
            .iter()
            .map(|s| match s {
                Size::Capacity(c) => *c,
                Size::Fraction(f) => (wss as f64 * f) as u64,
            })
            .collect();
        let jobs: Vec<(String, u64)> = policies
            .iter()
            .flat_map(|p| caps.iter().map(move |&c| (p.clone(), c)))
            .collect();
        policy::sweep(&st, &jobs, unit, threads).map_err(|e| e.to_string())
    };
    let results = py.detach(work).map_err(|m| raise(py, "InputError", m))?;
    to_py(py, &results)
}

/// The LRU miss-ratio curve in one pass. `capacities` defaults to `points` log-spaced sizes
/// up to the working set (objects or bytes); `sample_rate` in (0, 1) uses SHARDS.
#[pyfunction]
#[pyo3(signature = (trace, unit = "objects", sample_rate = None, capacities = None, points = 100))]
fn flat_mrc<'py>(
    py: Python<'py>,
    trace: &PyFlatTrace,
    unit: &str,
    sample_rate: Option<f64>,
    capacities: Option<Vec<u64>>,
    points: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let unit = unit_arg(py, unit)?;
    if let Some(r) = sample_rate {
        if !(r > 0.0 && r <= 1.0) {
            return Err(raise(
                py,
                "UsageError",
                format!("sample_rate must be in (0, 1], got {r}"),
            ));
        }
    }
    if trace.inner.is_empty() {
        return Err(raise(py, "InputError", "the trace is empty".into()));
    }
    let t = Arc::clone(&trace.inner);
    let m = py.detach(move || {
        let caps = capacities.unwrap_or_else(|| {
            let i = inspect(&t);
            let max = match unit {
                Unit::Objects => i.unique_keys,
                Unit::Bytes => i.working_set_bytes,
            };
            log_capacities(max, points)
        });
        lru_mrc(&t, unit, &caps, sample_rate)
    });
    to_py(py, &m)
}

/// Names of the eviction policies, from the registry.
#[pyfunction]
fn flat_policies() -> Vec<&'static str> {
    policy::names()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFlatTrace>()?;
    m.add_function(wrap_pyfunction!(flat_simulate, m)?)?;
    m.add_function(wrap_pyfunction!(flat_mrc, m)?)?;
    m.add_function(wrap_pyfunction!(flat_policies, m)?)?;
    Ok(())
}
