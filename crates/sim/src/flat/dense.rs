//! Dense object numbers: every distinct id becomes a `u32` slot, so policies keep their state
//! in flat arrays indexed by slot and do no hashing while they simulate.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;

use super::{FlatTrace, Format};
use crate::error::TraceError;

/// A fast hasher for integer keys: a folded 64×64→128-bit multiply (the high and low halves
/// XORed), so both the low bits (bucket index) and the high bits (control byte) of the hash
/// depend on every bit of the key. Not DoS-resistant; traces are not adversarial here.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let m = u128::from(self.0 ^ 0x243f_6a88_85a3_08d3) * 0x9e37_79b9_7f4a_7c15u128;
        (m as u64) ^ ((m >> 64) as u64)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }

    fn write_u32(&mut self, n: u32) {
        self.0 ^= u64::from(n);
    }
}

/// A `HashMap` with [`KeyHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// Ids below this may be numbered through a table indexed by id (256 MiB at most).
const DIRECT_MAX: u64 = 1 << 26;

/// Gives each distinct id the next dense number, in order of first appearance.
///
/// Ids below `limit` (at most 2^26, and at most 8 per expected request, so the table never
/// dwarfs the trace) are looked up in a table indexed by id that grows as needed; any other id
/// goes through a hash map. Either way it is one lookup per request.
pub struct Numberer {
    table: Vec<u32>,
    limit: u64,
    map: FastMap<u64, u32>,
    n: u32,
}

impl Numberer {
    /// A numberer for a trace of about `expected_requests` requests.
    pub fn new(expected_requests: usize) -> Numberer {
        Numberer {
            table: Vec::new(),
            limit: DIRECT_MAX.min(8 * expected_requests as u64 + 1024),
            map: FastMap::default(),
            n: 0,
        }
    }

    /// The number of `id`.
    #[inline]
    pub fn number(&mut self, id: u64) -> u32 {
        if id < self.limit {
            let i = id as usize;
            if i >= self.table.len() {
                let len = (i + 1)
                    .next_power_of_two()
                    .max(1 << 16)
                    .min(self.limit as usize);
                self.table.resize(len, u32::MAX);
            }
            let t = &mut self.table[i];
            if *t == u32::MAX {
                *t = self.n;
                self.n += 1;
            }
            *t
        } else {
            let next = self.n;
            let v = *self.map.entry(id).or_insert(next);
            if v == next {
                self.n += 1;
            }
            v
        }
    }

    /// Distinct ids numbered so far.
    pub fn count(&self) -> usize {
        self.n as usize
    }
}

/// A trace ready to simulate: each request's dense object slot (numbered by first
/// appearance), its size, and which requests the simulator skips.
///
/// A request is skipped when its size is 0 (libCacheSim's `cachesim` drops those when it reads
/// a trace) or its op is a delete. Skipped requests are not counted and change no state.
#[derive(Debug, Clone)]
pub struct SimTrace<'a> {
    /// Dense slot of every request, `0..n_objects`.
    pub slots: Vec<u32>,
    /// Size of every request in bytes.
    pub sizes: Cow<'a, [u32]>,
    /// `Some(mask)` when some requests are skipped (`true` = skip).
    pub skip: Option<Vec<bool>>,
    /// Number of distinct objects.
    pub n_objects: usize,
    /// Time of every request (the trace's unit, seconds for the policies that read it), when
    /// kept: [`SimTrace::new`] borrows the trace's, [`SimTrace::load`] keeps them only when
    /// asked (the Redis policies read them as their clocks; see [`crate::policy::PolicyInfo`]).
    pub times: Option<Cow<'a, [u32]>>,
}

fn zero_size_mask(sizes: &[u32], deletes: Option<Vec<bool>>) -> Option<Vec<bool>> {
    let mut skip = deletes;
    if sizes.contains(&0) {
        let mask = skip.get_or_insert_with(|| vec![false; sizes.len()]);
        for (m, &s) in mask.iter_mut().zip(sizes) {
            *m |= s == 0;
        }
    }
    skip
}

impl<'a> SimTrace<'a> {
    /// Numbers the objects of `trace` (see [`Numberer`]).
    pub fn new(trace: &'a FlatTrace) -> SimTrace<'a> {
        assert!(
            trace.len() < u32::MAX as usize,
            "traces of 2^32 requests or more are not supported"
        );
        let mut numberer = Numberer::new(trace.len());
        let slots: Vec<u32> = trace.ids.iter().map(|&id| numberer.number(id)).collect();
        SimTrace {
            slots,
            sizes: Cow::Borrowed(&trace.sizes),
            skip: zero_size_mask(&trace.sizes, trace.deletes()),
            n_objects: numberer.count(),
            times: Some(Cow::Borrowed(&trace.times)),
        }
    }

    /// Reads a trace file straight into simulation form, keeping only slots and sizes (8
    /// bytes per request): an `oracle` file is streamed and numbered as it is read, with no
    /// id or time columns; other formats are loaded as a [`FlatTrace`] first.
    pub fn load(
        path: impl AsRef<Path>,
        format: Option<Format>,
    ) -> Result<SimTrace<'static>, TraceError> {
        Self::load_with(path, format, false)
    }

    /// [`SimTrace::load`], keeping the request times too when `times` (4 more bytes per
    /// request), for policies whose clocks read them.
    pub fn load_with(
        path: impl AsRef<Path>,
        format: Option<Format>,
        times: bool,
    ) -> Result<SimTrace<'static>, TraceError> {
        let path = path.as_ref();
        if format.or_else(|| Format::from_path(path)) == Some(Format::Oracle) {
            let shown = path.display().to_string();
            let (file, n) = super::oracle::open(path, &shown)?;
            let mut numberer = Numberer::new(n);
            let mut slots = Vec::with_capacity(n);
            let mut sizes = Vec::with_capacity(n);
            let mut kept = Vec::with_capacity(if times { n } else { 0 });
            super::oracle::chunks(file, n, &shown, |data| {
                for r in data.chunks_exact(super::ORACLE_RECORD) {
                    let (id, size) = super::oracle::id_size(r);
                    slots.push(numberer.number(id));
                    sizes.push(size);
                    if times {
                        kept.push(super::oracle::time_size_next(r).0);
                    }
                }
            })?;
            let skip = zero_size_mask(&sizes, None);
            return Ok(SimTrace {
                slots,
                sizes: Cow::Owned(sizes),
                skip,
                n_objects: numberer.count(),
                times: times.then_some(Cow::Owned(kept)),
            });
        }
        let t = FlatTrace::load(path, format)?;
        let st = SimTrace::new(&t);
        Ok(SimTrace {
            slots: st.slots,
            sizes: Cow::Owned(t.sizes.clone()),
            skip: st.skip,
            n_objects: st.n_objects,
            times: times.then(|| Cow::Owned(t.times.clone())),
        })
    }

    /// Number of requests (skipped ones included).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether request `i` is skipped.
    #[inline]
    pub fn skipped(&self, i: usize) -> bool {
        self.skip.as_ref().is_some_and(|m| m[i])
    }

    /// The working set of the simulated requests: (distinct objects, sum of each object's
    /// first size) — libCacheSim's base for fractional cache sizes.
    pub fn working_set(&self) -> (u64, u64) {
        let mut seen = vec![false; self.n_objects];
        let (mut objects, mut bytes) = (0u64, 0u64);
        for (t, (&s, &size)) in self.slots.iter().zip(self.sizes.iter()).enumerate() {
            if !seen[s as usize] && !self.skipped(t) {
                seen[s as usize] = true;
                objects += 1;
                bytes += u64::from(size);
            }
        }
        (objects, bytes)
    }
}
