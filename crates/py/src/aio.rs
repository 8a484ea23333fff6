//! `AsyncClient`: memcached from asyncio. Its methods return awaitables (asyncio futures made by
//! `pyo3-async-runtimes`) whose work runs on one tokio runtime shared by the module (one worker
//! thread, `cachelab-aio`), over one [`SharedConnection`] per client: concurrent awaits are
//! pipelined on one socket, not one thread or socket each.
//!
//! Keys are checked and copied with the GIL held, before anything is sent; the request runs
//! without it; the answer (or the error, as a `cachelab.errors` class) becomes Python objects
//! in the runtime's blocking pool, which then completes the asyncio future on its loop.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tokio::sync::Mutex;

use cachelab_client::{Address, Error, Options, SharedConnection};
use cachelab_proto::{Key, Value};

use crate::client::{key, seconds, ListReply};
use crate::errors::{client_error, parse_address, raise};
use crate::tls::tls_from;

/// The connection of a client: made on first use, made again after it broke.
#[derive(Default)]
struct State {
    conn: Option<Arc<SharedConnection>>,
    closed: bool,
}

/// Why a call failed: the client's error, or a client closed before.
enum Failure {
    Client(Error),
    Closed,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Client(e)
    }
}

/// What an awaited call answers.
enum Answer {
    List(ListReply),
    Found(Vec<Value>),
    Flag(bool),
    Flags(Vec<bool>),
    Nothing,
}

/// A call's outcome, made into Python objects (or raised) once it is handed to its loop.
struct Done(Result<Answer, Failure>);

impl<'py> IntoPyObject<'py> for Done {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            Ok(Answer::List(r)) => r.into_tuple(py)?.into_pyobject(py).map(Bound::into_any),
            Ok(Answer::Found(found)) => {
                let out = PyDict::new(py);
                for v in found {
                    out.set_item(PyBytes::new(py, &v.key), PyBytes::new(py, &v.data))?;
                }
                Ok(out.into_any())
            }
            Ok(Answer::Flags(f)) => f.into_pyobject(py),
            Ok(Answer::Flag(f)) => Ok(f.into_pyobject(py)?.to_owned().into_any()),
            Ok(Answer::Nothing) => Ok(py.None().into_bound(py)),
            Err(Failure::Client(e)) => Err(client_error(py, e)),
            Err(Failure::Closed) => Err(raise(py, "ConnectionClosed", "client is closed".into())),
        }
    }
}

/// A memcached client for asyncio over TCP (`host:port`), TLS or a Unix socket (`unix:/path`):
/// every method returns an awaitable. One connection, made on the first call (within
/// `connect_timeout`) and again after a failure; concurrent calls share it, their requests
/// pipelined. Each call waits at most `timeout` for its reply once connected.
#[pyclass(module = "cachelab._core", frozen)]
struct AsyncClient {
    address: Address,
    options: Options,
    state: Arc<Mutex<State>>,
}

impl AsyncClient {
    /// Runs `call` on the client's connection as an awaitable.
    fn run<'py, F, Fut>(&self, py: Python<'py>, call: F) -> PyResult<Bound<'py, PyAny>>
    where
        F: FnOnce(Arc<SharedConnection>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<Answer, Error>> + Send,
    {
        let (address, options, state) = (
            self.address.clone(),
            self.options.clone(),
            Arc::clone(&self.state),
        );
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let outcome = match connection(&address, options, &state).await {
                Ok(conn) => call(conn).await.map_err(Failure::Client),
                Err(f) => Err(f),
            };
            Ok(Done(outcome))
        })
    }
}

/// The client's connection: the one open, else a new one (one caller connects, the others
/// wait for it: at most the connect timeout).
async fn connection(
    address: &Address,
    options: Options,
    state: &Mutex<State>,
) -> Result<Arc<SharedConnection>, Failure> {
    let mut s = state.lock().await;
    if s.closed {
        return Err(Failure::Closed);
    }
    if let Some(c) = &s.conn {
        if c.broken().is_none() {
            return Ok(Arc::clone(c));
        }
    }
    s.conn = None;
    let c = Arc::new(SharedConnection::connect(address, options).await?);
    s.conn = Some(Arc::clone(&c));
    Ok(c)
}

fn keys(py: Python<'_>, keys: &[Bound<'_, PyAny>]) -> PyResult<Vec<Key>> {
    keys.iter().map(|k| key(py, k)).collect()
}

#[pymethods]
impl AsyncClient {
    #[new]
    #[pyo3(signature = (address, *, connect_timeout = 2.0, timeout = 1.0, tls = None))]
    fn new(
        py: Python<'_>,
        address: &str,
        connect_timeout: f64,
        timeout: f64,
        tls: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<AsyncClient> {
        Ok(AsyncClient {
            address: parse_address(py, address)?,
            options: Options {
                connect_timeout: seconds(py, "connect_timeout", connect_timeout)?,
                request_timeout: seconds(py, "timeout", timeout)?,
                tls: tls_from(py, tls)?,
            },
            state: Arc::default(),
        })
    }

    /// Awaits one multi-get answered in the order of `keys`, as `Client.get_multi_list`:
    /// `(values, found, others, stripped_bytes)`.
    #[pyo3(signature = (keys, strip = None))]
    fn get_multi_list<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Bound<'py, PyAny>>,
        strip: Option<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ks = self::keys(py, &keys)?;
        let strip = strip.unwrap_or_default();
        self.run(py, move |c| async move {
            let found = c.get_multi(&ks).await?;
            Ok(Answer::List(ListReply::new(&ks, found, &strip)))
        })
    }

    /// Awaits one multi-get: {key: value} for the keys found.
    fn get_multi<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ks = self::keys(py, &keys)?;
        self.run(py, move |c| async move {
            c.get_multi(&ks).await.map(Answer::Found)
        })
    }

    /// Awaits `set`: True when stored.
    #[pyo3(signature = (key, value, *, flags = 0, exptime = 0))]
    fn set<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        value: Vec<u8>,
        flags: u32,
        exptime: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let k = self::key(py, key)?;
        self.run(py, move |c| async move {
            let stored = c.set(&k, value.into(), flags, exptime).await?;
            Ok(Answer::Flag(stored))
        })
    }

    /// Awaits `delete` of many keys in one batch: per key, True when it existed.
    fn delete_many<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ks = self::keys(py, &keys)?;
        self.run(py, move |c| async move {
            c.delete_many(&ks).await.map(Answer::Flags)
        })
    }

    /// Closes the connection: later calls raise ConnectionClosed. Awaiting it waits until the
    /// calls under way have their answers (at most the timeout) and the socket is closed.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = Arc::clone(&self.state);
        let wait = self.options.request_timeout + Duration::from_secs(1);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let conn = {
                let mut s = state.lock().await;
                s.closed = true;
                s.conn.take()
            };
            if let Some(c) = conn {
                c.close(wait).await;
            }
            Ok(Done(Ok(Answer::Nothing)))
        })
    }

    fn __repr__(&self) -> String {
        format!("AsyncClient({:?})", self.address.to_string())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(1)
        .thread_name("cachelab-aio")
        .enable_all();
    pyo3_async_runtimes::tokio::init(builder);
    m.add_class::<AsyncClient>()?;
    Ok(())
}
