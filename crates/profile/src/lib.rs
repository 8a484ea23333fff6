//! The latency profile of a memcached server.
//!
//! The experiment of Khan Academy's "Profiling App Engine Memcached", made careful:
//!
//! * **get by value size** — each sample writes a fresh random value under a new key (the set
//!   is timed too, giving **set by size**), times the read and compares the bytes. Mismatches
//!   and misses are counted, never dropped.
//! * **multi-get by key count** — each round writes the values of every key count in one
//!   pipelined batch (untimed), then times one multi-get per key count and verifies each value.
//!
//! A round's keys are deleted in the next round's write batch (and at the end of the run), so
//! the untimed work costs one round trip per round rather than one per sample.
//! * **the floor** — a minimal request/response (`mn`, or `version` on servers without the meta
//!   protocol) on a raw blocking socket: how much of any request is just the round trip.
//!
//! All cells run interleaved, round-robin, so drift over the run affects them alike. Warm-up
//! rounds are run and discarded. With `concurrency` N, N threads each hold their own
//! connection and take an equal share of the samples; their histograms are merged.
//!
//! Every key starts with the caller's per-run prefix. A key whose delete failed is retried at
//! the end; the result says how many could not be removed.

mod floor;
mod worker;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cachelab_client::{Address, BlockingConnection, Error, ErrorKind, Options};
use cachelab_metrics::Latency;
use cachelab_proto::Key;

pub use cachelab_client;

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
}

/// The kind of measurement in a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Floor,
    Get,
    Set,
    MultiGet,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Floor => "floor",
            Op::Get => "get",
            Op::Set => "set",
            Op::MultiGet => "multiget",
        }
    }
}

/// One line of the profile: an operation at one size or key count.
#[derive(Debug, Clone)]
pub struct Cell {
    pub op: Op,
    /// Bytes per value (0 for the floor).
    pub value_size: usize,
    /// Keys per request (1 except for multi-get; 0 for the floor).
    pub keys: usize,
    /// Latencies of the samples that succeeded, in ns.
    pub hist: Latency,
    /// Failed requests by kind.
    pub errors: BTreeMap<ErrorKind, u64>,
    /// Reads whose bytes differed from what was written.
    pub mismatches: u64,
    /// Reads that found nothing where a value had just been written.
    pub misses: u64,
}

impl Cell {
    fn new(op: Op, value_size: usize, keys: usize) -> Cell {
        Cell {
            op,
            value_size,
            keys,
            hist: cachelab_metrics::latency(),
            errors: BTreeMap::new(),
            mismatches: 0,
            misses: 0,
        }
    }

    fn merge(&mut self, other: &Cell) {
        self.hist.add(&other.hist).expect("same histogram bounds");
        for (k, n) in &other.errors {
            *self.errors.entry(*k).or_default() += n;
        }
        self.mismatches += other.mismatches;
        self.misses += other.misses;
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// What the server said about itself.
#[derive(Debug, Clone, Default)]
pub struct ServerFacts {
    pub version: String,
    /// `stats settings`.
    pub settings: Vec<(String, String)>,
    /// `stats` before the run.
    pub stats: Vec<(String, String)>,
}

impl ServerFacts {
    /// Worker threads, from `stats settings`.
    pub fn threads(&self) -> Option<usize> {
        self.settings
            .iter()
            .find(|(k, _)| k == "num_threads")
            .and_then(|(_, v)| v.parse().ok())
    }
}

/// A finished (or stopped) profile run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub cells: Vec<Cell>,
    pub server: ServerFacts,
    /// How the floor was measured: `"mn"` or `"version"`.
    pub floor_command: &'static str,
    /// Keys written and not deleted, even after the final clean-up.
    pub leftover_keys: u64,
    /// Keys the final clean-up had to delete (their per-sample delete failed).
    pub cleaned_up_keys: u64,
    /// The run was stopped through [`Progress::cancel`].
    pub cancelled: bool,
    /// The run gave up because the server went away; the reason.
    pub aborted: Option<String>,
    pub elapsed: Duration,
}

/// Shared progress: samples done of samples planned, and a stop flag.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicU64,
    pub total: AtomicU64,
    cancel: AtomicBool,
}

impl Progress {
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress::default())
    }

    /// Asks the run to stop after the current samples; partial results are kept.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Why a run could not start: an invalid spec, or a server that could not be reached.
pub use cachelab_client::StartError as SpecError;

/// The longest prefix accepted, leaving room in the 250-byte key for the rest.
pub const MAX_PREFIX: usize = 120;

impl Spec {
    fn validate(&self) -> Result<(), SpecError> {
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
        if self.key_counts.iter().any(|&k| k > 10_000) {
            return bad("key counts above 10000 are not supported".into());
        }
        Ok(())
    }

    /// The cells in the order they are reported.
    fn cells(&self) -> Vec<Cell> {
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
    fn share(&self, per_cell: u64, worker: usize) -> u64 {
        let n = self.concurrency as u64;
        per_cell / n + u64::from((worker as u64) < per_cell % n)
    }
}

/// Reads the server's version and settings.
pub fn server_facts(address: &Address, options: Options) -> Result<ServerFacts, Error> {
    let mut c = BlockingConnection::connect(address, options)?;
    let version = c.version()?;
    let settings = c.stats(Some("settings")).unwrap_or_default();
    let stats = c.stats(None).unwrap_or_default();
    Ok(ServerFacts {
        version,
        settings,
        stats,
    })
}

/// Runs the profile. Blocks until done, cancelled, or the server is gone.
///
/// Fails only when the spec is invalid or the server cannot be reached at the start; once
/// running, every failure is counted in the cells and the run carries on or gives up with
/// partial results and a reason.
pub fn run(spec: &Spec, progress: &Progress) -> Result<Outcome, SpecError> {
    spec.validate()?;
    let started = Instant::now();
    let server = server_facts(&spec.address, spec.options).map_err(SpecError::Server)?;
    let floor_command = floor::probe(&spec.address, spec.options).map_err(SpecError::Server)?;
    let server_threads = server.threads().unwrap_or(1).clamp(1, 1024);

    let tasks = spec.cells().len() - spec.sizes.len(); // get and set share a sample
    let rounds: u64 = spec.samples + spec.warmup;
    progress
        .total
        .store(rounds * tasks as u64, Ordering::Relaxed);

    let results: Vec<worker::Report> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..spec.concurrency)
            .map(|w| {
                let plan = worker::Plan {
                    id: w,
                    samples: spec.share(spec.samples, w),
                    warmup: spec.share(spec.warmup, w),
                    floor_command,
                    server_threads,
                };
                s.spawn(move || worker::run(spec, plan, progress))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("profile worker panicked"))
            .collect()
    });

    let mut cells = spec.cells();
    let mut leftovers = Vec::new();
    let mut aborted = None;
    for r in results {
        for (total, part) in cells.iter_mut().zip(&r.cells) {
            total.merge(part);
        }
        leftovers.extend(r.leftovers);
        aborted = aborted.or(r.aborted);
    }
    let cleaned_up_keys = leftovers.len() as u64;
    let leftover_keys = worker::delete_all(&spec.address, spec.options, &leftovers);
    Ok(Outcome {
        cells,
        server,
        floor_command,
        leftover_keys,
        cleaned_up_keys: cleaned_up_keys - leftover_keys,
        cancelled: progress.cancelled(),
        aborted,
        elapsed: started.elapsed(),
    })
}
