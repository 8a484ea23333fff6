//! Redis's own eviction (7.0's `evict.c`), as its `maxmemory-policy` does it:
//!
//! * `redis-lru` — `allkeys-lru`: approximated LRU. Each eviction pass samples
//!   `maxmemory-samples` keys (default 5) at random and offers each to an *eviction pool* of
//!   the 16 best candidates seen so far, kept across evictions and sorted by idle time; the
//!   pass then evicts the pool's best entry whose key still exists (an entry whose key is gone
//!   is a ghost and is dropped). A pool entry keeps the idle time it was sampled with, even if
//!   its key is read again before it is evicted — as in Redis. Idle times come from the LRU
//!   clock, which ticks once a second (`LRU_CLOCK_RESOLUTION` 1000 ms, 24 bits, wrapping):
//!   keys read within the same second tie.
//! * `redis-lfu` — `allkeys-lfu`: the same pool, ranked by `255 - counter`, where the counter
//!   is Redis's 8-bit logarithmic (Morris) counter: a new key starts at `LFU_INIT_VAL` 5; a
//!   read first decays it by one per `lfu-decay-time` minutes (default 1) since its last
//!   decrement time (a 16-bit clock of minutes), then raises it by one with probability
//!   `1 / ((counter - 5) * lfu-log-factor + 1)` (log factor 10 by default; below 5 counts as
//!   5), saturating at 255. Sampling a key decays nothing; it only reads the decayed value.
//! * `redis-random` — `allkeys-random`: evict a key drawn uniformly at random.
//!
//! `volatile-lru` / `volatile-lfu` / `volatile-random` sample only keys with a TTL; when
//! every key has one, as in a cache that sets every key with a TTL, they are the same as the
//! `allkeys-` policies modelled here.
//!
//! **Order.** A miss inserts the key (the cache's set after a get that missed), then keys are
//! evicted until the space used is within capacity again: Redis evicts before it runs the
//! next command, so the key just written is a candidate too (under `redis-lfu` a new key's
//! counter of 5 is often the lowest sampled, and it goes first — as in Redis). A key larger
//! than the whole capacity is not inserted.
//!
//! **Clock.** The trace's timestamps, in seconds (Unix time in a capture or a trace that has
//! it), are the clock: the LRU clock is the second, the LFU clock its minute (`t / 60`, 16
//! bits), so a replay that keeps Unix time sees the same minute boundaries as the server. A
//! time earlier than the one before is taken as the one before (the clocks never go back).
//! A trace without timestamps (every time the same) gets [`ASSUMED_RATE`] requests a second.
//!
//! **Random draws.** Redis samples with `dictGetSomeKeys`, which walks consecutive buckets
//! of its hash table from a random one; the keys there are in hash order, unrelated to their
//! use, so this samples `maxmemory-samples` distinct keys uniformly at random instead (all of
//! them when fewer are cached). The draws and the LFU counter's coin flips come from one
//! seeded generator (`rand`'s `SmallRng`), so a run is repeatable.

use rand::rngs::SmallRng;
use rand::seq::index;
use rand::{Rng, SeedableRng};

use super::{Policy, Runner, Space, NIL};
use crate::flat::SimTrace;

/// Entries in the eviction pool (Redis's `EVPOOL_SIZE`).
pub const EVPOOL_SIZE: usize = 16;
/// Redis's `LRU_CLOCK_MAX`: the LRU clock keeps 24 bits of seconds.
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;
/// Milliseconds per tick of the LRU clock (`LRU_CLOCK_RESOLUTION`).
pub const LRU_CLOCK_RESOLUTION: u64 = 1000;
/// A new key's LFU counter (`LFU_INIT_VAL`).
pub const LFU_INIT_VAL: u8 = 5;
/// Requests a second assumed when the trace has no timestamps.
pub const ASSUMED_RATE: u64 = 1000;
/// The generator's seed.
pub const SEED: u64 = 0x5eed_0ca0_de7e_4ed1;

/// Which of Redis's policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Lru,
    Lfu,
    Random,
}

/// Redis's eviction settings (their defaults: `maxmemory-samples 5`, `lfu-log-factor 10`,
/// `lfu-decay-time 1`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub samples: usize,
    pub log_factor: u32,
    /// Minutes per decrement of an LFU counter (0: never decays).
    pub decay_minutes: u32,
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            samples: 5,
            log_factor: 10,
            decay_minutes: 1,
            seed: SEED,
        }
    }
}

pub(crate) struct Redis {
    kind: Kind,
    params: Params,
    /// The cached slots, in no order (a uniform draw is a uniform index).
    keys: Vec<u32>,
    /// Each slot's index in `keys`, [`NIL`] when not cached.
    at: Vec<u32>,
    /// Each slot's `lru` field: the LRU clock of its last read, or (LFU) its decrement time
    /// in minutes `<< 8 |` its counter.
    lru: Vec<u32>,
    size: Vec<u32>,
    /// The eviction pool: `(idle, slot)` in ascending idle, at most [`EVPOOL_SIZE`].
    pool: Vec<(u64, u32)>,
    space: Space,
    rng: SmallRng,
    /// Each request's time in seconds (`None`: the assumed rate).
    times: Option<Vec<u32>>,
    /// The clock of the latest request, seconds.
    now: u32,
}

pub(crate) fn build_lru(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    Box::new(Redis::new(Kind::Lru, Params::default(), capacity, trace))
}

pub(crate) fn build_lfu(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    Box::new(Redis::new(Kind::Lfu, Params::default(), capacity, trace))
}

pub(crate) fn build_random(capacity: u64, trace: &SimTrace<'_>) -> Box<dyn Runner> {
    Box::new(Redis::new(Kind::Random, Params::default(), capacity, trace))
}

/// The trace's times when they tell time (not all the same), else `None`.
fn clock_of(trace: &SimTrace<'_>) -> Option<Vec<u32>> {
    let t = trace.times.as_deref()?;
    let first = *t.first()?;
    t.iter().any(|&x| x != first).then(|| t.to_vec())
}

impl Redis {
    pub(crate) fn new(kind: Kind, params: Params, capacity: u64, trace: &SimTrace<'_>) -> Redis {
        let n = trace.n_objects;
        Redis {
            kind,
            params,
            keys: Vec::new(),
            at: vec![NIL; n],
            lru: vec![0; n],
            size: vec![0; n],
            pool: Vec::with_capacity(EVPOOL_SIZE),
            space: Space::new(capacity),
            rng: SmallRng::seed_from_u64(params.seed),
            times: clock_of(trace),
            now: 0,
        }
    }

    /// Advances the clock to request `t`'s time.
    #[inline]
    fn tick(&mut self, t: usize) {
        let s = match &self.times {
            Some(times) => times[t],
            None => (t as u64 / ASSUMED_RATE) as u32,
        };
        self.now = self.now.max(s);
    }

    /// The LRU clock now (`getLRUClock`: seconds, 24 bits).
    #[inline]
    fn lru_clock(&self) -> u32 {
        self.now & LRU_CLOCK_MAX
    }

    /// The LFU clock now (`LFUGetTimeInMinutes`: minutes, 16 bits).
    #[inline]
    fn minutes(&self) -> u32 {
        (self.now / 60) & 65535
    }

    /// `estimateObjectIdleTime`: milliseconds since the slot's last read, in whole seconds.
    fn idle_ms(&self, slot: u32) -> u64 {
        let clock = u64::from(self.lru_clock());
        let lru = u64::from(self.lru[slot as usize]);
        let ticks = if clock >= lru {
            clock - lru
        } else {
            clock + (u64::from(LRU_CLOCK_MAX) - lru)
        };
        ticks * LRU_CLOCK_RESOLUTION
    }

    /// `LFUDecrAndReturn`: the slot's counter after its decay to now (the slot unchanged).
    fn lfu_decayed(&self, slot: u32) -> u32 {
        let field = self.lru[slot as usize];
        let (ldt, counter) = (field >> 8, field & 255);
        let now = self.minutes();
        let elapsed = if now >= ldt {
            now - ldt
        } else {
            65535 - ldt + now
        };
        let periods = elapsed.checked_div(self.params.decay_minutes).unwrap_or(0);
        counter.saturating_sub(periods)
    }

    /// `LFULogIncr`: one read's increment, taken with probability 1/((c - 5) * factor + 1).
    fn lfu_incr(&mut self, counter: u32) -> u32 {
        if counter >= 255 {
            return 255;
        }
        let base = f64::from(counter.saturating_sub(u32::from(LFU_INIT_VAL)));
        let p = 1.0 / (base * f64::from(self.params.log_factor) + 1.0);
        let r: f64 = self.rng.random();
        counter + u32::from(r < p)
    }

    /// A read of a cached slot: the LRU clock, or the decayed and raised LFU counter.
    fn touch_read(&mut self, slot: u32) {
        self.lru[slot as usize] = match self.kind {
            Kind::Lfu => {
                let c = self.lfu_decayed(slot);
                let c = self.lfu_incr(c);
                (self.minutes() << 8) | c
            }
            _ => self.lru_clock(),
        };
    }

    /// The pool's score of a slot: a higher one is a better candidate.
    fn score(&self, slot: u32) -> u64 {
        match self.kind {
            Kind::Lfu => 255 - u64::from(self.lfu_decayed(slot)),
            _ => self.idle_ms(slot),
        }
    }

    /// `evictionPoolPopulate`: offers `samples` random keys to the pool.
    fn populate(&mut self) {
        let n = self.keys.len();
        let k = self.params.samples.min(n);
        for i in index::sample(&mut self.rng, n, k) {
            let slot = self.keys[i];
            let idle = self.score(slot);
            self.offer(idle, slot);
        }
    }

    /// Puts `(idle, slot)` in the pool as Redis does: before the first entry that is not
    /// better; when the pool is full, it pushes out the worst entry, or is dropped if it is
    /// worse than all of them. The same key may be in the pool twice.
    fn offer(&mut self, idle: u64, slot: u32) {
        let pool = &mut self.pool;
        let k = pool.iter().take_while(|&&(i, _)| i < idle).count();
        if pool.len() < EVPOOL_SIZE {
            pool.insert(k, (idle, slot));
        } else if k > 0 {
            pool.remove(0);
            pool.insert(k - 1, (idle, slot));
        }
    }

    /// The next key to evict: the pool's best entry whose key is still cached (ghosts are
    /// dropped), populating the pool as often as it takes. `None` when nothing is cached.
    fn victim(&mut self) -> Option<u32> {
        if self.keys.is_empty() {
            return None;
        }
        if self.kind == Kind::Random {
            let i = self.rng.random_range(0..self.keys.len());
            return Some(self.keys[i]);
        }
        loop {
            self.populate();
            while let Some((_, slot)) = self.pool.pop() {
                if self.at[slot as usize] != NIL {
                    return Some(slot);
                }
            }
        }
    }

    fn insert(&mut self, slot: u32, size: u32) {
        self.at[slot as usize] = self.keys.len() as u32;
        self.keys.push(slot);
        self.size[slot as usize] = size;
        self.space.used += u64::from(size);
        self.lru[slot as usize] = match self.kind {
            Kind::Lfu => (self.minutes() << 8) | u32::from(LFU_INIT_VAL),
            _ => self.lru_clock(),
        };
    }

    fn remove(&mut self, slot: u32) {
        let i = self.at[slot as usize] as usize;
        self.keys.swap_remove(i);
        if let Some(&moved) = self.keys.get(i) {
            self.at[moved as usize] = i as u32;
        }
        self.at[slot as usize] = NIL;
        self.space.used -= u64::from(std::mem::take(&mut self.size[slot as usize]));
    }

    /// Whether `slot` is cached (for tests).
    #[cfg(test)]
    pub(crate) fn cached(&self, slot: u32) -> bool {
        self.at[slot as usize] != NIL
    }

    /// The slot's LFU counter as last stored (for tests).
    #[cfg(test)]
    pub(crate) fn counter(&self, slot: u32) -> u32 {
        self.lru[slot as usize] & 255
    }
}

impl Policy for Redis {
    fn grow(&mut self, n: usize) {
        if n > self.at.len() {
            self.at.resize(n, NIL);
            self.lru.resize(n, 0);
            self.size.resize(n, 0);
        }
    }

    fn access(&mut self, t: usize, x: u32, size: u32) -> bool {
        self.tick(t);
        if self.at[x as usize] != NIL {
            self.touch_read(x);
            return true;
        }
        if !self.space.admits(size) {
            return false;
        }
        self.insert(x, size);
        while self.space.used > self.space.capacity {
            match self.victim() {
                Some(v) => self.remove(v),
                None => break,
            }
        }
        false
    }
}

#[cfg(test)]
#[path = "redis_tests.rs"]
mod tests;
