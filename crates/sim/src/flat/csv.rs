//! CSV traces: a header naming the columns, then one request per line.

use std::io::{self, Write};

use super::{key_id, numbered_lines, parse_u64, write_u64, FlatTrace, Ops};
use crate::error::{Location, TraceError};

const KEY_NAMES: [&str; 4] = ["key", "lbn", "obj_id", "id"];
const SIZE_NAMES: [&str; 2] = ["size", "obj_size"];
const TIME_NAMES: [&str; 3] = ["time", "timestamp", "clock_time"];
const OP_NAMES: [&str; 1] = ["op"];

fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

fn column(header: &[&[u8]], names: &[&str]) -> Option<usize> {
    names.iter().find_map(|n| {
        header
            .iter()
            .position(|h| trim(h).eq_ignore_ascii_case(n.as_bytes()))
    })
}

/// A size field: a non-negative integer that fits a `u32`.
pub(crate) fn parse_size(s: &[u8]) -> Result<u32, String> {
    let s = trim(s);
    match parse_u64(s) {
        Some(v) => u32::try_from(v).map_err(|_| format!("size {v} is larger than 4294967295")),
        None if s.first() == Some(&b'-') && parse_u64(&s[1..]).is_some() => {
            Err(format!("negative size {:?}", String::from_utf8_lossy(s)))
        }
        None => Err(format!("non-numeric size {:?}", String::from_utf8_lossy(s))),
    }
}

/// A time field: a non-negative integer (a fractional part is dropped) that fits a `u32`.
fn parse_time(s: &[u8]) -> Result<u32, String> {
    let s = trim(s);
    let int = match s.iter().position(|&b| b == b'.') {
        Some(dot) if s[dot + 1..].iter().all(u8::is_ascii_digit) => &s[..dot],
        _ => s,
    };
    parse_u64(int)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| format!("bad time {:?}", String::from_utf8_lossy(s)))
}

/// Reads a CSV trace whose fields are plain (no quoting).
///
/// Our own splitting rather than the `csv` crate, which is slower on a big trace:
/// `benches/hand_vs_library.py --tree 650b8c0` (record
/// `benches/runs/2026-11-29-hand-vs-library.md`: 5 M rows of `time,key,size,op` in memory,
/// pinned, medians of 7 alternating rounds) read 137.7 ns a row here and 145.1 with `csv` 1.4
/// (1.05×; 1.06× in the run before it, and in 5 of 5 runs with a 64 KiB read buffer).
pub(crate) fn parse(data: &[u8], path: &str) -> Result<FlatTrace, TraceError> {
    let mut lines = numbered_lines(data);
    let (_, header_line) = lines
        .next()
        .ok_or_else(|| TraceError::new(path, Location::File, "empty file"))?;
    let header: Vec<&[u8]> = header_line.split(|&b| b == b',').collect();
    let key = column(&header, &KEY_NAMES).ok_or_else(|| {
        TraceError::new(
            path,
            Location::Line(1),
            format!(
                "header has no key column (one of {}): {:?}",
                KEY_NAMES.join(", "),
                String::from_utf8_lossy(header_line)
            ),
        )
    })?;
    let size = column(&header, &SIZE_NAMES);
    let time = column(&header, &TIME_NAMES);
    let op = column(&header, &OP_NAMES);
    let n_fields = header.len();
    let guess = data.len() / 24 + 1;
    let mut t = FlatTrace {
        times: Vec::with_capacity(guess),
        ids: Vec::with_capacity(guess),
        sizes: Vec::with_capacity(guess),
        ops: op.map(|_| Ops::default()),
    };
    let mut fields: [&[u8]; 16] = [&[]; 16];
    let mut wide: Vec<&[u8]> = Vec::new();
    for (n, line) in lines {
        if trim(line).is_empty() {
            continue;
        }
        let err = |m: String| TraceError::new(path, Location::Line(n), m);
        // Split without allocating when the header has at most 16 columns.
        let row: &[&[u8]] = if n_fields <= fields.len() {
            let mut count = 0;
            for f in line.split(|&b| b == b',') {
                if count < fields.len() {
                    fields[count] = f;
                }
                count += 1;
            }
            if count != n_fields {
                return Err(err(format!(
                    "bad line: {count} fields, the header has {n_fields}"
                )));
            }
            &fields[..count]
        } else {
            wide.clear();
            wide.extend(line.split(|&b| b == b','));
            if wide.len() != n_fields {
                return Err(err(format!(
                    "bad line: {} fields, the header has {n_fields}",
                    wide.len()
                )));
            }
            &wide
        };
        let k = trim(row[key]);
        if k.is_empty() {
            return Err(err("bad line: empty key".into()));
        }
        t.ids.push(key_id(k));
        t.sizes.push(match size {
            Some(c) => parse_size(row[c]).map_err(err)?,
            None => 1,
        });
        t.times.push(match time {
            Some(c) => parse_time(row[c]).map_err(err)?,
            None => 0,
        });
        if let (Some(c), Some(ops)) = (op, t.ops.as_mut()) {
            let code = ops
                .code(trim(row[c]))
                .ok_or_else(|| err("more than 256 distinct ops".into()))?;
            ops.codes.push(code);
        }
    }
    Ok(t)
}

pub(crate) fn write(t: &FlatTrace, w: &mut impl Write) -> io::Result<()> {
    match &t.ops {
        Some(_) => w.write_all(b"time,key,size,op\n")?,
        None => w.write_all(b"time,key,size\n")?,
    }
    for i in 0..t.len() {
        write_u64(w, u64::from(t.times[i]))?;
        w.write_all(b",")?;
        write_u64(w, t.ids[i])?;
        w.write_all(b",")?;
        write_u64(w, u64::from(t.sizes[i]))?;
        if let Some(ops) = &t.ops {
            w.write_all(b",")?;
            w.write_all(ops.names[ops.codes[i] as usize].as_bytes())?;
        }
        w.write_all(b"\n")?;
    }
    Ok(())
}
