//! The watcher connection: connect, `watch fetchers mutations`, then a thread of its own
//! drains the socket into memory as fast as the server writes (so a slow parser or writer
//! never makes the server skip lines, only grows the memory held, up to a cap), while
//! [`Watch::read`] splits what it read into lines for a [`State`]. A second thread keeps the
//! server's logger awake ([`waker`]).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::state::{Columns, Sink};

const READ_CHUNK: usize = 1 << 20;

/// Why a watch could not start.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchError {
    /// No connection (refused, timed out, no such host or socket).
    Unreachable(String),
    /// Connected, but the server did not answer `watch` with OK.
    Refused(String),
}

/// Why a read returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The wait ended, or the batch is full: read again.
    More,
    /// The server closed the stream.
    Closed,
    /// The row cap was reached.
    MaxEvents,
    /// The byte cap was reached.
    MaxBytes,
    /// The bytes read but not parsed yet passed their cap (the parser fell that far behind):
    /// the capture stops rather than drop lines.
    MaxBuffer,
}

/// Bytes -> lines -> [`State`], keeping a line cut by a chunk's end for the next chunk.
#[derive(Default)]
pub struct Lines {
    rest: Vec<u8>,
}

impl Lines {
    /// Feeds `chunk`'s complete lines to `state`; false when `out` reached `max_rows` (the
    /// remaining lines are dropped, as the Python reader drops them).
    pub fn feed<S: Sink + ?Sized>(
        &mut self,
        chunk: &[u8],
        state: &mut S,
        out: &mut Columns,
        max_rows: usize,
    ) -> bool {
        let mut from = 0;
        while let Some(nl) = chunk[from..].iter().position(|&b| b == b'\n') {
            let end = from + nl;
            if self.rest.is_empty() {
                state.line(&chunk[from..end], out);
            } else {
                self.rest.extend_from_slice(&chunk[from..end]);
                let line = std::mem::take(&mut self.rest);
                state.line(&line, out);
                self.rest = line;
                self.rest.clear();
            }
            from = end + 1;
            if out.len() >= max_rows {
                return false;
            }
        }
        self.rest.extend_from_slice(&chunk[from..]);
        true
    }
}

/// The rustls settings of a TLS connection (`rediss://`): its configuration and the name
/// sent and verified.
pub type TlsSettings = (
    std::sync::Arc<rustls::ClientConfig>,
    rustls::pki_types::ServerName<'static>,
);

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.sock.set_read_timeout(t),
        }
    }
    fn set_nonblocking(&self, yes: bool) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(yes),
            Stream::Unix(s) => s.set_nonblocking(yes),
            Stream::Tls(s) => s.sock.set_nonblocking(yes),
        }
    }
    /// A second handle on the connection; for TLS, on its socket alone (enough to shut it).
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tls(s) => Stream::Tcp(s.sock.try_clone()?),
        })
    }
    /// Both directions shut (a read blocked in another thread returns at once).
    fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            Stream::Tls(s) => s.sock.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Tls(s) => s.flush(),
            _ => Ok(()),
        }
    }
}

fn connect(address: &str, timeout: Duration) -> std::io::Result<Stream> {
    if let Some(path) = address.strip_prefix("unix:") {
        let s = UnixStream::connect(path)?;
        s.set_write_timeout(Some(timeout))?;
        return Ok(Stream::Unix(s));
    }
    let (host, port) = address.rsplit_once(':').ok_or_else(|| {
        std::io::Error::new(ErrorKind::InvalidInput, "not HOST:PORT or unix:PATH")
    })?;
    let port: u16 = port
        .parse()
        .map_err(|_| std::io::Error::new(ErrorKind::InvalidInput, "bad port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let mut last = std::io::Error::new(ErrorKind::NotFound, "no address for the host");
    for a in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                s.set_write_timeout(Some(timeout))?;
                s.set_nodelay(true)?;
                return Ok(Stream::Tcp(s));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// What the drain thread hands over.
enum Chunk {
    Data(Vec<u8>),
    Closed,
    Failed(std::io::Error),
    Full,
}

/// Shared between a [`Watch`] and its threads.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Bytes read from the socket and not parsed yet.
    buffered: AtomicU64,
    /// The server's logger answers at once (or there is no waker): see [`Watch::awake`].
    awake: AtomicBool,
    /// When the drain thread last read stream bytes: microseconds since `epoch`.
    last_data_us: AtomicU64,
    epoch: Option<Instant>,
}

impl Shared {
    fn since_epoch_us(&self) -> u64 {
        self.epoch.map_or(0, |e| e.elapsed().as_micros() as u64)
    }
    /// Whether the stream brought bytes within `d` (the server's logger is then awake).
    fn flowing_within(&self, d: Duration) -> bool {
        let last = self.last_data_us.load(Ordering::Relaxed);
        last > 0 && self.since_epoch_us().saturating_sub(last) < d.as_micros() as u64
    }
}

/// How long the drain thread's read blocks before it looks at the stop flag.
const DRAIN_POLL: Duration = Duration::from_millis(100);
/// How often the waker opens and closes a connection (see [`waker`]).
pub const WAKE_EVERY: Duration = Duration::from_millis(10);
/// The logger is awake once the events of this many pokes in a row came within
/// [`AWAKE_WITHIN`] each.
const AWAKE_STREAK: u32 = 5;
const AWAKE_WITHIN: Duration = Duration::from_millis(30);

/// A connection that has sent `watch fetchers mutations` and been told OK, drained by its own
/// thread into memory as fast as the server writes (a slow parser only grows the memory held,
/// up to `max_buffer` bytes, after which [`Watch::read`] says [`Status::MaxBuffer`]).
pub struct Watch {
    /// In a mutex only to be Sync (a Python object's field); [`Watch::read`] takes it
    /// with `get_mut`, never locking.
    chunks: Mutex<Receiver<Chunk>>,
    shared: Arc<Shared>,
    lines: Lines,
    /// Bytes of the stream parsed so far (with those that came with the OK).
    pub received: u64,
    /// Stream bytes that came with the OK, not yet fed.
    pending: Vec<u8>,
    /// A clone of the stream, shut down on close so that a blocked read ends at once.
    stream: Stream,
    threads: Vec<JoinHandle<()>>,
    /// The most bytes held between the drain and the parser at once.
    pub peak_buffered: u64,
}

impl Watch {
    /// Opens the watch; `max_buffer` caps the bytes read but not parsed yet; `wake` starts
    /// the logger waker (see [`wake`]).
    pub fn open(
        address: &str,
        timeout: Duration,
        max_buffer: u64,
        wake: bool,
    ) -> Result<Watch, WatchError> {
        let mut stream = connect(address, timeout)
            .map_err(|e| WatchError::Unreachable(format!("{address}: cannot connect: {e}")))?;
        let rest = start_watch(
            &mut stream,
            address,
            b"watch fetchers mutations\r\n",
            timeout,
        )?;
        Watch::start(stream, rest, address, timeout, max_buffer, wake)
    }

    /// Opens Redis's `MONITOR` stream at `address` (HOST:PORT or unix:PATH), over TLS with
    /// `tls`: `AUTH` with `login` (user, password) first when given, then `MONITOR`, answered
    /// `+OK`. The password is never in an error. Drained as [`Watch::open`]'s stream is (no
    /// waker).
    pub fn monitor(
        address: &str,
        timeout: Duration,
        max_buffer: u64,
        login: Option<(Option<&str>, &str)>,
        tls: Option<TlsSettings>,
    ) -> Result<Watch, WatchError> {
        let mut stream = connect(address, timeout)
            .map_err(|e| WatchError::Unreachable(format!("{address}: cannot connect: {e}")))?;
        if let Some((config, name)) = tls {
            let Stream::Tcp(tcp) = stream else {
                return Err(WatchError::Refused(format!(
                    "{address}: TLS over a Unix socket is not supported"
                )));
            };
            let conn = rustls::ClientConnection::new(config, name)
                .map_err(|e| WatchError::Refused(format!("{address}: TLS: {e}")))?;
            stream = Stream::Tls(Box::new(rustls::StreamOwned::new(conn, tcp)));
        }
        if let Some((user, password)) = login {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            if let Some(u) = user {
                args.push(u.as_bytes());
            }
            args.push(password.as_bytes());
            let (first, _) = command(&mut stream, address, &args, timeout)?;
            if first != b"+OK" {
                return Err(WatchError::Refused(format!(
                    "{address}: the server refused the login (AUTH): {}",
                    said(&first)
                )));
            }
        }
        let (first, rest) = command(&mut stream, address, &[b"MONITOR"], timeout)?;
        if first != b"+OK" {
            return Err(WatchError::Refused(format!(
                "{address}: the server refused MONITOR: {}",
                said(&first)
            )));
        }
        Watch::start(stream, rest, address, timeout, max_buffer, false)
    }

    /// The local address of the watching connection (`127.0.0.1:5555`; empty for a Unix
    /// socket): how the server names it as a client.
    pub fn local_address(&self) -> String {
        match &self.stream {
            Stream::Tcp(s) => s.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Stream::Tls(s) => s
                .sock
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            Stream::Unix(_) => String::new(),
        }
    }

    /// A stream that said OK, drained by a thread of its own from now on (and its logger
    /// kept awake with `wake`).
    fn start(
        stream: Stream,
        rest: Vec<u8>,
        address: &str,
        timeout: Duration,
        max_buffer: u64,
        wake: bool,
    ) -> Result<Watch, WatchError> {
        let no_reply = |e: std::io::Error| {
            WatchError::Refused(format!("{address}: cannot read the stream: {e}"))
        };
        // The drain thread reads the connection, the watch keeps a handle to shut it; a TLS
        // stream cannot be shared: the thread takes it, the watch keeps its socket.
        let (reading, stream) = if matches!(stream, Stream::Tls(_)) {
            let handle = stream.try_clone().map_err(no_reply)?;
            (stream, handle)
        } else {
            (stream.try_clone().map_err(no_reply)?, stream)
        };
        reading
            .set_read_timeout(Some(DRAIN_POLL))
            .map_err(no_reply)?;
        let shared = Arc::new(Shared {
            awake: AtomicBool::new(!wake),
            epoch: Some(Instant::now()),
            ..Shared::default()
        });
        let (tx, rx) = channel();
        let mut threads = Vec::new();
        let s = Arc::clone(&shared);
        threads.push(
            std::thread::Builder::new()
                .name("capture-drain".into())
                .spawn(move || drain(reading, tx, s, max_buffer))
                .map_err(no_reply)?,
        );
        if wake {
            let (s, a) = (Arc::clone(&shared), address.to_string());
            if let Ok(t) = std::thread::Builder::new()
                .name("capture-wake".into())
                .spawn(move || waker(&a, timeout, &s))
            {
                threads.push(t);
            }
        }
        Ok(Watch {
            chunks: Mutex::new(rx),
            shared,
            lines: Lines::default(),
            received: rest.len() as u64,
            pending: rest,
            stream,
            threads,
            peak_buffered: 0,
        })
    }

    /// Whether the server's logger thread is awake: its waker's last pokes were each logged
    /// within 30 ms (true at once without a waker, or when the server refused it). A logger
    /// that slept a second takes about that long again to wake: a capture waits for this
    /// before its clock starts.
    pub fn awake(&self) -> bool {
        self.shared.awake.load(Ordering::Relaxed)
    }

    /// Bytes read from the server and not parsed yet.
    pub fn buffered(&self) -> u64 {
        self.shared.buffered.load(Ordering::Relaxed)
    }

    /// Parses what the drain thread read, waiting up to `wait` for more, until `out` holds
    /// `batch` rows, `max_rows` rows, or `max_bytes` of stream were parsed; the stream's I/O
    /// error is returned as it is.
    pub fn read<S: Sink + ?Sized>(
        &mut self,
        state: &mut S,
        out: &mut Columns,
        wait: Duration,
        batch: usize,
        max_rows: usize,
        max_bytes: u64,
    ) -> std::io::Result<Status> {
        if !self.pending.is_empty() {
            let p = std::mem::take(&mut self.pending);
            if !self.lines.feed(&p, state, out, max_rows) {
                return Ok(Status::MaxEvents);
            }
        }
        let until = Instant::now() + wait;
        loop {
            if out.len() >= batch {
                return Ok(Status::More);
            }
            let left = until.saturating_duration_since(Instant::now());
            let chunks = self.chunks.get_mut().unwrap_or_else(|e| e.into_inner());
            let chunk = match chunks.recv_timeout(left) {
                Ok(c) => c,
                Err(RecvTimeoutError::Timeout) => return Ok(Status::More),
                Err(RecvTimeoutError::Disconnected) => return Ok(Status::Closed),
            };
            let data = match chunk {
                Chunk::Data(d) => d,
                Chunk::Closed => return Ok(Status::Closed),
                Chunk::Failed(e) => return Err(e),
                Chunk::Full => return Ok(Status::MaxBuffer),
            };
            let held = self
                .shared
                .buffered
                .fetch_sub(data.len() as u64, Ordering::Relaxed);
            self.peak_buffered = self.peak_buffered.max(held);
            self.received += data.len() as u64;
            if !self.lines.feed(&data, state, out, max_rows) {
                return Ok(Status::MaxEvents);
            }
            if self.received >= max_bytes {
                return Ok(Status::MaxBytes);
            }
        }
    }
}

impl Watch {
    /// Stops reading the socket (the drain thread and the waker end; the connection is shut):
    /// what was read is still there for [`Watch::read`], which says [`Status::Closed`] once
    /// it has parsed all of it.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.stream.shutdown();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a server answered, for an error: at most 80 bytes of its first line, quoted.
fn said(first: &[u8]) -> String {
    let said = String::from_utf8_lossy(&first[..first.len().min(80)])
        .trim()
        .to_string();
    if said.is_empty() {
        "nothing".to_string()
    } else {
        format!("{said:?}")
    }
}

/// Sends `args` as a RESP command and reads the first line of the answer (without its
/// `\r\n`), and the bytes that came after it.
fn command(
    stream: &mut Stream,
    address: &str,
    args: &[&[u8]],
    timeout: Duration,
) -> Result<(Vec<u8>, Vec<u8>), WatchError> {
    let no_reply = |e: std::io::Error| {
        WatchError::Refused(format!(
            "{address}: no reply to {}: {e}",
            String::from_utf8_lossy(args[0])
        ))
    };
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    stream.set_read_timeout(Some(timeout)).map_err(no_reply)?;
    stream.write_all(&out).map_err(no_reply)?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.windows(2).any(|w| w == b"\r\n") && reply.len() < 4096 {
        let n = stream.read(&mut buf).map_err(no_reply)?;
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..n]);
    }
    Ok(match reply.windows(2).position(|w| w == b"\r\n") {
        Some(i) => (reply[..i].to_vec(), reply[i + 2..].to_vec()),
        None => (reply, Vec::new()),
    })
}

/// Sends `command` and reads its OK; the stream bytes that came with it.
fn start_watch(
    stream: &mut Stream,
    address: &str,
    command: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, WatchError> {
    let no_reply =
        |e: std::io::Error| WatchError::Refused(format!("{address}: no reply to 'watch': {e}"));
    stream.set_read_timeout(Some(timeout)).map_err(no_reply)?;
    stream.write_all(command).map_err(no_reply)?;
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.windows(2).any(|w| w == b"\r\n") && reply.len() < 512 {
        let n = stream.read(&mut buf).map_err(no_reply)?;
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..n]);
    }
    let cut = reply.windows(2).position(|w| w == b"\r\n");
    let (first, rest) = match cut {
        Some(i) => (&reply[..i], reply[i + 2..].to_vec()),
        None => (&reply[..], Vec::new()),
    };
    if first != b"OK" {
        let said = String::from_utf8_lossy(&first[..first.len().min(80)])
            .trim()
            .to_string();
        let said = if said.is_empty() {
            "nothing".to_string()
        } else {
            said
        };
        let asked = String::from_utf8_lossy(command).trim().to_string();
        return Err(WatchError::Refused(format!(
            "{address}: the server refused '{asked}' (it answered {said:?}); capturing needs \
             memcached 1.6 or later"
        )));
    }
    Ok(rest)
}

/// The drain thread: the socket read into chunks as fast as the server writes, until the
/// stream ends, fails, the watch is closed, or `max_buffer` bytes wait to be parsed.
fn drain(mut stream: Stream, tx: Sender<Chunk>, shared: Arc<Shared>, max_buffer: u64) {
    let mut buf = vec![0u8; READ_CHUNK];
    while !shared.stop.load(Ordering::Relaxed) {
        let n = match stream.read(&mut buf) {
            Ok(0) => {
                let _ = tx.send(Chunk::Closed);
                return;
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                if !shared.stop.load(Ordering::Relaxed) {
                    let _ = tx.send(Chunk::Failed(e));
                }
                return;
            }
        };
        shared
            .last_data_us
            .store(shared.since_epoch_us().max(1), Ordering::Relaxed);
        let held = shared.buffered.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if tx.send(Chunk::Data(buf[..n].to_vec())).is_err() {
            return;
        }
        if held > max_buffer {
            let _ = tx.send(Chunk::Full);
            return;
        }
    }
}

/// Keeps the server's logger thread awake while a capture runs.
///
/// memcached's logger thread moves the lines its worker threads log (into a 64 KiB buffer
/// each, `-o worker_logbuf_size`) to the watchers; when it finds none it sleeps longer each
/// time, up to a second. A burst after a quiet spell then fills a worker's buffer before the
/// logger wakes, and the server drops the lines (`log_worker_dropped`): 2,178 of a 5,000
/// request burst in 0.3 s. So a second watcher asks for connection events (`watch
/// connevents`) and this thread opens and closes a connection every [`WAKE_EVERY`]: the
/// logger finds a line at each and never sleeps more than a few milliseconds. Its own lines
/// are read and dropped. No poke while the key stream itself brought bytes within the last
/// [`WAKE_EVERY`] (the logger is awake then): a busy server sees none. Best effort: a server
/// that refuses is left as it is.
fn waker(address: &str, timeout: Duration, shared: &Shared) {
    let Ok(mut events) = connect(address, timeout) else {
        shared.awake.store(true, Ordering::Relaxed);
        return;
    };
    if start_watch(&mut events, address, b"watch connevents\r\n", timeout).is_err() {
        shared.awake.store(true, Ordering::Relaxed);
        return;
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut streak = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        // A stream that flows shows the logger awake: no poke needed (none on a busy server).
        if shared.flowing_within(WAKE_EVERY) {
            shared.awake.store(true, Ordering::Relaxed);
            std::thread::sleep(WAKE_EVERY);
            continue;
        }
        if let Ok(poke) = connect(address, timeout) {
            poke.shutdown();
        }
        // Awake once the events of AWAKE_STREAK pokes in a row came within AWAKE_WITHIN.
        if events.set_read_timeout(Some(AWAKE_WITHIN)).is_err() {
            break;
        }
        match events.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => streak += 1,
            Err(_) => streak = 0,
        }
        if streak >= AWAKE_STREAK {
            shared.awake.store(true, Ordering::Relaxed);
        }
        // The rest of what came, dropped.
        if events.set_nonblocking(true).is_err() {
            break;
        }
        while matches!(events.read(&mut buf), Ok(n) if n > 0) {}
        if events.set_nonblocking(false).is_err() {
            break;
        }
        std::thread::sleep(WAKE_EVERY);
    }
    shared.awake.store(true, Ordering::Relaxed);
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
