//! Reading memcached's key stream (`watch fetchers mutations`, memcached 1.6+), or Redis's
//! `MONITOR` stream ([`monitor`]), into the rows of a cachelab capture file: the hot path of
//! `cachelab trace capture`.
//!
//! Layered as the protocol is: [`line`] parses one line (no I/O), [`state`] turns lines into
//! rows (store lookups dropped, multi-gets grouped, keys pseudonymised with [`blake2b`] and
//! sampled), [`reader`] owns the connection and splits its bytes into lines. The Python
//! reader in `cachelab.traces.capture_lines` is the reference this one matches row for row.

pub mod blake2b;
pub mod line;
pub mod monitor;
pub mod reader;
pub mod state;

pub use monitor::Monitor;
pub use reader::{Lines, Status, TlsSettings, Watch, WatchError};
pub use state::{Columns, Sink, State, SAME_REQUEST_US};
