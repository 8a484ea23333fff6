//! Flat key traces: one `(time, key, size[, op])` access per request, held in columns.
//!
//! Three formats are read and written (see [`Format`]):
//!
//! * **csv** — a header naming the columns, found by name (case-insensitive): the key column
//!   (`key`, `lbn`, `obj_id` or `id`, required), `size` (or `obj_size`; missing means every
//!   request has size 1), `time` (or `timestamp`, `clock_time`; missing means 0) and `op`
//!   (optional). Other columns are ignored. Integer keys are kept as they are; any other key is
//!   hashed to a `u64` with 64-bit FNV-1a ([`key_hash`]), which is stable across runs and
//!   machines. Fields are plain (no quoting).
//! * **oracle** — libCacheSim's `oracleGeneral` binary: little-endian 24-byte records
//!   `{u32 time; u64 id; u32 size; i64 next_access_vtime}`. The file's `next_access_vtime` is
//!   not trusted on reading (the simulator computes next accesses itself); on writing it is
//!   computed the way libCacheSim's `traceConv` does: the 1-based index of the next request to
//!   the same id, or -1 when there is none. Every record's size, time and next-access field is
//!   checked for plausibility as it is read ([`plausible`]): a file that is not a trace is
//!   refused, a few doubtful records are reported ([`FlatTrace::read`]).
//! * **lines** — one key per line, every request of size 1 (e.g. the SIEVE artifact's
//!   `zipf_1.0.txt`). Blank lines are skipped; a line with whitespace inside is an error.
//!
//! **Ops.** The op column is kept as text (dictionary-encoded) so `trace convert` round-trips it.
//! Simulation treats every request as an access, whatever its op, except that ops named
//! `delete`, `del` or `remove` (any case) are not requests at all: they are skipped, counted in
//! neither requests nor misses, and change no cache state. This matches what libCacheSim's
//! `cachesim` does with a `get`/`set` trace (it ignores the op) for everything but deletes.
//!
//! Text formats are read whole and parsed in place (no allocation per line); oracle files are
//! read in fixed pieces straight into the columns, so the file's bytes are never all in memory
//! beside them. For simulation, [`SimTrace::load`] keeps only 8 bytes per request, and
//! [`crate::policy::simulate_file`] none.
//! Writing goes to a temporary file in the target's directory that is renamed over the target
//! only when complete, so an error never leaves a half-written trace behind.

mod csv;
mod dense;
mod inspect;
mod lines;
mod oracle;
pub mod plausible;

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::error::{Location, TraceError};

pub use dense::{FastMap, KeyHasher, Numberer, SimTrace};
pub use inspect::{inspect, Inspection, SizeStats};
pub(crate) use oracle::{
    chunks as oracle_chunks, id_size as oracle_id_size, open as oracle_open,
    stream as oracle_stream,
};
pub use oracle::{next_access_vtimes, RECORD as ORACLE_RECORD};
pub use plausible::Doubts;

/// A trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// CSV with a header (`time,key,size[,op]` when written).
    Csv,
    /// libCacheSim `oracleGeneral` binary.
    Oracle,
    /// One key per line.
    Lines,
}

impl Format {
    /// All formats, in the order they are documented.
    pub const ALL: [Format; 3] = [Format::Csv, Format::Oracle, Format::Lines];

    /// The format's name as used on the command line: `csv`, `oracle`, `lines`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Oracle => "oracle",
            Format::Lines => "lines",
        }
    }

    /// Parses a format name (`csv`, `oracle` / `oracleGeneral` / `bin`, `lines` / `txt`).
    pub fn parse(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "csv" => Some(Format::Csv),
            "oracle" | "oraclegeneral" | "bin" | "binary" => Some(Format::Oracle),
            "lines" | "txt" | "text" => Some(Format::Lines),
            _ => None,
        }
    }

    /// The format a path's extension implies: `.csv`; `.bin`, `.oracleGeneral`,
    /// `.oracleGeneral.bin`; `.txt`, `.lines`. `None` for anything else.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "csv" => Some(Format::Csv),
            "bin" | "oraclegeneral" => Some(Format::Oracle),
            "txt" | "lines" => Some(Format::Lines),
            _ => None,
        }
    }
}

/// What an op name means to the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// An access (get, set, read, write, or anything not a delete).
    Access,
    /// A delete: skipped by the simulator.
    Delete,
}

impl OpKind {
    /// Classifies an op name.
    pub fn of(name: &str) -> OpKind {
        if ["delete", "del", "remove"]
            .iter()
            .any(|d| name.eq_ignore_ascii_case(d))
        {
            OpKind::Delete
        } else {
            OpKind::Access
        }
    }
}

/// The op column: a code per request indexing `names`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ops {
    pub codes: Vec<u8>,
    pub names: Vec<String>,
}

impl Ops {
    /// The code of `name`, added to the table when new; `None` when the table is full (256).
    pub(crate) fn code(&mut self, name: &[u8]) -> Option<u8> {
        if let Some(i) = self.names.iter().position(|n| n.as_bytes() == name) {
            return Some(i as u8);
        }
        if self.names.len() == 256 {
            return None;
        }
        self.names.push(String::from_utf8_lossy(name).into_owned());
        Some((self.names.len() - 1) as u8)
    }

    /// Which requests are deletes (`true` at each delete), or `None` when there are none.
    pub fn deletes(&self) -> Option<Vec<bool>> {
        let kinds: Vec<OpKind> = self.names.iter().map(|n| OpKind::of(n)).collect();
        if !kinds.contains(&OpKind::Delete) {
            return None;
        }
        Some(
            self.codes
                .iter()
                .map(|&c| kinds[c as usize] == OpKind::Delete)
                .collect(),
        )
    }
}

/// A flat trace in memory, one entry per request in each column.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlatTrace {
    /// Request time (the trace's unit, usually seconds; 0 when the file has none).
    pub times: Vec<u32>,
    /// Object id (integer keys as they are, other keys hashed with [`key_hash`]).
    pub ids: Vec<u64>,
    /// Object size in bytes (1 for `lines` traces).
    pub sizes: Vec<u32>,
    /// The op of each request, when the file had an op column.
    pub ops: Option<Ops>,
}

impl FlatTrace {
    /// Number of requests.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Appends one request (no op).
    pub fn push(&mut self, time: u32, id: u64, size: u32) {
        self.times.push(time);
        self.ids.push(id);
        self.sizes.push(size);
    }

    /// Reads `path`, in `format` or else the format its extension implies. An implausible
    /// oracleGeneral file is refused; [`FlatTrace::read`] also tells of doubtful records.
    pub fn load(path: impl AsRef<Path>, format: Option<Format>) -> Result<FlatTrace, TraceError> {
        Self::read(path, format, true).map(|(t, _)| t)
    }

    /// Reads `path` like [`FlatTrace::load`]; with `check`, an oracleGeneral file is checked
    /// for plausibility ([`plausible`]): refused when most of it is implausible, else returned
    /// with the [`Doubts`] about the few records that are. Without `check` any whole records
    /// are read (for files known to hold odd values on purpose). Text formats have no doubts.
    pub fn read(
        path: impl AsRef<Path>,
        format: Option<Format>,
        check: bool,
    ) -> Result<(FlatTrace, Option<Doubts>), TraceError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let format = match format.or_else(|| Format::from_path(path)) {
            Some(f) => f,
            None => {
                return Err(TraceError::new(
                    shown,
                    Location::File,
                    "cannot tell the trace format from the extension (use .csv, .bin, \
                     .oracleGeneral or .txt, or name the format)",
                ))
            }
        };
        if format == Format::Oracle {
            return oracle::read(path, &shown, check);
        }
        let data = fs::read(path)
            .map_err(|e| TraceError::new(&shown, Location::File, format!("cannot read: {e}")))?;
        Ok((Self::parse(&data, format, &shown)?, None))
    }

    /// Parses a whole file's bytes; `path` only names the file in errors.
    pub fn parse(data: &[u8], format: Format, path: &str) -> Result<FlatTrace, TraceError> {
        if data.is_empty() {
            return Err(TraceError::new(path, Location::File, "empty file"));
        }
        let trace = match format {
            Format::Csv => csv::parse(data, path)?,
            Format::Oracle => oracle::parse(data, path)?,
            Format::Lines => lines::parse(data, path)?,
        };
        if trace.is_empty() {
            return Err(TraceError::new(path, Location::File, "no requests in file"));
        }
        Ok(trace)
    }

    /// Writes the trace to `path` atomically (temporary file, then rename), in `format` or
    /// else the format the extension implies. `lines` keeps only the keys.
    pub fn write(&self, path: impl AsRef<Path>, format: Option<Format>) -> io::Result<()> {
        let path = path.as_ref();
        let format = format.or_else(|| Format::from_path(path)).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: cannot tell the trace format from the extension",
                    path.display()
                ),
            )
        })?;
        atomic_write(path, |w| match format {
            Format::Csv => csv::write(self, w),
            Format::Oracle => oracle::write(self, w),
            Format::Lines => lines::write(self, w),
        })
    }

    /// The op kind of every request, when any request is a delete.
    pub fn deletes(&self) -> Option<Vec<bool>> {
        self.ops.as_ref().and_then(Ops::deletes)
    }
}

/// Stable 64-bit FNV-1a of a key's bytes; used for keys that are not integers.
pub fn key_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A key's id: the integer when the key is all ASCII digits and fits a `u64`, else its hash.
pub(crate) fn key_id(key: &[u8]) -> u64 {
    parse_u64(key).unwrap_or_else(|| key_hash(key))
}

/// A plain decimal `u64` (digits only), or `None`.
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Writes through `f` into a temporary file beside `path` (created new under a random name,
/// so nothing already there is opened), then renames it over `path`. Refuses a `path` that
/// exists and is not a regular file (a device, FIFO or socket is never replaced).
fn atomic_write(
    path: &Path,
    f: impl FnOnce(&mut BufWriter<fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    refuse_a_node(path)?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        .tempfile_in(&dir)?;
    let (file, tmp_path) = tmp.into_parts();
    let mut w = BufWriter::with_capacity(1 << 20, file);
    f(&mut w)?;
    let file = w.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    refuse_a_node(path)?;
    tmp_path.persist(path).map_err(|e| e.error)
}

/// An error unless `path` is absent or a regular file (not followed if a symlink).
fn refuse_a_node(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{}: is not a regular file; not replacing it",
                path.display()
            ),
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Splits `data` into lines (without the `\n` and a trailing `\r`), numbered from 1.
pub(crate) fn numbered_lines(data: &[u8]) -> impl Iterator<Item = (u64, &[u8])> {
    let data = data.strip_suffix(b"\n").unwrap_or(data);
    data.split(|&b| b == b'\n').enumerate().map(|(i, l)| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        (i as u64 + 1, l)
    })
}

pub(crate) fn write_u64(w: &mut impl Write, mut v: u64) -> io::Result<()> {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    w.write_all(&buf[i..])
}
