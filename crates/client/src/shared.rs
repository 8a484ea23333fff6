//! [`SharedConnection`]: one connection used by many concurrent callers, their requests
//! pipelined.
//!
//! A task owns the [`Connection`]. Callers hand it their commands through a queue; each time it
//! is free it takes every request waiting (up to [`MAX_BATCH`]), writes them all at once, reads
//! the replies in order and hands each caller its own. So a hundred concurrent callers share one
//! socket and, under load, one write and one read. Each caller waits at most the request
//! timeout for its reply; a caller that gave up is skipped if its request was not sent yet.
//!
//! A failure breaks the connection (as for [`Connection`]): every request of that batch fails,
//! and so does every one still queued (with [`Error::Broken`]); the owner connects anew.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::{check, deleted, Address, Connection, Error, ErrorKind, Options};
use cachelab_proto::{Command, Key, Response, Store, Value};

/// The most requests one write carries.
pub const MAX_BATCH: usize = 256;

type Reply = Result<Vec<Response>, Error>;

struct Job {
    cmds: Vec<Command>,
    reply: oneshot::Sender<Reply>,
}

/// A connection shared by concurrent callers (`&self` methods); see the module docs.
pub struct SharedConnection {
    queue: Mutex<Option<mpsc::UnboundedSender<Job>>>,
    task: Mutex<Option<JoinHandle<()>>>,
    broken: Arc<Mutex<Option<ErrorKind>>>,
    address: Address,
    timeout: Duration,
}

impl SharedConnection {
    /// Connects (within `options.connect_timeout`) and starts the connection's task on the
    /// current tokio runtime.
    pub async fn connect(address: &Address, options: Options) -> Result<SharedConnection, Error> {
        let timeout = options.request_timeout;
        let conn = Connection::connect(address, options).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let broken = Arc::new(Mutex::new(None));
        let task = tokio::spawn(serve(conn, rx, Arc::clone(&broken)));
        Ok(SharedConnection {
            queue: Mutex::new(Some(tx)),
            task: Mutex::new(Some(task)),
            broken,
            address: address.clone(),
            timeout,
        })
    }

    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Why the connection can no longer be used, if it can't (closed: [`ErrorKind::Closed`]).
    pub fn broken(&self) -> Option<ErrorKind> {
        *self.broken.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `cmds` in one batch with other callers' and waits at most the request timeout
    /// for their replies, in order. Error replies are returned as responses.
    pub async fn pipeline(&self, cmds: Vec<Command>) -> Result<Vec<Response>, Error> {
        let (reply, answer) = oneshot::channel();
        let queued = match &*self.queue.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(q) => q.send(Job { cmds, reply }).is_ok(),
            None => false,
        };
        if !queued {
            return Err(Error::Broken(self.broken().unwrap_or(ErrorKind::Closed)));
        }
        match tokio::time::timeout(self.timeout, answer).await {
            Ok(Ok(r)) => r,
            // The task ended without answering: the connection broke under this request.
            Ok(Err(_)) => Err(Error::Broken(self.broken().unwrap_or(ErrorKind::Closed))),
            Err(_) => Err(Error::Timeout {
                address: self.address.to_string(),
                after: self.timeout,
            }),
        }
    }

    /// One `get` command for many keys; misses are absent from the result.
    pub async fn get_multi(&self, keys: &[Key]) -> Result<Vec<Value>, Error> {
        let mut out = self.pipeline(vec![Command::Get(keys.to_vec())]).await?;
        match check(out.pop().expect("one reply per command"))? {
            Response::Values(v) => Ok(v),
            r => Err(Error::unexpected("get", &r)),
        }
    }

    /// `set`: true when stored.
    pub async fn set(
        &self,
        key: &Key,
        data: Bytes,
        flags: u32,
        exptime: u32,
    ) -> Result<bool, Error> {
        let store = Store {
            key: key.clone(),
            flags,
            exptime,
            data,
        };
        let mut out = self.pipeline(vec![Command::Set(store)]).await?;
        match check(out.pop().expect("one reply per command"))? {
            Response::Stored => Ok(true),
            Response::NotStored | Response::Exists | Response::NotFound => Ok(false),
            r => Err(Error::unexpected("set", &r)),
        }
    }

    /// `delete` of many keys in one batch: per key, true when it existed.
    pub async fn delete_many(&self, keys: &[Key]) -> Result<Vec<bool>, Error> {
        let cmds = keys.iter().cloned().map(Command::Delete).collect();
        self.pipeline(cmds)
            .await?
            .into_iter()
            .map(|r| check(r).and_then(deleted))
            .collect()
    }

    /// Stops taking requests, lets the batch under way finish (bounded by the request
    /// timeout) and closes the socket; waits for that at most `wait`.
    pub async fn close(&self, wait: Duration) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut task) = task {
            if tokio::time::timeout(wait, &mut task).await.is_err() {
                task.abort();
            }
        }
        let mut broken = self.broken.lock().unwrap_or_else(PoisonError::into_inner);
        broken.get_or_insert(ErrorKind::Closed);
    }
}

impl Drop for SharedConnection {
    fn drop(&mut self) {
        // The task ends (and closes the socket) once its queue is closed and drained.
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

/// The connection's task: batches of waiting requests, one pipeline each, until the queue
/// closes or the connection breaks.
async fn serve(
    mut conn: Connection,
    mut rx: mpsc::UnboundedReceiver<Job>,
    broken: Arc<Mutex<Option<ErrorKind>>>,
) {
    let mut jobs: Vec<Job> = Vec::new();
    while let Some(first) = rx.recv().await {
        jobs.push(first);
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        // A caller that stopped waiting (its timeout, a cancelled task) is not sent.
        jobs.retain(|j| !j.reply.is_closed());
        if jobs.is_empty() {
            continue;
        }
        let counts: Vec<usize> = jobs.iter().map(|j| j.cmds.len()).collect();
        let cmds: Vec<Command> = jobs
            .iter_mut()
            .flat_map(|j| std::mem::take(&mut j.cmds))
            .collect();
        match conn.pipeline(&cmds).await {
            Ok(replies) => {
                let mut replies = replies.into_iter();
                for (job, n) in jobs.drain(..).zip(counts) {
                    let _ = job.reply.send(Ok(replies.by_ref().take(n).collect()));
                }
            }
            Err(e) => {
                *broken.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.kind());
                for job in jobs.drain(..) {
                    let _ = job.reply.send(Err(again(&e)));
                }
                break;
            }
        }
    }
    // Broken or closed: nothing more is sent on this socket; whoever still waits is told.
    rx.close();
    let kind = broken
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .unwrap_or(ErrorKind::Closed);
    while let Ok(job) = rx.try_recv() {
        let _ = job.reply.send(Err(Error::Broken(kind)));
    }
}

/// The same error again, for each caller of a failed batch (an [`Error`] is not `Clone`).
fn again(e: &Error) -> Error {
    match e {
        Error::Timeout { address, after } => Error::Timeout {
            address: address.clone(),
            after: *after,
        },
        Error::Closed => Error::Closed,
        Error::ClosedAtOnce { address, reset } => Error::ClosedAtOnce {
            address: address.clone(),
            reset: *reset,
        },
        Error::Io(io) => Error::Io(std::io::Error::new(io.kind(), io.to_string())),
        other => Error::Broken(other.kind()),
    }
}
