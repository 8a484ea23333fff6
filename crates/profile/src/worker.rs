//! One measuring thread: its own connection, its own share of the samples.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use cachelab_client::{Address, BlockingConnection, Error, ErrorKind, Options};
use cachelab_proto::{Command, Key, MetaFlags, MetaStatus, Response, Store};

use crate::floor::Floor;
use crate::{Cell, Progress, Protocol, Spec};

pub struct Plan {
    pub id: usize,
    pub samples: u64,
    pub warmup: u64,
    pub floor_command: &'static str,
}

pub struct Report {
    pub cells: Vec<Cell>,
    /// Keys that may still be on the server.
    pub leftovers: Vec<Key>,
    pub aborted: Option<String>,
}

struct Worker<'a> {
    spec: &'a Spec,
    plan: Plan,
    progress: &'a Progress,
    conn: Option<BlockingConnection>,
    floor: Option<Floor>,
    rng: SmallRng,
    cells: Vec<Cell>,
    leftovers: Vec<Key>,
    seq: u64,
    last_success: Instant,
    failures_in_a_row: u32,
    aborted: Option<String>,
    value_flag: MetaFlags,
    no_flags: MetaFlags,
}

pub fn run(spec: &Spec, plan: Plan, progress: &Progress) -> Report {
    let seed = spec.seed ^ (plan.id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut w = Worker {
        spec,
        plan,
        progress,
        conn: None,
        floor: None,
        rng: SmallRng::seed_from_u64(seed),
        cells: spec.cells(),
        leftovers: Vec::new(),
        seq: 0,
        last_success: Instant::now(),
        failures_in_a_row: 0,
        aborted: None,
        value_flag: MetaFlags::new("v").expect("valid flag"),
        no_flags: MetaFlags::default(),
    };
    w.run();
    Report {
        cells: w.cells,
        leftovers: w.leftovers,
        aborted: w.aborted,
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
        for round in 0..self.plan.warmup + self.plan.samples {
            let keep = round >= self.plan.warmup;
            self.floor_sample(keep);
            self.tick();
            for i in 0..n_sizes {
                self.get_set_sample(i, keep);
                self.tick();
            }
            for j in 0..self.spec.key_counts.len() {
                self.multi_get_sample(j, keep);
                self.tick();
            }
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

    fn random(&mut self, size: usize) -> Bytes {
        let mut b = BytesMut::zeroed(size);
        self.rng.fill_bytes(&mut b);
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
        self.conn = None;
        self.floor = None;
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

    fn connection(&mut self, cell: usize) -> Option<&mut BlockingConnection> {
        if self.conn.is_none() {
            match BlockingConnection::connect(&self.spec.address, self.spec.options) {
                Ok(c) => self.conn = Some(c),
                Err(e) => {
                    self.fail(cell, &e);
                    return None;
                }
            }
        }
        self.conn.as_mut()
    }

    fn floor_sample(&mut self, keep: bool) {
        if self.floor.is_none() {
            match Floor::connect(
                &self.spec.address,
                self.spec.options,
                self.plan.floor_command,
            ) {
                Ok(f) => self.floor = Some(f),
                Err(e) => return self.fail(0, &e),
            }
        }
        match self.floor.as_mut().expect("connected above").measure() {
            Ok(took) => {
                self.ok();
                if keep {
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
        let (protocol, vflag, noflag) = (
            self.spec.protocol,
            self.value_flag.clone(),
            self.no_flags.clone(),
        );
        let Some(conn) = self.connection(set_cell) else {
            return;
        };

        let t0 = Instant::now();
        let stored = match protocol {
            Protocol::Text => conn.set(&key, value.clone(), 0, 0),
            Protocol::Meta => conn
                .meta_set(&key, value.clone(), &noflag)
                .map(|r| r.status == MetaStatus::Hd),
        };
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
        let got = match protocol {
            Protocol::Text => conn.get(&key).map(|v| v.map(|v| v.data)),
            Protocol::Meta => conn.meta_get(&key, &vflag).map(|r| r.data),
        };
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
        self.delete(vec![key]);
    }

    fn multi_get_sample(&mut self, j: usize, keep: bool) {
        let k = self.spec.key_counts[j];
        let cell = 1 + 2 * self.spec.sizes.len() + j;
        let tag = format!("m{k}");
        let keys: Vec<Key> = (0..k).map(|_| self.key(&tag)).collect();
        let values: Vec<Bytes> = (0..k)
            .map(|_| self.random(self.spec.multi_value_size))
            .collect();
        let (protocol, vflag, noflag) = (
            self.spec.protocol,
            self.value_flag.clone(),
            self.no_flags.clone(),
        );
        let writes: Vec<Command> = keys
            .iter()
            .zip(&values)
            .map(|(key, v)| match protocol {
                Protocol::Text => Command::Set(Store {
                    key: key.clone(),
                    flags: 0,
                    exptime: 0,
                    data: v.clone(),
                }),
                Protocol::Meta => Command::MetaSet {
                    key: key.clone(),
                    data: v.clone(),
                    flags: noflag.clone(),
                },
            })
            .collect();
        let Some(conn) = self.connection(cell) else {
            return;
        };
        match conn.pipeline(&writes) {
            Ok(replies) => {
                if let Some(bad) = replies.iter().find(|r| {
                    !matches!(
                        r,
                        Response::Stored
                            | Response::Meta {
                                status: MetaStatus::Hd,
                                ..
                            }
                    )
                }) {
                    let e = Error::ServerError(format!("write before multi-get failed: {bad:?}"));
                    self.leftovers.extend(keys);
                    return self.fail(cell, &e);
                }
            }
            Err(e) => {
                self.leftovers.extend(keys);
                return self.fail(cell, &e);
            }
        }

        let conn = self.conn.as_mut().expect("connected above");
        let t0 = Instant::now();
        let got: Result<Vec<(Bytes, Bytes)>, Error> = match protocol {
            Protocol::Text => conn
                .get_multi(&keys)
                .map(|vs| vs.into_iter().map(|v| (v.key, v.data)).collect()),
            Protocol::Meta => {
                let reads: Vec<Command> = keys
                    .iter()
                    .map(|key| Command::MetaGet {
                        key: key.clone(),
                        flags: vflag.clone(),
                    })
                    .collect();
                conn.pipeline(&reads).map(|rs| {
                    rs.into_iter()
                        .zip(&keys)
                        .filter_map(|(r, key)| match r {
                            Response::Meta { data: Some(d), .. } => {
                                Some((Bytes::copy_from_slice(key.as_bytes()), d))
                            }
                            _ => None,
                        })
                        .collect()
                })
            }
        };
        let took = t0.elapsed();
        match got {
            Ok(found) => {
                self.ok();
                if keep {
                    cachelab_metrics::record(&mut self.cells[cell].hist, took.as_nanos() as u64);
                }
                let expected: HashMap<&[u8], &Bytes> =
                    keys.iter().map(|k| k.as_bytes()).zip(&values).collect();
                let c = &mut self.cells[cell];
                c.misses += (k - found.len().min(k)) as u64;
                for (key, data) in &found {
                    if expected.get(&key[..]) != Some(&data) {
                        c.mismatches += 1;
                    }
                }
            }
            Err(e) => {
                self.leftovers.extend(keys);
                return self.fail(cell, &e);
            }
        }
        self.delete(keys);
    }

    /// Deletes `keys` in one pipeline; whatever may remain is remembered for the final sweep.
    fn delete(&mut self, keys: Vec<Key>) {
        let noflag = self.no_flags.clone();
        let cmds: Vec<Command> = keys
            .iter()
            .map(|k| match self.spec.protocol {
                Protocol::Text => Command::Delete(k.clone()),
                Protocol::Meta => Command::MetaDelete {
                    key: k.clone(),
                    flags: noflag.clone(),
                },
            })
            .collect();
        let conn = self.conn.as_mut().expect("callers hold a connection");
        match conn.pipeline(&cmds) {
            Ok(replies) => {
                for (r, k) in replies.iter().zip(keys) {
                    if !is_gone(r) {
                        self.leftovers.push(k);
                    }
                }
            }
            Err(e) => {
                self.leftovers.extend(keys);
                if !is_reply_error(&e) {
                    self.conn = None;
                }
            }
        }
    }
}

fn is_gone(r: &Response) -> bool {
    matches!(
        r,
        Response::Deleted
            | Response::NotFound
            | Response::Meta {
                status: MetaStatus::Hd | MetaStatus::Nf,
                ..
            }
    )
}

/// Deletes `keys` on a fresh connection. Returns how many may still be on the server.
pub fn delete_all(address: &Address, options: Options, keys: &[Key]) -> u64 {
    if keys.is_empty() {
        return 0;
    }
    let Ok(mut conn) = BlockingConnection::connect(address, options) else {
        return keys.len() as u64;
    };
    let mut remaining = 0;
    for (i, chunk) in keys.chunks(100).enumerate() {
        let cmds: Vec<Command> = chunk.iter().map(|k| Command::Delete(k.clone())).collect();
        match conn.pipeline(&cmds) {
            Ok(replies) => remaining += replies.iter().filter(|r| !is_gone(r)).count() as u64,
            Err(_) => return remaining + (keys.len() - i * 100) as u64,
        }
    }
    remaining
}
