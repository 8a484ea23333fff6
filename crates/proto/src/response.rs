//! Frames put together into one response per command, owning their bytes.
//!
//! [`complete_len`] walks frames without allocating to find where a response ends (or that it
//! has not arrived yet); [`parse`] then builds the owned [`Response`], slicing values out of
//! the shared buffer without copying them.

use bytes::Bytes;

use crate::command::Expect;
use crate::frame::{self, DecodeError, Frame, MetaStatus};

/// One item returned by `get` / `gets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    pub key: Bytes,
    pub flags: u32,
    pub cas: Option<u64>,
    pub data: Bytes,
}

/// The complete response to one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The items found by `get` / `gets`, in the server's order; misses are absent.
    Values(Vec<Value>),
    /// `stats` lines as (name, value).
    Stats(Vec<(String, String)>),
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Ok,
    Number(u64),
    Version(String),
    /// A meta reply: status, returned flags, and the value for `VA`.
    Meta {
        status: MetaStatus,
        flags: Bytes,
        data: Option<Bytes>,
    },
    /// `ERROR`: the server did not recognise the command.
    Error,
    ClientError(String),
    ServerError(String),
}

fn is_error(f: &Frame<'_>) -> bool {
    matches!(
        f,
        Frame::Error | Frame::ClientError(_) | Frame::ServerError(_)
    )
}

/// The number of bytes at the start of `buf` that make up one complete response of shape
/// `expect`, or `Incomplete` / `Invalid`.
///
/// A frame that does not belong in the response (an `END` answering a `set`, say) is invalid:
/// the connection has lost its place in the stream.
pub fn complete_len(expect: Expect, buf: &[u8]) -> Result<usize, DecodeError> {
    let mut pos = 0;
    loop {
        let (f, n) = frame::decode(&buf[pos..]).map_err(|e| e.shifted(pos))?;
        let start = pos;
        pos += n;
        let ok = match (expect, &f) {
            (_, f) if is_error(f) => return Ok(pos),
            (Expect::Values, Frame::Value { .. }) | (Expect::Stats, Frame::Stat { .. }) => continue,
            (Expect::Values | Expect::Stats, Frame::End) => return Ok(pos),
            (Expect::Single, f) => {
                !matches!(f, Frame::Value { .. } | Frame::Stat { .. } | Frame::End)
            }
            _ => false,
        };
        return if ok {
            Ok(pos)
        } else {
            Err(unexpected().shifted(start))
        };
    }
}

fn unexpected() -> DecodeError {
    DecodeError::Invalid(frame::Invalid {
        kind: frame::InvalidKind::UnknownReply,
        offset: 0,
    })
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Builds the response from exactly the bytes [`complete_len`] measured.
pub fn parse(expect: Expect, bytes: &Bytes) -> Result<Response, DecodeError> {
    let mut pos = 0;
    let mut values = Vec::new();
    let mut stats = Vec::new();
    loop {
        let (f, n) = frame::decode(&bytes[pos..]).map_err(|e| e.shifted(pos))?;
        pos += n;
        let single = match f {
            Frame::Value {
                key,
                flags,
                cas,
                data,
            } if expect == Expect::Values => {
                values.push(Value {
                    key: bytes.slice_ref(key),
                    flags,
                    cas,
                    data: bytes.slice_ref(data),
                });
                continue;
            }
            Frame::Stat { name, value } if expect == Expect::Stats => {
                stats.push((text(name), text(value)));
                continue;
            }
            Frame::End if expect == Expect::Values => Response::Values(values),
            Frame::End if expect == Expect::Stats => Response::Stats(stats),
            Frame::Stored => Response::Stored,
            Frame::NotStored => Response::NotStored,
            Frame::Exists => Response::Exists,
            Frame::NotFound => Response::NotFound,
            Frame::Deleted => Response::Deleted,
            Frame::Touched => Response::Touched,
            Frame::Ok => Response::Ok,
            Frame::Number(n) => Response::Number(n),
            Frame::Version(v) => Response::Version(text(v)),
            Frame::Error => Response::Error,
            Frame::ClientError(m) => Response::ClientError(text(m)),
            Frame::ServerError(m) => Response::ServerError(text(m)),
            Frame::Meta(m) => Response::Meta {
                status: m.status,
                flags: bytes.slice_ref(m.flags),
                data: m.data.map(|d| bytes.slice_ref(d)),
            },
            Frame::Value { .. } | Frame::Stat { .. } | Frame::End => return Err(unexpected()),
        };
        return Ok(single);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(expect: Expect, wire: &'static [u8]) -> Response {
        assert_eq!(complete_len(expect, wire), Ok(wire.len()));
        parse(expect, &Bytes::from_static(wire)).unwrap()
    }

    #[test]
    fn multi_get_collects_values_until_end() {
        let r = full(
            Expect::Values,
            b"VALUE a 1 1\r\nx\r\nVALUE c 2 2 7\r\nyz\r\nEND\r\n",
        );
        let Response::Values(v) = r else { panic!() };
        assert_eq!(v.len(), 2);
        assert_eq!(
            (&v[0].key[..], v[0].flags, v[0].cas, &v[0].data[..]),
            (&b"a"[..], 1, None, &b"x"[..])
        );
        assert_eq!(
            (&v[1].key[..], v[1].cas, &v[1].data[..]),
            (&b"c"[..], Some(7), &b"yz"[..])
        );
        assert_eq!(full(Expect::Values, b"END\r\n"), Response::Values(vec![]));
    }

    #[test]
    fn stats_and_errors() {
        assert_eq!(
            full(Expect::Stats, b"STAT pid 1\r\nSTAT version 1.6\r\nEND\r\n"),
            Response::Stats(vec![
                ("pid".into(), "1".into()),
                ("version".into(), "1.6".into())
            ])
        );
        assert_eq!(
            full(Expect::Values, b"SERVER_ERROR out of memory\r\n"),
            Response::ServerError("out of memory".into())
        );
        assert_eq!(full(Expect::Single, b"ERROR\r\n"), Response::Error);
    }

    #[test]
    fn partial_responses_are_incomplete() {
        let wire = b"VALUE a 0 1\r\nx\r\nVALUE b 0 1\r\ny\r\nEND\r\n";
        for cut in 0..wire.len() {
            assert_eq!(
                complete_len(Expect::Values, &wire[..cut]),
                Err(DecodeError::Incomplete),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn out_of_place_frames_are_invalid() {
        assert!(matches!(
            complete_len(Expect::Single, b"END\r\n"),
            Err(DecodeError::Invalid(_))
        ));
        assert!(matches!(
            complete_len(Expect::Values, b"STORED\r\n"),
            Err(DecodeError::Invalid(_))
        ));
        assert!(matches!(
            complete_len(Expect::Stats, b"VALUE a 0 1\r\nx\r\nEND\r\n"),
            Err(DecodeError::Invalid(_))
        ));
    }
}
