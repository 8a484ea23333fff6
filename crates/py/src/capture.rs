//! The capture reader (`cachelab_capture`) for Python: `CaptureReader` reads memcached's
//! watcher stream (or bytes fed to it) into capture rows with the GIL released, and hands
//! them over as column buffers that `cachelab.traces.capture` turns into Arrow arrays.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use cachelab_capture::{Columns, Lines, Monitor, Sink, State, Status, Watch, WatchError};

use cachelab_client::Address;

use crate::errors::raise;
use crate::tls::tls_from;

/// What the rows come from: memcached's watcher stream or Redis's `MONITOR`.
enum Parser {
    Watch(State),
    Monitor(Monitor),
}

impl Sink for Parser {
    fn line(&mut self, line: &[u8], out: &mut Columns) {
        match self {
            Parser::Watch(s) => s.line(line, out),
            Parser::Monitor(m) => m.line(line, out),
        }
    }
}

/// A capture reader: a [`State`] (or, `monitor=True`, a [`Monitor`]) and, once `watch`
/// (or `monitor`) is called, its connection.
#[pyclass(module = "cachelab._core", name = "CaptureReader")]
pub struct PyCaptureReader {
    state: Parser,
    cols: Columns,
    lines: Lines,
    watch: Option<Watch>,
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * N);
    for &x in v {
        out.extend_from_slice(&f(x));
    }
    out
}

#[pymethods]
impl PyCaptureReader {
    /// `secret`: the pseudonyms' key (at most 64 bytes); `sample` in (0, 1]; `t0`: the time
    /// subtracted from the stream's timestamps (default: the first line's). `monitor`: the
    /// stream is Redis's `MONITOR` (rows of its cache commands; `db` keeps one database's).
    #[new]
    #[pyo3(signature = (secret, keep_keys, sample, t0 = None, monitor = false, db = None))]
    fn new(
        py: Python<'_>,
        secret: &[u8],
        keep_keys: bool,
        sample: f64,
        t0: Option<f64>,
        monitor: bool,
        db: Option<u32>,
    ) -> PyResult<Self> {
        if secret.len() > 64 || !(sample > 0.0 && sample <= 1.0) {
            return Err(raise(
                py,
                "UsageError",
                "secret of at most 64 bytes and sample in (0, 1]".into(),
            ));
        }
        Ok(PyCaptureReader {
            state: if monitor {
                Parser::Monitor(Monitor::new(secret, keep_keys, sample, db, t0))
            } else {
                Parser::Watch(State::new(secret, keep_keys, sample, t0))
            },
            cols: Columns::new(),
            lines: Lines::default(),
            watch: None,
        })
    }

    /// Connects to `address` (HOST:PORT or unix:PATH) and sends `watch fetchers mutations`;
    /// ServerUnreachable or ServerError when it cannot. From then on a thread of its own
    /// drains the stream into memory; `max_buffer` caps the bytes read and not parsed yet
    /// (`read` then says "max_buffer"); `wake` keeps the server's logger awake (a second
    /// watcher, of connection events, and a connection opened and closed every 10 ms).
    #[pyo3(signature = (address, connect_timeout, max_buffer = 1 << 30, wake = true))]
    fn watch(
        &mut self,
        py: Python<'_>,
        address: &str,
        connect_timeout: f64,
        max_buffer: u64,
        wake: bool,
    ) -> PyResult<()> {
        let t = Duration::from_secs_f64(connect_timeout.clamp(0.001, 600.0));
        let address = address.to_string();
        match py.detach(|| Watch::open(&address, t, max_buffer, wake)) {
            Ok(w) => {
                self.watch = Some(w);
                Ok(())
            }
            Err(WatchError::Unreachable(m)) => Err(raise(py, "ServerUnreachable", m)),
            Err(WatchError::Refused(m)) => Err(raise(py, "ServerError", m)),
        }
    }

    /// Connects to a Redis at `address` (HOST:PORT or unix:PATH), logs in (`AUTH [user]
    /// password` when a password is given) and sends `MONITOR`; ServerUnreachable or
    /// ServerError (never showing the password) when it cannot. Drained as `watch`'s stream
    /// is; the connection's own address is excluded from the rows (`local_address`).
    #[pyo3(signature = (address, connect_timeout, max_buffer = 1 << 30, user = None,
                        password = None, tls = None))]
    #[allow(clippy::too_many_arguments)]
    fn monitor(
        &mut self,
        py: Python<'_>,
        address: &str,
        connect_timeout: f64,
        max_buffer: u64,
        user: Option<String>,
        password: Option<String>,
        tls: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        if !matches!(self.state, Parser::Monitor(_)) {
            return Err(raise(
                py,
                "UsageError",
                "monitor() on a reader made without monitor=True".into(),
            ));
        }
        let settings = match tls_from(py, tls)? {
            Some(tls) => {
                let name = tls
                    .server_name(&Address::Tcp(address.to_string()))
                    .map_err(|e| raise(py, "UsageError", e.to_string()))?;
                Some((tls.config(), name))
            }
            None => None,
        };
        let t = Duration::from_secs_f64(connect_timeout.clamp(0.001, 600.0));
        let address = address.to_string();
        let opened = py.detach(|| {
            let login = password.as_deref().map(|p| (user.as_deref(), p));
            Watch::monitor(&address, t, max_buffer, login, settings)
        });
        match opened {
            Ok(w) => {
                if let Parser::Monitor(m) = &mut self.state {
                    m.exclude(w.local_address().as_bytes());
                }
                self.watch = Some(w);
                Ok(())
            }
            Err(WatchError::Unreachable(m)) => Err(raise(py, "ServerUnreachable", m)),
            Err(WatchError::Refused(m)) => Err(raise(py, "ServerError", m)),
        }
    }

    /// The commands of `client` (as MONITOR names it, e.g. `127.0.0.1:5555`) are counted,
    /// not written (cachelab's own connections).
    fn exclude(&mut self, client: &str) {
        if let Parser::Monitor(m) = &mut self.state {
            m.exclude(client.as_bytes());
        }
    }

    /// The local address of the reader's connection (empty before one, or over a Unix
    /// socket).
    #[getter]
    fn local_address(&self) -> String {
        self.watch
            .as_ref()
            .map_or(String::new(), |w| w.local_address())
    }

    /// MONITOR: the commands seen and not written, by command, in the order first seen
    /// (empty for memcached's stream).
    #[getter]
    fn other(&self) -> Vec<(String, u64)> {
        match &self.state {
            Parser::Monitor(m) => m.other.clone(),
            Parser::Watch(_) => Vec::new(),
        }
    }

    /// MONITOR: the commands written (an MGET of 3 keys is one), and the lines that were
    /// not a command.
    #[getter]
    fn commands(&self) -> u64 {
        match &self.state {
            Parser::Monitor(m) => m.commands,
            Parser::Watch(_) => 0,
        }
    }
    #[getter]
    fn malformed(&self) -> u64 {
        match &self.state {
            Parser::Monitor(m) => m.malformed,
            Parser::Watch(_) => 0,
        }
    }

    /// Parses the stream drained so far, waiting up to `wait` seconds for more, until `batch`
    /// rows are waiting, the rows waiting reach `max_rows`, or `max_bytes` of stream were
    /// parsed. Returns "more", "closed", "max_events", "max_bytes" or "max_buffer".
    fn read(
        &mut self,
        py: Python<'_>,
        wait: f64,
        batch: usize,
        max_rows: usize,
        max_bytes: u64,
    ) -> PyResult<&'static str> {
        let Some(w) = self.watch.as_mut() else {
            return Err(raise(py, "UsageError", "read() before watch()".into()));
        };
        let (state, cols) = (&mut self.state, &mut self.cols);
        let wait = Duration::from_secs_f64(wait.clamp(0.0, 60.0));
        let got = py.detach(|| w.read(state, cols, wait, batch, max_rows, max_bytes));
        match got {
            Ok(Status::More) => Ok("more"),
            Ok(Status::Closed) => Ok("closed"),
            Ok(Status::MaxEvents) => Ok("max_events"),
            Ok(Status::MaxBytes) => Ok("max_bytes"),
            Ok(Status::MaxBuffer) => Ok("max_buffer"),
            Err(e) => Err(raise(py, "ServerError", format!("the stream failed: {e}"))),
        }
    }

    /// Feeds stream bytes (as read from the connection); false when the rows waiting reached
    /// `max_rows` (the rest of `data` is dropped).
    fn feed(&mut self, py: Python<'_>, data: &[u8], max_rows: usize) -> bool {
        let (lines, state, cols) = (&mut self.lines, &mut self.state, &mut self.cols);
        py.detach(|| lines.feed(data, state, cols, max_rows))
    }

    /// Stops reading the connection: what was read stays to be parsed (`read` says "closed"
    /// once all of it is).
    fn stop_reading(&mut self, py: Python<'_>) {
        if let Some(w) = self.watch.as_mut() {
            py.detach(|| w.stop());
        }
    }

    /// Closes the connection (and stops its threads).
    fn close(&mut self, py: Python<'_>) {
        let w = self.watch.take();
        py.detach(|| drop(w));
    }

    /// Writes the fetches still held back (at the end of a capture).
    fn flush(&mut self) {
        if let Parser::Watch(s) = &mut self.state {
            s.flush(&mut self.cols);
        }
    }

    /// Rows waiting.
    fn __len__(&self) -> usize {
        self.cols.len()
    }

    /// The rows waiting as column buffers (little-endian; `keys` + `offsets` as an Arrow
    /// string array's; `op` and `status` as u16 indices into `words`), and forgets them.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.cols;
        let d = PyDict::new(py);
        d.set_item("rows", c.len())?;
        d.set_item("time", PyBytes::new(py, &le(&c.time, f64::to_le_bytes)))?;
        d.set_item("keys", PyBytes::new(py, &c.keys))?;
        d.set_item(
            "offsets",
            PyBytes::new(py, &le(&c.offsets, i32::to_le_bytes)),
        )?;
        d.set_item("op", PyBytes::new(py, &le(&c.op, u16::to_le_bytes)))?;
        d.set_item("status", PyBytes::new(py, &le(&c.status, u16::to_le_bytes)))?;
        d.set_item("size", PyBytes::new(py, &le(&c.size, u32::to_le_bytes)))?;
        d.set_item("clsid", PyBytes::new(py, &le(&c.clsid, u16::to_le_bytes)))?;
        d.set_item("conn", PyBytes::new(py, &le(&c.conn, i32::to_le_bytes)))?;
        d.set_item(
            "request",
            PyBytes::new(py, &le(&c.request, i64::to_le_bytes)),
        )?;
        d.set_item("ttl", PyBytes::new(py, &le(&c.ttl, i64::to_le_bytes)))?;
        d.set_item(
            "key_bytes",
            PyBytes::new(py, &le(&c.key_bytes, u16::to_le_bytes)),
        )?;
        d.set_item("words", c.words.clone())?;
        self.cols.clear();
        Ok(d)
    }

    /// Accesses written so far by op, in the order first seen.
    #[getter]
    fn ops(&self) -> Vec<(String, u64)> {
        match &self.state {
            Parser::Watch(s) => s.ops.clone(),
            Parser::Monitor(m) => m.ops.clone(),
        }
    }
    #[getter]
    fn hits(&self) -> u64 {
        match &self.state {
            Parser::Watch(s) => s.hits,
            Parser::Monitor(_) => 0,
        }
    }
    /// Lines the server said it skipped (`skipped=N`).
    #[getter]
    fn lost(&self) -> u64 {
        match &self.state {
            Parser::Watch(s) => s.lost,
            Parser::Monitor(_) => 0,
        }
    }
    #[getter]
    fn store_lookups(&self) -> u64 {
        match &self.state {
            Parser::Watch(s) => s.store_lookups,
            Parser::Monitor(_) => 0,
        }
    }
    #[getter]
    fn sampled_out(&self) -> u64 {
        match &self.state {
            Parser::Watch(s) => s.sampled_out,
            Parser::Monitor(m) => m.sampled_out,
        }
    }
    /// Stream bytes parsed.
    #[getter]
    fn received(&self) -> u64 {
        self.watch.as_ref().map_or(0, |w| w.received)
    }
    /// Whether the server's logger thread is awake (see `watch`'s `wake`; true without it).
    #[getter]
    fn awake(&self) -> bool {
        self.watch.as_ref().is_none_or(|w| w.awake())
    }
    /// Stream bytes read from the connection and not parsed yet.
    #[getter]
    fn buffered(&self) -> u64 {
        self.watch.as_ref().map_or(0, |w| w.buffered())
    }
    /// The most stream bytes held read and not parsed yet at once.
    #[getter]
    fn peak_buffered(&self) -> u64 {
        self.watch.as_ref().map_or(0, |w| w.peak_buffered)
    }
    /// The time subtracted from the stream's timestamps (None before the first line).
    #[getter]
    fn t0(&self) -> Option<f64> {
        match &self.state {
            Parser::Watch(s) => s.t0,
            Parser::Monitor(m) => m.t0,
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCaptureReader>()
}
