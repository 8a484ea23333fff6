//! The USL fitter (`cachelab_usl`) for Python (see the `cachelab.usl` package).
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

use cachelab_usl::{self as usl, Method, Options, Params};

use crate::convert::to_py;
use crate::errors::raise;

/// Fits the USL; the result is the fit's record (its keys are set out in cachelab_usl's
/// `record` module), with predictions at each of `predict`.
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
) -> PyResult<Bound<'py, PyAny>> {
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
    to_py(py, &fit.record(&predict))
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
) -> PyResult<Bound<'py, PyAny>> {
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
    to_py(py, &usl::predict(&p, cov.as_ref(), sigma, t, max_n, &ns))
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
