//! What the stream has told so far, and the rows it makes: the port of the Python reader's
//! `_State` (`cachelab.traces.capture_lines`), rule for rule, so both write the same rows.
//!
//! * A store is logged as a fetch of its key (the server's lookup of the item it replaces)
//!   and then the store: a connection's fetch is held back until its next line shows it was
//!   no store's lookup.
//! * A fetch joins the request of its connection's previous fetch when it comes within
//!   [`SAME_REQUEST_US`] µs of it with nothing else from that connection between.
//! * Keys become `k` + 16 hex digits of a keyed BLAKE2b (8-byte digest, big-endian); a key
//!   is kept when that number / 2^64 is below the sample rate.

use std::collections::HashMap;

use crate::blake2b::Keyed;
use crate::line::{is_space, py_int, timestamp, unquote, Fields};

/// Fetches of one connection this close together (µs) belong to one request.
pub const SAME_REQUEST_US: f64 = 5.0;

/// Rows in columns (the capture file's, less `member`); `op` and `status` are indices into
/// [`Columns::words`].
#[derive(Debug, Default, Clone)]
pub struct Columns {
    pub time: Vec<f64>,
    /// The keys' UTF-8 bytes, one after another; key i is `keys[offsets[i]..offsets[i+1]]`.
    pub keys: Vec<u8>,
    pub offsets: Vec<i32>,
    pub op: Vec<u16>,
    pub status: Vec<u16>,
    pub size: Vec<u32>,
    pub clsid: Vec<u16>,
    pub conn: Vec<i32>,
    pub request: Vec<i64>,
    pub ttl: Vec<i64>,
    pub key_bytes: Vec<u16>,
    /// The op and status words seen so far (shared by every batch of one [`State`]).
    pub words: Vec<String>,
}

impl Columns {
    pub fn new() -> Columns {
        Columns {
            offsets: vec![0],
            ..Columns::default()
        }
    }

    pub fn len(&self) -> usize {
        self.time.len()
    }

    pub fn is_empty(&self) -> bool {
        self.time.is_empty()
    }

    /// Empties the rows, keeping the words.
    pub fn clear(&mut self) {
        self.time.clear();
        self.keys.clear();
        self.offsets.clear();
        self.offsets.push(0);
        self.op.clear();
        self.status.clear();
        self.size.clear();
        self.clsid.clear();
        self.conn.clear();
        self.request.clear();
        self.ttl.clear();
        self.key_bytes.clear();
    }
}

/// What turns a stream's lines into rows: memcached's [`State`], Redis's
/// [`crate::monitor::Monitor`].
pub trait Sink {
    /// One line of the stream, without its `\n`.
    fn line(&mut self, line: &[u8], out: &mut Columns);
}

impl Sink for State {
    fn line(&mut self, line: &[u8], out: &mut Columns) {
        State::line(self, line, out);
    }
}

/// Whether `key` is sampled in (its keyed hash / 2^64 below `sample`; `sampled_out` counts
/// those that are not); writes its name to `out` if so: `k` + the hash's 16 hex digits, or
/// the key itself with `keep_keys`.
pub(crate) fn write_name(
    hasher: &Keyed,
    keep_keys: bool,
    sample: f64,
    key: &[u8],
    out: &mut Columns,
    sampled_out: &mut u64,
) -> bool {
    let word = hasher.word(key);
    if word as f64 / 18_446_744_073_709_551_616.0 >= sample {
        *sampled_out += 1;
        return false;
    }
    if keep_keys {
        out.keys
            .extend_from_slice(String::from_utf8_lossy(key).as_bytes());
    } else {
        out.keys.push(b'k');
        out.keys
            .extend_from_slice(format!("{word:016x}").as_bytes());
    }
    out.offsets.push(out.keys.len() as i32);
    true
}

/// A fetch held back: (time, key, status, size, clsid).
type Held = (f64, Vec<u8>, Vec<u8>, u32, u16);

/// The reader's state. `t0`: the time subtracted from the stream's timestamps (None: the
/// first line's).
pub struct State {
    hasher: Keyed,
    keep_keys: bool,
    sample: f64,
    pub t0: Option<f64>,
    /// Accesses written, by op word, in the order first seen.
    pub ops: Vec<(String, u64)>,
    pub hits: u64,
    /// Lines the server said it skipped (`skipped=N`).
    pub lost: u64,
    pub store_lookups: u64,
    pub sampled_out: u64,
    too_large: Option<Vec<u8>>,
    /// conn -> (insertion order, held fetch); flushed in insertion order, as a dict is.
    held: HashMap<i32, (u64, Held)>,
    held_seq: u64,
    /// conn -> (time of its last written fetch, its request id, keys in that request).
    last_get: HashMap<i32, (f64, i64, u64)>,
    next_request: i64,
    word_ids: HashMap<Vec<u8>, u16>,
    key_buf: Vec<u8>,
}

fn fits<T: TryFrom<i64>>(v: Option<&[u8]>, default: i64) -> Option<T> {
    let n = match v {
        Some(t) => py_int(t)?,
        None => default,
    };
    T::try_from(n).ok()
}

impl State {
    /// `secret`: the pseudonyms' key (at most 64 bytes); `sample` in (0, 1].
    pub fn new(secret: &[u8], keep_keys: bool, sample: f64, t0: Option<f64>) -> State {
        State {
            hasher: Keyed::new(secret),
            keep_keys,
            sample,
            t0,
            ops: Vec::new(),
            hits: 0,
            lost: 0,
            store_lookups: 0,
            sampled_out: 0,
            too_large: None,
            held: HashMap::new(),
            held_seq: 0,
            last_get: HashMap::new(),
            next_request: 0,
            word_ids: HashMap::new(),
            key_buf: Vec::new(),
        }
    }

    fn word(&mut self, w: &[u8], out: &mut Columns) -> u16 {
        if let Some(&i) = self.word_ids.get(w) {
            return i;
        }
        let i = out.words.len() as u16;
        out.words.push(String::from_utf8_lossy(w).into_owned());
        self.word_ids.insert(w.to_vec(), i);
        i
    }

    fn count(&mut self, op: &[u8]) {
        match self.ops.iter_mut().find(|(o, _)| o.as_bytes() == op) {
            Some((_, n)) => *n += 1,
            None => self.ops.push((String::from_utf8_lossy(op).into_owned(), 1)),
        }
    }

    /// Whether `key` is sampled in; writes its name (pseudonym or the key) to `out` if so.
    fn name(&mut self, key: &[u8], out: &mut Columns) -> bool {
        write_name(
            &self.hasher,
            self.keep_keys,
            self.sample,
            key,
            out,
            &mut self.sampled_out,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        out: &mut Columns,
        t: f64,
        key: &[u8],
        op: u16,
        status: u16,
        size: u32,
        clsid: u16,
        conn: i32,
        request: i64,
        ttl: i64,
    ) {
        out.time.push(t);
        out.op.push(op);
        out.status.push(status);
        out.size.push(size);
        out.clsid.push(clsid);
        out.conn.push(conn);
        out.request.push(request);
        out.ttl.push(ttl);
        out.key_bytes.push(key.len().min(65_535) as u16);
    }

    fn emit_get(&mut self, out: &mut Columns, conn: i32, held: Held) {
        let (t, key, status, size, clsid) = held;
        let (request, n) = match self.last_get.get(&conn) {
            Some(&(lt, r, n)) if (0.0..=SAME_REQUEST_US).contains(&((t - lt) * 1e6)) => (r, n + 1),
            _ => {
                self.next_request += 1;
                (self.next_request - 1, 1)
            }
        };
        self.last_get.insert(conn, (t, request, n));
        if !self.name(&key, out) {
            return;
        }
        self.count(b"get");
        self.hits += u64::from(status == b"found");
        let op = self.word(b"get", out);
        let st = self.word(&status, out);
        self.push(out, t, &key, op, st, size, clsid, conn, request, -1);
    }

    /// Writes the fetches still held back (at the end of a capture), in the order they were
    /// held.
    pub fn flush(&mut self, out: &mut Columns) {
        let mut held: Vec<(i32, (u64, Held))> = self.held.drain().collect();
        held.sort_by_key(|(_, (seq, _))| *seq);
        for (conn, (_, h)) in held {
            self.emit_get(out, conn, h);
        }
    }

    /// One line of the stream, without its `\n` (trailing `\r`s are dropped here).
    pub fn line(&mut self, mut line: &[u8], out: &mut Columns) {
        while let [rest @ .., b'\r'] = line {
            line = rest;
        }
        if line.starts_with(b"skipped=") || line.windows(9).any(|w| w == b" skipped=") {
            for part in line.split(|&b| is_space(b)) {
                if let Some(n) = part.strip_prefix(b"skipped=") {
                    let n = if n.is_empty() { Some(0) } else { py_int(n) };
                    self.lost += n.map_or(0, |n| n.max(0) as u64);
                }
            }
            return;
        }
        let Some(f) = Fields::parse(line) else {
            return;
        };
        let Some(ts) = f.ts.and_then(timestamp) else {
            return;
        };
        let (Some(conn), Some(size), Some(clsid)) = (
            fits::<i32>(f.cfd, -1),
            fits::<u32>(f.size, 0),
            fits::<u16>(f.clsid, 0),
        ) else {
            return;
        };
        let t0 = *self.t0.get_or_insert(ts);
        let t = ts - t0;
        let mut key = std::mem::take(&mut self.key_buf);
        unquote(f.key, &mut key);
        let status = f.status.unwrap_or(b"");
        let held = self.held.remove(&conn).map(|(_, h)| h);
        let kind = f.kind.unwrap_or(b"");
        if kind == b"item_get" {
            if let Some(h) = held {
                self.emit_get(out, conn, h);
            }
            if self.too_large.as_deref() == Some(&key[..]) {
                // A refused store (too large) is logged first, then the server's lookup of the
                // item it unlinks: not a client's get.
                self.too_large = None;
                self.store_lookups += 1;
            } else {
                self.held_seq += 1;
                self.held.insert(
                    conn,
                    (
                        self.held_seq,
                        (t, key.clone(), status.to_vec(), size, clsid),
                    ),
                );
            }
        } else if kind != b"item_store" {
            if let Some(h) = held {
                self.emit_get(out, conn, h);
            }
        } else {
            if let Some(h) = held {
                if h.1 == key {
                    self.store_lookups += 1; // the server's lookup of the item it replaces
                } else {
                    self.emit_get(out, conn, h);
                }
            }
            self.too_large = (status == b"too_large").then(|| key.clone());
            self.last_get.remove(&conn);
            if self.name(&key, out) {
                let op_word = f.cmd.unwrap_or(b"set");
                self.count(op_word);
                let request = self.next_request;
                self.next_request += 1;
                let ttl = f.ttl.and_then(py_int).unwrap_or(-1);
                let op = self.word(op_word, out);
                let st = self.word(status, out);
                self.push(out, t, &key, op, st, size, clsid, conn, request, ttl);
            }
        }
        self.key_buf = key;
    }
}
