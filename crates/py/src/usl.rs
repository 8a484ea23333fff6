//! The USL fitter (`cachelab_usl`) for Python (see python/cachelab/usl.py).
//!
//! ```text
//! usl_fit(n, x, method="bounded", *, level=0.95, bootstrap=0, seed=0, threads=0,
//!         predict=[]) -> dict
//! usl_predict(gamma, alpha, beta, cov, sigma, t, max_n, ns) -> list[dict]
//! usl_methods() -> list[tuple[str, str]]
//! t_quantile(p, df) -> float
//! ```
//!
//! Infinite values (Nmax when β = 0) come back as `float("inf")`; missing ones as None.
//! Bad data or arguments raise UsageError with the core's message (rows are 0-based).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use cachelab_usl::{self as usl, Bootstrap, Fit, Interval, Method, Options, Params, Prediction};

use crate::raise;

fn interval<'py>(py: Python<'py>, i: &Interval) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("lo", i.lo)?;
    d.set_item("median", i.median)?;
    d.set_item("hi", i.hi)?;
    Ok(d)
}

fn bootstrap_dict<'py>(py: Python<'py>, b: &Bootstrap) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("resamples", b.resamples)?;
    d.set_item("seed", b.seed)?;
    d.set_item("level", b.level)?;
    d.set_item("failed", b.failed)?;
    d.set_item("gamma", interval(py, &b.gamma)?)?;
    d.set_item("alpha", interval(py, &b.alpha)?)?;
    d.set_item("beta", interval(py, &b.beta)?)?;
    d.set_item(
        "n_max",
        b.n_max.as_ref().map(|i| interval(py, i)).transpose()?,
    )?;
    d.set_item(
        "x_max",
        b.x_max.as_ref().map(|i| interval(py, i)).transpose()?,
    )?;
    d.set_item("infinite_n_max", b.infinite_n_max)?;
    d.set_item("no_peak", b.no_peak)?;
    Ok(d)
}

fn prediction_list<'py>(py: Python<'py>, preds: &[Prediction]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for p in preds {
        let d = PyDict::new(py);
        d.set_item("n", p.n)?;
        d.set_item("x", p.x)?;
        d.set_item("x_se", p.x_se)?;
        d.set_item("x_lo", p.x_lo)?;
        d.set_item("x_hi", p.x_hi)?;
        d.set_item("x_pred_lo", p.x_pred_lo)?;
        d.set_item("x_pred_hi", p.x_pred_hi)?;
        d.set_item("r", p.r)?;
        d.set_item("r_lo", p.r_lo)?;
        d.set_item("r_hi", p.r_hi)?;
        d.set_item("extrapolated", p.extrapolated)?;
        out.append(d)?;
    }
    Ok(out)
}

fn by_name<'py, T: IntoPyObject<'py>>(
    py: Python<'py>,
    values: [T; 3],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, v) in usl::NAMES.iter().zip(values) {
        d.set_item(name, v)?;
    }
    Ok(d)
}

fn fit_dict<'py>(py: Python<'py>, f: &Fit, ns: &[f64]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("method", f.method.name())?;
    d.set_item("level", f.level)?;
    d.set_item("n", f.n.clone())?;
    d.set_item("x", f.x.clone())?;
    d.set_item("params", by_name(py, f.params.to_array())?)?;
    d.set_item("free", by_name(py, f.free)?)?;
    d.set_item("at_bound", by_name(py, f.at_bound)?)?;
    d.set_item("se", by_name(py, f.se)?)?;
    d.set_item(
        "ci",
        by_name(py, f.ci.map(|c| c.map(|(lo, hi)| vec![lo, hi])))?,
    )?;
    d.set_item("cov", f.cov.map(|c| c.map(|row| row.to_vec()).to_vec()))?;
    d.set_item("sse", f.sse)?;
    d.set_item("sigma", f.sigma)?;
    d.set_item("df", f.df)?;
    d.set_item("t", f.t)?;
    d.set_item("r_squared", f.r_squared)?;
    d.set_item("fitted", f.fitted.clone())?;
    d.set_item("residuals", f.residuals.clone())?;
    d.set_item("iterations", f.iterations)?;
    d.set_item("converged", f.converged)?;
    let peak = PyDict::new(py);
    peak.set_item("n_max", f.peak.n_max)?;
    peak.set_item("n_max_integer", f.peak.n_max_integer)?;
    peak.set_item("n_max_floor", f.peak.n_max_floor)?;
    peak.set_item("x_max", f.peak.x_max)?;
    peak.set_item("amdahl_limit", f.peak.amdahl_limit)?;
    d.set_item("peak", peak)?;
    d.set_item(
        "bootstrap",
        f.bootstrap
            .as_ref()
            .map(|b| bootstrap_dict(py, b))
            .transpose()?,
    )?;
    let warnings = PyList::empty(py);
    let extra = f.extrapolation_warning(ns);
    for w in f.warnings.iter().chain(extra.as_ref()) {
        let item = PyDict::new(py);
        item.set_item("code", w.code)?;
        item.set_item("message", &w.message)?;
        warnings.append(item)?;
    }
    d.set_item("warnings", warnings)?;
    d.set_item("predictions", prediction_list(py, &f.predict(ns))?)?;
    Ok(d)
}

/// Fits the USL; see the module docs for the result's keys.
#[pyfunction]
#[pyo3(signature = (n, x, method = "bounded", *, level = 0.95, bootstrap = 0, seed = 0,
                    threads = 0, predict = Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn usl_fit<'py>(
    py: Python<'py>,
    n: Vec<f64>,
    x: Vec<f64>,
    method: &str,
    level: f64,
    bootstrap: usize,
    seed: u64,
    threads: usize,
    predict: Vec<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let method = Method::from_name(method).map_err(|e| raise(py, "UsageError", e.to_string()))?;
    if bootstrap > 1_000_000 {
        return Err(raise(
            py,
            "UsageError",
            format!("bootstrap resamples must be at most 1,000,000, not {bootstrap}"),
        ));
    }
    let options = Options {
        method,
        level,
        bootstrap,
        seed,
        threads,
    };
    let fit = py
        .detach(|| usl::fit(&n, &x, &options))
        .map_err(|e| raise(py, "UsageError", e.to_string()))?;
    fit_dict(py, &fit, &predict)
}

/// Predictions from stored coefficients (what `usl_fit(..., predict=ns)` computes).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn usl_predict<'py>(
    py: Python<'py>,
    gamma: f64,
    alpha: f64,
    beta: f64,
    cov: Option<Vec<Vec<f64>>>,
    sigma: f64,
    t: f64,
    max_n: f64,
    ns: Vec<f64>,
) -> PyResult<Bound<'py, PyList>> {
    let cov = match cov {
        None => None,
        Some(rows) => {
            if rows.len() != 3 || rows.iter().any(|r| r.len() != 3) {
                return Err(raise(py, "UsageError", "cov must be 3x3".into()));
            }
            let mut m = [[0.0; 3]; 3];
            for (i, row) in rows.iter().enumerate() {
                m[i].copy_from_slice(row);
            }
            Some(m)
        }
    };
    let p = Params::new(gamma, alpha, beta);
    prediction_list(py, &usl::predict(&p, cov.as_ref(), sigma, t, max_n, &ns))
}

/// (name, summary) of every fitting method.
#[pyfunction]
fn usl_methods() -> Vec<(&'static str, &'static str)> {
    usl::METHODS.iter().map(|m| (m.name, m.summary)).collect()
}

/// The p-quantile of Student's t with `df` degrees of freedom.
#[pyfunction]
fn t_quantile(p: f64, df: f64) -> f64 {
    usl::dist::t_quantile(p, df)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(usl_fit, m)?)?;
    m.add_function(wrap_pyfunction!(usl_predict, m)?)?;
    m.add_function(wrap_pyfunction!(usl_methods, m)?)?;
    m.add_function(wrap_pyfunction!(t_quantile, m)?)?;
    Ok(())
}
