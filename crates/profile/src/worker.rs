//! One measuring thread: its own connection, its own share of the samples.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use cachelab_client::{Address, Error, ErrorKind, Options};
use cachelab_proto::Key;

use crate::cell::Cell;
use crate::conn::{Conn, Gone, Sent};
use crate::floor::{self, FloorRequest};
use crate::progress::Progress;
use crate::spec::{Protocol, Spec};

/// Extra random bytes in the value pool beyond twice the largest value.
const POOL_SLACK: usize = 1 << 16;

pub struct Plan {
    pub id: usize,
    pub samples: u64,
    pub warmup: u64,
    pub floor_request: FloorRequest,
}

pub struct Report {
    pub cells: Vec<Cell>,
    /// Keys that may still be on the server.
    pub leftovers: Vec<Key>,
    pub aborted: Option<String>,
    /// Commands sent, by name.
    pub sent: Sent,
}

struct Worker<'a> {
    spec: &'a Spec,
    plan: Plan,
    progress: &'a Progress,
    conn: Option<Conn>,
    /// Commands sent on connections since dropped.
    sent: Sent,
    rng: SmallRng,
    cells: Vec<Cell>,
    leftovers: Vec<Key>,
    /// Keys written and read this round, deleted in the next round's first pipeline.
    pending: Vec<Key>,
    /// Random bytes that values are cut from (see [`Worker::random`]).
    pool: Bytes,
    seq: u64,
    last_success: Instant,
    failures_in_a_row: u32,
    aborted: Option<String>,
}

pub fn run(spec: &Spec, plan: Plan, progress: &Progress) -> Report {
    let seed = spec.seed ^ (plan.id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut w = Worker {
        spec,
        plan,
        progress,
        conn: None,
        sent: Sent::new(),
        rng: SmallRng::seed_from_u64(seed),
        cells: spec.cells(),
        leftovers: Vec::new(),
        pending: Vec::new(),
        pool: Bytes::new(),
        seq: 0,
        last_success: Instant::now(),
        failures_in_a_row: 0,
        aborted: None,
    };
    w.run();
    w.flush_deletes();
    w.leftovers.append(&mut w.pending);
    w.drop_conn();
    Report {
        cells: w.cells,
        leftovers: w.leftovers,
        aborted: w.aborted,
        sent: w.sent,
    }
}

/// An outcome that needs no reconnect: the server answered, just not with success.
fn is_reply_error(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ServerError
            | ErrorKind::ClientError
            | ErrorKind::UnknownCommand
            | ErrorKind::Key
    )
}

impl Worker<'_> {
    fn run(&mut self) {
        let n_sizes = self.spec.sizes.len();
        let max = self.spec.sizes.iter().copied().max().unwrap_or(0);
        self.pool = self.fresh_random(2 * max.max(self.spec.multi_value_size) + POOL_SLACK);
        for round in 0..self.plan.warmup + self.plan.samples {
            let keep = round >= self.plan.warmup;
            self.floor_sample(keep);
            self.tick();
            for i in 0..n_sizes {
                self.get_set_sample(i, keep);
                self.tick();
            }
            self.multi_get_round(keep);
            if self.aborted.is_some() || self.progress.cancelled() {
                break;
            }
        }
    }

    fn tick(&self) {
        self.progress
            .done
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn key(&mut self, tag: &str) -> Key {
        self.seq += 1;
        Key::new(format!(
            "{}:{tag}:{}:{}",
            self.spec.prefix, self.plan.id, self.seq
        ))
        .expect("prefix validated, rest is digits")
    }

    fn fresh_random(&mut self, size: usize) -> Bytes {
        let mut b = BytesMut::zeroed(size);
        self.rng.fill_bytes(&mut b);
        b.freeze()
    }

    /// A value of `size` bytes, different from every other value of this run: random bytes cut
    /// from the pool at a random offset, with the sample's sequence number written over the
    /// first bytes. Generating a fresh megabyte per sample would cost more than reading it.
    fn random(&mut self, size: usize) -> Bytes {
        let span = self.pool.len() - size;
        let at = (self.rng.next_u64() % (span as u64 + 1)) as usize;
        let mut b = BytesMut::from(&self.pool[at..at + size]);
        self.seq += 1;
        let seq = self.seq.to_le_bytes();
        let n = size.min(seq.len());
        b[..n].copy_from_slice(&seq[..n]);
        b.freeze()
    }

    fn ok(&mut self) {
        self.last_success = Instant::now();
        self.failures_in_a_row = 0;
    }

    /// Counts a failure against `cell`; drops the connection when it can't be trusted any more;
    /// backs off, and gives up when nothing has worked for `give_up_after`.
    fn fail(&mut self, cell: usize, e: &Error) {
        *self.cells[cell].errors.entry(e.kind()).or_default() += 1;
        if is_reply_error(e) {
            return;
        }
        self.drop_conn();
        self.failures_in_a_row += 1;
        if self.last_success.elapsed() >= self.spec.give_up_after {
            self.aborted = Some(format!(
                "gave up: no request succeeded for {:.1} s; last error: {e}",
                self.last_success.elapsed().as_secs_f64()
            ));
            return;
        }
        let backoff = Duration::from_millis(5u64 << self.failures_in_a_row.min(7))
            .min(Duration::from_millis(500));
        std::thread::sleep(backoff);
    }

    /// Closes the measuring connection, keeping the count of what was sent on it.
    fn drop_conn(&mut self) {
        if let Some(mut c) = self.conn.take() {
            add_sent(&mut self.sent, c.take_sent());
        }
    }

    fn connection(&mut self, cell: usize) -> Option<&mut Conn> {
        if self.connect(cell) {
            self.conn.as_mut()
        } else {
            None
        }
    }

    /// Opens the measuring connection, which carries every sample, the floor's included.
    fn connect(&mut self, cell: usize) -> bool {
        if self.conn.is_some() {
            return true;
        }
        match Conn::connect(&self.spec.address, &self.spec.options, &self.spec.protocol) {
            Ok(conn) => {
                self.conn = Some(conn);
                true
            }
            Err(e) => {
                self.fail(cell, &e);
                false
            }
        }
    }

    /// One floor sample, on the measuring connection through the same client as every other
    /// sample (the same socket, server thread and wait): an untimed floor request, then a
    /// timed one. The untimed one stands where a get's set stands: a get is timed right after
    /// another round trip, and so is the floor. Timed first in the round instead, after the
    /// previous round's multi-gets, the floor's p50 was 1.3–1.6x a small get's here (2 cores,
    /// memcached `-t 4`): the first request after a pause or a large reply waits longer for
    /// the threads to wake, and the floor would be above what it is the floor of.
    fn floor_sample(&mut self, keep: bool) {
        let request = self.plan.floor_request.clone();
        let Some(conn) = self.connection(0) else {
            return;
        };
        let primed = conn.floor(&request);
        let timed = primed.and_then(|_| {
            let t0 = Instant::now();
            conn.floor(&request)
                .map(|answered| (answered, t0.elapsed()))
        });
        match timed {
            Ok((answered, took)) => {
                self.ok();
                if !answered {
                    self.cells[0].mismatches += 1;
                } else if keep {
                    cachelab_metrics::record(&mut self.cells[0].hist, took.as_nanos() as u64);
                }
            }
            Err(e) => self.fail(0, &e),
        }
    }

    fn get_set_sample(&mut self, i: usize, keep: bool) {
        let size = self.spec.sizes[i];
        let (get_cell, set_cell) = (1 + i, 1 + self.spec.sizes.len() + i);
        let key = self.key(&format!("g{size}"));
        let value = self.random(size);
        let Some(conn) = self.connection(set_cell) else {
            return;
        };

        let t0 = Instant::now();
        let stored = conn.set(&key, value.clone());
        let set_took = t0.elapsed();
        match stored {
            Ok(true) => {
                self.ok();
                if keep {
                    cachelab_metrics::record(
                        &mut self.cells[set_cell].hist,
                        set_took.as_nanos() as u64,
                    );
                }
            }
            Ok(false) => {
                let e = Error::ServerError("value not stored".into());
                return self.fail(set_cell, &e);
            }
            Err(e) => {
                self.leftovers.push(key);
                return self.fail(set_cell, &e);
            }
        }

        let conn = self.conn.as_mut().expect("connected above");
        let t1 = Instant::now();
        let got = conn.get(&key);
        let get_took = t1.elapsed();
        match got {
            Ok(Some(data)) => {
                self.ok();
                if keep {
                    cachelab_metrics::record(
                        &mut self.cells[get_cell].hist,
                        get_took.as_nanos() as u64,
                    );
                }
                if data != value {
                    self.cells[get_cell].mismatches += 1;
                }
            }
            Ok(None) => self.cells[get_cell].misses += 1,
            Err(e) => {
                self.leftovers.push(key);
                return self.fail(get_cell, &e);
            }
        }
        self.pending.push(key);
    }

    /// One multi-get sample per key count. The values for all of them are written in one
    /// untimed pipeline, which also carries the deletes of the previous round's keys; then each
    /// multi-get is timed on its own and verified.
    fn multi_get_round(&mut self, keep: bool) {
        let counts = self.spec.key_counts.clone();
        let first_cell = 1 + 2 * self.spec.sizes.len();
        let mut batches: Vec<(Vec<Key>, Vec<Bytes>)> = Vec::with_capacity(counts.len());
        for &k in &counts {
            let tag = format!("m{k}");
            let keys: Vec<Key> = (0..k).map(|_| self.key(&tag)).collect();
            let values: Vec<Bytes> = (0..k)
                .map(|_| self.random(self.spec.multi_value_size))
                .collect();
            batches.push((keys, values));
        }
        let deleted = std::mem::take(&mut self.pending);
        let writes: Vec<(Key, Bytes)> = batches
            .iter()
            .flat_map(|(k, v)| k.iter().cloned().zip(v.iter().cloned()))
            .collect();
        let written: Vec<Key> = writes.iter().map(|(k, _)| k.clone()).collect();
        let outcome = match self.connection(first_cell) {
            Some(conn) => conn.batch(&deleted, &writes),
            None => {
                self.pending = deleted;
                self.leftovers.extend(written);
                return self.ticks(counts.len());
            }
        };
        let (gone, bad) = match outcome {
            Ok(replies) => replies,
            Err(e) => {
                self.leftovers.extend(deleted);
                self.leftovers.extend(written);
                self.fail(first_cell, &e);
                return self.ticks(counts.len());
            }
        };
        for (g, k) in gone.iter().zip(deleted) {
            if !g.is_gone() {
                self.leftovers.push(k);
            }
        }
        if let Some(bad) = bad {
            let e = Error::ServerError(format!("write before multi-get failed: {bad}"));
            self.leftovers.extend(written);
            self.fail(first_cell, &e);
            return self.ticks(counts.len());
        }

        // An untimed read first, of a key never written (no value to verify): the first
        // request after the write batch is much slower than the next ones (a 1-key multi-get's
        // p50 2.9 ms timed first, 61 µs timed fourth, after a batch of ~700 values), and would
        // be charged to whichever cell came first. The floor's key: through a proxy its misses
        // land on the floor's server, not on a second one.
        let primer = Key::new(floor::miss_key(&self.spec.prefix)).expect("prefix validated");
        let conn = self.conn.as_mut().expect("connected above");
        if let Err(e) = conn.read_miss(&primer) {
            self.leftovers.extend(written);
            self.fail(first_cell, &e);
            return self.ticks(counts.len());
        }

        let mut batches = batches.into_iter();
        for j in 0..counts.len() {
            let (keys, values) = batches.next().expect("one batch per key count");
            if let Err(e) = self.timed_multi_get(first_cell + j, &keys, &values, keep) {
                self.leftovers.extend(keys);
                self.leftovers.extend(batches.flat_map(|(k, _)| k));
                self.fail(first_cell + j, &e);
                return self.ticks(counts.len() - j);
            }
            self.pending.extend(keys);
            self.tick();
        }
    }

    fn ticks(&self, n: usize) {
        for _ in 0..n {
            self.tick();
        }
    }

    fn timed_multi_get(
        &mut self,
        cell: usize,
        keys: &[Key],
        values: &[Bytes],
        keep: bool,
    ) -> Result<(), Error> {
        let conn = self.conn.as_mut().expect("connected by the caller");
        let t0 = Instant::now();
        let found = conn.multi_get(keys)?;
        let took = t0.elapsed();
        self.ok();
        let c = &mut self.cells[cell];
        if keep {
            cachelab_metrics::record(&mut c.hist, took.as_nanos() as u64);
        }
        let expected: HashMap<&[u8], &Bytes> =
            keys.iter().map(|k| k.as_bytes()).zip(values).collect();
        c.misses += (keys.len() - found.len().min(keys.len())) as u64;
        for (key, data) in &found {
            if expected.get(&key[..]) != Some(&data) {
                c.mismatches += 1;
            }
        }
        Ok(())
    }

    /// Deletes this round's keys at the end of the run; whatever may remain is remembered for
    /// the final sweep.
    fn flush_deletes(&mut self) {
        if self.pending.is_empty() || self.conn.is_none() {
            return;
        }
        let keys = std::mem::take(&mut self.pending);
        let conn = self.conn.as_mut().expect("checked above");
        match conn.delete(&keys) {
            Ok(gone) => {
                for (g, k) in gone.iter().zip(keys) {
                    if !g.is_gone() {
                        self.leftovers.push(k);
                    }
                }
            }
            Err(_) => self.leftovers.extend(keys),
        }
    }
}

/// Adds the counts of `more` to `into`.
pub fn add_sent(into: &mut Sent, more: Sent) {
    for (name, n) in more {
        *into.entry(name).or_default() += n;
    }
}

/// Sweeps of [`delete_all`], and the pause before the second (doubled before each next one).
const SWEEPS: u32 = 4;
const SWEEP_PAUSE: Duration = Duration::from_millis(50);

/// Deletes `keys` on a fresh connection. Returns how many may still be on the server.
///
/// The keys come here because a request about them failed, so a write of some of them may
/// still be on its way on the connection that was dropped (sent, not yet run): memcached can
/// run it after this delete, which arrives on another connection. So it deletes them all again
/// after a pause, and again, until a sweep finds none of them there (every reply `NOT_FOUND`),
/// at most [`SWEEPS`] times; keys it could not delete, or found again in the last sweep, are
/// counted.
pub fn delete_all(
    address: &Address,
    options: &Options,
    protocol: &Protocol,
    keys: &[Key],
    sent: &mut Sent,
) -> u64 {
    if keys.is_empty() {
        return 0;
    }
    let Ok(mut conn) = Conn::connect(address, options, protocol) else {
        return keys.len() as u64;
    };
    let left = sweep(&mut conn, keys);
    add_sent(sent, conn.take_sent());
    left
}

fn sweep(conn: &mut Conn, keys: &[Key]) -> u64 {
    let mut suspects = keys.to_vec();
    for sweep in 0..SWEEPS {
        if sweep > 0 {
            std::thread::sleep(SWEEP_PAUSE * (1 << (sweep - 1)));
        }
        let mut found = Vec::new();
        for chunk in suspects.chunks(100) {
            match conn.delete(chunk) {
                // Deleted now (it was there) or not deleted: look again next sweep.
                Ok(gone) => found.extend(
                    gone.iter()
                        .zip(chunk)
                        .filter(|(g, _)| **g != Gone::NotFound)
                        .map(|(_, k)| k.clone()),
                ),
                Err(_) => return suspects.len() as u64,
            }
        }
        if sweep == 0 {
            continue; // a write on its way can land after this sweep too: look at every key again
        }
        if found.is_empty() {
            return 0;
        }
        suspects = found;
    }
    suspects.len() as u64
}

#[cfg(test)]
#[path = "../../client/tests/support/mod.rs"]
mod support;

#[cfg(test)]
mod tests {
    use super::*;
    use cachelab_client::BlockingConnection;

    fn present(address: &Address, keys: &[Key]) -> usize {
        let mut c = BlockingConnection::connect(address, Options::default()).unwrap();
        c.get_multi(keys).unwrap().len()
    }

    /// A write still on its way when the sweep starts (sent on a dropped connection, run by
    /// memcached later) lands after the first delete: the sweep deletes it again.
    #[test]
    fn a_write_landing_after_the_first_delete_is_swept_again() {
        let mc = support::Memcached::start();
        let address: Address = mc.address.parse().unwrap();
        let keys: Vec<Key> = (0..5)
            .map(|i| Key::new(format!("cachelab-test:late:{i}")).unwrap())
            .collect();
        let late = {
            let (address, keys) = (address.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut c = BlockingConnection::connect(&address, Options::default()).unwrap();
                std::thread::sleep(Duration::from_millis(15));
                for k in &keys {
                    assert!(c.set(k, Bytes::from_static(b"late"), 0, 0).unwrap());
                }
            })
        };
        let mut sent = Sent::new();
        assert_eq!(
            delete_all(
                &address,
                &Options::default(),
                &Protocol::Text,
                &keys,
                &mut sent
            ),
            0
        );
        late.join().unwrap();
        assert_eq!(present(&address, &keys), 0);
    }

    #[test]
    fn keys_never_written_cost_two_sweeps_and_count_nothing() {
        let mc = support::Memcached::start();
        let address: Address = mc.address.parse().unwrap();
        let keys = vec![Key::new("cachelab-test:never").unwrap()];
        let t0 = Instant::now();
        let mut sent = Sent::new();
        assert_eq!(
            delete_all(
                &address,
                &Options::default(),
                &Protocol::Text,
                &keys,
                &mut sent
            ),
            0
        );
        assert_eq!(sent.get("delete"), Some(&2), "two sweeps of one delete");
        assert!(t0.elapsed() >= SWEEP_PAUSE);
    }
}
