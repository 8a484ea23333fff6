//! The blocking RESP client: the async [`RespConnection`] driven by a private current-thread
//! runtime.

use bytes::Bytes;
use cachelab_proto::resp::{Command, RespKey, Value};
use tokio::runtime::{Builder, Runtime};

use super::{Auth, Info, RespConnection, RespOptions, RespUrl, SetOptions};
use crate::{Address, Error, ErrorKind, Options};

/// A [`RespConnection`] for code that is not async. Each one owns a small runtime; use one
/// per thread.
pub struct RespClient {
    rt: Runtime,
    conn: RespConnection,
}

macro_rules! forward {
    ($( $(#[$doc:meta])* fn $name:ident(&mut self $(, $arg:ident : $ty:ty)*) -> $ret:ty; )*) => {
        $(
            $(#[$doc])*
            pub fn $name(&mut self $(, $arg: $ty)*) -> Result<$ret, Error> {
                self.rt.block_on(self.conn.$name($($arg),*))
            }
        )*
    };
}

impl RespClient {
    /// Connects and runs the handshake (see [`RespConnection::connect`]).
    pub fn connect(
        address: &Address,
        options: Options,
        resp: &RespOptions,
    ) -> Result<RespClient, Error> {
        let rt = Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(Error::Io)?;
        let conn = rt.block_on(RespConnection::connect(address, options, resp))?;
        Ok(RespClient { rt, conn })
    }

    /// Connects to a `redis://` or `rediss://` URL: its address, TLS, credentials and
    /// database; `resp`'s protocol and limits.
    pub fn connect_url(
        url: &RespUrl,
        options: Options,
        resp: &RespOptions,
    ) -> Result<RespClient, Error> {
        let options = url.options(options).map_err(|reason| Error::Tls {
            address: url.address.to_string(),
            reason,
        })?;
        let resp = RespOptions {
            auth: url.auth.clone().or_else(|| resp.auth.clone()),
            db: url.db.or(resp.db),
            ..resp.clone()
        };
        RespClient::connect(&url.address, options, &resp)
    }

    pub fn address(&self) -> &Address {
        self.conn.address()
    }

    pub fn protocol(&self) -> u8 {
        self.conn.protocol()
    }

    pub fn hello(&self) -> Option<&Value> {
        self.conn.hello()
    }

    pub fn broken(&self) -> Option<ErrorKind> {
        self.conn.broken()
    }

    /// See [`RespConnection::take_pushes`].
    pub fn take_pushes(&mut self) -> (Vec<Value>, u64) {
        self.conn.take_pushes()
    }

    forward! {
        /// See [`RespConnection::send`].
        fn send(&mut self, cmd: &Command) -> Value;
        /// See [`RespConnection::call`].
        fn call(&mut self, cmd: &Command) -> Value;
        /// See [`RespConnection::pipeline`].
        fn pipeline(&mut self, cmds: &[Command]) -> Vec<Value>;
        fn auth(&mut self, auth: &Auth) -> ();
        fn select(&mut self, db: u32) -> ();
        fn ping(&mut self) -> ();
        fn get(&mut self, key: &RespKey) -> Option<Bytes>;
        fn set(&mut self, key: &RespKey, data: Bytes, opts: SetOptions) -> bool;
        fn mget(&mut self, keys: &[RespKey]) -> Vec<Option<Bytes>>;
        fn del(&mut self, keys: &[RespKey]) -> u64;
        fn unlink(&mut self, keys: &[RespKey]) -> u64;
        fn info(&mut self, section: Option<&str>) -> Info;
        fn config_get(&mut self, pattern: &str) -> Vec<(String, String)>;
    }
}
