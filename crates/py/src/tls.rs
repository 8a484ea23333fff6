//! TLS settings from Python: the dict `cachelab.tls.TlsOptions.to_core()` makes, compiled
//! into the client crate's [`Tls`] (its files read here, before any connection).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use cachelab_client::{Tls, TlsConfig};

use crate::errors::{field, raise};

/// `None` for plain TCP, else `{"cacert", "cert", "key", "skip_verify", "sni"}` → a [`Tls`].
/// A file that can't be read or parsed is a UsageError naming it.
pub(crate) fn tls_from(py: Python<'_>, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Tls>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let d = v
        .cast::<PyDict>()
        .map_err(|_| raise(py, "UsageError", "tls must be a dict or None".into()))?;
    let path = |name: &str| -> PyResult<Option<PathBuf>> {
        Ok(field::<Option<String>>(d, "tls", name)?.map(PathBuf::from))
    };
    let config = TlsConfig {
        cacert: path("cacert")?,
        cert: path("cert")?,
        key: path("key")?,
        skip_verify: field(d, "tls", "skip_verify")?,
        sni: field(d, "tls", "sni")?,
    };
    Tls::new(&config)
        .map(Some)
        .map_err(|m| raise(py, "UsageError", m))
}

/// The `tls` entry of a spec dict (absent or None: plain TCP).
pub(crate) fn tls_field(d: &Bound<'_, PyDict>) -> PyResult<Option<Tls>> {
    tls_from(d.py(), d.get_item("tls")?.as_ref())
}
