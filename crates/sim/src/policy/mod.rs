//! Eviction policies over a [`SimTrace`]: one file per policy, one [`Policy`] trait, one
//! registry table ([`REGISTRY`]).
//!
//! Capacity is in objects (every object counts 1, like libCacheSim's `--ignore-obj-size 1`)
//! or in bytes (sizes honoured); see [`Unit`]. The common semantics follow libCacheSim's
//! `cache_get_base`, so LRU and FIFO give its exact miss counts:
//!
//! * a hit changes no object's size (the size stored at insertion stays);
//! * on a miss an object larger than the capacity is not inserted (and evicts nothing);
//! * otherwise objects are evicted until the new one fits, then it is inserted;
//! * requests of size 0 and delete ops are skipped (see [`SimTrace`]).
//!
//! Policies keep their state in arrays indexed by the trace's dense object slots (intrusive
//! doubly-linked lists of `u32`, see [`Links`]), so a request costs no hashing and no
//! allocation.

mod arc;
mod belady;
mod fifo;
mod idmap;
mod lfu;
mod links;
mod lru;
pub mod redis;
mod s3fifo;
mod sieve;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::TraceError;
use crate::flat::{Format, Numberer, SimTrace};

pub use links::{Links, List, NIL};

/// What a capacity counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Every object counts 1.
    Objects,
    /// Objects count their size in bytes.
    Bytes,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Objects => "objects",
            Unit::Bytes => "bytes",
        }
    }

    pub fn parse(s: &str) -> Option<Unit> {
        match s.to_ascii_lowercase().as_str() {
            "objects" | "object" | "objs" => Some(Unit::Objects),
            "bytes" | "byte" => Some(Unit::Bytes),
            _ => None,
        }
    }
}

/// One eviction policy at one capacity, fed one request at a time.
pub trait Policy: Send {
    /// Request `t` of the trace (its index, counting skipped requests) for object `slot`
    /// of `size` (1 in object mode). Returns whether it was a hit.
    fn access(&mut self, t: usize, slot: u32, size: u32) -> bool;

    /// Reads the state of `slot` a few requests ahead of its access, so that its cache miss
    /// overlaps the current request's work instead of following it (a load standing in for a
    /// prefetch, which safe Rust cannot issue). The value is meaningless; the default reads
    /// nothing.
    #[inline]
    fn touch(&self, _slot: u32) -> u32 {
        0
    }

    /// Makes room for slots `0..n_objects` (they arrive as a streamed trace is read).
    fn grow(&mut self, n_objects: usize);

    /// Runs the policy over a whole trace (compiled once per policy, so `access` is a
    /// direct call in the loop).
    fn run(&mut self, trace: &SimTrace<'_>, unit: Unit) -> Counts
    where
        Self: Sized,
    {
        let mut c = Counts::default();
        let skip = trace.skip.as_deref();
        run_slice(self, &trace.slots, &trace.sizes, skip, 0, unit, &mut c);
        c
    }
}

/// How many requests ahead [`Policy::touch`] reads.
const LOOKAHEAD: usize = 8;

/// Requests per block of a streamed oracleGeneral file whose state a first pass reads before
/// a second simulates them (see `lru::stream_oracle`).
const BLOCK: usize = 1024;

/// Feeds requests `t0..t0 + slots.len()` to `p`, adding to `c`. Requests of size 0 and those
/// marked in `skip` are skipped.
#[inline]
fn run_slice<P: Policy>(
    p: &mut P,
    slots: &[u32],
    sizes: &[u32],
    skip: Option<&[bool]>,
    t0: usize,
    unit: Unit,
    c: &mut Counts,
) {
    for (i, (&slot, &size)) in slots.iter().zip(sizes).enumerate() {
        if let Some(&ahead) = slots.get(i + LOOKAHEAD) {
            std::hint::black_box(p.touch(ahead));
        }
        if size == 0 || skip.is_some_and(|m| m[i]) {
            continue;
        }
        let charged = match unit {
            Unit::Objects => 1,
            Unit::Bytes => size,
        };
        c.requests += 1;
        c.bytes += u64::from(size);
        if !p.access(t0 + i, slot, charged) {
            c.misses += 1;
            c.miss_bytes += u64::from(size);
        }
    }
}

/// The counts of one simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Requests simulated (skipped ones not counted).
    pub requests: u64,
    pub misses: u64,
    /// Bytes requested: the sum of request sizes, in both units.
    pub bytes: u64,
    /// Bytes of the missed requests.
    pub miss_bytes: u64,
}

/// The result of one (policy, capacity) simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct SimResult {
    pub policy: String,
    pub capacity: u64,
    pub unit: Unit,
    pub counts: Counts,
}

impl SimResult {
    pub fn miss_ratio(&self) -> f64 {
        ratio(self.counts.misses, self.counts.requests)
    }

    /// Missed bytes over requested bytes (real sizes, also in object mode — where
    /// libCacheSim, having set every size to 1, prints the miss ratio again).
    pub fn byte_miss_ratio(&self) -> f64 {
        ratio(self.counts.miss_bytes, self.counts.bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Builds a policy for a capacity over a trace (policies size their arrays from the trace;
/// Belady reads its future).
pub type Build = fn(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner>;

/// A built policy as the registry hands it out: [`Policy`]'s loops behind a `dyn`.
pub trait Runner: Send {
    /// The whole trace.
    fn run_all(&mut self, trace: &SimTrace<'_>, unit: Unit) -> Counts;
    /// One piece of a streamed trace, requests `t0..`; grows the policy first when the
    /// pieces so far hold `n_objects` distinct objects.
    fn run_piece(
        &mut self,
        slots: &[u32],
        sizes: &[u32],
        t0: usize,
        n_objects: usize,
        unit: Unit,
        c: &mut Counts,
    );
}

impl<P: Policy> Runner for P {
    fn run_all(&mut self, trace: &SimTrace<'_>, unit: Unit) -> Counts {
        self.run(trace, unit)
    }

    fn run_piece(
        &mut self,
        slots: &[u32],
        sizes: &[u32],
        t0: usize,
        n_objects: usize,
        unit: Unit,
        c: &mut Counts,
    ) {
        self.grow(n_objects);
        run_slice(self, slots, sizes, None, t0, unit, c);
    }
}

/// One registry entry.
pub struct PolicyInfo {
    /// Canonical name (lower case).
    pub name: &'static str,
    /// Other accepted spellings.
    pub aliases: &'static [&'static str],
    /// One line on what it is and which variant.
    pub about: &'static str,
    pub build: Build,
    /// Whether it can run on a trace streamed from a file (Belady needs the future, the Redis
    /// policies the request times).
    pub streams: bool,
    /// Whether it reads the request times (its clocks are the trace's timestamps).
    pub clock: bool,
    /// A dedicated loop over an oracleGeneral file keyed by the file's ids, when the policy
    /// has one (same results as [`Self::build`] over the loaded trace, less work per request).
    pub stream_oracle: Option<StreamOracle>,
}

/// Simulates one capacity over `n` records of an opened oracleGeneral file (`path` names it
/// in errors).
pub type StreamOracle = fn(
    file: std::fs::File,
    n: usize,
    path: &str,
    capacity: u64,
    unit: Unit,
) -> Result<Counts, TraceError>;

/// Every policy, in the order they are listed.
pub static REGISTRY: &[PolicyInfo] = &[
    PolicyInfo {
        name: "lru",
        aliases: &[],
        about: "least recently used (libCacheSim LRU, exact)",
        build: lru::build,
        streams: true,
        clock: false,
        stream_oracle: Some(lru::stream_oracle),
    },
    PolicyInfo {
        name: "fifo",
        aliases: &[],
        about: "first in, first out (libCacheSim FIFO, exact)",
        build: fifo::build,
        streams: true,
        clock: false,
        stream_oracle: None,
    },
    PolicyInfo {
        name: "lfu",
        aliases: &[],
        about: "least frequently used; ties go to the object that reached its count first \
                (libCacheSim LFU)",
        build: lfu::build,
        streams: true,
        clock: false,
        stream_oracle: None,
    },
    PolicyInfo {
        name: "arc",
        aliases: &[],
        about: "adaptive replacement cache, ghosts sized in bytes (libCacheSim ARC)",
        build: arc::build,
        streams: true,
        clock: false,
        stream_oracle: None,
    },
    PolicyInfo {
        name: "s3fifo",
        aliases: &["s3-fifo"],
        about: "S3-FIFO: small FIFO 10 %, ghost 90 %, move to main at 2 hits \
                (libCacheSim S3FIFO defaults)",
        build: s3fifo::build,
        streams: true,
        clock: false,
        stream_oracle: None,
    },
    PolicyInfo {
        name: "sieve",
        aliases: &[],
        about: "SIEVE: FIFO with a visited bit and a moving hand (libCacheSim Sieve)",
        build: sieve::build,
        streams: true,
        clock: false,
        stream_oracle: None,
    },
    PolicyInfo {
        name: "belady",
        aliases: &["opt", "optimal"],
        about: "Belady: evict the object used farthest in the future, bypass when the new one \
                is used last; optimal with capacity in objects, a heuristic in bytes",
        build: belady::build,
        streams: false,
        clock: false,
        stream_oracle: None,
    },
    PolicyInfo {
        name: "redis-lru",
        aliases: &["allkeys-lru", "volatile-lru"],
        about: "Redis 7's allkeys-lru (and volatile-lru when every key has a TTL): 5 random \
                samples a pass into a 16-entry eviction pool, idle times in whole seconds \
                of the trace's clock (maxmemory-samples 5)",
        build: redis::build_lru,
        streams: false,
        clock: true,
        stream_oracle: None,
    },
    PolicyInfo {
        name: "redis-lfu",
        aliases: &["allkeys-lfu", "volatile-lfu"],
        about: "Redis 7's allkeys-lfu: the eviction pool ranked by the logarithmic counter \
                (maxmemory-samples 5, lfu-log-factor 10, lfu-decay-time 1 minute of the \
                trace's clock)",
        build: redis::build_lfu,
        streams: false,
        clock: true,
        stream_oracle: None,
    },
    PolicyInfo {
        name: "redis-random",
        aliases: &["allkeys-random", "volatile-random"],
        about: "Redis 7's allkeys-random: evict a key drawn uniformly at random",
        build: redis::build_random,
        streams: false,
        clock: false,
        stream_oracle: None,
    },
];

/// The registry entry for a name or alias (any case).
pub fn lookup(name: &str) -> Option<&'static PolicyInfo> {
    REGISTRY.iter().find(|p| {
        p.name.eq_ignore_ascii_case(name) || p.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

/// The canonical policy names.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|p| p.name).collect()
}

/// A policy name not in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown policy {:?} (known: {})",
            self.0,
            names().join(", ")
        )
    }
}

impl std::error::Error for UnknownPolicy {}

/// Simulates one policy at one capacity.
pub fn simulate(
    trace: &SimTrace<'_>,
    policy: &str,
    capacity: u64,
    unit: Unit,
) -> Result<SimResult, UnknownPolicy> {
    let info = lookup(policy).ok_or_else(|| UnknownPolicy(policy.to_string()))?;
    let mut p = (info.build)(capacity, trace);
    let counts = p.run_all(trace, unit);
    Ok(SimResult {
        policy: info.name.to_string(),
        capacity,
        unit,
        counts,
    })
}

/// Simulates one policy at one capacity straight from an oracleGeneral file, reading it in
/// pieces and keeping no per-request arrays: memory is the policy's per-object state only.
/// `Ok(None)` when this cannot stream (another format, or a policy such as Belady that needs
/// the whole trace): load a [`SimTrace`] and call [`simulate`] instead.
pub fn simulate_file(
    path: &std::path::Path,
    format: Option<Format>,
    policy: &str,
    capacity: u64,
    unit: Unit,
) -> Result<Option<SimResult>, TraceError> {
    let shown = path.display().to_string();
    let info = match lookup(policy) {
        Some(i) if i.streams => i,
        _ => return Ok(None),
    };
    if format.or_else(|| Format::from_path(path)) != Some(Format::Oracle) {
        return Ok(None);
    }
    let (file, n) = crate::flat::oracle_open(path, &shown)?;
    if let Some(run) = info.stream_oracle {
        let counts = run(file, n, &shown, capacity, unit)?;
        return Ok(Some(SimResult {
            policy: info.name.to_string(),
            capacity,
            unit,
            counts,
        }));
    }
    let empty = SimTrace {
        slots: Vec::new(),
        sizes: std::borrow::Cow::Borrowed(&[]),
        skip: None,
        n_objects: 0,
        times: None,
    };
    let mut p = (info.build)(capacity, &empty);
    let mut numberer = Numberer::new(n);
    let mut counts = Counts::default();
    const PIECE: usize = 1 << 17;
    let mut slots = Vec::with_capacity(PIECE);
    let mut sizes = Vec::with_capacity(PIECE);
    let mut t0 = 0usize;
    let mut room = 0usize;
    let mut flush = |slots: &mut Vec<u32>, sizes: &mut Vec<u32>, objects: usize| {
        if objects > room {
            room = objects.next_power_of_two();
        }
        p.run_piece(slots, sizes, t0, room, unit, &mut counts);
        t0 += slots.len();
        slots.clear();
        sizes.clear();
    };
    crate::flat::oracle_stream(file, n, &shown, |id, size| {
        slots.push(numberer.number(id));
        sizes.push(size);
        if slots.len() == PIECE {
            flush(&mut slots, &mut sizes, numberer.count());
        }
    })?;
    flush(&mut slots, &mut sizes, numberer.count());
    Ok(Some(SimResult {
        policy: info.name.to_string(),
        capacity,
        unit,
        counts,
    }))
}

/// Simulates every `(policy, capacity)` job over one shared trace on up to `threads` threads
/// (0 = one per core); results come back in job order. Names are checked before any work.
pub fn sweep(
    trace: &SimTrace<'_>,
    jobs: &[(String, u64)],
    unit: Unit,
    threads: usize,
) -> Result<Vec<SimResult>, UnknownPolicy> {
    for (name, _) in jobs {
        lookup(name).ok_or_else(|| UnknownPolicy(name.clone()))?;
    }
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(jobs.len())
    .max(1);
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<SimResult>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((name, cap)) = jobs.get(i) else {
                    break;
                };
                let r = simulate(trace, name, *cap, unit).expect("names checked above");
                out.lock().expect("no panics while locked")[i] = Some(r);
            });
        }
    });
    Ok(out
        .into_inner()
        .expect("no panics while locked")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect())
}

/// Occupancy bookkeeping shared by the single-queue policies: stored size per slot.
pub(crate) struct Space {
    pub capacity: u64,
    pub used: u64,
}

impl Space {
    pub fn new(capacity: u64) -> Space {
        Space { capacity, used: 0 }
    }

    /// Whether an object of `size` may be inserted at all (libCacheSim `can_insert`).
    #[inline]
    pub fn admits(&self, size: u32) -> bool {
        u64::from(size) <= self.capacity
    }

    /// Whether `size` more bytes fit now.
    #[inline]
    pub fn fits(&self, size: u32) -> bool {
        self.used + u64::from(size) <= self.capacity
    }
}
