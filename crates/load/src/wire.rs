//! The text protocol on the hot path: requests are encoded straight into a connection's write
//! buffer, and replies are decoded in place from its read buffer ([`cachelab_proto::frame`]),
//! so nothing is allocated per request.

use cachelab_proto::frame::{self, DecodeError, Frame};

use crate::fault::Fault;

/// Appends the key `<prefix>:<index>`.
pub(crate) fn put_key(out: &mut Vec<u8>, prefix: &[u8], index: u64) {
    out.extend_from_slice(prefix);
    out.push(b':');
    put_u64(out, index);
}

/// Appends `set <key> 0 <ttl> <len>\r\n`; the value and its `\r\n` are the caller's.
pub(crate) fn put_set_header(out: &mut Vec<u8>, prefix: &[u8], index: u64, ttl: u32, len: usize) {
    out.extend_from_slice(b"set ");
    put_key(out, prefix, index);
    out.extend_from_slice(b" 0 ");
    put_u64(out, u64::from(ttl));
    out.push(b' ');
    put_u64(out, len as u64);
    out.extend_from_slice(b"\r\n");
}

/// Appends the decimal digits of `v`.
fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// A reply; for a get, the number of values it carried.
    Done { hits: u32 },
    /// An error reply; the connection is still usable.
    Failed(Fault),
}

/// Decodes one whole reply from the start of `buf`: `None` until all of it has arrived.
pub(crate) fn parse_reply(is_get: bool, buf: &[u8]) -> Result<Option<(usize, Reply)>, DecodeError> {
    let mut pos = 0;
    let mut hits = 0u32;
    loop {
        let (f, n) = match frame::decode(&buf[pos..]) {
            Ok(x) => x,
            Err(DecodeError::Incomplete) => return Ok(None),
            Err(e) => return Err(e),
        };
        pos += n;
        let reply = match f {
            Frame::Value { .. } if is_get => {
                hits += 1;
                continue;
            }
            Frame::End if is_get => Reply::Done { hits },
            Frame::ServerError(_) => Reply::Failed(Fault::ServerError),
            Frame::ClientError(_) => Reply::Failed(Fault::ClientError),
            Frame::Error => Reply::Failed(Fault::UnknownCommand),
            Frame::Stored | Frame::NotStored | Frame::Deleted | Frame::NotFound | Frame::Exists
                if !is_get =>
            {
                Reply::Done { hits: 0 }
            }
            _ => {
                return Err(DecodeError::Invalid(frame::Invalid {
                    kind: frame::InvalidKind::UnknownReply,
                    offset: pos - n,
                }))
            }
        };
        return Ok(Some((pos, reply)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits() {
        for v in [0u64, 7, 10, 12345, u64::MAX] {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
    }

    #[test]
    fn requests_are_encoded_in_place() {
        let mut out = b"get ".to_vec();
        put_key(&mut out, b"run", 42);
        out.extend_from_slice(b"\r\n");
        put_set_header(&mut out, b"run", 7, 60, 1000);
        assert_eq!(out, b"get run:42\r\nset run:7 0 60 1000\r\n");
    }

    #[test]
    fn replies_are_taken_whole() {
        let get = b"VALUE a 0 1\r\nx\r\nVALUE b 0 2\r\nyz\r\nEND\r\nSTORED\r\n";
        assert_eq!(
            parse_reply(true, get).unwrap(),
            Some((38, Reply::Done { hits: 2 }))
        );
        for cut in 0..38 {
            assert_eq!(parse_reply(true, &get[..cut]).unwrap(), None, "cut {cut}");
        }
        assert_eq!(
            parse_reply(false, &get[38..]).unwrap(),
            Some((8, Reply::Done { hits: 0 }))
        );
        assert_eq!(
            parse_reply(true, b"END\r\n").unwrap(),
            Some((5, Reply::Done { hits: 0 }))
        );
        assert_eq!(
            parse_reply(false, b"SERVER_ERROR out of memory\r\n").unwrap(),
            Some((28, Reply::Failed(Fault::ServerError)))
        );
        assert!(parse_reply(false, b"END\r\n").is_err());
        assert!(parse_reply(true, b"STORED\r\n").is_err());
        assert!(parse_reply(true, b"HELLO garbage\r\n").is_err());
    }
}
