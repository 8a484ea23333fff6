//! Commands as RESP sends them: an array of bulk strings, and the keys that go in them.
//!
//! A bulk string carries its length, so a RESP key is binary safe: spaces, `\r`, `\n` and NUL
//! are data, not separators, and cannot start a second command. [`RespKey`] only bounds the
//! length (1 to [`MAX_RESP_KEY_LEN`] bytes).

use std::fmt;

use bytes::Bytes;

use crate::key::{Key, KeyError};

/// The longest key cachelab sends to a RESP server: 64 KiB. Redis itself takes up to 512 MiB
/// (`proto-max-bulk-len`), but a key that long is a mistake in a cache benchmark, and every
/// server-side structure that holds keys pays for their length.
pub const MAX_RESP_KEY_LEN: usize = 64 * 1024;

/// A validated RESP key: 1 to [`MAX_RESP_KEY_LEN`] bytes, any bytes at all.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RespKey(Bytes);

/// Checks a RESP key without copying it: not empty (Redis takes an empty key, but every key
/// cachelab writes has its run's prefix, so an empty one is a bug), at most
/// [`MAX_RESP_KEY_LEN`] bytes.
pub fn validate_resp_key(bytes: &[u8]) -> Result<(), KeyError> {
    match bytes.len() {
        0 => Err(KeyError::Empty),
        len if len > MAX_RESP_KEY_LEN => Err(KeyError::RespTooLong { len }),
        _ => Ok(()),
    }
}

impl RespKey {
    /// Validates `bytes` and keeps them (no copy for `Bytes`, one for anything else).
    pub fn new(bytes: impl Into<Bytes>) -> Result<RespKey, KeyError> {
        let bytes = bytes.into();
        validate_resp_key(&bytes)?;
        Ok(RespKey(bytes))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a key has at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Every memcached key is a valid RESP key (at most 250 bytes).
impl From<&Key> for RespKey {
    fn from(k: &Key) -> RespKey {
        RespKey(Bytes::copy_from_slice(k.as_bytes()))
    }
}

impl fmt::Debug for RespKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RespKey({})", printable(&self.0, 80))
    }
}

/// At most `max` bytes, quoted, with anything unprintable escaped.
fn printable(b: &[u8], max: usize) -> String {
    let mut out = String::from("\"");
    out.extend(
        b.iter()
            .take(max)
            .flat_map(|&c| std::ascii::escape_default(c))
            .map(char::from),
    );
    if b.len() > max {
        out.push_str("\"…");
    } else {
        out.push('"');
    }
    out
}

/// Appends `*<n>` and each argument as a bulk string: the only form a RESP server reads.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A], out: &mut Vec<u8>) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// One command: its name and arguments. Arguments added with [`Command::secret`] (a password)
/// are sent as they are but shown as `<secret>` by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    args: Vec<Bytes>,
    secret: Vec<bool>,
}

impl Command {
    /// A command named `name` (`GET`, `SET`, `CONFIG`), no arguments yet.
    pub fn new(name: &'static str) -> Command {
        Command {
            args: vec![Bytes::from_static(name.as_bytes())],
            secret: vec![false],
        }
    }

    /// Adds an argument (a value, an option word, a number as text).
    pub fn arg(mut self, a: impl Into<Bytes>) -> Command {
        self.args.push(a.into());
        self.secret.push(false);
        self
    }

    /// Adds a key.
    pub fn key(self, k: &RespKey) -> Command {
        self.arg(k.0.clone())
    }

    /// Adds a number, as decimal text.
    pub fn int(self, n: impl fmt::Display) -> Command {
        self.arg(n.to_string())
    }

    /// Adds an argument that must never be shown (a password).
    pub fn secret(mut self, a: impl Into<Bytes>) -> Command {
        self.args.push(a.into());
        self.secret.push(true);
        self
    }

    /// The command's name, as given to [`Command::new`].
    pub fn name(&self) -> &str {
        std::str::from_utf8(&self.args[0]).unwrap_or("?")
    }

    /// Every argument, the name first.
    pub fn args(&self) -> &[Bytes] {
        &self.args
    }

    /// Appends the wire form to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_command(&self.args, out);
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_tuple("Command");
        for (a, &secret) in self.args.iter().zip(&self.secret) {
            if secret {
                list.field(&format_args!("<secret>"));
            } else {
                list.field(&format_args!("{}", printable(a, 64)));
            }
        }
        list.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_binary_safe_and_bounded() {
        for ok in [&b"a"[..], b"with space", b"x\r\nFLUSHALL\r\n", b"\0\xff"] {
            let k = RespKey::new(Bytes::copy_from_slice(ok)).unwrap();
            assert_eq!(k.as_bytes(), ok);
        }
        assert_eq!(
            RespKey::new(vec![b'k'; MAX_RESP_KEY_LEN]).unwrap().len(),
            MAX_RESP_KEY_LEN
        );
        assert_eq!(RespKey::new(Vec::new()), Err(KeyError::Empty));
        assert_eq!(
            RespKey::new(vec![b'k'; MAX_RESP_KEY_LEN + 1]),
            Err(KeyError::RespTooLong {
                len: MAX_RESP_KEY_LEN + 1
            })
        );
        let mc = Key::new("mc:key").unwrap();
        assert_eq!(RespKey::from(&mc).as_bytes(), b"mc:key");
    }

    #[test]
    fn a_key_that_looks_like_a_command_stays_one_argument() {
        let k = RespKey::new(&b"a\r\n*1\r\n$8\r\nFLUSHALL\r\n"[..]).unwrap();
        let mut out = Vec::new();
        Command::new("GET").key(&k).encode(&mut out);
        assert_eq!(
            out,
            b"*2\r\n$3\r\nGET\r\n$21\r\na\r\n*1\r\n$8\r\nFLUSHALL\r\n\r\n"
        );
    }

    #[test]
    fn encodes_an_array_of_bulk_strings() {
        let mut out = Vec::new();
        let k = RespKey::new("k").unwrap();
        Command::new("SET")
            .key(&k)
            .arg("")
            .arg("PX")
            .int(1500)
            .encode(&mut out);
        assert_eq!(
            out,
            b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$2\r\nPX\r\n$4\r\n1500\r\n"
        );
    }

    #[test]
    fn debug_never_shows_a_secret() {
        let c = Command::new("AUTH").arg("alice").secret("hunter2");
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(shown, r#"Command("AUTH", "alice", <secret>)"#);
        let mut out = Vec::new();
        c.encode(&mut out);
        assert!(out.ends_with(b"$7\r\nhunter2\r\n"));
    }
}
