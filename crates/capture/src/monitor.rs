//! Redis's `MONITOR` stream, as a capture reads it: one line per command the server runs,
//!
//! ```text
//! +1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"
//! ```
//!
//! (the time, the database and the client, then each argument quoted, with `\"`, `\\`,
//! `\n`, `\r`, `\t`, `\a`, `\b` and `\xHH` escapes). [`parse`] reads one line; [`Monitor`]
//! turns the commands a cache sees (reads, writes, deletes, expiries) into the rows of a
//! capture, as [`crate::State`] does for memcached's stream: keys pseudonymised by the same
//! keyed BLAKE2b, sampled the same way, the keys of one MGET/DEL/MSET one request. The
//! database goes in the rows' `clsid` column (written as `db`). Other commands (INFO, PING,
//! AUTH, CLIENT, hashes, lists ...) are counted, not written.

use std::collections::HashMap;

use crate::blake2b::Keyed;
use crate::line::timestamp;
use crate::state::{write_name, Columns, Sink};

/// One `MONITOR` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    /// Seconds since the epoch, as the server's clock said.
    pub time: f64,
    pub db: u32,
    /// The client: `127.0.0.1:5555`, `[::1]:5555`, `unix:/path`, `lua` ...
    pub client: &'a [u8],
    /// The command and its arguments, unescaped (the command as sent: any case).
    pub args: Vec<Vec<u8>>,
}

fn unhex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The quoted arguments of `rest` (` "a" "b\x00"`); None when a quote is not closed or
/// something else stands between them.
fn arguments(mut rest: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    loop {
        while let [b' ', tail @ ..] = rest {
            rest = tail;
        }
        let [b'"', tail @ ..] = rest else {
            return rest.is_empty().then_some(args);
        };
        rest = tail;
        let mut arg = Vec::new();
        loop {
            match rest {
                [b'"', tail @ ..] => {
                    rest = tail;
                    break;
                }
                [b'\\', b'x', h, l, tail @ ..] if unhex(*h).is_some() && unhex(*l).is_some() => {
                    arg.push(unhex(*h)? * 16 + unhex(*l)?);
                    rest = tail;
                }
                [b'\\', c, tail @ ..] => {
                    arg.push(match c {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'a' => 7,
                        b'b' => 8,
                        other => *other,
                    });
                    rest = tail;
                }
                [c, tail @ ..] => {
                    arg.push(*c);
                    rest = tail;
                }
                [] => return None,
            }
        }
        args.push(arg);
    }
}

/// One line of the stream (without its `\r\n`); None for anything else (the `+OK` that
/// starts it, a malformed line).
pub fn parse(line: &[u8]) -> Option<Line<'_>> {
    let line = line.strip_prefix(b"+").unwrap_or(line);
    let sp = line.iter().position(|&b| b == b' ')?;
    let time = timestamp(&line[..sp])?;
    let rest = line[sp + 1..].strip_prefix(b"[")?;
    // The client holds no quote: the bracket that closes it is the last one before the
    // first argument.
    let first_quote = rest.iter().position(|&b| b == b'"').unwrap_or(rest.len());
    let close = rest[..first_quote].iter().rposition(|&b| b == b']')?;
    let inside = &rest[..close];
    let db_end = inside.iter().position(|&b| b == b' ')?;
    let db = std::str::from_utf8(&inside[..db_end]).ok()?.parse().ok()?;
    let client = &inside[db_end + 1..];
    let args = arguments(&rest[close + 1..])?;
    if args.is_empty() {
        return None;
    }
    Some(Line {
        time,
        db,
        client,
        args,
    })
}

/// How a command's arguments become rows.
#[derive(Clone, Copy)]
enum Shape {
    /// Every argument a key.
    Keys,
    /// The first argument a key (the rest options or numbers).
    Key,
    /// The key and its value (`SET k v ...`, `GETSET`, `SETNX`).
    KeyValue,
    /// `SETEX k seconds v`, `PSETEX k ms v`.
    KeyTtlValue { ms: bool },
    /// `MSET k v k v ...`.
    Pairs,
}

/// The commands written, as (command, op written, shape).
const COMMANDS: &[(&[u8], &str, Shape)] = &[
    (b"GET", "get", Shape::Key),
    (b"MGET", "get", Shape::Keys),
    (b"GETEX", "getex", Shape::Key),
    (b"GETDEL", "getdel", Shape::Key),
    (b"SET", "set", Shape::KeyValue),
    (b"SETNX", "setnx", Shape::KeyValue),
    (b"GETSET", "getset", Shape::KeyValue),
    (b"SETEX", "setex", Shape::KeyTtlValue { ms: false }),
    (b"PSETEX", "psetex", Shape::KeyTtlValue { ms: true }),
    (b"MSET", "set", Shape::Pairs),
    (b"MSETNX", "setnx", Shape::Pairs),
    (b"APPEND", "append", Shape::Key),
    (b"DEL", "del", Shape::Keys),
    (b"UNLINK", "unlink", Shape::Keys),
    (b"EXISTS", "exists", Shape::Keys),
    (b"TOUCH", "touch", Shape::Keys),
    (b"INCR", "incr", Shape::Key),
    (b"INCRBY", "incr", Shape::Key),
    (b"INCRBYFLOAT", "incr", Shape::Key),
    (b"DECR", "decr", Shape::Key),
    (b"DECRBY", "decr", Shape::Key),
    (b"EXPIRE", "expire", Shape::Key),
    (b"PEXPIRE", "expire", Shape::Key),
    (b"EXPIREAT", "expire", Shape::Key),
    (b"PEXPIREAT", "expire", Shape::Key),
    (b"PERSIST", "persist", Shape::Key),
    (b"STRLEN", "strlen", Shape::Key),
];

/// `SET`'s expiry in seconds from its options (`EX s`, `PX ms`); -1 without one (or with
/// an absolute `EXAT`/`PXAT`, or `KEEPTTL`).
fn set_ttl(options: &[Vec<u8>]) -> i64 {
    let mut i = 0;
    while i < options.len() {
        let o = options[i].to_ascii_uppercase();
        let n = options.get(i + 1).and_then(|v| std::str::from_utf8(v).ok());
        match (&o[..], n.and_then(|n| n.parse::<i64>().ok())) {
            (b"EX", Some(s)) => return s,
            (b"PX", Some(ms)) => return (ms + 999) / 1000,
            _ => {}
        }
        i += 1;
    }
    -1
}

/// The reader's state for a `MONITOR` stream (see the module).
pub struct Monitor {
    hasher: Keyed,
    keep_keys: bool,
    sample: f64,
    /// Only this database's commands (None: every database's).
    db: Option<u32>,
    pub t0: Option<f64>,
    /// Accesses written, by op, in the order first seen.
    pub ops: Vec<(String, u64)>,
    /// Commands seen and not written (not a cache's reads or writes, another database's, or
    /// a client's excluded), by command (lowercase), in the order first seen.
    pub other: Vec<(String, u64)>,
    /// Lines that were not a command (malformed).
    pub malformed: u64,
    pub sampled_out: u64,
    /// Commands written (one MGET of 3 keys is one).
    pub commands: u64,
    /// Clients whose commands are not written (cachelab's own connections).
    excluded: Vec<Vec<u8>>,
    conns: HashMap<Vec<u8>, i32>,
    next_request: i64,
    word_ids: HashMap<&'static str, u16>,
    status: Option<u16>,
}

fn count(counts: &mut Vec<(String, u64)>, what: &str) {
    match counts.iter_mut().find(|(o, _)| o == what) {
        Some((_, n)) => *n += 1,
        None => counts.push((what.to_string(), 1)),
    }
}

impl Monitor {
    /// `secret`: the pseudonyms' key (at most 64 bytes); `sample` in (0, 1]; `db`: only that
    /// database's commands; `t0`: the time subtracted (None: the first line's).
    pub fn new(
        secret: &[u8],
        keep_keys: bool,
        sample: f64,
        db: Option<u32>,
        t0: Option<f64>,
    ) -> Monitor {
        Monitor {
            hasher: Keyed::new(secret),
            keep_keys,
            sample,
            db,
            t0,
            ops: Vec::new(),
            other: Vec::new(),
            malformed: 0,
            sampled_out: 0,
            commands: 0,
            excluded: Vec::new(),
            conns: HashMap::new(),
            next_request: 0,
            word_ids: HashMap::new(),
            status: None,
        }
    }

    /// The commands of `client` (as the stream names it, e.g. `127.0.0.1:5555`) are counted
    /// as other, not written.
    pub fn exclude(&mut self, client: &[u8]) {
        self.excluded.push(client.to_vec());
    }

    fn word(&mut self, w: &'static str, out: &mut Columns) -> u16 {
        if let Some(&i) = self.word_ids.get(w) {
            return i;
        }
        let i = out.words.len() as u16;
        out.words.push(w.to_string());
        self.word_ids.insert(w, i);
        i
    }

    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        out: &mut Columns,
        t: f64,
        key: &[u8],
        op: &'static str,
        size: usize,
        db: u32,
        conn: i32,
        request: i64,
        ttl: i64,
    ) {
        if !write_name(
            &self.hasher,
            self.keep_keys,
            self.sample,
            key,
            out,
            &mut self.sampled_out,
        ) {
            return;
        }
        count(&mut self.ops, op);
        let op = self.word(op, out);
        let status = match self.status {
            Some(s) => s,
            None => {
                let s = self.word("", out);
                self.status = Some(s);
                s
            }
        };
        out.time.push(t);
        out.op.push(op);
        out.status.push(status);
        out.size.push(u32::try_from(size).unwrap_or(u32::MAX));
        out.clsid.push(u16::try_from(db).unwrap_or(u16::MAX));
        out.conn.push(conn);
        out.request.push(request);
        out.ttl.push(ttl);
        out.key_bytes.push(key.len().min(65_535) as u16);
    }
}

impl Sink for Monitor {
    fn line(&mut self, mut line: &[u8], out: &mut Columns) {
        while let [rest @ .., b'\r'] = line {
            line = rest;
        }
        if line.is_empty() || line == b"+OK" {
            return;
        }
        let Some(l) = parse(line) else {
            self.malformed += 1;
            return;
        };
        let name = l.args[0].to_ascii_uppercase();
        let found = COMMANDS.iter().find(|(c, _, _)| *c == &name[..]);
        let other =
            self.db.is_some_and(|d| d != l.db) || self.excluded.iter().any(|c| c == l.client);
        let Some(&(_, op, shape)) = found.filter(|_| !other) else {
            count(
                &mut self.other,
                &String::from_utf8_lossy(&name).to_ascii_lowercase(),
            );
            return;
        };
        let t0 = *self.t0.get_or_insert(l.time);
        let t = l.time - t0;
        let next = self.conns.len() as i32;
        let conn = *self.conns.entry(l.client.to_vec()).or_insert(next);
        let request = self.next_request;
        self.next_request += 1;
        self.commands += 1;
        let args = &l.args[1..];
        match shape {
            Shape::Keys => {
                for k in args {
                    self.row(out, t, k, op, 0, l.db, conn, request, -1);
                }
            }
            Shape::Key => {
                if let Some(k) = args.first() {
                    self.row(out, t, k, op, 0, l.db, conn, request, -1);
                }
            }
            Shape::KeyValue => {
                if let [k, v, options @ ..] = args {
                    let ttl = if op == "set" { set_ttl(options) } else { -1 };
                    self.row(out, t, k, op, v.len(), l.db, conn, request, ttl);
                }
            }
            Shape::KeyTtlValue { ms } => {
                if let [k, ttl, v, ..] = args {
                    let n = std::str::from_utf8(ttl)
                        .ok()
                        .and_then(|n| n.parse::<i64>().ok())
                        .unwrap_or(-1);
                    let ttl = if ms && n >= 0 { (n + 999) / 1000 } else { n };
                    self.row(out, t, k, op, v.len(), l.db, conn, request, ttl);
                }
            }
            Shape::Pairs => {
                for kv in args.chunks_exact(2) {
                    self.row(out, t, &kv[0], op, kv[1].len(), l.db, conn, request, -1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(lines: &[&[u8]], db: Option<u32>) -> (Monitor, Columns) {
        let mut m = Monitor::new(b"s", true, 1.0, db, None);
        let mut out = Columns::new();
        for l in lines {
            m.line(l, &mut out);
        }
        (m, out)
    }

    fn keys(c: &Columns) -> Vec<Vec<u8>> {
        c.offsets
            .windows(2)
            .map(|w| c.keys[w[0] as usize..w[1] as usize].to_vec())
            .collect()
    }

    fn ops(c: &Columns) -> Vec<&str> {
        c.op.iter().map(|&i| c.words[i as usize].as_str()).collect()
    }

    #[test]
    fn a_line_is_its_time_database_client_and_arguments() {
        let l = parse(br#"+1700000000.123456 [3 127.0.0.1:5555] "SET" "k" "v""#).unwrap();
        assert!((l.time - 1_700_000_000.123_456).abs() < 1e-6);
        assert_eq!(l.db, 3);
        assert_eq!(l.client, b"127.0.0.1:5555");
        assert_eq!(l.args, vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]);
    }

    #[test]
    fn escapes_are_undone() {
        let l =
            parse(br#"+1.000001 [0 127.0.0.1:1] "SET" "a\"b\\c" "\x00\xff\n\r\t\a\b" "say \"]\"""#)
                .unwrap();
        assert_eq!(l.args[1], b"a\"b\\c");
        assert_eq!(l.args[2], vec![0u8, 0xff, b'\n', b'\r', b'\t', 7, 8]);
        assert_eq!(l.args[3], b"say \"]\"");
    }

    #[test]
    fn clients_of_every_kind_and_an_empty_argument() {
        for (line, client) in [
            (&br#"+1.5 [0 [::1]:6000] "GET" "k""#[..], &b"[::1]:6000"[..]),
            (
                br#"+1.5 [0 unix:/tmp/r.sock] "GET" "k""#,
                b"unix:/tmp/r.sock",
            ),
            (br#"+1.5 [0 lua] "GET" "k""#, b"lua"),
        ] {
            assert_eq!(parse(line).unwrap().client, client);
        }
        assert_eq!(
            parse(br#"+1.5 [0 lua] "SET" "" """#).unwrap().args[1],
            b"".to_vec()
        );
    }

    #[test]
    fn malformed_lines_are_none() {
        for bad in [
            &b"+OK"[..],
            b"",
            b"+1.5 [0 127.0.0.1:1]",
            br#"+1.5 [0 127.0.0.1:1] "GET" "k"#,
            br#"+x [0 127.0.0.1:1] "GET" "k""#,
            br#"+1.5 [z 127.0.0.1:1] "GET" "k""#,
            br#"+1.5 [0 127.0.0.1:1] GET"#,
        ] {
            assert!(parse(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn reads_writes_and_deletes_become_rows_with_sizes_ttls_and_requests() {
        let (m, c) = rows(
            &[
                b"+OK\r",
                br#"+100.000000 [0 127.0.0.1:1] "SET" "a" "12345" "EX" "60""#,
                br#"+100.000010 [0 127.0.0.1:1] "get" "a""#,
                br#"+100.000020 [0 127.0.0.1:2] "MGET" "a" "b" "c""#,
                br#"+100.000030 [0 127.0.0.1:2] "DEL" "a" "b""#,
                br#"+100.000040 [0 127.0.0.1:1] "SETEX" "d" "30" "xy""#,
                br#"+100.000050 [0 127.0.0.1:1] "PSETEX" "d" "1500" "xyz""#,
                br#"+100.000060 [0 127.0.0.1:1] "MSET" "e" "1" "f" "22""#,
                br#"+100.000070 [0 127.0.0.1:1] "UNLINK" "e""#,
                br#"+100.000080 [0 127.0.0.1:1] "GETEX" "f" "PX" "100""#,
                br#"+100.000090 [0 127.0.0.1:1] "INFO""#,
                br#"+100.000100 [0 127.0.0.1:1] "AUTH" "(redacted)""#,
            ],
            None,
        );
        assert_eq!(
            ops(&c),
            [
                "set", "get", "get", "get", "get", "del", "del", "setex", "psetex", "set", "set",
                "unlink", "getex"
            ]
        );
        let k: Vec<&[u8]> = vec![
            b"a", b"a", b"a", b"b", b"c", b"a", b"b", b"d", b"d", b"e", b"f", b"e", b"f",
        ];
        assert_eq!(keys(&c), k);
        assert_eq!(c.size, [5, 0, 0, 0, 0, 0, 0, 2, 3, 1, 2, 0, 0]);
        assert_eq!(c.ttl, [60, -1, -1, -1, -1, -1, -1, 30, 2, -1, -1, -1, -1]);
        // One request per command: an MGET's keys share one, a DEL's and an MSET's too.
        assert_eq!(c.request, [0, 1, 2, 2, 2, 3, 3, 4, 5, 6, 6, 7, 8]);
        assert_eq!(c.conn, [0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0]);
        assert!((c.time[12] - 80e-6).abs() < 1e-9);
        assert_eq!(m.commands, 9);
        assert_eq!(
            m.other,
            vec![("info".to_string(), 1), ("auth".to_string(), 1)]
        );
        assert_eq!(m.malformed, 0);
    }

    #[test]
    fn binary_keys_are_kept_as_sent_and_pseudonyms_depend_on_the_key_alone() {
        let mut m = Monitor::new(b"secret", false, 1.0, None, None);
        let mut out = Columns::new();
        for l in [
            &br#"+1.0 [0 127.0.0.1:1] "SET" "\x00\xffk" "v""#[..],
            br#"+1.1 [5 127.0.0.1:2] "GET" "\x00\xffk""#,
            br#"+1.2 [0 127.0.0.1:1] "GET" "other""#,
        ] {
            m.line(l, &mut out);
        }
        let k = keys(&out);
        assert_eq!(k[0], k[1]);
        assert_ne!(k[0], k[2]);
        assert_eq!(k[0].len(), 17);
        assert_eq!(out.key_bytes, [3, 3, 5]);
        let hasher = Keyed::new(b"secret");
        assert_eq!(
            k[0],
            format!("k{:016x}", hasher.word(b"\x00\xffk")).into_bytes()
        );
        assert_eq!(out.clsid, [0, 5, 0]);
    }

    #[test]
    fn a_database_given_and_excluded_clients_leave_the_rest_out() {
        let mut m = Monitor::new(b"s", true, 1.0, Some(2), None);
        m.exclude(b"127.0.0.1:9");
        let mut out = Columns::new();
        for l in [
            &br#"+1.0 [0 127.0.0.1:1] "GET" "a""#[..],
            br#"+1.1 [2 127.0.0.1:1] "GET" "b""#,
            br#"+1.2 [2 127.0.0.1:9] "GET" "c""#,
            b"garbage",
        ] {
            m.line(l, &mut out);
        }
        assert_eq!(keys(&out), vec![b"b".to_vec()]);
        assert_eq!(m.other, vec![("get".to_string(), 2)]);
        assert_eq!(m.malformed, 1);
        // The clock starts at the first line written.
        assert_eq!(out.time, [0.0]);
    }
}
