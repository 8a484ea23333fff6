//! `AsyncClient`: memcached from asyncio. Its methods return asyncio futures of the running
//! loop; the requests run on one tokio runtime shared by the module (one worker thread,
//! `cachelab-aio`), over one [`SharedConnection`] per client: concurrent awaits are pipelined
//! on one socket, not one thread or socket each.
//!
//! How an answer reaches its future (made by hand rather than with `pyo3-async-runtimes`,
//! which takes the GIL on a thread of its own and calls `call_soon_threadsafe` once per
//! answer: with a hundred awaits in flight those hand-offs fought the loop for the GIL — 5-7
//! thousand calls a second and 16-20 ms loop stalls, about aiomcache's rate): each loop has a
//! *mailbox*, a queue of (future, outcome) and a socket pair whose read end the loop watches
//! (`add_reader`). The tokio task that got an answer queues it and, if the queue was empty,
//! writes one byte; the loop, when it next polls, drains the queue on its own thread (the GIL
//! already held), making the Python objects and completing the futures. So no thread but the
//! loop's touches Python objects, and nothing waits for the GIL. A drain completes at most
//! [`PER_PASS`] futures and, if more are queued, calls itself again on the loop's next pass:
//! each completed future wakes its task on the pass after, so a hundred answers that came in
//! one batch are a hundred tasks resumed in one pass if drained at once — a hold of the loop of
//! several milliseconds, which timers and other tasks wait out.
//!
//! The way out is batched the same way: a call checks and copies its keys (the GIL held) and
//! queues its request in the mailbox's *outbox*; the first call of a pass of the loop also
//! schedules one flush (`call_soon`), which hands the whole outbox to the runtime in one spawn
//! (one wake-up of its thread a pass, not one a call: a wave of a hundred tasks each sending a
//! read no longer wakes that thread a hundred times while the loop is busy). The requests start
//! on the loop's next pass; the runtime's thread makes a task of each (cheap there: no wake-up)
//! and sends them together. A future cancelled in the meantime is skipped; its request still
//! ends within the timeout.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict};
use tokio::runtime::Runtime;

use cachelab_client::{Address, Error, Options, SharedConnection};
use cachelab_proto::{Key, Value};

use crate::client::{key, options, ListReply};
use crate::errors::{client_error, parse_address, raise};

/// The runtime every client's requests run on, made on first use.
fn runtime() -> PyResult<&'static Runtime> {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("cachelab-aio")
        .enable_all()
        .build()
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// The running event loop (`asyncio.get_running_loop()`, the function looked up once).
fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    GET_RUNNING_LOOP
        .import(py, "asyncio", "get_running_loop")?
        .call0()
}

/// A queued request: called on the runtime's thread, it spawns the request's task there.
type Job = Box<dyn FnOnce() + Send>;

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

/// A call's outcome, made into Python objects (or an exception) on the loop's thread.
struct Done(Result<Answer, Failure>);

impl Done {
    fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        match self.0 {
            Ok(Answer::List(r)) => r.into_tuple(py)?.into_pyobject(py).map(Bound::into_any),
            Ok(Answer::Found(found)) => {
                let out = PyDict::new(py);
                for v in found {
                    out.set_item(PyBytes::new(py, &v.key), PyBytes::new(py, &v.data))?;
                }
                Ok(out.into_any())
            }
            Ok(Answer::Flag(f)) => Ok(f.into_pyobject(py)?.to_owned().into_any()),
            Ok(Answer::Flags(f)) => f.into_pyobject(py),
            Ok(Answer::Nothing) => Ok(py.None().into_bound(py)),
            Err(Failure::Client(e)) => Err(client_error(py, e)),
            Err(Failure::Closed) => Err(raise(py, "ConnectionClosed", "client is closed".into())),
        }
    }
}

/// The most futures one drain of a mailbox completes: their tasks run on the loop's next pass,
/// so this bounds the tasks a batch of answers resumes in one pass. A task resuming from a
/// `get_many` of ten small values takes some 20-40 µs of the loop; 16 keep a pass near half a
/// millisecond, at the cost of one more poll of the loop (microseconds) per 16 answers.
const PER_PASS: usize = 16;

/// The part of a mailbox the runtime's tasks post to (no Python object is touched there:
/// the futures are only moved).
struct Slot {
    done: Mutex<VecDeque<(Py<PyAny>, Done)>>,
    bell: UnixStream,
    /// Requests posted to this mailbox and not answered yet.
    pending: AtomicUsize,
    /// Its client is closed or gone: the loop stops watching once nothing is pending.
    retired: AtomicBool,
    /// Requests made on the loop and not yet handed to the runtime (see the module docs).
    outbox: Mutex<Vec<Job>>,
}

impl Slot {
    /// Queues a request; true when it is the first since the last flush (the caller schedules
    /// one).
    fn queue(&self, job: Job) -> bool {
        let mut out = self.outbox.lock().unwrap_or_else(PoisonError::into_inner);
        out.push(job);
        out.len() == 1
    }

    /// The queued requests, taken out of the outbox (the lock released before they drop).
    fn take_outbox(&self) -> Vec<Job> {
        std::mem::take(&mut *self.outbox.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Hands the queued requests to the runtime in one spawn (one wake-up of its thread).
    fn flush(&self) -> PyResult<()> {
        let jobs = self.take_outbox();
        if !jobs.is_empty() {
            runtime()?.spawn(async move {
                for job in jobs {
                    job();
                }
            });
        }
        Ok(())
    }

    fn post(&self, future: Py<PyAny>, done: Done) {
        let mut q = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        let ring = q.is_empty();
        q.push_back((future, done));
        drop(q);
        self.pending.fetch_sub(1, Ordering::AcqRel);
        if ring {
            // A full socket buffer means a byte is already waiting: nothing is lost.
            let _ = (&self.bell).write(&[1]);
        }
    }

    fn retire(&self) {
        self.retired.store(true, Ordering::Release);
        let _ = (&self.bell).write(&[1]);
    }
}

/// One event loop's mailbox (see the module docs): the loop calls it when its socket is
/// readable.
#[pyclass(module = "cachelab._core", frozen)]
struct Mailbox {
    slot: Arc<Slot>,
    /// What the loop calls to flush the outbox (made once).
    flush: Py<Flush>,
    ear: UnixStream,
    event_loop: Py<PyAny>,
}

#[pymethods]
impl Mailbox {
    fn __call__(slf: &Bound<'_, Self>) {
        let py = slf.py();
        let this = slf.get();
        // The bell first, then the queue: a post after this read rings again (a post while
        // answers are left queued does not ring: this drain calls itself again for them).
        let mut buf = [0u8; 512];
        while matches!((&this.ear).read(&mut buf), Ok(n) if n > 0) {}
        let (done, more) = {
            let mut q = this
                .slot
                .done
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let n = q.len().min(PER_PASS);
            let now: Vec<_> = q.drain(..n).collect();
            (now, !q.is_empty())
        };
        for (future, outcome) in done {
            let future = future.bind(py);
            // A cancelled future (its task cancelled, or timed out by the caller) is skipped.
            if future
                .call_method0(intern!(py, "done"))
                .and_then(|d| d.is_truthy())
                .unwrap_or(true)
            {
                continue;
            }
            let _ = match outcome.into_py(py) {
                Ok(v) => future.call_method1(intern!(py, "set_result"), (v,)),
                Err(e) => future.call_method1(intern!(py, "set_exception"), (e.into_value(py),)),
            };
        }
        let event_loop = this.event_loop.bind(py);
        if more {
            // After the tasks just woken have run (they were scheduled first).
            if event_loop
                .call_method1(intern!(py, "call_soon"), (slf,))
                .is_ok()
            {
                return;
            }
            // A loop that no longer takes callbacks is closing: nothing left to deliver to.
        }
        if this.slot.retired.load(Ordering::Acquire)
            && this.slot.pending.load(Ordering::Acquire) == 0
        {
            let _ = event_loop.call_method1("remove_reader", (this.ear.as_raw_fd(),));
        }
    }
}

/// What the loop calls (`call_soon`) to flush a mailbox's outbox once a pass.
#[pyclass(module = "cachelab._core", frozen)]
struct Flush {
    slot: Arc<Slot>,
}

#[pymethods]
impl Flush {
    fn __call__(&self) -> PyResult<()> {
        self.slot.flush()
    }
}

/// A memcached client for asyncio over TCP (`host:port`), TLS or a Unix socket (`unix:/path`):
/// every method returns an asyncio future of the running loop. One connection, made on the
/// first call (within `connect_timeout`) and again after a failure; concurrent calls share
/// it, their requests pipelined. Each call waits at most `timeout` for its reply once
/// connected.
#[pyclass(module = "cachelab._core", frozen)]
struct AsyncClient {
    core: Arc<Core>,
    /// One mailbox per event loop the client was used from (a loop closed since is dropped).
    mailboxes: Mutex<Vec<(Py<PyAny>, Py<Mailbox>)>>,
    closed: AtomicBool,
}

/// What a client's requests share on the runtime.
struct Core {
    address: Address,
    options: Options,
    state: tokio::sync::Mutex<State>,
    /// Read-held by each request from the call until its command is queued on the connection;
    /// `close` write-locks it first, so the requests made before it are sent before it closes
    /// (they may reach the runtime in a flush after close's task, or be spawned behind it).
    gate: Arc<tokio::sync::RwLock<()>>,
}

/// The connection of a client: made on first use, made again after it broke.
#[derive(Default)]
struct State {
    conn: Option<Arc<SharedConnection>>,
    closed: bool,
}

impl AsyncClient {
    /// The running loop's mailbox (made, and watched by the loop, on first use). No Python
    /// code runs while the list is locked (it could wait for a thread that waits for it).
    fn slot<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Arc<Slot>, Bound<'py, Flush>)> {
        let event_loop = running_loop(py)?;
        let known: Vec<(Py<PyAny>, Arc<Slot>)> = {
            let boxes = self
                .mailboxes
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some((_, m)) = boxes.iter().find(|(l, _)| l.is(&event_loop)) {
                let m = m.get();
                return Ok((event_loop, Arc::clone(&m.slot), m.flush.bind(py).clone()));
            }
            boxes
                .iter()
                .map(|(l, m)| (l.clone_ref(py), Arc::clone(&m.get().slot)))
                .collect()
        };
        // Loops closed since are forgotten, and so are the requests still in their outboxes
        // (queued in the loop's last pass, its flush never run): nobody can await them, and
        // each holds the close gate and its slot (a cycle) — `close` would wait on them forever.
        let closed: Vec<Py<PyAny>> = known
            .into_iter()
            .filter(|(l, _)| {
                l.bind(py)
                    .call_method0("is_closed")
                    .and_then(|c| c.is_truthy())
                    .unwrap_or(true)
            })
            .map(|(l, slot)| {
                drop(slot.take_outbox());
                l
            })
            .collect();
        let (bell, ear) = UnixStream::pair()?;
        bell.set_nonblocking(true)?;
        ear.set_nonblocking(true)?;
        let fd = ear.as_raw_fd();
        let slot = Arc::new(Slot {
            done: Mutex::new(VecDeque::new()),
            bell,
            pending: AtomicUsize::new(0),
            retired: AtomicBool::new(false),
            outbox: Mutex::new(Vec::new()),
        });
        let flush = Bound::new(
            py,
            Flush {
                slot: Arc::clone(&slot),
            },
        )?;
        let mailbox = Py::new(
            py,
            Mailbox {
                slot: Arc::clone(&slot),
                flush: flush.clone().unbind(),
                ear,
                event_loop: event_loop.clone().unbind(),
            },
        )?;
        event_loop.call_method1("add_reader", (fd, mailbox.clone_ref(py)))?;
        let mut boxes = self
            .mailboxes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        boxes.retain(|(l, _)| !closed.iter().any(|c| c.is(l)));
        boxes.push((event_loop.clone().unbind(), mailbox));
        Ok((event_loop, slot, flush))
    }

    /// Queues `call` to run on the client's connection (see the module docs); returns the
    /// future it completes.
    fn run<'py, F, Fut>(&self, py: Python<'py>, call: F) -> PyResult<Bound<'py, PyAny>>
    where
        F: FnOnce(Arc<SharedConnection>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<Answer, Error>> + Send + 'static,
    {
        if self.closed.load(Ordering::Acquire) {
            return self.at_once(py, Done(Err(Failure::Closed)));
        }
        // Fails only once close has begun (its task holds or waits for the write lock).
        let Ok(gate) = Arc::clone(&self.core.gate).try_read_owned() else {
            return self.at_once(py, Done(Err(Failure::Closed)));
        };
        let (event_loop, slot, flush) = self.slot(py)?;
        let future = event_loop.call_method0(intern!(py, "create_future"))?;
        let handle = future.clone().unbind();
        let core = Arc::clone(&self.core);
        let mailbox = Arc::clone(&slot);
        slot.pending.fetch_add(1, Ordering::AcqRel);
        let first = slot.queue(Box::new(move || {
            tokio::spawn(async move {
                let outcome = match connection(&core).await {
                    Ok(conn) => {
                        // The command is queued in this poll, before close's task can run.
                        drop(gate);
                        call(conn).await.map_err(Failure::Client)
                    }
                    Err(f) => Err(f),
                };
                mailbox.post(handle, Done(outcome));
            });
        }));
        if first
            && event_loop
                .call_method1(intern!(py, "call_soon"), (flush,))
                .is_err()
        {
            slot.flush()?;
        }
        Ok(future)
    }
}

impl AsyncClient {
    /// A future of the running loop that is already done (a closed client's answer).
    fn at_once<'py>(&self, py: Python<'py>, done: Done) -> PyResult<Bound<'py, PyAny>> {
        let event_loop = running_loop(py)?;
        let future = event_loop.call_method0("create_future")?;
        match done.into_py(py) {
            Ok(v) => future.call_method1("set_result", (v,))?,
            Err(e) => future.call_method1("set_exception", (e.into_value(py),))?,
        };
        Ok(future)
    }
}

impl Drop for AsyncClient {
    fn drop(&mut self) {
        // Each loop stops watching this client's mailbox once its answers are delivered.
        for (_, m) in self
            .mailboxes
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            m.get().slot.retire();
        }
    }
}

/// The client's connection: the one open, else a new one (one caller connects, the others
/// wait for it: at most the connect timeout).
async fn connection(core: &Core) -> Result<Arc<SharedConnection>, Failure> {
    let mut s = core.state.lock().await;
    if s.closed {
        return Err(Failure::Closed);
    }
    if let Some(c) = &s.conn {
        if c.broken().is_none() {
            return Ok(Arc::clone(c));
        }
    }
    s.conn = None;
    let c = Arc::new(SharedConnection::connect(&core.address, core.options.clone()).await?);
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
            core: Arc::new(Core {
                address: parse_address(py, address)?,
                options: options(py, connect_timeout, timeout, tls)?,
                state: tokio::sync::Mutex::default(),
                gate: Arc::default(),
            }),
            mailboxes: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
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
    /// calls under way have their answers (at most the timeout) and the socket is closed; then
    /// the loops stop watching the client's mailboxes.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.closed.load(Ordering::Acquire) {
            return self.at_once(py, Done(Ok(Answer::Nothing)));
        }
        let (event_loop, slot, _) = self.slot(py)?;
        let future = event_loop.call_method0(intern!(py, "create_future"))?;
        let handle = future.clone().unbind();
        let core = Arc::clone(&self.core);
        let wait = self.core.options.request_timeout + Duration::from_secs(1);
        self.closed.store(true, Ordering::Release);
        // The requests queued on any loop go to the runtime now, ahead of close's task.
        let slots: Vec<Arc<Slot>> = self
            .mailboxes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, m)| Arc::clone(&m.get().slot))
            .collect();
        for s in &slots {
            s.retired.store(true, Ordering::Release);
            s.flush()?;
        }
        slot.pending.fetch_add(1, Ordering::AcqRel);
        runtime()?.spawn(async move {
            // Once every request made before has its command queued (or failed to connect).
            let gate = core.gate.write().await;
            let conn = {
                let mut s = core.state.lock().await;
                s.closed = true;
                s.conn.take()
            };
            drop(gate);
            if let Some(c) = conn {
                c.close(wait).await;
            }
            slot.post(handle, Done(Ok(Answer::Nothing)));
        });
        Ok(future)
    }

    /// Whether :meth:`close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn __repr__(&self) -> String {
        format!("AsyncClient({:?})", self.core.address.to_string())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AsyncClient>()?;
    Ok(())
}
