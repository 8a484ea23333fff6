//! `load_run`: the load generator, driven from Python (see the `cachelab.load` package).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use cachelab_client::Options;
use cachelab_load::{
    Arrivals, Change, DistSpec, Distribution, Member, Mix, Mode, Pool, Spec, Stop, OPS,
};

use crate::convert::to_py;
use crate::errors::{field, parse_address, raise, start_error};
use crate::tls::tls_field;

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

fn usage(py: Python<'_>, msg: String) -> PyErr {
    raise(py, "UsageError", msg)
}

fn item<'py, T: for<'a> FromPyObject<'a, 'py>>(d: &Bound<'py, PyDict>, name: &str) -> PyResult<T> {
    field(d, "load", name)
}

fn seconds(py: Python<'_>, name: &str, s: f64, allow_zero: bool) -> PyResult<Duration> {
    let ok = s.is_finite() && (s > 0.0 || (allow_zero && s == 0.0)) && s <= 1e6;
    if !ok {
        return Err(usage(
            py,
            format!("{name} must be a positive number of seconds, got {s}"),
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

fn dist(d: &Bound<'_, PyDict>, name: &str) -> PyResult<DistSpec> {
    let (name, params): (String, Vec<f64>) = item(d, name)?;
    Ok(DistSpec { name, params })
}

/// The pool: `servers` as `[(address, weight), ...]` in order, its `distribution`, and the
/// member failure settings.
fn pool(d: &Bound<'_, PyDict>) -> PyResult<Pool> {
    let py = d.py();
    let servers: Vec<(String, u32)> = item(d, "servers")?;
    let members = servers
        .iter()
        .map(|(a, weight)| {
            Ok(Member {
                address: parse_address(py, a)?,
                weight: *weight,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let distribution = Distribution::parse(&item::<String>(d, "distribution")?)
        .map_err(|e| usage(py, e.to_string()))?;
    let remap = match item::<String>(d, "on_member_down")?.as_str() {
        "keep" => false,
        "remap" => true,
        other => {
            return Err(usage(
                py,
                format!("on-member-down {other:?} is not one of: keep, remap"),
            ))
        }
    };
    let changes = item::<Vec<(f64, usize, String)>>(d, "changes")?
        .into_iter()
        .map(|(at, member, what)| {
            let add = match what.as_str() {
                "add" => true,
                "remove" => false,
                other => {
                    return Err(usage(
                        py,
                        format!("a membership change is add or remove, not {other:?}"),
                    ))
                }
            };
            Ok(Change {
                at: seconds(py, "change time", at, false)?,
                member,
                add,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Pool {
        members,
        distribution,
        failure_limit: item(d, "member_failure_limit")?,
        retry: seconds(py, "member_retry", item(d, "member_retry")?, false)?,
        member_timeout: seconds(py, "member_timeout", item(d, "member_timeout")?, false)?,
        remap,
        changes,
    })
}

fn spec_from(d: &Bound<'_, PyDict>) -> PyResult<Spec> {
    let py = d.py();
    let mode = match item::<Option<f64>>(d, "rate")? {
        None => Mode::Closed,
        Some(rate) => Mode::Open {
            rate,
            arrivals: match item::<String>(d, "arrivals")?.as_str() {
                "poisson" => Arrivals::Poisson,
                "uniform" => Arrivals::Uniform,
                other => {
                    return Err(usage(
                        py,
                        format!("arrivals {other:?} is not one of: poisson, uniform"),
                    ))
                }
            },
        },
    };
    let mix: BTreeMap<String, f64> = item(d, "mix")?;
    if let Some(k) = mix.keys().find(|k| !OPS.contains(&k.as_str())) {
        return Err(usage(
            py,
            format!("op mix: unknown operation {k:?}; known: {}", OPS.join(", ")),
        ));
    }
    let share = |k: &str| mix.get(k).copied().unwrap_or(0.0);
    let stop = match (
        item::<Option<f64>>(d, "duration")?,
        item::<Option<u64>>(d, "requests")?,
    ) {
        (Some(s), None) => Stop::Duration(seconds(py, "duration", s, false)?),
        (None, Some(n)) => Stop::Requests(n),
        _ => {
            return Err(usage(
                py,
                "give a duration or a request count, not both".into(),
            ))
        }
    };
    let pid: Option<u32> = item(d, "server_pid")?;
    Ok(Spec {
        pool: pool(d)?,
        connections: item(d, "connections")?,
        threads: item(d, "threads")?,
        pipeline: item(d, "pipeline")?,
        max_outstanding: item(d, "max_outstanding")?,
        mode,
        mix: Mix {
            get: share("get"),
            multiget: share("multiget"),
            set: share("set"),
            delete: share("delete"),
        },
        multiget_keys: item(d, "multiget_keys")?,
        key_space: item(d, "key_space")?,
        key_dist: dist(d, "key_dist")?,
        value_size: dist(d, "value_size")?,
        prefix: item(d, "prefix")?,
        ttl: item(d, "ttl")?,
        stop,
        warmup: seconds(py, "warmup", item(d, "warmup")?, true)?,
        prefill: item(d, "prefill")?,
        interval: seconds(py, "interval", item(d, "interval")?, false)?,
        options: Options {
            connect_timeout: seconds(py, "connect_timeout", item(d, "connect_timeout")?, false)?,
            request_timeout: seconds(py, "timeout", item(d, "timeout")?, false)?,
            tls: tls_field(d)?,
        },
        give_up_after: seconds(py, "give_up_after", item(d, "give_up_after")?, false)?,
        stall: seconds(py, "stall", item::<f64>(d, "stall_ms")? / 1000.0, false)?,
        seed: item(d, "seed")?,
        server_pid: pid,
        busy_poll: Duration::from_micros(item(d, "busy_poll_us")?),
        send_batch: item(d, "send_batch")?,
        behind: item::<Option<Vec<String>>>(d, "behind")?
            .unwrap_or_default()
            .iter()
            .map(|a| parse_address(py, a))
            .collect::<PyResult<Vec<_>>>()?,
        probe_rate: item(d, "probe_rate")?,
        on_miss_set: match item::<String>(d, "on_miss")?.as_str() {
            "none" => false,
            "set" => true,
            other => {
                return Err(usage(
                    py,
                    format!("on-miss {other:?} is not one of: none, set"),
                ))
            }
        },
    })
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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LoadProgress>()?;
    m.add_function(wrap_pyfunction!(load_predict, m)?)?;
    m.add_function(wrap_pyfunction!(load_run, m)?)?;
    m.add_function(wrap_pyfunction!(load_check, m)?)?;
    Ok(())
}
