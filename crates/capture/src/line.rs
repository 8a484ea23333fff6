//! One line of memcached's watcher stream, parsed as cachelab's Python reader parses it
//! (`cachelab.traces.capture_lines`): the key is everything between ` key=` and the next
//! ` status=` (a key may hold `=`), the other fields are `name=value` words, and numbers are
//! read as Python's `int()` reads them (a sign, digits, single underscores between digits).

/// Python's `str.split()` whitespace among ASCII bytes.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f)
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// The fields of an item line a capture uses (the last of a name wins, as in a dict).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Fields<'a> {
    pub key: &'a [u8],
    pub kind: Option<&'a [u8]>,
    pub ts: Option<&'a [u8]>,
    pub status: Option<&'a [u8]>,
    pub cmd: Option<&'a [u8]>,
    pub ttl: Option<&'a [u8]>,
    pub cfd: Option<&'a [u8]>,
    pub size: Option<&'a [u8]>,
    pub clsid: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    fn set(&mut self, part: &'a [u8]) {
        let Some(eq) = part.iter().position(|&b| b == b'=') else {
            return;
        };
        let (name, value) = (&part[..eq], &part[eq + 1..]);
        match name {
            b"key" => self.key = value,
            b"type" => self.kind = Some(value),
            b"ts" => self.ts = Some(value),
            b"status" => self.status = Some(value),
            b"cmd" => self.cmd = Some(value),
            b"ttl" => self.ttl = Some(value),
            b"cfd" => self.cfd = Some(value),
            b"size" => self.size = Some(value),
            b"clsid" => self.clsid = Some(value),
            _ => {}
        }
    }

    /// None for a line that is not an item fetch or store (no ` key=` ... ` status=`).
    pub fn parse(line: &'a [u8]) -> Option<Fields<'a>> {
        let start = find(line, b" key=", 0)?;
        let end = find(line, b" status=", start + 5)?;
        let mut f = Fields {
            key: &line[start + 5..end],
            ..Fields::default()
        };
        // The words of line[..start] + line[end..]; line[end] is a space, so no word spans
        // the join.
        for half in [&line[..start], &line[end..]] {
            for part in half.split(|&b| is_space(b)).filter(|p| !p.is_empty()) {
                f.set(part);
            }
        }
        Some(f)
    }
}

/// Python's `int(text)` for ASCII text, if it fits an i64.
pub fn py_int(text: &[u8]) -> Option<i64> {
    let (neg, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty()
        || !digits[0].is_ascii_digit()
        || !digits[digits.len() - 1].is_ascii_digit()
    {
        return None;
    }
    let mut v: i128 = 0;
    let mut prev_underscore = false;
    for &b in digits {
        if b == b'_' {
            if prev_underscore {
                return None;
            }
            prev_underscore = true;
            continue;
        }
        if !b.is_ascii_digit() {
            return None;
        }
        prev_underscore = false;
        v = v * 10 + i128::from(b - b'0');
        if v > i128::from(i64::MAX) + 1 {
            return None;
        }
    }
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

/// `ts=SECONDS.MICROSECONDS` as memcached prints it: the microseconds without leading zeros
/// (`1795735358.29784` is .029784 s), computed as the Python reader computes it.
pub fn timestamp(text: &[u8]) -> Option<f64> {
    let (sec, usec) = match text.iter().position(|&b| b == b'.') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (text, &b""[..]),
    };
    let sec = py_int(sec)?;
    let usec = if usec.is_empty() { 0 } else { py_int(usec)? };
    Some(sec as f64 + usec as f64 * 1e-6)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// A key as the client sent it: memcached's log URI-encodes keys (`a%25b` is `a%b`); a `%`
/// not followed by two hex digits stays as it is (Python's `urllib.parse.unquote`).
pub fn unquote(logged: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < logged.len() {
        let b = logged[i];
        if b == b'%' {
            if let (Some(h), Some(l)) = (
                logged.get(i + 1).copied().and_then(hex),
                logged.get(i + 2).copied().and_then(hex),
            ) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_a_get_and_a_store() {
        let f = Fields::parse(
            b"ts=1795596440.129536 gid=4 type=item_get key=k1 status=found clsid=1 cfd=24 size=5",
        )
        .unwrap();
        assert_eq!(f.key, b"k1");
        assert_eq!(f.kind, Some(&b"item_get"[..]));
        assert_eq!(f.status, Some(&b"found"[..]));
        assert_eq!(
            (f.cfd, f.size, f.clsid),
            (Some(&b"24"[..]), Some(&b"5"[..]), Some(&b"1"[..]))
        );
        let s = Fields::parse(b"ts=1.2 gid=5 type=item_store key=a=b c status=stored cmd=add ttl=9 clsid=1 cfd=3 size=5").unwrap();
        assert_eq!(s.key, b"a=b c");
        assert_eq!((s.cmd, s.ttl), (Some(&b"add"[..]), Some(&b"9"[..])));
        assert!(Fields::parse(b"ts=1.2 gid=5 type=item_get key=k1").is_none());
        assert!(Fields::parse(b"skipped=4").is_none());
    }

    #[test]
    fn numbers_as_python_reads_them() {
        assert_eq!(py_int(b"24"), Some(24));
        assert_eq!(py_int(b"-5"), Some(-5));
        assert_eq!(py_int(b"+1_000"), Some(1000));
        for bad in [
            &b""[..],
            b"-",
            b"1__0",
            b"_1",
            b"1_",
            b"1a",
            b"99999999999999999999",
        ] {
            assert_eq!(py_int(bad), None, "{bad:?}");
        }
        assert_eq!(
            timestamp(b"1795735358.29784"),
            Some(1795735358.0 + 29784.0 * 1e-6)
        );
        assert_eq!(timestamp(b"17"), Some(17.0));
        assert_eq!(timestamp(b"x.1"), None);
    }

    #[test]
    fn keys_are_unquoted() {
        let mut out = Vec::new();
        for (logged, key) in [
            (&b"a%25b"[..], &b"a%b"[..]),
            (b"plain", b"plain"),
            (b"%e2%82%ac", "€".as_bytes()),
            (b"bad%zz%4", b"bad%zz%4"),
            (b"end%", b"end%"),
            (b"%FF", &[0xff]),
        ] {
            unquote(logged, &mut out);
            assert_eq!(out, key);
        }
    }
}
