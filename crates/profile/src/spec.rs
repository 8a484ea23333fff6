//! What to measure and how: the spec, its checks, and how it divides into cells and shares.
//!
//! [`Spec`] is built from Python's `cachelab.profile.ProfileSpec` in one conversion: it derives
//! `Deserialize`, its fields named as the dataclass's, and each numeric field's range is
//! written once, in [`LIMITS`].

use std::time::Duration;

use serde::Deserialize;

pub use cachelab_client::resp::{Password, RespLogin};
use cachelab_client::spec::{self as de, Limit};
use cachelab_client::{Address, Options};
use cachelab_proto::Key;

use crate::cell::{Cell, Op};

/// Which protocol the timed commands use. From Python: `"text"`, `"meta"`, or
/// `{"resp": {"user", "password", "db"}}` (each optional), as the load engine's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// `set` / `get` / `get k1 … kn` / `delete`.
    Text,
    /// `ms` / `mg … v` / pipelined `mg` for a multi-get / `md`.
    Meta,
    /// RESP2 (Redis, Valkey): `SET` / `GET` / `MGET k1 … kn` / `UNLINK`; the floor `PING`.
    Resp(RespLogin),
}

/// The most samples (or warm-up samples) per cell.
pub const MAX_SAMPLES: u64 = 10_000_000;
/// The largest value: memcached's largest item (`-I 1024m`) less room for its header.
pub const MAX_VALUE_SIZE: u64 = (1 << 30) - 4096;
/// The most keys in one multi-get.
pub const MAX_KEY_COUNT: u64 = 10_000;

/// The range of each numeric field of a spec, by its name (`_core.PROFILE_LIMITS` in Python,
/// which the command line's flags read); [`Spec::validate`] checks them. Those of `sizes` and
/// `key_counts` hold for each of their items.
pub mod limits {
    use super::{MAX_KEY_COUNT, MAX_SAMPLES, MAX_VALUE_SIZE};
    use cachelab_client::spec::Limit;

    pub const SIZES: Limit = Limit::int("sizes", 1, MAX_VALUE_SIZE, "bytes");
    pub const KEY_COUNTS: Limit = Limit::int("key_counts", 1, MAX_KEY_COUNT, "");
    pub const MULTI_VALUE_SIZE: Limit = Limit::int("multi_value_size", 1, MAX_VALUE_SIZE, "bytes");
    pub const SAMPLES: Limit = Limit::int("samples", 1, MAX_SAMPLES, "");
    pub const WARMUP: Limit = Limit::int("warmup", 0, MAX_SAMPLES, "");
    pub const CONCURRENCY: Limit = Limit::int("concurrency", 1, 1024, "");
    pub const TIMEOUT: Limit = Limit::above("timeout", 0.0, 3600.0, "seconds");
    pub const CONNECT_TIMEOUT: Limit = Limit::above("connect_timeout", 0.0, 3600.0, "seconds");
    pub const GIVE_UP_AFTER: Limit = Limit::above("give_up_after", 0.0, 3600.0, "seconds");
    /// Any u64: written so that a seed out of it is refused with its range.
    pub const SEED: Limit = Limit::int("seed", 0, u64::MAX, "");
}

/// Every numeric field's range (see [`limits`]).
pub const LIMITS: &[Limit] = &{
    use limits::*;
    [
        SIZES,
        KEY_COUNTS,
        MULTI_VALUE_SIZE,
        SAMPLES,
        WARMUP,
        CONCURRENCY,
        TIMEOUT,
        CONNECT_TIMEOUT,
        GIVE_UP_AFTER,
        SEED,
    ]
};

/// What to measure and how. Its fields are `cachelab.profile.ProfileSpec`'s, as its
/// `to_core` resolves them.
#[derive(Debug, Clone, Deserialize)]
pub struct Spec {
    pub address: Address,
    /// Value sizes for get and set, in bytes.
    pub sizes: Vec<usize>,
    /// Key counts for multi-get.
    pub key_counts: Vec<usize>,
    /// The size of each value in a multi-get.
    pub multi_value_size: usize,
    /// Samples kept per cell.
    pub samples: u64,
    /// Samples per cell run first and discarded.
    pub warmup: u64,
    /// Connections (threads) measuring at once.
    pub concurrency: usize,
    pub protocol: Protocol,
    #[serde(flatten, deserialize_with = "de::flat")]
    pub options: Options,
    pub seed: u64,
    /// The per-run key prefix; every key written starts with it.
    pub prefix: String,
    /// Give up when no request succeeds for this long (the server is gone).
    #[serde(deserialize_with = "de::seconds")]
    pub give_up_after: Duration,
    /// `address` is a proxy (twemproxy) in front of the servers, which passes on the key
    /// commands only: the floor is then a get of a key never written (not `mn` or `PING`,
    /// which twemproxy answers itself), and no `stats` or `INFO` is asked of it (it would
    /// close the connection, or refuse). The text protocol or RESP (twemproxy's redis mode).
    pub proxy: bool,
}

/// Why a run could not start: an invalid spec, or a server that could not be reached.
pub use cachelab_client::StartError as SpecError;

/// The longest prefix accepted, leaving room in the 250-byte key for the rest.
pub const MAX_PREFIX: usize = 120;

impl Spec {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), SpecError> {
        use limits::*;
        let bad = |m: String| Err(SpecError::Invalid(m));
        let whole = |l: Limit, v: usize| l.check_int(v as u64);
        if self.prefix.is_empty() || self.prefix.len() > MAX_PREFIX {
            return bad(format!("key prefix must be 1 to {MAX_PREFIX} bytes"));
        }
        if let Err(e) = Key::new(&self.prefix) {
            return bad(format!("key prefix {:?}: {e}", self.prefix));
        }
        SAMPLES
            .check_int(self.samples)
            .and_then(|()| WARMUP.check_int(self.warmup))
            .and_then(|()| whole(CONCURRENCY, self.concurrency))
            .map_err(SpecError::Invalid)?;
        if self.sizes.is_empty() && self.key_counts.is_empty() {
            return bad("nothing to measure: no sizes and no key counts".into());
        }
        self.sizes
            .iter()
            .try_for_each(|&s| whole(SIZES, s))
            .and_then(|()| {
                self.key_counts
                    .iter()
                    .try_for_each(|&k| whole(KEY_COUNTS, k))
            })
            .and_then(|()| match self.key_counts.is_empty() {
                true => Ok(()),
                false => whole(MULTI_VALUE_SIZE, self.multi_value_size),
            })
            .and_then(|()| TIMEOUT.check_duration(self.options.request_timeout, 1.0))
            .and_then(|()| CONNECT_TIMEOUT.check_duration(self.options.connect_timeout, 1.0))
            .and_then(|()| GIVE_UP_AFTER.check_duration(self.give_up_after, 1.0))
            .map_err(SpecError::Invalid)?;
        match (&self.protocol, self.proxy) {
            (Protocol::Meta, true) => bad("the meta protocol through a proxy: twemproxy closes \
                 the connection on meta commands; use the text protocol"
                .into()),
            _ => Ok(()),
        }
    }

    /// The cells in the order they are reported.
    pub(crate) fn cells(&self) -> Vec<Cell> {
        let mut cells = vec![Cell::new(Op::Floor, 0, 0)];
        cells.extend(self.sizes.iter().map(|&s| Cell::new(Op::Get, s, 1)));
        cells.extend(self.sizes.iter().map(|&s| Cell::new(Op::Set, s, 1)));
        cells.extend(
            self.key_counts
                .iter()
                .map(|&k| Cell::new(Op::MultiGet, self.multi_value_size, k)),
        );
        cells
    }

    /// Samples each worker takes: an equal share, the remainder to the first workers.
    pub(crate) fn share(&self, per_cell: u64, worker: usize) -> u64 {
        let n = self.concurrency as u64;
        per_cell / n + u64::from((worker as u64) < per_cell % n)
    }
}
