//! The blocking API: the async [`Connection`] driven by a private current-thread runtime.

use bytes::Bytes;
use tokio::runtime::{Builder, Runtime};

use crate::{Address, Connection, Error, MetaReply, Options};
use cachelab_proto::{Command, Key, MetaFlags, Response, Value};

/// A [`Connection`] for code that is not async. Each one owns a small runtime; use one per
/// thread.
pub struct BlockingConnection {
    rt: Runtime,
    conn: Connection,
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

impl BlockingConnection {
    pub fn connect(address: &Address, options: Options) -> Result<BlockingConnection, Error> {
        let rt = Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(Error::Io)?;
        let conn = rt.block_on(Connection::connect(address, options))?;
        Ok(BlockingConnection { rt, conn })
    }

    pub fn address(&self) -> &Address {
        self.conn.address()
    }

    pub fn broken(&self) -> Option<crate::ErrorKind> {
        self.conn.broken()
    }

    forward! {
        /// See [`Connection::send`].
        fn send(&mut self, cmd: &Command) -> Response;
        /// See [`Connection::pipeline`].
        fn pipeline(&mut self, cmds: &[Command]) -> Vec<Response>;
        fn get(&mut self, key: &Key) -> Option<Value>;
        fn get_multi(&mut self, keys: &[Key]) -> Vec<Value>;
        fn gets(&mut self, keys: &[Key]) -> Vec<Value>;
        fn set(&mut self, key: &Key, data: Bytes, flags: u32, exptime: u32) -> bool;
        fn add(&mut self, key: &Key, data: Bytes, flags: u32, exptime: u32) -> bool;
        fn delete(&mut self, key: &Key) -> bool;
        /// See [`Connection::delete_many`].
        fn delete_many(&mut self, keys: &[Key]) -> Vec<bool>;
        fn touch(&mut self, key: &Key, exptime: u32) -> bool;
        fn incr(&mut self, key: &Key, delta: u64) -> Option<u64>;
        fn decr(&mut self, key: &Key, delta: u64) -> Option<u64>;
        fn stats(&mut self, group: Option<&str>) -> Vec<(String, String)>;
        fn version(&mut self) -> String;
        fn meta_get(&mut self, key: &Key, flags: &MetaFlags) -> MetaReply;
        fn meta_set(&mut self, key: &Key, data: Bytes, flags: &MetaFlags) -> MetaReply;
        fn meta_delete(&mut self, key: &Key, flags: &MetaFlags) -> MetaReply;
        fn meta_noop(&mut self) -> ();
    }
}
