//! Frames put together into one reply, owning their bytes.
//!
//! [`complete_len`] walks frames without allocating (a counter per open aggregate, on the
//! stack) to find where the first reply ends, or that it has not arrived yet; [`parse`] then
//! builds the owned [`Value`], slicing strings out of the shared buffer without copying them.

use bytes::Bytes;

use super::frame::{self, invalid, Frame, Limits, MAX_DEPTH};
use crate::frame::{DecodeError, InvalidKind};

/// One reply (or one element of one), RESP2 or RESP3.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Simple(Bytes),
    /// An error reply: the whole line after `-` (`ERR unknown command ...`, `WRONGPASS ...`).
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    /// RESP2's null bulk string (`$-1`).
    NullBulk,
    /// RESP2's null array (`*-1`).
    NullArray,
    /// RESP3's null (`_`).
    Null,
    Boolean(bool),
    Double(f64),
    /// The digits as sent, with their sign.
    BigNumber(Bytes),
    BulkError(Bytes),
    Verbatim {
        format: Bytes,
        text: Bytes,
    },
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Push(Vec<Value>),
    /// A value that came with RESP3 attributes (`|n` pairs, then the value).
    Attributed {
        attributes: Vec<(Value, Value)>,
        value: Box<Value>,
    },
}

impl Value {
    /// True for any of the three nulls.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::NullBulk | Value::NullArray | Value::Null)
    }

    /// The error text of an error reply (simple or bulk).
    pub fn error(&self) -> Option<&[u8]> {
        match self {
            Value::Error(e) | Value::BulkError(e) => Some(e),
            _ => None,
        }
    }

    /// The bytes of a string reply: bulk, simple or verbatim (its text).
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            Value::Bulk(b) | Value::Simple(b) => Some(b),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// The value without its attributes.
    pub fn plain(&self) -> &Value {
        match self {
            Value::Attributed { value, .. } => value.plain(),
            v => v,
        }
    }

    /// Appends the wire form to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut put = |f: Frame<'_>| frame::encode(&f, out);
        match self {
            Value::Simple(s) => put(Frame::Simple(s)),
            Value::Error(s) => put(Frame::Error(s)),
            Value::Integer(n) => put(Frame::Integer(*n)),
            Value::Bulk(b) => put(Frame::Bulk(b)),
            Value::NullBulk => put(Frame::NullBulk),
            Value::NullArray => put(Frame::NullArray),
            Value::Null => put(Frame::Null),
            Value::Boolean(b) => put(Frame::Boolean(*b)),
            Value::Double(d) => put(Frame::Double(*d)),
            Value::BigNumber(b) => put(Frame::BigNumber(b)),
            Value::BulkError(b) => put(Frame::BulkError(b)),
            Value::Verbatim { format, text } => put(Frame::Verbatim { format, text }),
            Value::Array(items) | Value::Set(items) | Value::Push(items) => {
                let n = items.len();
                put(match self {
                    Value::Array(_) => Frame::Array(n),
                    Value::Set(_) => Frame::Set(n),
                    _ => Frame::Push(n),
                });
                items.iter().for_each(|v| v.encode(out));
            }
            Value::Map(pairs) => {
                put(Frame::Map(pairs.len()));
                encode_pairs(pairs, out);
            }
            Value::Attributed { attributes, value } => {
                put(Frame::Attribute(attributes.len()));
                encode_pairs(attributes, out);
                value.encode(out);
            }
        }
    }
}

fn encode_pairs(pairs: &[(Value, Value)], out: &mut Vec<u8>) {
    for (k, v) in pairs {
        k.encode(out);
        v.encode(out);
    }
}

/// The number of bytes at the start of `buf` that make up one complete reply (an aggregate
/// with everything in it, attributes included), or `Incomplete` / `Invalid`. Allocates
/// nothing.
pub fn complete_len(buf: &[u8], limits: &Limits) -> Result<usize, DecodeError> {
    let max_depth = limits.max_depth.min(MAX_DEPTH);
    // owed[d]: the values still owed at depth d (0: the reply itself).
    let mut owed = [0usize; MAX_DEPTH + 1];
    owed[0] = 1;
    let mut depth = 0;
    let mut pos = 0;
    loop {
        let (f, n) = frame::decode(&buf[pos..], limits).map_err(|e| e.shifted(pos))?;
        let start = pos;
        pos += n;
        // An attribute describes the value after it: that value is still owed.
        if !matches!(f, Frame::Attribute(_)) {
            owed[depth] -= 1;
        }
        let children = f.children();
        if children > 0 {
            if depth == max_depth {
                return Err(invalid(InvalidKind::TooDeep, start));
            }
            depth += 1;
            owed[depth] = children;
        }
        while owed[depth] == 0 {
            if depth == 0 {
                return Ok(pos);
            }
            depth -= 1;
        }
    }
}

/// Decodes the first reply in `bytes`: the value and the bytes it used. Strings are slices
/// of `bytes` (no copy). Safe on any input: it checks what [`complete_len`] checks.
pub fn parse(bytes: &Bytes, limits: &Limits) -> Result<(Value, usize), DecodeError> {
    let mut pos = 0;
    let v = parse_at(bytes, &mut pos, limits, 0)?;
    Ok((v, pos))
}

fn parse_at(
    bytes: &Bytes,
    pos: &mut usize,
    limits: &Limits,
    depth: usize,
) -> Result<Value, DecodeError> {
    let start = *pos;
    let (f, n) = frame::decode(&bytes[start..], limits).map_err(|e| e.shifted(start))?;
    *pos += n;
    if f.children() > 0 && depth == limits.max_depth.min(MAX_DEPTH) {
        return Err(invalid(InvalidKind::TooDeep, start));
    }
    let s = |b: &[u8]| bytes.slice_ref(b);
    let list = |count: usize, pos: &mut usize| -> Result<Vec<Value>, DecodeError> {
        // Never trust a count for an allocation: the values are what arrived.
        let mut items = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            items.push(parse_at(bytes, pos, limits, depth + 1)?);
        }
        Ok(items)
    };
    Ok(match f {
        Frame::Simple(b) => Value::Simple(s(b)),
        Frame::Error(b) => Value::Error(s(b)),
        Frame::Integer(n) => Value::Integer(n),
        Frame::Bulk(b) => Value::Bulk(s(b)),
        Frame::NullBulk => Value::NullBulk,
        Frame::NullArray => Value::NullArray,
        Frame::Null => Value::Null,
        Frame::Boolean(b) => Value::Boolean(b),
        Frame::Double(d) => Value::Double(d),
        Frame::BigNumber(b) => Value::BigNumber(s(b)),
        Frame::BulkError(b) => Value::BulkError(s(b)),
        Frame::Verbatim { format, text } => Value::Verbatim {
            format: s(format),
            text: s(text),
        },
        Frame::Array(n) => Value::Array(list(n, pos)?),
        Frame::Set(n) => Value::Set(list(n, pos)?),
        Frame::Push(n) => Value::Push(list(n, pos)?),
        Frame::Map(n) => Value::Map(pairs(list(2 * n, pos)?)),
        Frame::Attribute(n) => {
            let attributes = pairs(list(2 * n, pos)?);
            // The value the attributes describe sits at the attribute's own depth.
            let value = Box::new(parse_at(bytes, pos, limits, depth)?);
            Value::Attributed { attributes, value }
        }
    })
}

fn pairs(flat: Vec<Value>) -> Vec<(Value, Value)> {
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(wire: &'static [u8]) -> Value {
        let limits = Limits::default();
        assert_eq!(complete_len(wire, &limits), Ok(wire.len()));
        let (v, n) = parse(&Bytes::from_static(wire), &limits).unwrap();
        assert_eq!(n, wire.len());
        v
    }

    fn bulk(b: &'static [u8]) -> Value {
        Value::Bulk(Bytes::from_static(b))
    }

    #[test]
    fn nested_aggregates_and_attributes() {
        assert_eq!(
            whole(b"*3\r\n$1\r\na\r\n$-1\r\n*2\r\n:1\r\n_\r\n"),
            Value::Array(vec![
                bulk(b"a"),
                Value::NullBulk,
                Value::Array(vec![Value::Integer(1), Value::Null])
            ])
        );
        assert_eq!(
            whole(b"%2\r\n+first\r\n:1\r\n+second\r\n#t\r\n"),
            Value::Map(vec![
                (Value::Simple("first".into()), Value::Integer(1)),
                (Value::Simple("second".into()), Value::Boolean(true)),
            ])
        );
        // The spec's example: an attribute before an array, and one inside it.
        let v = whole(
            b"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n|1\r\n+ttl\r\n:3\r\n:2039123\r\n:9543892\r\n",
        );
        let Value::Attributed { attributes, value } = v else {
            panic!("{v:?}")
        };
        assert_eq!(attributes.len(), 1);
        let Value::Array(items) = *value else {
            panic!()
        };
        assert_eq!(items[0].plain(), &Value::Integer(2039123));
        assert_eq!(items[1], Value::Integer(9543892));
        assert_eq!(whole(b"*0\r\n"), Value::Array(vec![]));
        assert_eq!(whole(b"*-1\r\n"), Value::NullArray);
        assert_eq!(
            whole(b">2\r\n+message\r\n$2\r\nhi\r\n"),
            Value::Push(vec![Value::Simple("message".into()), bulk(b"hi")])
        );
    }

    #[test]
    fn only_the_first_reply_is_measured() {
        let wire = b"*1\r\n+a\r\n:7\r\n";
        assert_eq!(complete_len(wire, &Limits::default()), Ok(8));
    }

    #[test]
    fn every_cut_of_a_reply_is_incomplete() {
        let wire = b"*2\r\n%1\r\n+k\r\n$3\r\nabc\r\n|1\r\n+a\r\n+b\r\n~1\r\n,1.5\r\n";
        let limits = Limits::default();
        assert_eq!(complete_len(wire, &limits), Ok(wire.len()));
        for cut in 0..wire.len() {
            assert_eq!(
                complete_len(&wire[..cut], &limits),
                Err(DecodeError::Incomplete),
                "cut {cut}"
            );
            let part = Bytes::copy_from_slice(&wire[..cut]);
            assert_eq!(parse(&part, &limits), Err(DecodeError::Incomplete));
        }
    }

    #[test]
    fn nesting_is_bounded_with_the_offset_of_the_frame_too_deep() {
        let limits = Limits {
            max_depth: 3,
            ..Limits::default()
        };
        let ok = b"*1\r\n*1\r\n*1\r\n:1\r\n";
        assert_eq!(complete_len(ok, &limits), Ok(ok.len()));
        let deep = b"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n";
        let too_deep = invalid(InvalidKind::TooDeep, 12);
        assert_eq!(complete_len(deep, &limits), Err(too_deep));
        assert_eq!(
            parse(&Bytes::from_static(deep), &limits).map(|_| ()),
            Err(too_deep)
        );
        // A million nested arrays: refused at the limit, no stack overflow.
        let abyss = b"*1\r\n".repeat(1_000_000);
        let limits = Limits::default();
        assert!(matches!(
            complete_len(&abyss, &limits),
            Err(DecodeError::Invalid(i)) if i.kind == InvalidKind::TooDeep
        ));
        assert!(parse(&Bytes::from(abyss), &limits).is_err());
    }

    #[test]
    fn an_error_inside_an_aggregate_is_shifted_to_its_offset() {
        let e = complete_len(b"*2\r\n:1\r\n:x\r\n", &Limits::default());
        assert_eq!(e, Err(invalid(InvalidKind::BadNumber, 9)));
    }

    #[test]
    fn encode_round_trips() {
        let wire: &[u8] = b"*4\r\n$-1\r\n*-1\r\n=6\r\ntxt:hi\r\n|1\r\n+a\r\n(123\r\n!3\r\nERR\r\n";
        let v = whole(Box::leak(wire.to_vec().into_boxed_slice()));
        let mut out = Vec::new();
        v.encode(&mut out);
        assert_eq!(out, wire);
    }
}
