//! A RESP client for Redis and Valkey: one connection over TCP, TLS or a Unix socket, with the
//! memcached client's transports, deadlines and error type.
//!
//! [`RespConnection`] is async (tokio); [`RespClient`] wraps it with a private current-thread
//! runtime. Connecting runs the handshake [`RespOptions`] asks for — `HELLO 3` (RESP3, with
//! its `AUTH` folded in), else `AUTH`, then `SELECT` — each bounded by the connect timeout.
//! Every request (or pipeline) is bounded by the request timeout; one that fails leaves the
//! connection broken, as for memcached. Pipelining: [`RespConnection::pipeline`] writes many
//! commands at once and reads one reply for each, in order. RESP3 push messages that arrive
//! between replies are set aside ([`RespConnection::take_pushes`]), never taken for a reply.
//!
//! [`RespCluster`] talks to a Redis Cluster: a connection per master, commands routed by hash
//! slot ([`key_slot`]), redirections followed (see `cluster.rs`).

mod blocking;
mod cluster;
mod info;
mod login;
pub mod slot;
mod slotmap;
mod url;

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use cachelab_proto::resp::{complete_len, parse, Command, Limits, RespKey, Value};
use cachelab_proto::DecodeError;

pub use blocking::RespClient;
pub use cluster::{ClusterOptions, ClusterStats, RespCluster};
pub use info::{subfields, Info, InfoSection};
pub use login::{Password, RespLogin};
pub use slot::key_slot;
pub use slotmap::{ClusterNode, Redirect, SlotMap};
pub use url::{redact, Auth, RespUrl, Secret, DEFAULT_PORT};

use crate::{Address, Error, ErrorKind, Options, Stream, READ_CHUNK};

/// Which protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2: no `HELLO`, any Redis.
    #[default]
    Resp2,
    /// RESP3 through `HELLO 3`; a server without it is an [`Error::NoResp3`].
    Resp3,
    /// RESP3 where the server has it, RESP2 where `HELLO` is unknown.
    PreferResp3,
}

/// What to do after connecting, and the decoder's limits.
#[derive(Debug, Clone, Default)]
pub struct RespOptions {
    pub auth: Option<Auth>,
    /// `SELECT db` after connecting.
    pub db: Option<u32>,
    pub protocol: Protocol,
    pub limits: Limits,
}

impl RespOptions {
    /// The credentials and database a URL gives.
    pub fn from_url(url: &RespUrl) -> RespOptions {
        RespOptions {
            auth: url.auth.clone(),
            db: url.db,
            ..RespOptions::default()
        }
    }
}

/// `SET`'s expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expire {
    /// `EX seconds`
    Seconds(u64),
    /// `PX milliseconds`
    Millis(u64),
}

/// `SET`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetOptions {
    pub expire: Option<Expire>,
    /// `NX`: only when the key does not exist.
    pub nx: bool,
}

/// The most push messages kept for [`RespConnection::take_pushes`]; older ones are dropped
/// (and counted) past it.
pub const MAX_PUSHES: usize = 1024;

/// One connection to one RESP server.
pub struct RespConnection {
    stream: Stream,
    address: Address,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
    options: Options,
    limits: Limits,
    broken: Option<ErrorKind>,
    replies: u64,
    protocol: u8,
    hello: Option<Value>,
    pushes: VecDeque<Value>,
    pushes_dropped: u64,
}

/// An error reply as [`Error::Redis`]; any other reply as it is.
fn check(v: Value) -> Result<Value, Error> {
    match v.error() {
        Some(e) => Err(Error::Redis(String::from_utf8_lossy(e).into_owned())),
        None => Ok(v),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `DEL`/`UNLINK`-style commands: the name, then every key.
fn with_keys(name: &'static str, keys: &[RespKey]) -> Command {
    keys.iter().fold(Command::new(name), |c, k| c.key(k))
}

impl RespConnection {
    /// Connects, then runs the handshake `resp` asks for, all within the connect timeout.
    pub async fn connect(
        address: &Address,
        options: Options,
        resp: &RespOptions,
    ) -> Result<RespConnection, Error> {
        let within = options.connect_timeout;
        let setup = async {
            let stream = Stream::open(address, &options).await?;
            let mut c = RespConnection {
                stream,
                address: address.clone(),
                rbuf: BytesMut::with_capacity(READ_CHUNK),
                wbuf: Vec::with_capacity(4096),
                options: options.clone(),
                limits: resp.limits,
                broken: None,
                replies: 0,
                protocol: 2,
                hello: None,
                pushes: VecDeque::new(),
                pushes_dropped: 0,
            };
            c.handshake(resp).await?;
            Ok(c)
        };
        match tokio::time::timeout(within, setup).await {
            Ok(r) => r,
            Err(_) => Err(Error::ConnectTimeout {
                address: address.to_string(),
                after: within,
            }),
        }
    }

    async fn handshake(&mut self, resp: &RespOptions) -> Result<(), Error> {
        let mut auth_done = false;
        if resp.protocol != Protocol::Resp2 {
            let mut hello = Command::new("HELLO").arg("3");
            if let Some(a) = &resp.auth {
                let user = a.user.clone().unwrap_or_else(|| "default".into());
                hello = hello
                    .arg("AUTH")
                    .arg(user)
                    .secret(a.password.expose().to_string());
            }
            match self.send(&hello).await? {
                v @ (Value::Map(_) | Value::Array(_)) => {
                    self.protocol = 3;
                    self.hello = Some(v);
                    auth_done = true;
                }
                v => {
                    let reply = v.error().map(text).unwrap_or_else(|| format!("{v:?}"));
                    // A server without HELLO (before Redis 6), or without protocol 3.
                    let old =
                        reply.starts_with("ERR unknown command") || reply.starts_with("NOPROTO");
                    if !old || resp.protocol == Protocol::Resp3 {
                        return Err(if old {
                            Error::NoResp3 {
                                address: self.address.to_string(),
                                reply,
                            }
                        } else {
                            Error::Redis(reply)
                        });
                    }
                }
            }
        }
        if let (Some(a), false) = (&resp.auth, auth_done) {
            self.auth(a).await?;
        }
        if let Some(db) = resp.db {
            self.select(db).await?;
        }
        Ok(())
    }

    pub fn address(&self) -> &Address {
        &self.address
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// 2 or 3: the protocol the connection speaks.
    pub fn protocol(&self) -> u8 {
        self.protocol
    }

    /// `HELLO 3`'s reply (a map: server, version, proto, id, mode, role, modules), when the
    /// connection speaks RESP3.
    pub fn hello(&self) -> Option<&Value> {
        self.hello.as_ref()
    }

    /// Why the connection can no longer be used, if it can't.
    pub fn broken(&self) -> Option<ErrorKind> {
        self.broken
    }

    /// The RESP3 push messages received so far (at most [`MAX_PUSHES`]), oldest first, and
    /// how many older ones were dropped.
    pub fn take_pushes(&mut self) -> (Vec<Value>, u64) {
        let dropped = std::mem::take(&mut self.pushes_dropped);
        (self.pushes.drain(..).collect(), dropped)
    }

    /// Sends one command and reads its reply; an error reply is returned as a value.
    pub async fn send(&mut self, cmd: &Command) -> Result<Value, Error> {
        let mut out = self.pipeline(std::slice::from_ref(cmd)).await?;
        Ok(out.pop().expect("one reply per command"))
    }

    /// Sends one command; an error reply is [`Error::Redis`].
    pub async fn call(&mut self, cmd: &Command) -> Result<Value, Error> {
        check(self.send(cmd).await?)
    }

    /// Writes all `cmds` at once, then reads one reply for each, in order. Error replies are
    /// values ([`Value::error`]): one command's error does not fail the others.
    pub async fn pipeline(&mut self, cmds: &[Command]) -> Result<Vec<Value>, Error> {
        if let Some(kind) = self.broken {
            return Err(Error::Broken(kind));
        }
        self.wbuf.clear();
        for c in cmds {
            c.encode(&mut self.wbuf);
        }
        let deadline = self.options.request_timeout;
        let result = match tokio::time::timeout(deadline, self.exchange(cmds.len())).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                address: self.address.to_string(),
                after: deadline,
            }),
        };
        let result = match result {
            // Closed before any reply on plain TCP: most likely a TLS listener.
            Err(e) if self.replies == 0 && self.stream.is_plain_tcp() => {
                Err(e.at_first_reply(&self.address.to_string()))
            }
            r => r,
        };
        if let Err(e) = &result {
            self.broken = Some(e.kind());
        }
        result
    }

    async fn exchange(&mut self, n: usize) -> Result<Vec<Value>, Error> {
        self.stream.write_all(&self.wbuf).await.map_err(Error::Io)?;
        let mut replies = Vec::with_capacity(n);
        while replies.len() < n {
            match self.read_value().await? {
                Value::Push(p) if self.protocol == 3 => {
                    if self.pushes.len() == MAX_PUSHES {
                        self.pushes.pop_front();
                        self.pushes_dropped += 1;
                    }
                    self.pushes.push_back(Value::Push(p));
                }
                v => replies.push(v),
            }
        }
        Ok(replies)
    }

    async fn read_value(&mut self) -> Result<Value, Error> {
        loop {
            let first = self.replies == 0;
            match complete_len(&self.rbuf, &self.limits) {
                Ok(n) => {
                    let bytes = self.rbuf.split_to(n).freeze();
                    let (v, _) = parse(&bytes, &self.limits).map_err(|e| {
                        Error::resp_protocol(&self.address.to_string(), e, &bytes, first)
                    })?;
                    self.replies += 1;
                    return Ok(v);
                }
                Err(DecodeError::Incomplete) => {
                    if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
                        self.rbuf.reserve(READ_CHUNK);
                    }
                    let got = self
                        .stream
                        .read_buf(&mut self.rbuf)
                        .await
                        .map_err(Error::Io)?;
                    if got == 0 {
                        return Err(Error::Closed);
                    }
                }
                Err(e) => {
                    let address = self.address.to_string();
                    return Err(Error::resp_protocol(&address, e, &self.rbuf, first));
                }
            }
        }
    }

    /// [`RespConnection::call`] for the typed commands: a reply's RESP3 attributes (which
    /// Redis 7 sends none of) are dropped.
    async fn typed(&mut self, cmd: &Command) -> Result<Value, Error> {
        let mut v = self.call(cmd).await?;
        while let Value::Attributed { value, .. } = v {
            v = *value;
        }
        check(v)
    }

    /// `AUTH [user] password`.
    pub async fn auth(&mut self, auth: &Auth) -> Result<(), Error> {
        let mut cmd = Command::new("AUTH");
        if let Some(u) = &auth.user {
            cmd = cmd.arg(u.clone());
        }
        let cmd = cmd.secret(auth.password.expose().to_string());
        self.ok("AUTH", &cmd).await
    }

    /// `SELECT db`.
    pub async fn select(&mut self, db: u32) -> Result<(), Error> {
        self.ok("SELECT", &Command::new("SELECT").int(db)).await
    }

    async fn ok(&mut self, name: &'static str, cmd: &Command) -> Result<(), Error> {
        match self.typed(cmd).await? {
            Value::Simple(s) if &s[..] == b"OK" => Ok(()),
            v => Err(Error::unexpected_reply(name, &v)),
        }
    }

    /// `PING`: a round trip that does nothing on the server.
    pub async fn ping(&mut self) -> Result<(), Error> {
        match self.typed(&Command::new("PING")).await? {
            Value::Simple(s) if &s[..] == b"PONG" => Ok(()),
            v => Err(Error::unexpected_reply("PING", &v)),
        }
    }

    /// `GET`: `None` on a miss.
    pub async fn get(&mut self, key: &RespKey) -> Result<Option<Bytes>, Error> {
        let v = self.typed(&Command::new("GET").key(key)).await?;
        string_or_null("GET", v)
    }

    /// `SET` with its options: true when stored, false when `NX` found the key.
    pub async fn set(
        &mut self,
        key: &RespKey,
        data: Bytes,
        opts: SetOptions,
    ) -> Result<bool, Error> {
        match self.typed(&set_command(key, data, opts)).await? {
            Value::Simple(s) if &s[..] == b"OK" => Ok(true),
            v if v.is_null() => Ok(false),
            v => Err(Error::unexpected_reply("SET", &v)),
        }
    }

    /// `MGET`: one entry per key, in order, `None` for a miss. No keys: no command.
    pub async fn mget(&mut self, keys: &[RespKey]) -> Result<Vec<Option<Bytes>>, Error> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        match self.typed(&with_keys("MGET", keys)).await? {
            Value::Array(items) if items.len() == keys.len() => items
                .into_iter()
                .map(|v| string_or_null("MGET", v))
                .collect(),
            v => Err(Error::unexpected_reply("MGET", &v)),
        }
    }

    /// `DEL`: how many of the keys existed. No keys: no command.
    pub async fn del(&mut self, keys: &[RespKey]) -> Result<u64, Error> {
        self.count("DEL", keys).await
    }

    /// `UNLINK`: `DEL` with the memory freed in the background.
    pub async fn unlink(&mut self, keys: &[RespKey]) -> Result<u64, Error> {
        self.count("UNLINK", keys).await
    }

    async fn count(&mut self, name: &'static str, keys: &[RespKey]) -> Result<u64, Error> {
        if keys.is_empty() {
            return Ok(0);
        }
        match self.typed(&with_keys(name, keys)).await? {
            Value::Integer(n) if n >= 0 => Ok(n as u64),
            v => Err(Error::unexpected_reply(name, &v)),
        }
    }

    /// `INFO [section]`, parsed (`all` or `everything` for every section).
    pub async fn info(&mut self, section: Option<&str>) -> Result<Info, Error> {
        let mut cmd = Command::new("INFO");
        if let Some(s) = section {
            cmd = cmd.arg(s.to_string());
        }
        match self.typed(&cmd).await? {
            Value::Bulk(b) | Value::Verbatim { text: b, .. } => Ok(Info::parse(&text(&b))),
            v => Err(Error::unexpected_reply("INFO", &v)),
        }
    }

    /// `CONFIG GET pattern`: the matching parameters and their values (RESP2's flat array or
    /// RESP3's map), sorted by name.
    pub async fn config_get(&mut self, pattern: &str) -> Result<Vec<(String, String)>, Error> {
        let cmd = Command::new("CONFIG").arg("GET").arg(pattern.to_string());
        let v = self.typed(&cmd).await?;
        let pairs: Vec<(Value, Value)> = match v {
            Value::Map(pairs) => pairs,
            Value::Array(flat) if flat.len() % 2 == 0 => {
                let mut it = flat.into_iter();
                std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect()
            }
            v => return Err(Error::unexpected_reply("CONFIG GET", &v)),
        };
        let mut out = pairs
            .into_iter()
            .map(|(k, v)| match (k.as_bytes(), v.as_bytes()) {
                (Some(k), Some(v)) => Ok((text(k), text(v))),
                _ => Err(Error::unexpected_reply("CONFIG GET", &(k, v))),
            })
            .collect::<Result<Vec<_>, Error>>()?;
        out.sort();
        Ok(out)
    }
}

/// `SET key value [EX s | PX ms] [NX]`.
pub fn set_command(key: &RespKey, data: Bytes, opts: SetOptions) -> Command {
    let mut cmd = Command::new("SET").key(key).arg(data);
    cmd = match opts.expire {
        Some(Expire::Seconds(s)) => cmd.arg("EX").int(s),
        Some(Expire::Millis(ms)) => cmd.arg("PX").int(ms),
        None => cmd,
    };
    if opts.nx {
        cmd = cmd.arg("NX");
    }
    cmd
}

fn string_or_null(name: &'static str, v: Value) -> Result<Option<Bytes>, Error> {
    match v {
        Value::Bulk(b) => Ok(Some(b)),
        v if v.is_null() => Ok(None),
        v => Err(Error::unexpected_reply(name, &v)),
    }
}
