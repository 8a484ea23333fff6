//! `RespClient`: a blocking connection to one Redis or Valkey (what Python needs of it around a
//! run: `INFO`, `CONFIG GET`, `PING`, `DBSIZE`, `UNLINK` of the run's keys, the pipelined
//! `SET`s of a Ray agent's prefill and the pipelined `UNLINK`s of its driver's clean-up), and
//! `parse_resp_url` and `redact_resp_url` (the client crate's `redis://` / `rediss://` parser
//! and redaction, the only ones).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use bytes::Bytes;
use cachelab_client::resp::{
    redact, set_command, Auth, Expire, RespClient as Blocking, RespOptions, RespUrl, SetOptions,
};
use cachelab_client::Error;
use cachelab_proto::resp::{Command, RespKey, Value};

use crate::client::options;
use crate::errors::{client_error, parse_address, raise};

/// `redis://[user:password@]host[:port][/db]` or `rediss://…` as a dict: `address`
/// (`host:port`), `tls`, `user`, `password`, `db` (None where the URL gives none). A bad URL
/// is a UsageError whose message shows the password as `***`.
#[pyfunction]
fn parse_resp_url<'py>(py: Python<'py>, url: &str) -> PyResult<Bound<'py, PyDict>> {
    let u: RespUrl = url
        .parse()
        .map_err(|m: String| raise(py, "UsageError", m))?;
    let d = PyDict::new(py);
    d.set_item("address", u.address.to_string())?;
    d.set_item("tls", u.tls)?;
    d.set_item("user", u.auth.as_ref().and_then(|a| a.user.clone()))?;
    d.set_item("password", u.auth.as_ref().map(|a| a.password.expose()))?;
    d.set_item("db", u.db)?;
    Ok(d)
}

/// `url` with its password, if any, as `***` (what an error or a log line may show).
#[pyfunction]
fn redact_resp_url(url: &str) -> String {
    redact(url)
}

/// A blocking RESP2 connection to one server: `AUTH` (when a password is given) and `SELECT`
/// (when a database is) at connect, each request bounded by `timeout`.
#[pyclass(module = "cachelab._core")]
pub struct RespClient {
    conn: Option<Blocking>,
}

impl RespClient {
    fn with<T>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut Blocking) -> Result<T, Error> + Send,
    ) -> PyResult<T>
    where
        T: Send,
    {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| raise(py, "ConnectionClosed", "the client is closed".into()))?;
        py.detach(|| f(conn)).map_err(|e| client_error(py, e))
    }
}

#[pymethods]
impl RespClient {
    #[new]
    #[pyo3(signature = (address, *, user = None, password = None, db = None,
                        connect_timeout = 2.0, timeout = 1.0, tls = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        address: &str,
        user: Option<String>,
        password: Option<String>,
        db: Option<u32>,
        connect_timeout: f64,
        timeout: f64,
        tls: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<RespClient> {
        let address = parse_address(py, address)?;
        let options = options(py, connect_timeout, timeout, tls)?;
        let auth = match (user, password) {
            (u, Some(p)) => Some(Auth {
                user: u,
                ..Auth::password(p)
            }),
            (Some(_), None) => {
                return Err(raise(py, "UsageError", "a user needs its password".into()))
            }
            (None, None) => None,
        };
        let resp = RespOptions {
            auth,
            db,
            ..RespOptions::default()
        };
        let conn = py
            .detach(|| Blocking::connect(&address, options, &resp))
            .map_err(|e| client_error(py, e))?;
        Ok(RespClient { conn: Some(conn) })
    }

    /// `INFO [section]`: every field of the sections it returns, as one dict of strings.
    #[pyo3(signature = (section = None))]
    fn info(&mut self, py: Python<'_>, section: Option<String>) -> PyResult<Vec<(String, String)>> {
        let info = self.with(py, |c| c.info(section.as_deref()))?;
        Ok(info.sections.into_iter().flat_map(|s| s.fields).collect())
    }

    /// `CONFIG GET pattern`: `[(name, value)]`, sorted by name.
    fn config_get(&mut self, py: Python<'_>, pattern: String) -> PyResult<Vec<(String, String)>> {
        self.with(py, |c| c.config_get(&pattern))
    }

    fn ping(&mut self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.ping())
    }

    /// `DBSIZE`: the keys in the selected database.
    fn dbsize(&mut self, py: Python<'_>) -> PyResult<u64> {
        let v = self.with(py, |c| c.call(&Command::new("DBSIZE")))?;
        match v {
            Value::Integer(n) if n >= 0 => Ok(n as u64),
            v => Err(raise(py, "ProtocolError", format!("DBSIZE answered {v:?}"))),
        }
    }

    /// `UNLINK` of `keys` (one command): how many of them were there.
    fn unlink(&mut self, py: Python<'_>, keys: Vec<String>) -> PyResult<u64> {
        let ks = keys
            .into_iter()
            .map(RespKey::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| raise(py, "InvalidKey", e.to_string()))?;
        self.with(py, |c| c.unlink(&ks))
    }

    /// `SET key value [EX ttl]` for each of `items` (`(key, value)`), pipelined in one write:
    /// how many the server answered `OK`. An error reply (`-OOM …`) is not counted.
    #[pyo3(signature = (items, ttl = 0))]
    fn set_many(
        &mut self,
        py: Python<'_>,
        items: Vec<(String, Vec<u8>)>,
        ttl: u64,
    ) -> PyResult<u64> {
        let opts = SetOptions {
            expire: (ttl > 0).then_some(Expire::Seconds(ttl)),
            nx: false,
        };
        let cmds = items
            .into_iter()
            .map(|(k, v)| Ok(set_command(&RespKey::new(k)?, Bytes::from(v), opts)))
            .collect::<Result<Vec<_>, cachelab_proto::KeyError>>()
            .map_err(|e| raise(py, "InvalidKey", e.to_string()))?;
        let replies = self.with(py, |c| c.pipeline(&cmds))?;
        Ok(replies
            .iter()
            .filter(|r| matches!(r, Value::Simple(ok) if ok.as_ref() == b"OK"))
            .count() as u64)
    }

    /// `UNLINK key` for each of `keys`, one command each, pipelined in one write (a Redis
    /// Cluster refuses one `UNLINK` of keys in different slots): whether each key was there.
    /// An error reply raises `ServerError` with the server's text.
    fn unlink_each(&mut self, py: Python<'_>, keys: Vec<String>) -> PyResult<Vec<bool>> {
        let cmds = keys
            .into_iter()
            .map(|k| Ok(Command::new("UNLINK").key(&RespKey::new(k)?)))
            .collect::<Result<Vec<_>, cachelab_proto::KeyError>>()
            .map_err(|e| raise(py, "InvalidKey", e.to_string()))?;
        let replies = self.with(py, |c| c.pipeline(&cmds))?;
        replies
            .into_iter()
            .map(|r| match r {
                Value::Integer(n) => Ok(n > 0),
                v => Err(raise(py, "ServerError", format!("UNLINK answered {v:?}"))),
            })
            .collect()
    }

    fn close(&mut self) {
        self.conn = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &mut self,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) {
        self.close();
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RespClient>()?;
    m.add_function(wrap_pyfunction!(parse_resp_url, m)?)?;
    m.add_function(wrap_pyfunction!(redact_resp_url, m)?)?;
    Ok(())
}
