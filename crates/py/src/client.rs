//! `Client`: a blocking connection to one memcached, and key validation.

use std::time::Duration;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use cachelab_client::{BlockingConnection, Error, Options};
use cachelab_proto::{Key, MetaFlags, Value};

use crate::errors::{client_error, parse_address, raise};
use crate::tls::tls_from;

pub(crate) fn key(py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<Key> {
    let bytes: Vec<u8> = if let Ok(s) = k.extract::<String>() {
        s.into_bytes()
    } else {
        k.extract::<Vec<u8>>()?
    };
    Key::new(&bytes).map_err(|e| raise(py, "InvalidKey", e.to_string()))
}

fn meta_flags(py: Python<'_>, flags: &str) -> PyResult<MetaFlags> {
    MetaFlags::new(flags).map_err(|e| raise(py, "UsageError", e.to_string()))
}

pub(crate) fn seconds(py: Python<'_>, what: &str, s: f64) -> PyResult<Duration> {
    if s.is_finite() && s > 0.0 && s <= 3600.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(raise(
            py,
            "UsageError",
            format!("{what} must be between 0 and 3600 seconds, got {s}"),
        ))
    }
}

/// A multi-get's values in the order of its keys (see `Client.get_multi_list`), built without
/// the GIL; `into_tuple` makes the Python answer.
pub(crate) struct ListReply {
    values: Vec<Option<Bytes>>,
    found: usize,
    others: Vec<usize>,
    stripped: usize,
}

impl ListReply {
    pub(crate) fn new(ks: &[Key], found: Vec<Value>, strip: &[u8]) -> ListReply {
        // The server answers in the order asked, leaving misses out: one forward walk
        // aligns them. A reply out of that order is placed by a search from the start.
        let mut slot: Vec<Option<Bytes>> = vec![None; ks.len()];
        let mut next = 0;
        for v in found {
            let at = match ks[next..].iter().position(|k| k.as_bytes() == &v.key[..]) {
                Some(p) => Some(next + p),
                None => {
                    (0..ks.len()).find(|&i| slot[i].is_none() && ks[i].as_bytes() == &v.key[..])
                }
            };
            if let Some(i) = at {
                slot[i] = Some(v.data);
                next = i + 1;
            }
        }
        let mut others = Vec::new();
        let mut stripped = 0;
        let mut found = 0;
        for (i, s) in slot.iter_mut().enumerate() {
            let Some(d) = s else { continue };
            found += 1;
            if !strip.is_empty() && d.starts_with(strip) {
                stripped += d.len();
                *d = d.slice(strip.len()..);
            } else {
                others.push(i);
            }
        }
        ListReply {
            values: slot,
            found,
            others,
            stripped,
        }
    }

    /// `(values, found, others, stripped_bytes)`.
    pub(crate) fn into_tuple(
        self,
        py: Python<'_>,
    ) -> PyResult<(Bound<'_, PyList>, usize, Vec<usize>, usize)> {
        let values = PyList::empty(py);
        for v in &self.values {
            match v {
                None => values.append(py.None())?,
                Some(d) => values.append(PyBytes::new(py, d))?,
            }
        }
        Ok((values, self.found, self.others, self.stripped))
    }
}

/// Checks a key: 1-250 bytes, no whitespace or control characters. Raises InvalidKey.
#[pyfunction]
fn validate_key(py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
    self::key(py, key).map(|_| ())
}

/// A blocking connection to one memcached server, over TCP (`host:port`) or a Unix socket
/// (`unix:/path`). Every call has a deadline; the GIL is released while waiting.
#[pyclass(module = "cachelab._core")]
struct Client {
    conn: Option<BlockingConnection>,
}

impl Client {
    fn with<T: Send>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut BlockingConnection) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| raise(py, "ConnectionClosed", "client is closed".into()))?;
        py.detach(|| f(conn)).map_err(|e| client_error(py, e))
    }
}

fn meta_tuple(
    py: Python<'_>,
    r: cachelab_client::MetaReply,
) -> (String, String, Option<Py<PyBytes>>) {
    let status = String::from_utf8_lossy(r.status.code()).into_owned();
    let flags = String::from_utf8_lossy(&r.flags).into_owned();
    (status, flags, r.data.map(|d| PyBytes::new(py, &d).unbind()))
}

/// A client's options from its constructor's arguments (the blocking and the asyncio one).
pub(crate) fn options(
    py: Python<'_>,
    connect_timeout: f64,
    timeout: f64,
    tls: Option<&Bound<'_, PyAny>>,
) -> PyResult<Options> {
    Ok(Options {
        connect_timeout: seconds(py, "connect_timeout", connect_timeout)?,
        request_timeout: seconds(py, "timeout", timeout)?,
        tls: tls_from(py, tls)?,
    })
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (address, *, connect_timeout = 2.0, timeout = 1.0, tls = None))]
    fn new(
        py: Python<'_>,
        address: &str,
        connect_timeout: f64,
        timeout: f64,
        tls: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Client> {
        let address = parse_address(py, address)?;
        let options = options(py, connect_timeout, timeout, tls)?;
        let conn = py
            .detach(|| BlockingConnection::connect(&address, options))
            .map_err(|e| client_error(py, e))?;
        Ok(Client { conn: Some(conn) })
    }

    /// The value stored under `key`, or None.
    fn get(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyBytes>>> {
        let k = self::key(py, key)?;
        let v = self.with(py, |c| c.get(&k))?;
        Ok(v.map(|v| PyBytes::new(py, &v.data).unbind()))
    }

    /// One multi-get; returns {key: value} for the keys found.
    fn get_multi<'py>(
        &mut self,
        py: Python<'py>,
        keys: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let ks = keys
            .iter()
            .map(|k| self::key(py, k))
            .collect::<PyResult<Vec<_>>>()?;
        let found = self.with(py, |c| c.get_multi(&ks))?;
        let out = PyDict::new(py);
        for v in found {
            out.set_item(PyBytes::new(py, &v.key), PyBytes::new(py, &v.data))?;
        }
        Ok(out)
    }

    /// One multi-get answered in the order of `keys`: `(values, found, others, stripped_bytes)`.
    ///
    /// `values[i]` is the value of `keys[i]`, or None for a miss; `found` counts the values
    /// that are not None. A value that starts with `strip` comes without it; the indices of the
    /// values found that do not start with it are listed in `others` (ascending), and
    /// `stripped_bytes` is the total length, `strip` included, of the values that had it.
    /// Without `strip` every value comes whole and `others` lists every value found.
    #[pyo3(signature = (keys, strip = None))]
    fn get_multi_list<'py>(
        &mut self,
        py: Python<'py>,
        keys: Vec<Bound<'py, PyAny>>,
        strip: Option<Vec<u8>>,
    ) -> PyResult<(Bound<'py, PyList>, usize, Vec<usize>, usize)> {
        let ks = keys
            .iter()
            .map(|k| self::key(py, k))
            .collect::<PyResult<Vec<_>>>()?;
        let strip = strip.unwrap_or_default();
        let reply = self.with(py, |c| {
            c.get_multi(&ks)
                .map(|found| ListReply::new(&ks, found, &strip))
        })?;
        reply.into_tuple(py)
    }

    /// `set`: True when stored.
    #[pyo3(signature = (key, value, *, flags = 0, exptime = 0))]
    fn set(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: Vec<u8>,
        flags: u32,
        exptime: u32,
    ) -> PyResult<bool> {
        let k = self::key(py, key)?;
        self.with(py, |c| c.set(&k, Bytes::from(value), flags, exptime))
    }

    /// `add`: True when stored, False when the key exists.
    #[pyo3(signature = (key, value, *, flags = 0, exptime = 0))]
    fn add(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: Vec<u8>,
        flags: u32,
        exptime: u32,
    ) -> PyResult<bool> {
        let k = self::key(py, key)?;
        self.with(py, |c| c.add(&k, Bytes::from(value), flags, exptime))
    }

    /// `delete`: True when the key existed.
    fn delete(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = self::key(py, key)?;
        self.with(py, |c| c.delete(&k))
    }

    /// `delete` of many keys, pipelined in one round trip: per key, True when it existed.
    fn delete_many(&mut self, py: Python<'_>, keys: Vec<Bound<'_, PyAny>>) -> PyResult<Vec<bool>> {
        let ks = keys
            .iter()
            .map(|k| self::key(py, k))
            .collect::<PyResult<Vec<Key>>>()?;
        self.with(py, |c| c.delete_many(&ks))
    }

    /// `touch`: True when the key existed.
    fn touch(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>, exptime: u32) -> PyResult<bool> {
        let k = self::key(py, key)?;
        self.with(py, |c| c.touch(&k, exptime))
    }

    /// `incr`: the new value, or None when the key does not exist.
    fn incr(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        delta: u64,
    ) -> PyResult<Option<u64>> {
        let k = self::key(py, key)?;
        self.with(py, |c| c.incr(&k, delta))
    }

    /// `decr`: the new value, or None when the key does not exist.
    fn decr(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        delta: u64,
    ) -> PyResult<Option<u64>> {
        let k = self::key(py, key)?;
        self.with(py, |c| c.decr(&k, delta))
    }

    /// `stats` (or `stats <group>`) as a dict of strings.
    #[pyo3(signature = (group = None))]
    fn stats<'py>(
        &mut self,
        py: Python<'py>,
        group: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let pairs = self.with(py, |c| c.stats(group.as_deref()))?;
        let out = PyDict::new(py);
        for (k, v) in pairs {
            out.set_item(k, v)?;
        }
        Ok(out)
    }

    fn version(&mut self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |c| c.version())
    }

    /// `mg <key> <flags>`: (status, returned flags, value or None).
    #[pyo3(signature = (key, flags = "v"))]
    fn meta_get(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        flags: &str,
    ) -> PyResult<(String, String, Option<Py<PyBytes>>)> {
        let (k, f) = (self::key(py, key)?, meta_flags(py, flags)?);
        let r = self.with(py, |c| c.meta_get(&k, &f))?;
        Ok(meta_tuple(py, r))
    }

    /// `ms <key> <len> <flags>`: (status, returned flags, None).
    #[pyo3(signature = (key, value, flags = ""))]
    fn meta_set(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: Vec<u8>,
        flags: &str,
    ) -> PyResult<(String, String, Option<Py<PyBytes>>)> {
        let (k, f) = (self::key(py, key)?, meta_flags(py, flags)?);
        let r = self.with(py, |c| c.meta_set(&k, Bytes::from(value), &f))?;
        Ok(meta_tuple(py, r))
    }

    /// `md <key> <flags>`: (status, returned flags, None).
    #[pyo3(signature = (key, flags = ""))]
    fn meta_delete(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        flags: &str,
    ) -> PyResult<(String, String, Option<Py<PyBytes>>)> {
        let (k, f) = (self::key(py, key)?, meta_flags(py, flags)?);
        let r = self.with(py, |c| c.meta_delete(&k, &f))?;
        Ok(meta_tuple(py, r))
    }

    /// `mn`: one round trip that does nothing.
    fn meta_noop(&mut self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.meta_noop())
    }

    /// Closes the connection; later calls raise ConnectionClosed.
    fn close(&mut self) {
        self.conn = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&mut self, _t: Py<PyAny>, _v: Py<PyAny>, _tb: Py<PyAny>) {
        self.conn = None;
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Client>()?;
    m.add_function(wrap_pyfunction!(validate_key, m)?)?;
    Ok(())
}
