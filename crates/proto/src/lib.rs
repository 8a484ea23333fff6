//! memcached text and meta protocol codecs, and RESP's ([`resp`]), without I/O.
//!
//! Layers, bottom up: [`key`] (validated keys), [`command`] (what a client sends, encoded),
//! [`frame`] (one server line plus its data block, decoded without allocating), and
//! [`response`] (frames put together into one owned response per command). Connections,
//! timeouts and pipelining live in `cachelab-client`.

pub mod command;
pub mod frame;
pub mod key;
pub mod resp;
pub mod response;

pub use command::{Command, Expect, MetaFlags, MetaFlagsError, Store};
pub use frame::{DecodeError, Frame, Invalid, InvalidKind, Meta, MetaStatus};
pub use key::{validate_key, Key, KeyError, MAX_KEY_LEN};
pub use response::{Response, Value};
