//! A connection's socket, TCP, TLS or Unix, used without blocking from a current-thread runtime.
//!
//! TLS is driven by hand (rustls without its I/O helpers) so that it keeps the shape of the
//! plain sockets: wait for readiness, then read or write what the socket takes now. The
//! handshake is the client crate's; after it, records are read and written here.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::task::{Context, Poll};

use bytes::BytesMut;
use rustls::ClientConnection;
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

use cachelab_client::{connect_tcp, connect_tls, connect_unix, Address, Error, Options};

/// An open connection to the server.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsSocket>),
    Unix(UnixStream),
}

/// A TCP socket and the TLS session over it (borrowed only inside one non-async call).
pub(crate) struct TlsSocket {
    tcp: TcpStream,
    session: RefCell<ClientConnection>,
}

/// The socket as `Read`/`Write` that never waits: `WouldBlock` when it has nothing.
struct NoWait<'a>(&'a TcpStream);

impl Read for NoWait<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for NoWait<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsSocket {
    /// Sends the records the session holds, as far as the socket takes them now.
    fn send_records(&self) -> io::Result<()> {
        let mut session = self.session.borrow_mut();
        while session.wants_write() {
            match session.write_tls(&mut NoWait(&self.tcp)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads every record the socket holds and appends their plaintext to `buf`.
    fn read_some(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let mut got = 0;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let mut session = self.session.borrow_mut();
            match session.reader().read(&mut chunk) {
                Ok(0) => return Ok(got), // close_notify: 0 means closed
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    got += n;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            match session.read_tls(&mut NoWait(&self.tcp)) {
                Ok(0) => return Ok(got),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if got > 0 { Ok(got) } else { Err(e) };
                }
                Err(e) => return Err(e),
            }
            session
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            drop(session);
            self.send_records()?;
        }
    }

    /// Takes plaintext only when the records before it have gone out, so that the bytes
    /// waiting inside the session stay bounded by one write.
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.send_records()?;
        if self.session.borrow().wants_write() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.session.borrow_mut().writer().write(buf)?;
        self.send_records()?;
        Ok(n)
    }
}

impl Stream {
    /// Connects within the connect timeout (TCP with Nagle's algorithm off), then shakes hands
    /// within it again over TLS.
    pub async fn connect(address: &Address, options: &Options) -> Result<Stream, Error> {
        match (address, &options.tls) {
            (_, Some(tls)) => {
                let (tcp, session) = connect_tls(address, options, tls).await?.into_inner();
                let session = RefCell::new(session);
                Ok(Stream::Tls(Box::new(TlsSocket { tcp, session })))
            }
            (Address::Tcp(hp), None) => Ok(Stream::Tcp(connect_tcp(hp, address, options).await?)),
            (Address::Unix(p), None) => Ok(Stream::Unix(connect_unix(p, address, options).await?)),
        }
    }

    /// RESP: sends `commands` (the login: `AUTH`, `SELECT`) and reads their `replies`, all
    /// within the connect timeout. An error reply (`WRONGPASS …`, `NOAUTH …`) is
    /// [`Error::Redis`] with the server's text (which never holds the password).
    pub async fn login(
        &self,
        commands: &[u8],
        replies: usize,
        address: &Address,
        options: &Options,
    ) -> Result<(), Error> {
        use cachelab_proto::resp::{complete_len, Limits};
        use cachelab_proto::DecodeError;
        let exchange = async {
            let mut at = 0;
            while at < commands.len() || self.pending() {
                std::future::poll_fn(|cx| self.poll_write_ready(cx))
                    .await
                    .map_err(Error::Io)?;
                if at < commands.len() {
                    match self.try_write(&commands[at..]) {
                        Ok(n) => at += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(Error::Io(e)),
                    }
                }
                self.send_pending().map_err(Error::Io)?;
            }
            let mut buf = BytesMut::with_capacity(4096);
            let mut got = 0;
            while got < replies {
                match complete_len(&buf, &Limits::default()) {
                    Ok(n) => {
                        let reply = buf.split_to(n);
                        if let Some(text) = reply.strip_prefix(b"-") {
                            let text = String::from_utf8_lossy(text);
                            return Err(Error::Redis(text.trim_end().to_string()));
                        }
                        got += 1;
                        continue;
                    }
                    Err(DecodeError::Incomplete) => {}
                    Err(error) => {
                        return Err(Error::RespProtocol {
                            address: address.to_string(),
                            error,
                            first: got == 0,
                            head: String::from_utf8_lossy(&buf[..buf.len().min(120)]).into_owned(),
                        })
                    }
                }
                std::future::poll_fn(|cx| self.poll_read_ready(cx))
                    .await
                    .map_err(Error::Io)?;
                if buf.capacity() - buf.len() < 1024 {
                    buf.reserve(4096);
                }
                match self.read_some(&mut buf) {
                    Ok(0) => return Err(Error::Closed),
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(Error::Io(e)),
                }
            }
            Ok(())
        };
        match tokio::time::timeout(options.connect_timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(Error::ConnectTimeout {
                address: address.to_string(),
                after: options.connect_timeout,
            }),
        }
    }

    /// Ready when the socket may have something to read; otherwise `cx` is woken when it
    /// may (only the task that polled last is). Lets one task wait on several sockets at once
    /// without a future per socket.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Stream::Tcp(s) => s.poll_read_ready(cx),
            Stream::Tls(t) => t.tcp.poll_read_ready(cx),
            Stream::Unix(s) => s.poll_read_ready(cx),
        }
    }

    /// Ready when the socket may take more bytes (as [`Stream::poll_read_ready`]).
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Stream::Tcp(s) => s.poll_write_ready(cx),
            Stream::Tls(t) => t.tcp.poll_write_ready(cx),
            Stream::Unix(s) => s.poll_write_ready(cx),
        }
    }

    /// True when TLS records are waiting to go out (the socket was full): wait until it is
    /// writable and call [`Stream::send_pending`].
    pub fn pending(&self) -> bool {
        match self {
            Stream::Tls(t) => t.session.borrow().wants_write(),
            _ => false,
        }
    }

    /// Sends the TLS records waiting, as far as the socket takes them now.
    pub fn send_pending(&self) -> io::Result<()> {
        match self {
            Stream::Tls(t) => t.send_records(),
            _ => Ok(()),
        }
    }

    /// Reads what the socket holds into `buf`'s spare room. A read that leaves room took all
    /// there was, so the readiness is cleared at once instead of by a second read failing with
    /// `WouldBlock` (a syscall per wake-up saved). This is safe: data arriving later raises a
    /// new readiness event, and tokio does not clear readiness newer than the one it saw.
    /// Over TLS every record the socket holds is read and its plaintext appended (`buf` grows).
    pub fn read_some(&self, buf: &mut BytesMut) -> io::Result<usize> {
        if let Stream::Tls(t) = self {
            return t.read_some(buf);
        }
        let room = buf.capacity() - buf.len();
        let mut got = None;
        let mut read = || {
            let n = match self {
                Stream::Tcp(s) => s.try_read_buf(buf),
                Stream::Unix(s) => s.try_read_buf(buf),
                Stream::Tls(_) => unreachable!("handled above"),
            }?;
            got = Some(n);
            if n > 0 && n < room {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(n)
            }
        };
        let r = match self {
            Stream::Tcp(s) => s.try_io(Interest::READABLE, &mut read),
            Stream::Unix(s) => s.try_io(Interest::READABLE, &mut read),
            Stream::Tls(_) => unreachable!("handled above"),
        };
        match got {
            Some(n) => Ok(n),
            None => r,
        }
    }

    /// Writes what the socket takes now, without waiting.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_write(buf),
            Stream::Tls(t) => t.try_write(buf),
            Stream::Unix(s) => s.try_write(buf),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Tls(t) => t.tcp.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}
