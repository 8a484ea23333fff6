//! The watcher connection: connect, `watch fetchers mutations`, then read the stream in
//! chunks and split it into lines for a [`State`].

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::state::{Columns, State};

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
}

/// Bytes -> lines -> [`State`], keeping a line cut by a chunk's end for the next chunk.
#[derive(Default)]
pub struct Lines {
    rest: Vec<u8>,
}

impl Lines {
    /// Feeds `chunk`'s complete lines to `state`; false when `out` reached `max_rows` (the
    /// remaining lines are dropped, as the Python reader drops them).
    pub fn feed(
        &mut self,
        chunk: &[u8],
        state: &mut State,
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

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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

/// A connection that has sent `watch fetchers mutations` and been told OK.
pub struct Watch {
    stream: Stream,
    lines: Lines,
    buf: Vec<u8>,
    /// Bytes of the stream read so far (with those that came with the OK).
    pub received: u64,
    /// Stream bytes that came with the OK, not yet fed.
    pending: Vec<u8>,
}

impl Watch {
    pub fn open(address: &str, timeout: Duration) -> Result<Watch, WatchError> {
        let mut stream = connect(address, timeout)
            .map_err(|e| WatchError::Unreachable(format!("{address}: cannot connect: {e}")))?;
        let no_reply =
            |e: std::io::Error| WatchError::Refused(format!("{address}: no reply to 'watch': {e}"));
        stream.set_read_timeout(Some(timeout)).map_err(no_reply)?;
        stream
            .write_all(b"watch fetchers mutations\r\n")
            .map_err(no_reply)?;
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
            return Err(WatchError::Refused(format!(
                "{address}: the server refused 'watch fetchers mutations' (it answered \
                 {said:?}); capturing needs memcached 1.6 or later"
            )));
        }
        Ok(Watch {
            stream,
            lines: Lines::default(),
            buf: vec![0u8; READ_CHUNK],
            received: rest.len() as u64,
            pending: rest,
        })
    }

    /// Reads for up to `wait`, or until `out` holds `batch` rows, `max_rows` rows, or the
    /// stream has given `max_bytes`; an I/O error is returned as it is.
    pub fn read(
        &mut self,
        state: &mut State,
        out: &mut Columns,
        wait: Duration,
        batch: usize,
        max_rows: usize,
        max_bytes: u64,
    ) -> std::io::Result<Status> {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || out.len() >= batch {
                return Ok(Status::More);
            }
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            let n = match self.stream.read(&mut self.buf) {
                Ok(0) => return Ok(Status::Closed),
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(Status::More)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.received += n as u64;
            if !self.pending.is_empty() {
                let p = std::mem::take(&mut self.pending);
                if !self.lines.feed(&p, state, out, max_rows) {
                    return Ok(Status::MaxEvents);
                }
            }
            if !self.lines.feed(&self.buf[..n], state, out, max_rows) {
                return Ok(Status::MaxEvents);
            }
            if self.received >= max_bytes {
                return Ok(Status::MaxBytes);
            }
        }
    }
}
