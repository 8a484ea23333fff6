//! One key per line; every request has size 1 and time 0.

use std::io::{self, Write};

use super::{key_id, numbered_lines, write_u64, FlatTrace};
use crate::error::{Location, TraceError};

pub(crate) fn parse(data: &[u8], path: &str) -> Result<FlatTrace, TraceError> {
    let guess = data.len() / 4 + 1;
    let mut ids = Vec::with_capacity(guess);
    for (n, line) in numbered_lines(data) {
        let key = line.trim_ascii();
        if key.is_empty() {
            continue;
        }
        if key.iter().any(|b| b.is_ascii_whitespace() || *b == b',') {
            return Err(TraceError::new(
                path,
                Location::Line(n),
                format!(
                    "bad line: expected one key, got {:?}",
                    String::from_utf8_lossy(line)
                ),
            ));
        }
        ids.push(key_id(key));
    }
    let n = ids.len();
    Ok(FlatTrace {
        times: vec![0; n],
        ids,
        sizes: vec![1; n],
        ops: None,
    })
}

pub(crate) fn write(t: &FlatTrace, w: &mut impl Write) -> io::Result<()> {
    for &id in &t.ids {
        write_u64(w, id)?;
        w.write_all(b"\n")?;
    }
    Ok(())
}
