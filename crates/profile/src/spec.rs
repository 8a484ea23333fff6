//! What to measure and how: the spec, its checks, and how it divides into cells and shares.

use std::time::Duration;

use cachelab_client::{Address, Options};
use cachelab_proto::Key;

use crate::cell::{Cell, Op};

/// Which protocol the timed commands use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `set` / `get` / `get k1 … kn` / `delete`.
    Text,
    /// `ms` / `mg … v` / pipelined `mg` for a multi-get / `md`.
    Meta,
}

/// What to measure and how.
#[derive(Debug, Clone)]
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
    pub options: Options,
    pub seed: u64,
    /// The per-run key prefix; every key written starts with it.
    pub prefix: String,
    /// Give up when no request succeeds for this long (the server is gone).
    pub give_up_after: Duration,
    /// `address` is a proxy (twemproxy) in front of the servers, which passes on the key
    /// commands only: the floor is then a get of a key never written (not `mn`), and no
    /// `stats` is asked of it (it would close the connection). Text protocol only.
    pub proxy: bool,
}

/// Why a run could not start: an invalid spec, or a server that could not be reached.
pub use cachelab_client::StartError as SpecError;

/// The longest prefix accepted, leaving room in the 250-byte key for the rest.
pub const MAX_PREFIX: usize = 120;

impl Spec {
    /// Checks every field against its range.
    pub(crate) fn validate(&self) -> Result<(), SpecError> {
        let bad = |m: String| Err(SpecError::Invalid(m));
        if self.prefix.is_empty() || self.prefix.len() > MAX_PREFIX {
            return bad(format!("key prefix must be 1 to {MAX_PREFIX} bytes"));
        }
        if let Err(e) = Key::new(&self.prefix) {
            return bad(format!("key prefix {:?}: {e}", self.prefix));
        }
        if self.samples == 0 {
            return bad("samples must be at least 1".into());
        }
        if self.concurrency == 0 || self.concurrency > 1024 {
            return bad("concurrency must be between 1 and 1024".into());
        }
        if self.sizes.is_empty() && self.key_counts.is_empty() {
            return bad("nothing to measure: no sizes and no key counts".into());
        }
        if self.key_counts.contains(&0) {
            return bad("key counts must be at least 1".into());
        }
        if self.sizes.contains(&0) || (!self.key_counts.is_empty() && self.multi_value_size == 0) {
            return bad("value sizes must be at least 1 byte".into());
        }
        if let Some(&s) = self.sizes.iter().chain([&self.multi_value_size]).max() {
            if s > 1 << 30 {
                return bad(format!("value size {s} is over memcached's 1 GiB ceiling"));
            }
        }
        if self.proxy && self.protocol == Protocol::Meta {
            return bad(
                "the meta protocol through a proxy: twemproxy closes the connection on meta \
                 commands; use the text protocol"
                    .into(),
            );
        }
        if self.key_counts.iter().any(|&k| k > 10_000) {
            return bad("key counts above 10000 are not supported".into());
        }
        Ok(())
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
