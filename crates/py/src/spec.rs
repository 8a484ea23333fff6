//! Specs from Python: [`spec_from`] builds an engine's `Spec` (which derives
//! `serde::Deserialize`) from the dict a Python spec's `to_core` makes, in one conversion
//! (pythonize), and [`limits`] hands Python each numeric field's range, written once in the
//! engine crate. No field is named here.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::de::DeserializeOwned;

use cachelab_client::spec::Limit;

use crate::convert::to_py;
use crate::errors::raise;

/// The engine spec `T` from `spec` (a dict; `what` names it in errors, `limits` are its
/// fields' ranges). A bad field is a UsageError of one line naming it: with its range and the
/// value given when it has one (`connections must be a whole number from 1 to 4096, not
/// 'x'`), else with what is wrong with it (`load spec field arrivals: unknown variant …`).
pub(crate) fn spec_from<T: DeserializeOwned>(
    what: &str,
    spec: &Bound<'_, PyDict>,
    limits: &[Limit],
) -> PyResult<T> {
    let py = spec.py();
    let mut de = pythonize::Depythonizer::from_object(spec.as_any());
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let why = e.into_inner().to_string();
        // A field in a flattened part of the spec is named by the message (`field: why`).
        let (path, why) = match (path.as_str(), why.split_once(": ")) {
            (".", Some((p, rest))) if spec.contains(field_of(p)).unwrap_or(false) => {
                (p.to_string(), rest.to_string())
            }
            _ => (path, why),
        };
        let field = field_of(&path);
        let msg = match limits.iter().find(|l| l.field == field) {
            Some(limit) => {
                let got = spec
                    .get_item(field)
                    .ok()
                    .flatten()
                    .and_then(|v| v.repr().ok())
                    .map_or_else(|| "given".to_string(), |r| r.to_string());
                limit.refusal(got)
            }
            None if path == "." => format!("{what} spec: {why}"),
            None => format!("{what} spec field {path}: {why}"),
        };
        raise(py, "UsageError", msg)
    })
}

/// The top field of a path: `servers` of `servers[1]`, `tls` of `tls.cacert`.
fn field_of(path: &str) -> &str {
    path.split(['.', '[']).next().unwrap_or(path)
}

/// `{field: {"lo", "hi", "above", "unit"}}`: each numeric field's range.
pub(crate) fn limits<'py>(py: Python<'py>, limits: &[Limit]) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for l in limits {
        out.set_item(l.field, to_py(py, l)?)?;
    }
    Ok(out)
}
