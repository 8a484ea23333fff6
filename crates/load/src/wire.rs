//! The protocols on the hot path: requests are encoded straight into a connection's write
//! buffer, and replies are decoded in place from its read buffer, so nothing is allocated per
//! request. memcached's text protocol ([`cachelab_proto::frame`]) or RESP, Redis and Valkey's
//! ([`cachelab_proto::resp::frame`]): a [`Wire`] picks one, per connection.
//!
//! In RESP a get is `GET key`, a multi-get `MGET key…`, a set `SET key value [EX ttl]`, a
//! delete `DEL key`; every request is an array of bulk strings.

use cachelab_proto::frame::{self, DecodeError, Frame};
use cachelab_proto::resp::frame::{self as resp, Frame as RespFrame};
use cachelab_proto::resp::Limits;

use crate::fault::Fault;
use crate::series::{GET, MULTIGET};

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    Memcached,
    Resp,
}

/// Appends the key `<prefix>:<index>`.
pub(crate) fn put_key(out: &mut Vec<u8>, prefix: &[u8], index: u64) {
    out.extend_from_slice(prefix);
    out.push(b':');
    put_u64(out, index);
}

/// Decimal digits of `v`.
fn digits(v: u64) -> usize {
    let mut n = 1;
    let mut v = v / 10;
    while v > 0 {
        n += 1;
        v /= 10;
    }
    n
}

/// Appends the key `<prefix>:<index>` as a RESP bulk string (`$len\r\n<key>\r\n`).
fn put_bulk_key(out: &mut Vec<u8>, prefix: &[u8], index: u64) {
    out.push(b'$');
    put_u64(out, (prefix.len() + 1 + digits(index)) as u64);
    out.extend_from_slice(b"\r\n");
    put_key(out, prefix, index);
    out.extend_from_slice(b"\r\n");
}

impl Wire {
    /// A whole single-key get.
    #[inline]
    pub(crate) fn put_get(self, out: &mut Vec<u8>, prefix: &[u8], index: u64) {
        match self {
            Wire::Memcached => {
                out.extend_from_slice(b"get ");
                put_key(out, prefix, index);
                out.extend_from_slice(b"\r\n");
            }
            Wire::Resp => {
                out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
                put_bulk_key(out, prefix, index);
            }
        }
    }

    /// A whole delete.
    #[inline]
    pub(crate) fn put_delete(self, out: &mut Vec<u8>, prefix: &[u8], index: u64) {
        match self {
            Wire::Memcached => {
                out.extend_from_slice(b"delete ");
                put_key(out, prefix, index);
                out.extend_from_slice(b"\r\n");
            }
            Wire::Resp => {
                out.extend_from_slice(b"*2\r\n$3\r\nDEL\r\n");
                put_bulk_key(out, prefix, index);
            }
        }
    }

    /// The start of a multi-get of `keys` keys; each key follows ([`Wire::put_multiget_key`]),
    /// then [`Wire::put_multiget_end`].
    #[inline]
    pub(crate) fn put_multiget_start(self, out: &mut Vec<u8>, keys: usize) {
        match self {
            Wire::Memcached => out.extend_from_slice(b"get"),
            Wire::Resp => {
                out.push(b'*');
                put_u64(out, keys as u64 + 1);
                out.extend_from_slice(b"\r\n$4\r\nMGET\r\n");
            }
        }
    }

    #[inline]
    pub(crate) fn put_multiget_key(self, out: &mut Vec<u8>, prefix: &[u8], index: u64) {
        match self {
            Wire::Memcached => {
                out.push(b' ');
                put_key(out, prefix, index);
            }
            Wire::Resp => put_bulk_key(out, prefix, index),
        }
    }

    #[inline]
    pub(crate) fn put_multiget_end(self, out: &mut Vec<u8>) {
        if self == Wire::Memcached {
            out.extend_from_slice(b"\r\n");
        }
    }

    /// A set's bytes before its value of `len` bytes; the value follows, then
    /// [`Wire::put_set_end`]. memcached: `set <key> 0 <ttl> <len>\r\n`; RESP: `SET`, the key
    /// and the value's length (with `EX ttl` after the value when `ttl` is above 0).
    #[inline]
    pub(crate) fn put_set_header(
        self,
        out: &mut Vec<u8>,
        prefix: &[u8],
        index: u64,
        ttl: u32,
        len: usize,
    ) {
        match self {
            Wire::Memcached => {
                out.extend_from_slice(b"set ");
                put_key(out, prefix, index);
                out.extend_from_slice(b" 0 ");
                put_u64(out, u64::from(ttl));
                out.push(b' ');
                put_u64(out, len as u64);
                out.extend_from_slice(b"\r\n");
            }
            Wire::Resp => {
                out.extend_from_slice(if ttl > 0 { b"*5" } else { b"*3" });
                out.extend_from_slice(b"\r\n$3\r\nSET\r\n");
                put_bulk_key(out, prefix, index);
                out.push(b'$');
                put_u64(out, len as u64);
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// What follows a set's value.
    #[inline]
    pub(crate) fn put_set_end(self, out: &mut Vec<u8>, ttl: u32) {
        out.extend_from_slice(b"\r\n");
        if self == Wire::Resp && ttl > 0 {
            out.extend_from_slice(b"$2\r\nEX\r\n$");
            put_u64(out, digits(u64::from(ttl)) as u64);
            out.extend_from_slice(b"\r\n");
            put_u64(out, u64::from(ttl));
            out.extend_from_slice(b"\r\n");
        }
    }

    /// Decodes the whole reply to a request of operation `op` (see [`crate::series`]) from
    /// the start of `buf`: `None` until all of it has arrived.
    #[inline]
    pub(crate) fn parse_reply(
        self,
        op: usize,
        buf: &[u8],
    ) -> Result<Option<(usize, Reply)>, DecodeError> {
        match self {
            Wire::Memcached => parse_reply(op == GET || op == MULTIGET, buf),
            Wire::Resp => parse_resp_reply(op, buf),
        }
    }
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
    /// A Redis Cluster's `-MOVED slot host:port` (`ask` false) or `-ASK slot host:port`:
    /// `to` is where `host:port` sits in the buffer parsed.
    Redirect {
        ask: bool,
        slot: u16,
        to: (usize, usize),
    },
}

/// The redirection in RESP error `e` (a slice of `buf`), if it is one.
fn redirect(e: &[u8], buf: &[u8]) -> Option<Reply> {
    let (ask, rest) = if let Some(r) = e.strip_prefix(b"MOVED ") {
        (false, r)
    } else {
        (true, e.strip_prefix(b"ASK ")?)
    };
    let space = rest.iter().position(|&b| b == b' ')?;
    let slot: u16 = std::str::from_utf8(&rest[..space]).ok()?.parse().ok()?;
    let addr = &rest[space + 1..];
    let start = addr.as_ptr() as usize - buf.as_ptr() as usize;
    Some(Reply::Redirect {
        ask,
        slot,
        to: (start, start + addr.len()),
    })
}

/// Decodes one whole memcached reply from the start of `buf`: `None` until all of it has
/// arrived.
fn parse_reply(is_get: bool, buf: &[u8]) -> Result<Option<(usize, Reply)>, DecodeError> {
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

/// RESP's decoder limits: Redis's own (a value is at most what the run sets).
const LIMITS: Limits = Limits {
    max_bulk: 512 << 20,
    max_elements: 1 << 26,
    max_depth: 32,
};

/// A RESP reply that is not one a request of this kind gets.
fn unexpected(offset: usize) -> DecodeError {
    DecodeError::Invalid(frame::Invalid {
        kind: frame::InvalidKind::UnknownReply,
        offset,
    })
}

/// [`parse_reply`] for RESP: a get's bulk string (a hit) or null (a miss), a multi-get's
/// array of them, a set's `+OK`, a delete's integer. An error reply (`-ERR …`, `-OOM …`,
/// `-NOAUTH …`) is a failed request on a connection that is still usable, as memcached's
/// `SERVER_ERROR`.
fn parse_resp_reply(op: usize, buf: &[u8]) -> Result<Option<(usize, Reply)>, DecodeError> {
    let (f, n) = match resp::decode(buf, &LIMITS) {
        Ok(x) => x,
        Err(DecodeError::Incomplete) => return Ok(None),
        Err(e) => return Err(e),
    };
    let reply = match (f, op) {
        (RespFrame::Error(e), _) => redirect(e, buf).unwrap_or(Reply::Failed(Fault::ServerError)),
        (RespFrame::BulkError(_), _) => Reply::Failed(Fault::ServerError),
        (RespFrame::Bulk(_), GET) => Reply::Done { hits: 1 },
        (RespFrame::NullBulk | RespFrame::Null, GET) => Reply::Done { hits: 0 },
        (RespFrame::Array(count), MULTIGET) => {
            let mut pos = n;
            let mut hits = 0u32;
            for _ in 0..count {
                let (f, m) = match resp::decode(&buf[pos..], &LIMITS) {
                    Ok(x) => x,
                    Err(DecodeError::Incomplete) => return Ok(None),
                    Err(e) => return Err(e),
                };
                match f {
                    RespFrame::Bulk(_) => hits += 1,
                    RespFrame::NullBulk | RespFrame::Null => {}
                    _ => return Err(unexpected(pos)),
                }
                pos += m;
            }
            return Ok(Some((pos, Reply::Done { hits })));
        }
        (RespFrame::Simple(_) | RespFrame::Integer(_), _) if op != GET && op != MULTIGET => {
            Reply::Done { hits: 0 }
        }
        _ => return Err(unexpected(0)),
    };
    Ok(Some((n, reply)))
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
        Wire::Memcached.put_set_header(&mut out, b"run", 7, 60, 1000);
        assert_eq!(out, b"get run:42\r\nset run:7 0 60 1000\r\n");
    }

    /// Every RESP request is a valid command for the proto crate's encoder: the same bytes.
    #[test]
    fn resp_requests_are_the_commands_encoded() {
        use cachelab_proto::resp::encode_command;
        let enc = |args: &[&[u8]]| {
            let mut out = Vec::new();
            encode_command(args, &mut out);
            out
        };
        let w = Wire::Resp;
        for index in [0u64, 9, 10, 12345, u64::MAX] {
            let key = format!("run:{index}").into_bytes();
            let mut out = Vec::new();
            w.put_get(&mut out, b"run", index);
            assert_eq!(out, enc(&[b"GET", &key]));
            out.clear();
            w.put_delete(&mut out, b"run", index);
            assert_eq!(out, enc(&[b"DEL", &key]));
            for ttl in [0u32, 5, 86_400] {
                out.clear();
                w.put_set_header(&mut out, b"run", index, ttl, 3);
                out.extend_from_slice(b"abc");
                w.put_set_end(&mut out, ttl);
                let want = if ttl == 0 {
                    enc(&[b"SET", &key, b"abc"])
                } else {
                    enc(&[b"SET", &key, b"abc", b"EX", ttl.to_string().as_bytes()])
                };
                assert_eq!(out, want, "ttl {ttl}");
            }
        }
        let mut out = Vec::new();
        w.put_multiget_start(&mut out, 2);
        w.put_multiget_key(&mut out, b"r", 1);
        w.put_multiget_key(&mut out, b"r", 22);
        w.put_multiget_end(&mut out);
        assert_eq!(out, enc(&[b"MGET", b"r:1", b"r:22"]));
    }

    #[test]
    fn resp_replies_are_taken_whole() {
        use crate::series::{DELETE, SET};
        let w = Wire::Resp;
        assert_eq!(
            w.parse_reply(GET, b"$2\r\nab\r\n").unwrap(),
            Some((8, Reply::Done { hits: 1 }))
        );
        assert_eq!(
            w.parse_reply(GET, b"$-1\r\n").unwrap(),
            Some((5, Reply::Done { hits: 0 }))
        );
        let mget = b"*3\r\n$1\r\nx\r\n$-1\r\n$2\r\nyz\r\n+OK\r\n";
        assert_eq!(
            w.parse_reply(MULTIGET, mget).unwrap(),
            Some((24, Reply::Done { hits: 2 }))
        );
        for cut in 0..24 {
            assert_eq!(
                w.parse_reply(MULTIGET, &mget[..cut]).unwrap(),
                None,
                "cut {cut}"
            );
        }
        assert_eq!(
            w.parse_reply(SET, b"+OK\r\n").unwrap(),
            Some((5, Reply::Done { hits: 0 }))
        );
        assert_eq!(
            w.parse_reply(DELETE, b":1\r\n").unwrap(),
            Some((4, Reply::Done { hits: 0 }))
        );
        let oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";
        assert_eq!(
            w.parse_reply(SET, oom).unwrap(),
            Some((oom.len(), Reply::Failed(Fault::ServerError)))
        );
        assert!(w.parse_reply(GET, b"+OK\r\n").is_err());
        assert!(w.parse_reply(SET, b"$1\r\nx\r\n").is_err());
        assert!(w.parse_reply(MULTIGET, b"*1\r\n:1\r\n").is_err());
        assert!(w.parse_reply(GET, b"VALUE a 0 1\r\n").is_err());
    }

    #[test]
    fn a_cluster_s_redirections_name_their_slot_and_node() {
        let w = Wire::Resp;
        let moved = b"-MOVED 3999 127.0.0.22:7001\r\n";
        let (n, r) = w.parse_reply(GET, moved).unwrap().unwrap();
        assert_eq!(n, moved.len());
        let Reply::Redirect { ask, slot, to } = r else {
            panic!("{r:?}")
        };
        assert_eq!(
            (ask, slot, &moved[to.0..to.1]),
            (false, 3999, &b"127.0.0.22:7001"[..])
        );
        let (_, r) = w
            .parse_reply(MULTIGET, b"-ASK 1 :7002\r\n")
            .unwrap()
            .unwrap();
        assert!(
            matches!(
                r,
                Reply::Redirect {
                    ask: true,
                    slot: 1,
                    to: (7, 12)
                }
            ),
            "{r:?}"
        );
        // Not a redirection: a slot past the last, or another error.
        for e in [
            &b"-MOVED 99999 a:1\r\n"[..],
            b"-MOVEDX 1 a:1\r\n",
            b"-ERR MOVED\r\n",
        ] {
            let (_, r) = w.parse_reply(crate::series::SET, e).unwrap().unwrap();
            assert_eq!(r, Reply::Failed(Fault::ServerError), "{e:?}");
        }
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
