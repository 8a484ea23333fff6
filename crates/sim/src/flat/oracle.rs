//! libCacheSim `oracleGeneral`: little-endian records
//! `{u32 time; u64 id; u32 size; i64 next_access_vtime}`, 24 bytes each.
//!
//! Every reader here checks the records' plausibility as it goes ([`super::plausible`]): a
//! file that is not a trace is refused, and [`read`] reports a few doubtful records.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use super::plausible::{Checker, Doubts};
use super::{FastMap, FlatTrace};
use crate::error::{Location, TraceError};

/// Bytes per record.
pub const RECORD: usize = 24;
/// Records per part that [`chunks`] checks and hands on at a time.
const PART: usize = 1024;

/// Checks the length is whole records; returns the number of records.
fn records(len: u64, path: &str) -> Result<usize, TraceError> {
    let whole = len / RECORD as u64 * RECORD as u64;
    if whole != len {
        return Err(TraceError::new(
            path,
            Location::Offset(whole),
            format!(
                "truncated record: {} of {RECORD} bytes (the file is not a whole number of \
                 {RECORD}-byte records: is this an oracleGeneral trace?)",
                len - whole
            ),
        ));
    }
    Ok((whole / RECORD as u64) as usize)
}

fn with_capacity(n: usize) -> FlatTrace {
    FlatTrace {
        times: Vec::with_capacity(n),
        ids: Vec::with_capacity(n),
        sizes: Vec::with_capacity(n),
        ops: None,
    }
}

/// The time, size and next-access fields of one record.
#[inline]
pub(crate) fn time_size_next(r: &[u8]) -> (u32, u32, i64) {
    (
        u32::from_le_bytes([r[0], r[1], r[2], r[3]]),
        u32::from_le_bytes([r[12], r[13], r[14], r[15]]),
        i64::from_le_bytes([r[16], r[17], r[18], r[19], r[20], r[21], r[22], r[23]]),
    )
}

/// Appends the records of `data` to the columns, checking each with `checker` when given (in
/// the same pass: the records are in cache once).
fn push_records(t: &mut FlatTrace, data: &[u8], mut checker: Option<&mut Checker>) {
    for r in data.chunks_exact(RECORD) {
        let (time, size, next) = time_size_next(r);
        if let Some(c) = checker.as_deref_mut() {
            c.record(time, size, next);
        }
        t.times.push(time);
        t.ids.push(u64::from_le_bytes([
            r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
        ]));
        t.sizes.push(size);
    }
}

/// Parses a whole file's bytes; refuses an implausible file (a few doubtful records are read
/// without a word: [`read`] is the reader that reports them).
pub(crate) fn parse(data: &[u8], path: &str) -> Result<FlatTrace, TraceError> {
    let n = records(data.len() as u64, path)?;
    let mut t = with_capacity(n);
    let mut checker = Checker::default();
    push_records(&mut t, data, Some(&mut checker));
    checker.finish(path)?;
    Ok(t)
}

/// Opens a file and checks it holds whole records; returns it with the record count.
pub(crate) fn open(file_path: &Path, path: &str) -> Result<(File, usize), TraceError> {
    let io_err = |e: io::Error| TraceError::new(path, Location::File, format!("cannot read: {e}"));
    let f = File::open(file_path).map_err(io_err)?;
    let len = f.metadata().map_err(io_err)?.len();
    if len == 0 {
        return Err(TraceError::new(path, Location::File, "empty file"));
    }
    Ok((f, records(len, path)?))
}

/// Streams `n` records from an [`open`]ed file, read in 96 KiB pieces (small enough to stay in
/// the CPU cache next to a simulator's state), calling `each` with every [`PART`] records of a
/// piece (the last part of the file may be shorter).
///
/// Each part is checked for plausibility just before `each` sees it (so its 24 KiB are still
/// in the L1 cache for the second pass), and a file that is not a trace is refused before
/// anything is simulated (if its head gives it away) or at the end (if most of its records
/// do); a few doubtful records pass without a word.
pub(crate) fn chunks(
    mut f: File,
    n: usize,
    path: &str,
    mut each: impl FnMut(&[u8]),
) -> Result<(), TraceError> {
    let io_err = |e: io::Error| TraceError::new(path, Location::File, format!("cannot read: {e}"));
    let mut buf = vec![0u8; RECORD << 12];
    let mut left = n * RECORD;
    let mut checker = Checker::default();
    while left > 0 {
        let k = left.min(buf.len());
        f.read_exact(&mut buf[..k]).map_err(io_err)?;
        for part in buf[..k].chunks(RECORD * PART) {
            checker.records(part.chunks_exact(RECORD).map(time_size_next));
            checker.head(path)?;
            each(part);
        }
        left -= k;
    }
    checker.finish(path).map(drop)
}

/// The id and size of one record.
#[inline]
pub(crate) fn id_size(r: &[u8]) -> (u64, u32) {
    (
        u64::from_le_bytes([r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11]]),
        u32::from_le_bytes([r[12], r[13], r[14], r[15]]),
    )
}

/// [`chunks`], calling `each(id, size)` per record (times and next-access fields are not
/// needed by the simulator).
pub(crate) fn stream(
    f: File,
    n: usize,
    path: &str,
    mut each: impl FnMut(u64, u32),
) -> Result<(), TraceError> {
    chunks(f, n, path, |data| {
        for r in data.chunks_exact(RECORD) {
            let (id, size) = id_size(r);
            each(id, size);
        }
    })
}

/// Reads a file in 12 MiB pieces, so the file's bytes are never all in memory next to the
/// columns parsed from them. With `check`, refuses an implausible file and returns the doubts
/// about one it accepts.
pub(crate) fn read(
    file_path: &Path,
    path: &str,
    check: bool,
) -> Result<(FlatTrace, Option<Doubts>), TraceError> {
    let io_err = |e: io::Error| TraceError::new(path, Location::File, format!("cannot read: {e}"));
    let mut f = File::open(file_path).map_err(io_err)?;
    let len = f.metadata().map_err(io_err)?.len();
    if len == 0 {
        return Err(TraceError::new(path, Location::File, "empty file"));
    }
    let n = records(len, path)?;
    let mut t = with_capacity(n);
    let mut buf = vec![0u8; RECORD << 19];
    let mut left = len as usize;
    let mut checker = check.then(Checker::default);
    while left > 0 {
        let k = left.min(buf.len());
        f.read_exact(&mut buf[..k]).map_err(io_err)?;
        push_records(&mut t, &buf[..k], checker.as_mut());
        if let Some(c) = &checker {
            c.head(path)?;
        }
        left -= k;
    }
    let doubts = match checker {
        Some(c) => c.finish(path)?,
        None => None,
    };
    Ok((t, doubts))
}

/// libCacheSim's next-access field for every request: the 1-based index of the next request
/// to the same id, or -1 when there is none (as its `traceConv` writes it).
pub fn next_access_vtimes(ids: &[u64]) -> Vec<i64> {
    let mut next = vec![-1i64; ids.len()];
    let mut seen: FastMap<u64, u32> = FastMap::default();
    seen.reserve(ids.len() / 8 + 1024);
    for (i, &id) in ids.iter().enumerate().rev() {
        if let Some(j) = seen.insert(id, i as u32) {
            next[i] = i64::from(j) + 1;
        }
    }
    next
}

pub(crate) fn write(t: &FlatTrace, w: &mut impl Write) -> io::Result<()> {
    if t.len() > u32::MAX as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "trace too long for this writer",
        ));
    }
    let next = next_access_vtimes(&t.ids);
    let mut rec = [0u8; RECORD];
    for (i, n) in next.iter().enumerate() {
        rec[0..4].copy_from_slice(&t.times[i].to_le_bytes());
        rec[4..12].copy_from_slice(&t.ids[i].to_le_bytes());
        rec[12..16].copy_from_slice(&t.sizes[i].to_le_bytes());
        rec[16..24].copy_from_slice(&n.to_le_bytes());
        w.write_all(&rec)?;
    }
    Ok(())
}
