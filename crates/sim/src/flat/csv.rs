//! CSV traces: a header naming the columns, then one request per line, read with the `csv`
//! crate (RFC 4180: a field may be quoted, so it can hold a comma or a quote).

use std::io::{self, Write};

use super::{key_id, parse_u64, write_u64, FlatTrace, Ops};
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

pub(crate) fn parse(data: &[u8], path: &str) -> Result<FlatTrace, TraceError> {
    // Field counts are checked below, in this reader's words, so records may differ in
    // length; whitespace is trimmed field by field below (ASCII, as before the crate).
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(data);
    let mut record = ::csv::ByteRecord::new();
    // The crate skips empty lines; the line a record starts on names it in errors.
    let read = |reader: &mut ::csv::Reader<&[u8]>, record: &mut ::csv::ByteRecord| {
        let more = reader.read_byte_record(record).map_err(|e| {
            let line = e.position().map_or(0, ::csv::Position::line);
            TraceError::new(path, Location::Line(line), format!("bad line: {e}"))
        })?;
        Ok::<_, TraceError>(more.then(|| record.position().map_or(0, ::csv::Position::line)))
    };
    let header_line = read(&mut reader, &mut record)?
        .ok_or_else(|| TraceError::new(path, Location::File, "empty file"))?;
    let header: Vec<&[u8]> = record.iter().collect();
    let key = column(&header, &KEY_NAMES).ok_or_else(|| {
        TraceError::new(
            path,
            Location::Line(header_line),
            format!(
                "header has no key column (one of {}): {:?}",
                KEY_NAMES.join(", "),
                String::from_utf8_lossy(&header.join(&b','))
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
    let mut row = ::csv::ByteRecord::new();
    while let Some(n) = read(&mut reader, &mut row)? {
        if row.len() == 1 && trim(&row[0]).is_empty() {
            continue; // a line of blanks
        }
        let err = |m: String| TraceError::new(path, Location::Line(n), m);
        if row.len() != n_fields {
            return Err(err(format!(
                "bad line: {} fields, the header has {n_fields}",
                row.len()
            )));
        }
        let k = trim(&row[key]);
        if k.is_empty() {
            return Err(err("bad line: empty key".into()));
        }
        t.ids.push(key_id(k));
        t.sizes.push(match size {
            Some(c) => parse_size(&row[c]).map_err(err)?,
            None => 1,
        });
        t.times.push(match time {
            Some(c) => parse_time(&row[c]).map_err(err)?,
            None => 0,
        });
        if let (Some(c), Some(ops)) = (op, t.ops.as_mut()) {
            let code = ops
                .code(trim(&row[c]))
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
