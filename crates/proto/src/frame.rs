//! Response frames: one line from the server, plus its data block when it announces one.
//!
//! Frames are self-describing for both the text and the meta protocol, so the decoder needs
//! no knowledge of which command was sent; putting frames together into a response (a `get`
//! is `VALUE` frames closed by `END`) is the job of [`crate::response`].
//!
//! [`decode`] borrows from the buffer and allocates nothing. It first checks that a whole frame
//! is present, returning [`DecodeError::Incomplete`] if not, and only then parses, so a caller
//! can feed it bytes as they arrive. Bytes that can never become a valid frame give
//! [`DecodeError::Invalid`] with the offset of the problem.

use std::fmt;

/// A line longer than this without `\r\n` is invalid rather than incomplete.
pub const MAX_LINE: usize = 8192;
/// A data block announced as larger than this is invalid (memcached's own ceiling is 1 GiB).
pub const MAX_VALUE: usize = 1 << 30;

/// One decoded server frame, borrowing from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `VALUE <key> <flags> <bytes> [<cas>]` and its data block.
    Value {
        key: &'a [u8],
        flags: u32,
        cas: Option<u64>,
        data: &'a [u8],
    },
    /// `END`: closes a `get`/`gets` or `stats` response.
    End,
    /// `STAT <name> <value>`; the value is the rest of the line.
    Stat {
        name: &'a [u8],
        value: &'a [u8],
    },
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Ok,
    /// The reply to `incr` / `decr`.
    Number(u64),
    /// `VERSION <version>`.
    Version(&'a [u8]),
    /// `ERROR`: the server did not know the command.
    Error,
    /// `CLIENT_ERROR <message>`.
    ClientError(&'a [u8]),
    /// `SERVER_ERROR <message>`.
    ServerError(&'a [u8]),
    /// A meta-protocol reply.
    Meta(Meta<'a>),
}

/// The status code that starts a meta-protocol reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaStatus {
    /// `VA`: a value follows.
    Va,
    /// `HD`: success, no value.
    Hd,
    /// `EN`: miss.
    En,
    /// `NF`: not found.
    Nf,
    /// `NS`: not stored.
    Ns,
    /// `EX`: exists (CAS mismatch).
    Ex,
    /// `MN`: the reply to `mn` (meta no-op).
    Mn,
}

impl MetaStatus {
    pub fn code(self) -> &'static [u8; 2] {
        match self {
            MetaStatus::Va => b"VA",
            MetaStatus::Hd => b"HD",
            MetaStatus::En => b"EN",
            MetaStatus::Nf => b"NF",
            MetaStatus::Ns => b"NS",
            MetaStatus::Ex => b"EX",
            MetaStatus::Mn => b"MN",
        }
    }

    fn from_code(code: &[u8]) -> Option<MetaStatus> {
        Some(match code {
            b"VA" => MetaStatus::Va,
            b"HD" => MetaStatus::Hd,
            b"EN" => MetaStatus::En,
            b"NF" => MetaStatus::Nf,
            b"NS" => MetaStatus::Ns,
            b"EX" => MetaStatus::Ex,
            b"MN" => MetaStatus::Mn,
            _ => return None,
        })
    }
}

/// A meta-protocol reply: status, returned flags (raw, space separated), and data for `VA`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta<'a> {
    pub status: MetaStatus,
    /// The flag tokens exactly as sent, e.g. `b"f0 t-1 c42"`; empty when there are none.
    pub flags: &'a [u8],
    /// The data block; `Some` exactly when `status` is `Va`.
    pub data: Option<&'a [u8]>,
}

impl<'a> Meta<'a> {
    /// Iterates over the returned flags as `(flag letter, token after the letter)`.
    pub fn flag_tokens(&self) -> impl Iterator<Item = (u8, &'a [u8])> {
        self.flags
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty())
            .map(|t| (t[0], &t[1..]))
    }

    /// The token returned for flag `letter`, if the server returned it.
    pub fn flag(&self, letter: u8) -> Option<&'a [u8]> {
        self.flag_tokens()
            .find(|&(l, _)| l == letter)
            .map(|(_, v)| v)
    }
}

/// Why bytes could not be decoded into a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// More bytes are needed; nothing is wrong with what is there so far.
    Incomplete,
    /// The bytes can never become a valid frame.
    Invalid(Invalid),
}

impl DecodeError {
    /// The same error, its offset counted `by` bytes further on (a frame decoded from
    /// `buf[by..]`, told of as an offset into `buf`).
    pub fn shifted(self, by: usize) -> DecodeError {
        match self {
            DecodeError::Invalid(mut i) => {
                i.offset += by;
                DecodeError::Invalid(i)
            }
            inc => inc,
        }
    }
}

/// Where and why a frame is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid {
    pub kind: InvalidKind,
    /// Byte offset from the start of the frame.
    pub offset: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidKind {
    /// No `\r\n` within [`MAX_LINE`] bytes.
    LineTooLong,
    /// A `\n` without the `\r` before it.
    BareNewline,
    /// The first token is not a reply this decoder knows.
    UnknownReply,
    /// A reply has the wrong number of tokens.
    WrongArity,
    /// A numeric field is not a number, or out of range.
    BadNumber,
    /// A data block is larger than [`MAX_VALUE`].
    ValueTooLarge,
    /// A data block is not followed by `\r\n`.
    MissingDataTerminator,
    /// RESP: the first byte is not a type this decoder knows.
    UnknownType,
    /// RESP: an aggregate announces more elements than the decoder's limit.
    TooManyElements,
    /// RESP: aggregates nested deeper than the decoder's limit.
    TooDeep,
    /// RESP: a frame that breaks its type's rules (a boolean other than `t`/`f`, a verbatim
    /// string without its `xxx:` format, a null with a payload, a `\r` without `\n`).
    Malformed,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Incomplete => write!(f, "incomplete frame"),
            DecodeError::Invalid(inv) => {
                let what = match inv.kind {
                    InvalidKind::LineTooLong => "line too long",
                    InvalidKind::BareNewline => "bare newline",
                    InvalidKind::UnknownReply => "unknown reply",
                    InvalidKind::WrongArity => "wrong number of fields",
                    InvalidKind::BadNumber => "bad number",
                    InvalidKind::ValueTooLarge => "value too large",
                    InvalidKind::MissingDataTerminator => "data block not followed by \\r\\n",
                    InvalidKind::UnknownType => "unknown RESP type byte",
                    InvalidKind::TooManyElements => "aggregate longer than the limit",
                    InvalidKind::TooDeep => "aggregates nested deeper than the limit",
                    InvalidKind::Malformed => "malformed RESP value",
                };
                write!(f, "invalid frame: {what} at byte {}", inv.offset)
            }
        }
    }
}

impl std::error::Error for DecodeError {}

fn invalid(kind: InvalidKind, offset: usize) -> DecodeError {
    DecodeError::Invalid(Invalid { kind, offset })
}

/// Finds the end of the first line. Returns the line without `\r\n`.
fn line(buf: &[u8]) -> Result<&[u8], DecodeError> {
    let window = &buf[..buf.len().min(MAX_LINE + 2)];
    match window.iter().position(|&b| b == b'\n') {
        Some(0) => Err(invalid(InvalidKind::BareNewline, 0)),
        Some(nl) if buf[nl - 1] != b'\r' => Err(invalid(InvalidKind::BareNewline, nl)),
        Some(nl) => Ok(&buf[..nl - 1]),
        None if buf.len() > MAX_LINE + 1 => Err(invalid(InvalidKind::LineTooLong, MAX_LINE)),
        None => Err(DecodeError::Incomplete),
    }
}

fn parse_u64(tok: &[u8], offset: usize) -> Result<u64, DecodeError> {
    if tok.is_empty() || tok.len() > 20 || !tok.iter().all(u8::is_ascii_digit) {
        return Err(invalid(InvalidKind::BadNumber, offset));
    }
    tok.iter()
        .try_fold(0u64, |n, &d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .ok_or(invalid(InvalidKind::BadNumber, offset))
}

/// Splits a line into space-separated tokens with their offsets.
fn tokens(line: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut pos = 0;
    line.split(|&b| b == b' ').filter_map(move |t| {
        let start = pos;
        pos += t.len() + 1;
        (!t.is_empty()).then_some((start, t))
    })
}

/// Takes a data block of `len` bytes plus `\r\n` starting at `start`.
fn data_block(buf: &[u8], start: usize, len: usize) -> Result<&[u8], DecodeError> {
    if len > MAX_VALUE {
        return Err(invalid(InvalidKind::ValueTooLarge, start));
    }
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

/// Decodes one frame from the start of `buf`.
///
/// Returns the frame and the number of bytes it used. Does no I/O and allocates nothing.
pub fn decode(buf: &[u8]) -> Result<(Frame<'_>, usize), DecodeError> {
    let line = line(buf)?;
    let after_line = line.len() + 2;
    let (head, rest) = match line.iter().position(|&b| b == b' ') {
        Some(sp) => (&line[..sp], &line[sp + 1..]),
        None => (line, &line[line.len()..]),
    };
    let rest_offset = head.len() + 1;
    let single = |frame: Frame<'static>| {
        if rest.is_empty() {
            Ok((frame, after_line))
        } else {
            Err(invalid(InvalidKind::WrongArity, rest_offset))
        }
    };
    match head {
        b"VALUE" => {
            let mut it = tokens(rest).map(|(o, t)| (o + rest_offset, t));
            let (Some((_, key)), Some((fo, flags)), Some((bo, bytes))) =
                (it.next(), it.next(), it.next())
            else {
                return Err(invalid(InvalidKind::WrongArity, rest_offset));
            };
            let cas = match it.next() {
                Some((co, c)) => Some(parse_u64(c, co)?),
                None => None,
            };
            if let Some((o, _)) = it.next() {
                return Err(invalid(InvalidKind::WrongArity, o));
            }
            let flags = u32::try_from(parse_u64(flags, fo)?)
                .map_err(|_| invalid(InvalidKind::BadNumber, fo))?;
            let len = parse_u64(bytes, bo)?;
            let len = usize::try_from(len).map_err(|_| invalid(InvalidKind::ValueTooLarge, bo))?;
            let data = data_block(buf, after_line, len)?;
            Ok((
                Frame::Value {
                    key,
                    flags,
                    cas,
                    data,
                },
                after_line + len + 2,
            ))
        }
        b"END" => single(Frame::End),
        b"STORED" => single(Frame::Stored),
        b"NOT_STORED" => single(Frame::NotStored),
        b"EXISTS" => single(Frame::Exists),
        b"NOT_FOUND" => single(Frame::NotFound),
        b"DELETED" => single(Frame::Deleted),
        b"TOUCHED" => single(Frame::Touched),
        b"OK" => single(Frame::Ok),
        b"ERROR" => single(Frame::Error),
        b"CLIENT_ERROR" => Ok((Frame::ClientError(rest), after_line)),
        b"SERVER_ERROR" => Ok((Frame::ServerError(rest), after_line)),
        b"VERSION" => Ok((Frame::Version(rest), after_line)),
        b"STAT" => match rest.iter().position(|&b| b == b' ') {
            Some(sp) if sp > 0 => Ok((
                Frame::Stat {
                    name: &rest[..sp],
                    value: &rest[sp + 1..],
                },
                after_line,
            )),
            _ => Err(invalid(InvalidKind::WrongArity, rest_offset)),
        },
        _ if head.first().is_some_and(u8::is_ascii_digit) => {
            let n = parse_u64(head, 0)?;
            // memcached may pad an incr reply with trailing spaces.
            if rest.iter().any(|&b| b != b' ') {
                return Err(invalid(InvalidKind::WrongArity, rest_offset));
            }
            Ok((Frame::Number(n), after_line))
        }
        _ => {
            let status =
                MetaStatus::from_code(head).ok_or(invalid(InvalidKind::UnknownReply, 0))?;
            if status == MetaStatus::Va {
                let (size, flags) = match rest.iter().position(|&b| b == b' ') {
                    Some(sp) => (&rest[..sp], &rest[sp + 1..]),
                    None => (rest, &rest[rest.len()..]),
                };
                let len = parse_u64(size, rest_offset)?;
                let len =
                    usize::try_from(len).map_err(|_| invalid(InvalidKind::ValueTooLarge, 3))?;
                let data = data_block(buf, after_line, len)?;
                let meta = Meta {
                    status,
                    flags,
                    data: Some(data),
                };
                Ok((Frame::Meta(meta), after_line + len + 2))
            } else {
                Ok((
                    Frame::Meta(Meta {
                        status,
                        flags: rest,
                        data: None,
                    }),
                    after_line,
                ))
            }
        }
    }
}

/// Appends the wire form of `frame` to `out`: what a server would send.
///
/// Used by fake servers in tests and by the round-trip property tests.
pub fn encode(frame: &Frame<'_>, out: &mut Vec<u8>) {
    fn line(out: &mut Vec<u8>, parts: &[&[u8]]) {
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(p);
        }
        out.extend_from_slice(b"\r\n");
    }
    match *frame {
        Frame::Value {
            key,
            flags,
            cas,
            data,
        } => {
            let flags = flags.to_string();
            let len = data.len().to_string();
            match cas {
                Some(c) => line(
                    out,
                    &[
                        b"VALUE",
                        key,
                        flags.as_bytes(),
                        len.as_bytes(),
                        c.to_string().as_bytes(),
                    ],
                ),
                None => line(out, &[b"VALUE", key, flags.as_bytes(), len.as_bytes()]),
            }
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        }
        Frame::End => line(out, &[b"END"]),
        Frame::Stat { name, value } => line(out, &[b"STAT", name, value]),
        Frame::Stored => line(out, &[b"STORED"]),
        Frame::NotStored => line(out, &[b"NOT_STORED"]),
        Frame::Exists => line(out, &[b"EXISTS"]),
        Frame::NotFound => line(out, &[b"NOT_FOUND"]),
        Frame::Deleted => line(out, &[b"DELETED"]),
        Frame::Touched => line(out, &[b"TOUCHED"]),
        Frame::Ok => line(out, &[b"OK"]),
        Frame::Number(n) => line(out, &[n.to_string().as_bytes()]),
        Frame::Version(v) => line(out, &[b"VERSION", v]),
        Frame::Error => line(out, &[b"ERROR"]),
        Frame::ClientError(m) => line(out, &[b"CLIENT_ERROR", m]),
        Frame::ServerError(m) => line(out, &[b"SERVER_ERROR", m]),
        Frame::Meta(Meta {
            status,
            flags,
            data,
        }) => {
            let mut parts: Vec<&[u8]> = vec![status.code()];
            let len;
            if let Some(d) = data {
                len = d.len().to_string();
                parts.push(len.as_bytes());
            }
            if !flags.is_empty() {
                parts.push(flags);
            }
            line(out, &parts);
            if let Some(d) = data {
                out.extend_from_slice(d);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Frame<'_> {
        let (f, n) = decode(bytes).unwrap();
        assert_eq!(
            n,
            bytes.len(),
            "frame should use all of {:?}",
            String::from_utf8_lossy(bytes)
        );
        f
    }

    #[test]
    fn text_replies() {
        assert_eq!(
            one(b"VALUE k 5 3\r\nabc\r\n"),
            Frame::Value {
                key: b"k",
                flags: 5,
                cas: None,
                data: b"abc"
            }
        );
        assert_eq!(
            one(b"VALUE k 0 2 99\r\n\r\n\r\n"),
            Frame::Value {
                key: b"k",
                flags: 0,
                cas: Some(99),
                data: b"\r\n"
            }
        );
        assert_eq!(one(b"END\r\n"), Frame::End);
        assert_eq!(one(b"STORED\r\n"), Frame::Stored);
        assert_eq!(one(b"NOT_STORED\r\n"), Frame::NotStored);
        assert_eq!(one(b"EXISTS\r\n"), Frame::Exists);
        assert_eq!(one(b"NOT_FOUND\r\n"), Frame::NotFound);
        assert_eq!(one(b"DELETED\r\n"), Frame::Deleted);
        assert_eq!(one(b"TOUCHED\r\n"), Frame::Touched);
        assert_eq!(one(b"42\r\n"), Frame::Number(42));
        assert_eq!(one(b"7  \r\n"), Frame::Number(7));
        assert_eq!(one(b"VERSION 1.6.18\r\n"), Frame::Version(b"1.6.18"));
        assert_eq!(
            one(b"STAT version 1.6.18\r\n"),
            Frame::Stat {
                name: b"version",
                value: b"1.6.18"
            }
        );
        assert_eq!(one(b"ERROR\r\n"), Frame::Error);
        assert_eq!(
            one(b"CLIENT_ERROR bad data chunk\r\n"),
            Frame::ClientError(b"bad data chunk")
        );
        assert_eq!(
            one(b"SERVER_ERROR object too large for cache\r\n"),
            Frame::ServerError(b"object too large for cache")
        );
    }

    #[test]
    fn meta_replies() {
        let Frame::Meta(m) = one(b"VA 2 f3 t-1\r\nhi\r\n") else {
            panic!()
        };
        assert_eq!((m.status, m.data), (MetaStatus::Va, Some(&b"hi"[..])));
        assert_eq!(m.flag(b'f'), Some(&b"3"[..]));
        assert_eq!(m.flag(b't'), Some(&b"-1"[..]));
        assert_eq!(m.flag(b'c'), None);
        assert_eq!(
            one(b"HD\r\n"),
            Frame::Meta(Meta {
                status: MetaStatus::Hd,
                flags: b"",
                data: None
            })
        );
        assert_eq!(
            one(b"EN\r\n"),
            Frame::Meta(Meta {
                status: MetaStatus::En,
                flags: b"",
                data: None
            })
        );
        assert_eq!(
            one(b"NF\r\n"),
            Frame::Meta(Meta {
                status: MetaStatus::Nf,
                flags: b"",
                data: None
            })
        );
        assert_eq!(
            one(b"NS\r\n"),
            Frame::Meta(Meta {
                status: MetaStatus::Ns,
                flags: b"",
                data: None
            })
        );
        assert_eq!(
            one(b"EX c5\r\n"),
            Frame::Meta(Meta {
                status: MetaStatus::Ex,
                flags: b"c5",
                data: None
            })
        );
        assert_eq!(
            one(b"MN\r\n"),
            Frame::Meta(Meta {
                status: MetaStatus::Mn,
                flags: b"",
                data: None
            })
        );
    }

    #[test]
    fn decodes_only_the_first_frame() {
        let buf = b"VALUE a 0 1\r\nx\r\nEND\r\n";
        let (f, n) = decode(buf).unwrap();
        assert_eq!(
            f,
            Frame::Value {
                key: b"a",
                flags: 0,
                cas: None,
                data: b"x"
            }
        );
        assert_eq!(decode(&buf[n..]).unwrap(), (Frame::End, 5));
    }

    #[test]
    fn incomplete_is_not_invalid() {
        for partial in [
            &b""[..],
            b"EN",
            b"END\r",
            b"VALUE k 0 5\r\nab",
            b"VALUE k 0 2\r\nab",
            b"VALUE k 0 2\r\nab\r",
            b"VA 3\r\n",
        ] {
            assert_eq!(
                decode(partial),
                Err(DecodeError::Incomplete),
                "{:?}",
                String::from_utf8_lossy(partial)
            );
        }
    }

    #[test]
    fn invalid_bytes_are_named() {
        let kind = |b: &[u8]| match decode(b) {
            Err(DecodeError::Invalid(i)) => i.kind,
            other => panic!("expected invalid, got {other:?}"),
        };
        assert_eq!(kind(b"HELLO\r\n"), InvalidKind::UnknownReply);
        assert_eq!(kind(b"END\n"), InvalidKind::BareNewline);
        assert_eq!(kind(b"\n"), InvalidKind::BareNewline);
        assert_eq!(kind(b"END extra\r\n"), InvalidKind::WrongArity);
        assert_eq!(kind(b"VALUE k 0\r\n"), InvalidKind::WrongArity);
        assert_eq!(kind(b"VALUE k x 1\r\na\r\n"), InvalidKind::BadNumber);
        assert_eq!(
            kind(b"VALUE k 4294967296 1\r\na\r\n"),
            InvalidKind::BadNumber
        );
        assert_eq!(
            kind(b"VALUE k 0 1\r\nab\r\n"),
            InvalidKind::MissingDataTerminator
        );
        assert_eq!(
            kind(b"VALUE k 0 1\r\nax"),
            InvalidKind::MissingDataTerminator
        );
        assert_eq!(
            kind(b"VALUE k 0 99999999999\r\n"),
            InvalidKind::ValueTooLarge
        );
        assert_eq!(kind(b"99999999999999999999999\r\n"), InvalidKind::BadNumber);
        assert_eq!(kind(&[b'x'; MAX_LINE + 2]), InvalidKind::LineTooLong);
    }

    #[test]
    fn encode_matches_the_wire() {
        let mut out = Vec::new();
        encode(
            &Frame::Value {
                key: b"k",
                flags: 1,
                cas: Some(2),
                data: b"ab",
            },
            &mut out,
        );
        encode(
            &Frame::Meta(Meta {
                status: MetaStatus::Va,
                flags: b"f1",
                data: Some(b"xy"),
            }),
            &mut out,
        );
        encode(
            &Frame::Meta(Meta {
                status: MetaStatus::Hd,
                flags: b"",
                data: None,
            }),
            &mut out,
        );
        assert_eq!(out, b"VALUE k 1 2 2\r\nab\r\nVA 2 f1\r\nxy\r\nHD\r\n");
    }
}
