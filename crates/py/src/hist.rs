//! HdrHistogram helpers over the V2 compressed base64 encoding the artifacts carry.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::to_py;
use crate::errors::raise;

/// The value at each percentile (0-100) of an encoded histogram, in the histogram's unit.
#[pyfunction]
fn hist_percentiles(py: Python<'_>, histogram: &str, percentiles: Vec<f64>) -> PyResult<Vec<u64>> {
    let h =
        cachelab_metrics::decode(histogram).map_err(|e| raise(py, "InputError", e.to_string()))?;
    if let Some(p) = percentiles.iter().find(|p| !(0.0..=100.0).contains(*p)) {
        return Err(PyValueError::new_err(format!(
            "percentile {p} is outside 0-100"
        )));
    }
    Ok(cachelab_metrics::percentiles(&h, &percentiles))
}

/// count, min, max, mean and stdev of an encoded histogram (`cachelab_metrics::Summary`).
#[pyfunction]
fn hist_summary<'py>(py: Python<'py>, histogram: &str) -> PyResult<Bound<'py, PyAny>> {
    let h =
        cachelab_metrics::decode(histogram).map_err(|e| raise(py, "InputError", e.to_string()))?;
    to_py(py, &cachelab_metrics::Summary::of(&h))
}

/// Encodes values (ns) as a latency histogram: V2 compressed, base64.
#[pyfunction]
fn hist_from_values(values: Vec<u64>) -> String {
    cachelab_metrics::encode(&cachelab_metrics::from_values(values))
}

/// Merges encoded histograms into one.
#[pyfunction]
fn hist_merge(py: Python<'_>, histograms: Vec<String>) -> PyResult<String> {
    let mut total = cachelab_metrics::latency();
    for h in &histograms {
        let h = cachelab_metrics::decode(h).map_err(|e| raise(py, "InputError", e.to_string()))?;
        total
            .add(&h)
            .map_err(|e| raise(py, "InputError", format!("{e:?}")))?;
    }
    Ok(cachelab_metrics::encode(&total))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hist_percentiles, m)?)?;
    m.add_function(wrap_pyfunction!(hist_summary, m)?)?;
    m.add_function(wrap_pyfunction!(hist_from_values, m)?)?;
    m.add_function(wrap_pyfunction!(hist_merge, m)?)?;
    Ok(())
}
