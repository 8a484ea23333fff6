//! The protocol a run speaks ([`Protocol`], a field of the [`Spec`](crate::Spec)): memcached's
//! text protocol, or RESP with the login each connection sends first ([`RespLogin`]).

use serde::Deserialize;

pub use cachelab_client::resp::{Password, RespLogin};

/// The protocol a run speaks. From Python: `"memcached"`, or `{"resp": {"user", "password",
/// "db"}}` (each optional: `AUTH` and `SELECT` on every connection).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// memcached's text protocol.
    #[default]
    Memcached,
    /// RESP2: Redis and Valkey.
    Resp(RespLogin),
}
