//! One RESP frame: a type byte and its line, plus the payload of the bulk types.
//!
//! An aggregate (array, map, set, attribute, push) is one frame that announces how many
//! values follow; those values are frames of their own. [`decode`] reads exactly one frame,
//! borrowing from the buffer and allocating nothing: it returns [`DecodeError::Incomplete`]
//! while the frame has not fully arrived, and [`DecodeError::Invalid`] (with the offset of the
//! problem) for bytes that can never become one. Putting a whole reply together is the job of
//! [`super::value`].

use crate::frame::{DecodeError, Invalid, InvalidKind};

/// A line (a simple string, an error, a number) longer than this without `\r\n` is invalid
/// rather than incomplete. Redis's own longest inline line is 64 KiB too.
pub const MAX_LINE: usize = 64 * 1024;

/// How much a reply may announce before the decoder refuses it, so a corrupt or hostile
/// length can neither make a client wait for gigabytes nor nest without end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest bulk string, bulk error or verbatim string, in bytes.
    pub max_bulk: usize,
    /// The most elements one aggregate may announce (pairs, for a map or an attribute).
    pub max_elements: usize,
    /// The deepest nesting of aggregates (a flat array is depth 1); at most [`MAX_DEPTH`].
    pub max_depth: usize,
}

/// The hard ceiling on [`Limits::max_depth`].
pub const MAX_DEPTH: usize = 128;

impl Default for Limits {
    /// Redis's own ceilings: 512 MiB a bulk string (`proto-max-bulk-len`), 2^26 elements an
    /// aggregate; 32 levels of nesting (no Redis command replies deeper than a few).
    fn default() -> Limits {
        Limits {
            max_bulk: 512 << 20,
            max_elements: 1 << 26,
            max_depth: 32,
        }
    }
}

/// One decoded frame, borrowing from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Frame<'a> {
    /// `+OK`
    Simple(&'a [u8]),
    /// `-ERR message`: the whole line after `-`.
    Error(&'a [u8]),
    /// `:42`
    Integer(i64),
    /// `$3\r\nabc`
    Bulk(&'a [u8]),
    /// `$-1`: RESP2's null (a GET miss).
    NullBulk,
    /// `*n`: n values follow.
    Array(usize),
    /// `*-1`: RESP2's null array.
    NullArray,
    /// `_`: RESP3's null.
    Null,
    /// `#t` / `#f`
    Boolean(bool),
    /// `,3.14`, `,inf`, `,-inf`, `,nan`
    Double(f64),
    /// `(12345678901234567890`: the digits, with their sign, as sent.
    BigNumber(&'a [u8]),
    /// `!len\r\n<error>`
    BulkError(&'a [u8]),
    /// `=len\r\nfmt:text`: a three-byte format (`txt`, `mkd`) and the text.
    Verbatim { format: &'a [u8], text: &'a [u8] },
    /// `%n`: n key/value pairs follow.
    Map(usize),
    /// `~n`: n values follow.
    Set(usize),
    /// `|n`: n key/value pairs follow, then the value they describe.
    Attribute(usize),
    /// `>n`: an out-of-band message of n values.
    Push(usize),
}

impl Frame<'_> {
    /// How many frames follow as this frame's elements (2 per pair of a map or attribute).
    pub fn children(&self) -> usize {
        match *self {
            Frame::Array(n) | Frame::Set(n) | Frame::Push(n) => n,
            Frame::Map(n) | Frame::Attribute(n) => 2 * n,
            _ => 0,
        }
    }
}

pub(crate) fn invalid(kind: InvalidKind, offset: usize) -> DecodeError {
    DecodeError::Invalid(Invalid { kind, offset })
}

/// The line after the type byte, without `\r\n`; a `\r` or `\n` alone is invalid.
fn line(buf: &[u8]) -> Result<&[u8], DecodeError> {
    let window = &buf[1..buf.len().min(MAX_LINE + 3)];
    match window.iter().position(|&b| b == b'\r' || b == b'\n') {
        Some(i) if window[i] == b'\n' => Err(invalid(InvalidKind::BareNewline, i + 1)),
        Some(i) => match window.get(i + 1) {
            Some(b'\n') => Ok(&window[..i]),
            Some(_) => Err(invalid(InvalidKind::Malformed, i + 1)),
            None if i > MAX_LINE => Err(invalid(InvalidKind::LineTooLong, 1 + MAX_LINE)),
            None => Err(DecodeError::Incomplete),
        },
        None if window.len() > MAX_LINE => Err(invalid(InvalidKind::LineTooLong, 1 + MAX_LINE)),
        None => Err(DecodeError::Incomplete),
    }
}

/// Decimal digits with an optional sign, as an i64.
fn parse_i64(tok: &[u8]) -> Option<i64> {
    let (neg, digits) = match tok.first() {
        Some(b'-') => (true, &tok[1..]),
        Some(b'+') => (false, &tok[1..]),
        _ => (false, tok),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0i128, |n, &d| n * 10 + i128::from(d - b'0'));
    i64::try_from(if neg { -n } else { n }).ok()
}

/// A length or count: `-1` (null, when the type has one) or a number up to `max`.
fn length(
    line: &[u8],
    max: usize,
    too_big: InvalidKind,
    nullable: bool,
) -> Result<Option<usize>, DecodeError> {
    let n = parse_i64(line)
        .filter(|_| line.first() != Some(&b'+'))
        .ok_or(invalid(InvalidKind::BadNumber, 1))?;
    match n {
        -1 if nullable => Ok(None),
        n if n < 0 => Err(invalid(InvalidKind::BadNumber, 1)),
        n => match usize::try_from(n) {
            Ok(n) if n <= max => Ok(Some(n)),
            _ => Err(invalid(too_big, 1)),
        },
    }
}

fn parse_double(line: &[u8]) -> Option<f64> {
    let ok = !line.is_empty()
        && (line.iter().all(|b| b"0123456789+-.eE".contains(b))
            || matches!(
                line.to_ascii_lowercase().as_slice(),
                b"inf" | b"+inf" | b"-inf" | b"nan"
            ));
    if !ok {
        return None;
    }
    std::str::from_utf8(line).ok()?.parse().ok()
}

/// `len` bytes plus `\r\n` starting at `start`.
fn payload(buf: &[u8], start: usize, len: usize) -> Result<&[u8], DecodeError> {
    let end = start + len;
    if buf.len() < end + 2 {
        // A terminator that has arrived must already be right.
        if buf.len() > end && buf[end] != b'\r' {
            return Err(invalid(InvalidKind::MissingDataTerminator, end));
        }
        return Err(DecodeError::Incomplete);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(invalid(InvalidKind::MissingDataTerminator, end));
    }
    Ok(&buf[start..end])
}

/// Decodes one frame from the start of `buf`: the frame and the bytes it used.
pub fn decode<'a>(buf: &'a [u8], limits: &Limits) -> Result<(Frame<'a>, usize), DecodeError> {
    let Some(&kind) = buf.first() else {
        return Err(DecodeError::Incomplete);
    };
    if !b"+-:$*_#,(!=%~|>".contains(&kind) {
        return Err(invalid(InvalidKind::UnknownType, 0));
    }
    let line = line(buf)?;
    let used = 1 + line.len() + 2;
    let count = |nullable| {
        length(
            line,
            limits.max_elements,
            InvalidKind::TooManyElements,
            nullable,
        )
    };
    let frame = match kind {
        b'+' => Frame::Simple(line),
        b'-' => Frame::Error(line),
        b':' => Frame::Integer(parse_i64(line).ok_or(invalid(InvalidKind::BadNumber, 1))?),
        b'_' if line.is_empty() => Frame::Null,
        b'_' => return Err(invalid(InvalidKind::Malformed, 1)),
        b'#' => match line {
            b"t" => Frame::Boolean(true),
            b"f" => Frame::Boolean(false),
            _ => return Err(invalid(InvalidKind::Malformed, 1)),
        },
        b',' => Frame::Double(parse_double(line).ok_or(invalid(InvalidKind::BadNumber, 1))?),
        b'(' => {
            let digits = line.strip_prefix(b"-").unwrap_or(line);
            let digits = digits.strip_prefix(b"+").unwrap_or(digits);
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(invalid(InvalidKind::BadNumber, 1));
            }
            Frame::BigNumber(line)
        }
        b'*' => match count(true)? {
            Some(n) => Frame::Array(n),
            None => Frame::NullArray,
        },
        b'%' => Frame::Map(count(false)?.unwrap_or(0)),
        b'~' => Frame::Set(count(false)?.unwrap_or(0)),
        b'|' => Frame::Attribute(count(false)?.unwrap_or(0)),
        b'>' => Frame::Push(count(false)?.unwrap_or(0)),
        // The bulk types: `$` (nullable), `!` and `=`.
        _ => {
            let len = length(
                line,
                limits.max_bulk,
                InvalidKind::ValueTooLarge,
                kind == b'$',
            )?;
            let Some(len) = len else {
                return Ok((Frame::NullBulk, used));
            };
            let data = payload(buf, used, len)?;
            let frame = match kind {
                b'$' => Frame::Bulk(data),
                b'!' => Frame::BulkError(data),
                _ if data.len() >= 4 && data[3] == b':' => Frame::Verbatim {
                    format: &data[..3],
                    text: &data[4..],
                },
                _ => return Err(invalid(InvalidKind::Malformed, used)),
            };
            return Ok((frame, used + len + 2));
        }
    };
    Ok((frame, used))
}

/// Appends the wire form of one frame (an aggregate's header only) to `out`.
pub fn encode(frame: &Frame<'_>, out: &mut Vec<u8>) {
    fn head(out: &mut Vec<u8>, kind: u8, line: &[u8]) {
        out.push(kind);
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    fn bulk(out: &mut Vec<u8>, kind: u8, parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        head(out, kind, len.to_string().as_bytes());
        for p in parts {
            out.extend_from_slice(p);
        }
        out.extend_from_slice(b"\r\n");
    }
    match *frame {
        Frame::Simple(s) => head(out, b'+', s),
        Frame::Error(s) => head(out, b'-', s),
        Frame::Integer(n) => head(out, b':', n.to_string().as_bytes()),
        Frame::Bulk(d) => bulk(out, b'$', &[d]),
        Frame::NullBulk => head(out, b'$', b"-1"),
        Frame::Array(n) => head(out, b'*', n.to_string().as_bytes()),
        Frame::NullArray => head(out, b'*', b"-1"),
        Frame::Null => head(out, b'_', b""),
        Frame::Boolean(b) => head(out, b'#', if b { b"t" } else { b"f" }),
        Frame::Double(d) => {
            let text = match d {
                d if d.is_nan() => "nan".to_string(),
                d if d.is_infinite() => if d > 0.0 { "inf" } else { "-inf" }.to_string(),
                d => d.to_string(),
            };
            head(out, b',', text.as_bytes());
        }
        Frame::BigNumber(s) => head(out, b'(', s),
        Frame::BulkError(d) => bulk(out, b'!', &[d]),
        Frame::Verbatim { format, text } => bulk(out, b'=', &[format, b":", text]),
        Frame::Map(n) => head(out, b'%', n.to_string().as_bytes()),
        Frame::Set(n) => head(out, b'~', n.to_string().as_bytes()),
        Frame::Attribute(n) => head(out, b'|', n.to_string().as_bytes()),
        Frame::Push(n) => head(out, b'>', n.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Frame<'_> {
        let (f, n) = decode(bytes, &Limits::default()).unwrap();
        assert_eq!(n, bytes.len(), "{:?}", String::from_utf8_lossy(bytes));
        f
    }

    fn kind(bytes: &[u8]) -> InvalidKind {
        match decode(bytes, &Limits::default()) {
            Err(DecodeError::Invalid(i)) => i.kind,
            other => panic!("{:?}: expected invalid, got {other:?}", bytes),
        }
    }

    #[test]
    fn every_type_decodes() {
        assert_eq!(one(b"+OK\r\n"), Frame::Simple(b"OK"));
        assert_eq!(
            one(b"-ERR unknown command\r\n"),
            Frame::Error(b"ERR unknown command")
        );
        assert_eq!(one(b":-42\r\n"), Frame::Integer(-42));
        assert_eq!(one(b":9223372036854775807\r\n"), Frame::Integer(i64::MAX));
        assert_eq!(one(b":-9223372036854775808\r\n"), Frame::Integer(i64::MIN));
        assert_eq!(one(b"$5\r\na\r\nbc\r\n"), Frame::Bulk(b"a\r\nbc"));
        assert_eq!(one(b"$0\r\n\r\n"), Frame::Bulk(b""));
        assert_eq!(one(b"$-1\r\n"), Frame::NullBulk);
        assert_eq!(one(b"*2\r\n"), Frame::Array(2));
        assert_eq!(one(b"*-1\r\n"), Frame::NullArray);
        assert_eq!(one(b"_\r\n"), Frame::Null);
        assert_eq!(one(b"#t\r\n"), Frame::Boolean(true));
        assert_eq!(one(b"#f\r\n"), Frame::Boolean(false));
        assert_eq!(one(b",1.5e3\r\n"), Frame::Double(1500.0));
        assert_eq!(one(b",-inf\r\n"), Frame::Double(f64::NEG_INFINITY));
        assert!(matches!(one(b",nan\r\n"), Frame::Double(d) if d.is_nan()));
        assert_eq!(
            one(b"(-3492890328409238509324850943850943825024385\r\n"),
            Frame::BigNumber(b"-3492890328409238509324850943850943825024385")
        );
        assert_eq!(
            one(b"!21\r\nSYNTAX invalid syntax\r\n"),
            Frame::BulkError(b"SYNTAX invalid syntax")
        );
        assert_eq!(
            one(b"=15\r\ntxt:Some string\r\n"),
            Frame::Verbatim {
                format: b"txt",
                text: b"Some string"
            }
        );
        assert_eq!(one(b"%3\r\n"), Frame::Map(3));
        assert_eq!(one(b"~0\r\n"), Frame::Set(0));
        assert_eq!(one(b"|1\r\n"), Frame::Attribute(1));
        assert_eq!(one(b">4\r\n"), Frame::Push(4));
    }

    #[test]
    fn a_partial_frame_is_incomplete() {
        for partial in [
            &b""[..],
            b"+",
            b"+OK",
            b"+OK\r",
            b"$5\r\nab",
            b"$2\r\nab",
            b"$2\r\nab\r",
            b"=4\r\ntxt",
            b":12",
        ] {
            assert_eq!(
                decode(partial, &Limits::default()),
                Err(DecodeError::Incomplete),
                "{:?}",
                String::from_utf8_lossy(partial)
            );
        }
    }

    #[test]
    fn invalid_bytes_are_named() {
        assert_eq!(kind(b"END\r\n"), InvalidKind::UnknownType);
        assert_eq!(kind(b"+OK\n"), InvalidKind::BareNewline);
        assert_eq!(kind(b"+O\rK\r\n"), InvalidKind::Malformed);
        assert_eq!(kind(b":12x\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b":9223372036854775808\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b":\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b"$-2\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b"$+2\r\nab\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b"!-1\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b"%-1\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b"$2\r\nabc\r\n"), InvalidKind::MissingDataTerminator);
        assert_eq!(kind(b"$2\r\nab\rx"), InvalidKind::MissingDataTerminator);
        assert_eq!(kind(b"#x\r\n"), InvalidKind::Malformed);
        assert_eq!(kind(b"_x\r\n"), InvalidKind::Malformed);
        assert_eq!(kind(b"=3\r\ntxt\r\n"), InvalidKind::Malformed);
        assert_eq!(kind(b"=4\r\ntxtx\r\n"), InvalidKind::Malformed);
        assert_eq!(kind(b",1.2.x\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b",\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(b"(12a\r\n"), InvalidKind::BadNumber);
        let mut long = vec![b'+'];
        long.extend(std::iter::repeat_n(b'x', MAX_LINE + 2));
        assert_eq!(kind(&long), InvalidKind::LineTooLong);
    }

    #[test]
    fn absurd_lengths_are_refused_at_once_not_waited_for() {
        assert_eq!(kind(b"$99999999999\r\n"), InvalidKind::ValueTooLarge);
        assert_eq!(
            kind(b"$99999999999999999999999\r\n"),
            InvalidKind::BadNumber
        );
        assert_eq!(kind(b"*99999999999\r\n"), InvalidKind::TooManyElements);
        assert_eq!(kind(b"%99999999999\r\n"), InvalidKind::TooManyElements);
        let small = Limits {
            max_bulk: 4,
            max_elements: 2,
            max_depth: 2,
        };
        assert_eq!(
            decode(b"$5\r\n", &small),
            Err(invalid(InvalidKind::ValueTooLarge, 1))
        );
        assert_eq!(
            decode(b"~3\r\n", &small),
            Err(invalid(InvalidKind::TooManyElements, 1))
        );
        assert_eq!(decode(b"$4\r\nabcd\r\n", &small).unwrap().1, 10);
    }

    #[test]
    fn encode_matches_the_wire() {
        let mut out = Vec::new();
        for f in [
            Frame::Array(2),
            Frame::Bulk(b"GET"),
            Frame::NullBulk,
            Frame::Double(f64::INFINITY),
            Frame::Double(0.25),
            Frame::Verbatim {
                format: b"txt",
                text: b"hi",
            },
        ] {
            encode(&f, &mut out);
        }
        assert_eq!(
            out,
            b"*2\r\n$3\r\nGET\r\n$-1\r\n,inf\r\n,0.25\r\n=6\r\ntxt:hi\r\n"
        );
    }
}
