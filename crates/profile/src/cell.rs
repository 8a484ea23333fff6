//! The cells of a profile: one operation at one value size or key count, and what its samples
//! measured.

use std::collections::BTreeMap;

use cachelab_client::ErrorKind;
use cachelab_metrics::Latency;

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
    pub(crate) fn new(op: Op, value_size: usize, keys: usize) -> Cell {
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

    pub(crate) fn merge(&mut self, other: &Cell) {
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
