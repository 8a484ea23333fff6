//! `load_run`: the load generator, driven from Python (see python/cachelab/load.py).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use cachelab_client::Options;
use cachelab_load::{
    Arrivals, DistSpec, Interval, Mix, Mode, Outcome, Spec, SpecError, Stop, Totals, OPS,
};
use cachelab_metrics::Latency;

use crate::{client_error, parse_address, raise};

/// Progress of a running load: `done` of `total` (ms of a timed run, or requests of a counted
/// one), the latest interval's rate and p99, errors so far; `cancel()` stops it early.
#[pyclass(module = "cachelab._core", frozen)]
pub struct LoadProgress(Arc<cachelab_load::Progress>);

#[pymethods]
impl LoadProgress {
    #[new]
    fn new() -> LoadProgress {
        LoadProgress(cachelab_load::Progress::new())
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
    let py = d.py();
    let v = d
        .get_item(name)?
        .ok_or_else(|| usage(py, format!("load spec is missing {name:?}")))?;
    v.extract::<T>()
        .map_err(|_| usage(py, format!("load spec field {name:?} has the wrong type")))
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
        address: parse_address(py, &item::<String>(d, "address")?)?,
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
        },
        give_up_after: seconds(py, "give_up_after", item(d, "give_up_after")?, false)?,
        seed: item(d, "seed")?,
        server_pid: pid,
        busy_poll: Duration::from_micros(item(d, "busy_poll_us")?),
        send_batch: item(d, "send_batch")?,
    })
}

const PCTS: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 100.0];
const PCT_NAMES: [&str; 5] = ["50", "90", "99", "99.9", "max"];

fn hist_dict<'py>(py: Python<'py>, h: &Latency) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("count", h.len())?;
    d.set_item("histogram", cachelab_metrics::encode(h))?;
    let p = PyDict::new(py);
    for (name, v) in PCT_NAMES
        .iter()
        .zip(cachelab_metrics::percentiles(h, &PCTS))
    {
        p.set_item(name, v)?;
    }
    d.set_item("percentiles", p)?;
    d.set_item("mean", if h.is_empty() { 0.0 } else { h.mean() })?;
    d.set_item("max", h.max())?;
    Ok(d)
}

fn ops_dict<'py>(py: Python<'py>, ops: &[u64; 4]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, n) in OPS.iter().zip(ops) {
        d.set_item(k, n)?;
    }
    Ok(d)
}

fn interval_dict<'py>(py: Python<'py>, i: &Interval, open: bool) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("index", i.index)?;
    d.set_item("start_s", i.start_s)?;
    d.set_item("duration_s", i.duration_s)?;
    d.set_item("warmup", i.warmup)?;
    d.set_item("ops", ops_dict(py, &i.ops)?)?;
    d.set_item("replies", i.replies())?;
    d.set_item("throughput", i.throughput())?;
    d.set_item("hits", i.hits)?;
    d.set_item("misses", i.misses)?;
    d.set_item("errors", i.errors.clone())?;
    d.set_item("lost", i.lost)?;
    d.set_item("sent", i.sent)?;
    d.set_item(
        "corrected",
        if open {
            Some(hist_dict(py, &i.corrected)?)
        } else {
            None
        },
    )?;
    d.set_item("uncorrected", hist_dict(py, &i.uncorrected)?)?;
    Ok(d)
}

fn totals_dict<'py>(py: Python<'py>, t: &Totals, open: bool) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("first_index", t.first_index)?;
    d.set_item("intervals", t.intervals)?;
    d.set_item("duration_s", t.duration_s)?;
    d.set_item("ops", ops_dict(py, &t.ops)?)?;
    d.set_item("replies", t.replies())?;
    d.set_item("throughput", t.throughput())?;
    d.set_item("hits", t.hits)?;
    d.set_item("misses", t.misses)?;
    d.set_item("errors", t.errors.clone())?;
    d.set_item("lost", t.lost)?;
    d.set_item("sent", t.sent)?;
    d.set_item(
        "corrected",
        if open {
            Some(hist_dict(py, &t.corrected)?)
        } else {
            None
        },
    )?;
    d.set_item("uncorrected", hist_dict(py, &t.uncorrected)?)?;
    Ok(d)
}

fn outcome_dict<'py>(py: Python<'py>, o: &Outcome, open: bool) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let intervals = PyList::empty(py);
    for i in &o.intervals {
        intervals.append(interval_dict(py, i, open)?)?;
    }
    out.set_item("intervals", intervals)?;
    let steady = PyDict::new(py);
    steady.set_item("start_index", o.steady.start_index)?;
    steady.set_item("reached", o.steady.reached)?;
    steady.set_item("reference_throughput", o.steady.reference_throughput)?;
    steady.set_item("reference_p50_ns", o.steady.reference_p50_ns)?;
    out.set_item("steady", steady)?;
    out.set_item("all", totals_dict(py, &o.all, open)?)?;
    out.set_item("window", totals_dict(py, &o.window, open)?)?;
    let server = PyDict::new(py);
    server.set_item("version", &o.server.version)?;
    server.set_item("before", o.server.before.clone())?;
    server.set_item("after", o.server.after.clone())?;
    server.set_item("pid", o.server.pid)?;
    let sched =
        |s: &Option<cachelab_load::server::SchedStat>| -> PyResult<Option<Bound<'py, PyDict>>> {
            s.map(|s| {
                let d = PyDict::new(py);
                d.set_item("on_cpu_ns", s.on_cpu_ns)?;
                d.set_item("wait_ns", s.wait_ns)?;
                d.set_item("slices", s.slices)?;
                d.set_item("threads", s.threads)?;
                Ok(d)
            })
            .transpose()
        };
    server.set_item("schedstat_before", sched(&o.server.schedstat_before)?)?;
    server.set_item("schedstat_after", sched(&o.server.schedstat_after)?)?;
    out.set_item("server", server)?;
    match &o.schedule {
        Some(s) => {
            let d = PyDict::new(py);
            d.set_item("target_rate", s.target_rate)?;
            d.set_item("backlog_at_end", s.backlog_at_end)?;
            d.set_item("skipped_disconnected", s.skipped_disconnected)?;
            out.set_item("schedule", d)?;
        }
        None => out.set_item("schedule", py.None())?,
    }
    out.set_item("client_cpu_user_s", o.client_cpu_s.0)?;
    out.set_item("client_cpu_system_s", o.client_cpu_s.1)?;
    out.set_item("client_wait_s", o.client_sched.wait_s)?;
    out.set_item("client_sleeps", o.client_sched.sleeps)?;
    out.set_item("client_preempted", o.client_sched.preempted)?;
    out.set_item("client_busy_polls", o.client_sched.busy_polls)?;
    out.set_item("client_busy_caught", o.client_sched.busy_caught)?;
    out.set_item("client_writes", o.client_sched.writes)?;
    out.set_item("process_cpu_s", o.process_cpu_s.0 + o.process_cpu_s.1)?;
    out.set_item("prefilled_keys", o.prefilled_keys)?;
    out.set_item("prefill_s", o.prefill_s)?;
    out.set_item("deleted_keys", o.deleted_keys)?;
    out.set_item("leftover_keys", o.leftover_keys)?;
    out.set_item("cancelled", o.cancelled)?;
    out.set_item("aborted", o.aborted.as_deref())?;
    out.set_item("elapsed_s", o.elapsed.as_secs_f64())?;
    Ok(out)
}

/// Runs a load with the GIL released. `spec` is a dict (see cachelab.load); returns a dict of
/// intervals, totals, the steady-state window, server stats and clean-up counts.
#[pyfunction]
fn load_run<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyDict>,
    progress: &LoadProgress,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = spec_from(spec)?;
    let open = matches!(spec.mode, Mode::Open { .. });
    let shared = Arc::clone(&progress.0);
    let outcome = py
        .detach(|| cachelab_load::run(&spec, &shared))
        .map_err(|e| match e {
            SpecError::Invalid(m) => raise(py, "UsageError", m),
            SpecError::Server(e) => client_error(py, e),
        })?;
    outcome_dict(py, &outcome, open)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LoadProgress>()?;
    m.add_function(wrap_pyfunction!(load_run, m)?)?;
    Ok(())
}
