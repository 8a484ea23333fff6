//! A memcached client: one connection, text and meta protocol, over TCP, TLS or a Unix socket;
//! and a RESP client for Redis and Valkey over the same transports ([`resp`]).
//!
//! [`Connection`] is async (tokio); [`BlockingConnection`] wraps it with a private
//! current-thread runtime. Every wait — connecting, writing, reading — has a deadline, and a
//! request that times out leaves the connection unusable (its replies may still arrive and
//! would be read as the answer to the next request), so it is marked broken and the caller
//! reconnects.
//!
//! Pipelining: [`Connection::pipeline`] writes many commands at once and reads their replies in
//! order. Each command gets exactly one reply; the quiet meta flag is refused for that reason.
//! [`SharedConnection`] pipelines concurrent callers' requests over one connection.

mod address;
mod blocking;
mod error;
pub mod pool;
pub mod resp;
mod shared;
pub mod spec;
pub mod tls;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::client::TlsStream;

pub use address::Address;
pub use blocking::BlockingConnection;
pub use cachelab_proto as proto;
pub use error::{Error, ErrorKind, StartError};
pub use rustls;
pub use shared::SharedConnection;
pub use tls::{Tls, TlsConfig};

use cachelab_proto::response::{complete_len, parse};
use cachelab_proto::{Command, DecodeError, Key, MetaFlags, MetaStatus, Response, Store, Value};

/// Deadlines for one connection, and its transport. In a spec from Python: `connect_timeout`
/// and `timeout` in seconds, `tls` (absent or None: plain TCP).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Options {
    /// Deadline for connecting, and again for the TLS handshake.
    #[serde(deserialize_with = "spec::seconds")]
    pub connect_timeout: Duration,
    /// Deadline for one request (or one pipeline): from the first byte written to the last read.
    #[serde(rename = "timeout", deserialize_with = "spec::seconds")]
    pub request_timeout: Duration,
    /// TLS over TCP (memcached `-Z`); None for plain TCP or a Unix socket.
    #[serde(default, deserialize_with = "spec::tls")]
    pub tls: Option<Tls>,
}

impl Options {
    /// What the connection runs over: `tcp`, `tls` or `unix` (recorded with results).
    pub fn transport(&self, address: &Address) -> &'static str {
        match (address, &self.tls) {
            (Address::Unix(_), _) => "unix",
            (Address::Tcp(_), Some(_)) => "tls",
            (Address::Tcp(_), None) => "tcp",
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(1),
            tls: None,
        }
    }
}

pub(crate) enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Unix(UnixStream),
}

impl Stream {
    /// Connects over `options`' transport: TCP, TLS over TCP, or a Unix socket.
    pub(crate) async fn open(address: &Address, options: &Options) -> Result<Stream, Error> {
        Ok(match (address, &options.tls) {
            (_, Some(tls)) => Stream::Tls(Box::new(connect_tls(address, options, tls).await?)),
            (Address::Tcp(hostport), None) => {
                Stream::Tcp(connect_tcp(hostport, address, options).await?)
            }
            (Address::Unix(path), None) => {
                Stream::Unix(connect_unix(path, address, options).await?)
            }
        })
    }

    pub(crate) fn is_plain_tcp(&self) -> bool {
        matches!(self, Stream::Tcp(_))
    }

    pub(crate) async fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.write_all(buf).await,
            Stream::Tls(s) => {
                s.write_all(buf).await?;
                // rustls may hold records back until flushed.
                s.flush().await
            }
            Stream::Unix(s) => s.write_all(buf).await,
        }
    }

    pub(crate) async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read_buf(buf).await,
            Stream::Tls(s) => s.read_buf(buf).await,
            Stream::Unix(s) => s.read_buf(buf).await,
        }
    }
}

/// Opens a TCP connection within `options.connect_timeout`, Nagle's algorithm off.
pub async fn connect_tcp(
    hostport: &str,
    address: &Address,
    options: &Options,
) -> Result<TcpStream, Error> {
    let connect = async {
        let s = TcpStream::connect(hostport).await?;
        s.set_nodelay(true)?;
        Ok(s)
    };
    within_connect_timeout(address, options, connect).await
}

/// Opens a Unix-socket connection within `options.connect_timeout`.
pub async fn connect_unix(
    path: &std::path::Path,
    address: &Address,
    options: &Options,
) -> Result<UnixStream, Error> {
    within_connect_timeout(address, options, UnixStream::connect(path)).await
}

/// `connect` bounded by the connect timeout, its failures named with the address.
async fn within_connect_timeout<S>(
    address: &Address,
    options: &Options,
    connect: impl std::future::Future<Output = std::io::Result<S>>,
) -> Result<S, Error> {
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

/// Opens a TLS connection: TCP within the connect timeout, then the handshake within it again.
pub async fn connect_tls(
    address: &Address,
    options: &Options,
    tls: &Tls,
) -> Result<TlsStream<TcpStream>, Error> {
    let Address::Tcp(hostport) = address else {
        return Err(Error::Tls {
            address: address.to_string(),
            reason: "TLS over a Unix socket is not supported".into(),
        });
    };
    tls.server_name(address)?;
    let tcp = connect_tcp(hostport, address, options).await?;
    tls::handshake(tls, address, tcp, options.connect_timeout).await
}

/// An error reply as its [`Error`]; any other reply as it is.
fn check(r: Response) -> Result<Response, Error> {
    match r {
        Response::Error => Err(Error::UnknownCommand),
        Response::ClientError(m) => Err(Error::ClientError(m)),
        Response::ServerError(m) => Err(Error::ServerError(m)),
        r => Ok(r),
    }
}

/// A `delete`'s reply: true when the key existed.
fn deleted(r: Response) -> Result<bool, Error> {
    match r {
        Response::Deleted => Ok(true),
        Response::NotFound => Ok(false),
        r => Err(Error::unexpected("delete", &r)),
    }
}

/// One connection to one server.
pub struct Connection {
    stream: Stream,
    address: Address,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
    options: Options,
    broken: Option<ErrorKind>,
    /// Replies read so far: a reply that is not memcached's as the first one means the
    /// address is some other service.
    replies: u64,
}

pub(crate) const READ_CHUNK: usize = 64 * 1024;

impl Connection {
    /// Connects within `options.connect_timeout` (and, over TLS, shakes hands within it too).
    pub async fn connect(address: &Address, options: Options) -> Result<Connection, Error> {
        let stream = Stream::open(address, &options).await?;
        Ok(Connection {
            stream,
            address: address.clone(),
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: Vec::with_capacity(4096),
            options,
            broken: None,
            replies: 0,
        })
    }

    pub fn address(&self) -> &Address {
        &self.address
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Why the connection can no longer be used, if it can't.
    pub fn broken(&self) -> Option<ErrorKind> {
        self.broken
    }

    /// Sends one command and reads its reply. Error replies are returned as responses.
    pub async fn send(&mut self, cmd: &Command) -> Result<Response, Error> {
        let mut out = self.pipeline(std::slice::from_ref(cmd)).await?;
        Ok(out.pop().expect("one reply per command"))
    }

    /// Writes all `cmds` at once, then reads one reply for each, in order.
    pub async fn pipeline(&mut self, cmds: &[Command]) -> Result<Vec<Response>, Error> {
        if let Some(kind) = self.broken {
            return Err(Error::Broken(kind));
        }
        self.wbuf.clear();
        for c in cmds {
            c.encode(&mut self.wbuf);
        }
        let deadline = self.options.request_timeout;
        let result = match tokio::time::timeout(deadline, self.exchange(cmds)).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                address: self.address.to_string(),
                after: deadline,
            }),
        };
        let result = match result {
            // Nothing was ever read on this plain TCP connection: a server that hangs up at
            // once most likely wanted a TLS handshake.
            Err(e) if self.replies == 0 && matches!(self.stream, Stream::Tcp(_)) => {
                Err(e.at_first_reply(&self.address.to_string()))
            }
            r => r,
        };
        if let Err(e) = &result {
            self.broken = Some(e.kind());
        }
        result
    }

    async fn exchange(&mut self, cmds: &[Command]) -> Result<Vec<Response>, Error> {
        self.stream.write_all(&self.wbuf).await.map_err(Error::Io)?;
        let mut replies = Vec::with_capacity(cmds.len());
        for c in cmds {
            replies.push(self.read_reply(c).await?);
        }
        Ok(replies)
    }

    async fn read_reply(&mut self, cmd: &Command) -> Result<Response, Error> {
        let expect = cmd.expect();
        loop {
            match complete_len(expect, &self.rbuf) {
                Ok(n) => {
                    let bytes = self.rbuf.split_to(n).freeze();
                    let first = self.replies == 0;
                    let reply = parse(expect, &bytes).map_err(|e| {
                        Error::protocol(&self.address.to_string(), e, &bytes, first)
                    })?;
                    self.replies += 1;
                    return Ok(reply);
                }
                Err(DecodeError::Incomplete) => {
                    if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
                        self.rbuf.reserve(READ_CHUNK);
                    }
                    if self
                        .stream
                        .read_buf(&mut self.rbuf)
                        .await
                        .map_err(Error::Io)?
                        == 0
                    {
                        return Err(Error::Closed);
                    }
                }
                Err(e) => {
                    let first = self.replies == 0;
                    return Err(Error::protocol(
                        &self.address.to_string(),
                        e,
                        &self.rbuf,
                        first,
                    ));
                }
            }
        }
    }

    /// Sends one command and turns error replies into [`Error`]s.
    async fn checked(&mut self, cmd: &Command) -> Result<Response, Error> {
        check(self.send(cmd).await?)
    }

    /// `get` of one key: `None` on a miss.
    pub async fn get(&mut self, key: &Key) -> Result<Option<Value>, Error> {
        let mut found = self.get_multi(std::slice::from_ref(key)).await?;
        Ok(found.pop())
    }

    /// One `get` command for many keys; misses are absent from the result.
    pub async fn get_multi(&mut self, keys: &[Key]) -> Result<Vec<Value>, Error> {
        match self.checked(&Command::Get(keys.to_vec())).await? {
            Response::Values(v) => Ok(v),
            r => Err(Error::unexpected("get", &r)),
        }
    }

    /// `gets`: values with their CAS tokens.
    pub async fn gets(&mut self, keys: &[Key]) -> Result<Vec<Value>, Error> {
        match self.checked(&Command::Gets(keys.to_vec())).await? {
            Response::Values(v) => Ok(v),
            r => Err(Error::unexpected("gets", &r)),
        }
    }

    /// `set`: true when stored.
    pub async fn set(
        &mut self,
        key: &Key,
        data: Bytes,
        flags: u32,
        exptime: u32,
    ) -> Result<bool, Error> {
        let store = store(key, data, flags, exptime);
        self.stored("set", &Command::Set(store)).await
    }

    /// `add`: true when stored, false when the key already existed.
    pub async fn add(
        &mut self,
        key: &Key,
        data: Bytes,
        flags: u32,
        exptime: u32,
    ) -> Result<bool, Error> {
        let store = store(key, data, flags, exptime);
        self.stored("add", &Command::Add(store)).await
    }

    async fn stored(&mut self, verb: &'static str, cmd: &Command) -> Result<bool, Error> {
        match self.checked(cmd).await? {
            Response::Stored => Ok(true),
            Response::NotStored | Response::Exists | Response::NotFound => Ok(false),
            r => Err(Error::unexpected(verb, &r)),
        }
    }

    /// `delete`: true when the key existed.
    pub async fn delete(&mut self, key: &Key) -> Result<bool, Error> {
        deleted(self.checked(&Command::Delete(key.clone())).await?)
    }

    /// `delete` of many keys in one pipelined write (one round trip): per key, true when it
    /// existed. An error reply for any key is that key's error, as for [`Connection::delete`].
    pub async fn delete_many(&mut self, keys: &[Key]) -> Result<Vec<bool>, Error> {
        let cmds: Vec<Command> = keys.iter().cloned().map(Command::Delete).collect();
        self.pipeline(&cmds)
            .await?
            .into_iter()
            .map(|r| check(r).and_then(deleted))
            .collect()
    }

    /// `touch`: true when the key existed.
    pub async fn touch(&mut self, key: &Key, exptime: u32) -> Result<bool, Error> {
        match self
            .checked(&Command::Touch {
                key: key.clone(),
                exptime,
            })
            .await?
        {
            Response::Touched => Ok(true),
            Response::NotFound => Ok(false),
            r => Err(Error::unexpected("touch", &r)),
        }
    }

    /// `incr`: the new value, or `None` when the key does not exist.
    pub async fn incr(&mut self, key: &Key, delta: u64) -> Result<Option<u64>, Error> {
        let key = key.clone();
        self.arithmetic("incr", Command::Incr { key, delta }).await
    }

    /// `decr`: the new value, or `None` when the key does not exist.
    pub async fn decr(&mut self, key: &Key, delta: u64) -> Result<Option<u64>, Error> {
        let key = key.clone();
        self.arithmetic("decr", Command::Decr { key, delta }).await
    }

    async fn arithmetic(&mut self, name: &'static str, cmd: Command) -> Result<Option<u64>, Error> {
        match self.checked(&cmd).await? {
            Response::Number(n) => Ok(Some(n)),
            Response::NotFound => Ok(None),
            r => Err(Error::unexpected(name, &r)),
        }
    }

    /// `stats` or `stats <group>`.
    pub async fn stats(&mut self, group: Option<&str>) -> Result<Vec<(String, String)>, Error> {
        let group = group.map(Key::new).transpose().map_err(Error::Key)?;
        match self.checked(&Command::Stats(group)).await? {
            Response::Stats(s) => Ok(s),
            r => Err(Error::unexpected("stats", &r)),
        }
    }

    pub async fn version(&mut self) -> Result<String, Error> {
        match self.checked(&Command::Version).await? {
            Response::Version(v) => Ok(v),
            r => Err(Error::unexpected("version", &r)),
        }
    }

    /// `mg <key> <flags>`: the raw meta reply (`VA`, `HD` or `EN`).
    pub async fn meta_get(&mut self, key: &Key, flags: &MetaFlags) -> Result<MetaReply, Error> {
        let cmd = Command::MetaGet {
            key: key.clone(),
            flags: flags.clone(),
        };
        self.meta("mg", &cmd).await
    }

    /// `ms <key> <len> <flags>`.
    pub async fn meta_set(
        &mut self,
        key: &Key,
        data: Bytes,
        flags: &MetaFlags,
    ) -> Result<MetaReply, Error> {
        let cmd = Command::MetaSet {
            key: key.clone(),
            data,
            flags: flags.clone(),
        };
        self.meta("ms", &cmd).await
    }

    /// `md <key> <flags>`.
    pub async fn meta_delete(&mut self, key: &Key, flags: &MetaFlags) -> Result<MetaReply, Error> {
        let cmd = Command::MetaDelete {
            key: key.clone(),
            flags: flags.clone(),
        };
        self.meta("md", &cmd).await
    }

    /// `mn`: a round trip that does nothing on the server.
    pub async fn meta_noop(&mut self) -> Result<(), Error> {
        self.meta("mn", &Command::MetaNoop).await.map(|_| ())
    }

    async fn meta(&mut self, verb: &'static str, cmd: &Command) -> Result<MetaReply, Error> {
        match self.checked(cmd).await? {
            Response::Meta {
                status,
                flags,
                data,
            } => Ok(MetaReply {
                status,
                flags,
                data,
            }),
            r => Err(Error::unexpected(verb, &r)),
        }
    }
}

/// A meta-protocol reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaReply {
    pub status: MetaStatus,
    /// Returned flags, raw and space separated (e.g. `f0 t-1`).
    pub flags: Bytes,
    pub data: Option<Bytes>,
}

impl MetaReply {
    /// The token returned for flag `letter`.
    pub fn flag(&self, letter: u8) -> Option<&[u8]> {
        self.flags
            .split(|&b| b == b' ')
            .find(|t| t.first() == Some(&letter))
            .map(|t| &t[1..])
    }
}

/// The payload of a storage command.
fn store(key: &Key, data: Bytes, flags: u32, exptime: u32) -> Store {
    Store {
        key: key.clone(),
        flags,
        exptime,
        data,
    }
}
