//! A connection's socket, TCP or Unix, used without blocking from a current-thread runtime.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use bytes::BytesMut;
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

use cachelab_client::{Address, Error, Options};

/// An open connection to the server.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Connects within the connect timeout (TCP with Nagle's algorithm off).
    pub async fn connect(address: &Address, options: Options) -> Result<Stream, Error> {
        let connect = async {
            match address {
                Address::Tcp(hp) => {
                    let s = TcpStream::connect(hp.as_str()).await?;
                    s.set_nodelay(true)?;
                    Ok(Stream::Tcp(s))
                }
                Address::Unix(p) => Ok(Stream::Unix(UnixStream::connect(p).await?)),
            }
        };
        match tokio::time::timeout(options.connect_timeout, connect).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(source)) => Err(Error::Connect {
                address: address.to_string(),
                source,
            }),
            Err(_) => Err(Error::ConnectTimeout {
                address: address.to_string(),
                after: options.connect_timeout,
            }),
        }
    }

    /// Waits until the socket may have something to read.
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Unix(s) => s.readable().await,
        }
    }

    /// Waits until the socket may take more bytes.
    pub async fn writable(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.writable().await,
            Stream::Unix(s) => s.writable().await,
        }
    }

    /// Reads what the socket holds into `buf`'s spare room. A read that leaves room took all
    /// there was, so the readiness is cleared at once instead of by a second read failing with
    /// `WouldBlock` (a syscall per wake-up saved). This is safe: data arriving later raises a
    /// new readiness event, and tokio does not clear readiness newer than the one it saw.
    pub fn read_some(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let room = buf.capacity() - buf.len();
        let mut got = None;
        let mut read = || {
            let n = match self {
                Stream::Tcp(s) => s.try_read_buf(buf),
                Stream::Unix(s) => s.try_read_buf(buf),
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
            Stream::Unix(s) => s.try_write(buf),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}
