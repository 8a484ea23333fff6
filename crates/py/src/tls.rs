//! TLS settings from Python: the dict `cachelab.tls.TlsOptions.to_core()` makes, compiled
//! into the client crate's [`Tls`] (its files read here, before any connection) by the same
//! deserializer the engines' specs use for their `tls` field.

use pyo3::prelude::*;

use cachelab_client::Tls;

use crate::errors::raise;

/// `None` for plain TCP, else `{"cacert", "cert", "key", "skip_verify", "sni"}` → a [`Tls`].
/// A file that can't be read or parsed is a UsageError naming it.
pub(crate) fn tls_from(py: Python<'_>, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Tls>> {
    let Some(v) = v else {
        return Ok(None);
    };
    cachelab_client::spec::tls(&mut pythonize::Depythonizer::from_object(v)).map_err(|e| {
        let e = e.to_string();
        let msg = match e.starts_with("invalid type") || e.starts_with("missing field") {
            true => format!("tls must be a dict of TLS settings or None: {e}"),
            false => e,
        };
        raise(py, "UsageError", msg)
    })
}
