//! Cache simulation, two ways.
//!
//! * **Flat key traces** ([`flat`], [`policy`], [`mrc`]): a sequence of `(key, size)` accesses
//!   through one eviction policy at one capacity, giving miss ratio and byte miss ratio; exact
//!   LRU miss-ratio curves from stack distances, and SHARDS sampling for huge traces. Results are
//!   checked against libCacheSim on the same files.
//! * **Request traces** ([`request`]): web requests that each touch an ordered list of catalog
//!   items, run through caching strategies (no cache, LRU, a fixed hot set, prefetching a
//!   topic's descendants in one multi-get) with get and multi-get costs drawn from a measured
//!   latency model, giving the added latency of every request.
//!
//! Results implement `serde::Serialize` as the records [`record`] sets out (their names, order
//! and derived figures). No I/O beyond reading trace files; no Python.

pub mod error;
pub mod flat;
pub mod mrc;
pub mod policy;
pub mod record;
pub mod request;

pub use error::{Location, TraceError};
