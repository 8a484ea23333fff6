//! Commands a client sends, and their wire encoding.
//!
//! Every key is a [`Key`] and every meta flag string a [`MetaFlags`], both validated at
//! construction, so nothing encoded here can smuggle a second command onto the wire.

use bytes::Bytes;
use std::fmt;

use crate::key::Key;

/// The fields of a storage command (`set`, `add`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    pub key: Key,
    /// The client flags stored with the item.
    pub flags: u32,
    /// Expiry: 0 for none, seconds up to 30 days, or a Unix time beyond that.
    pub exptime: u32,
    pub data: Bytes,
}

/// Validated meta-protocol flags, e.g. `"v f t"` or `"T60 F5"`.
///
/// Each token is a letter followed by printable, non-space bytes. The quiet flag `q` is refused:
/// a quiet command may send no reply at all, which breaks the one-reply-per-command pipelining
/// this client relies on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetaFlags(String);

/// Why a meta flag string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaFlagsError(pub String);

impl fmt::Display for MetaFlagsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MetaFlagsError {}

impl MetaFlags {
    pub fn new(flags: &str) -> Result<MetaFlags, MetaFlagsError> {
        let mut tokens = Vec::new();
        for tok in flags.split(' ').filter(|t| !t.is_empty()) {
            let b = tok.as_bytes();
            if !b[0].is_ascii_alphabetic() {
                return Err(MetaFlagsError(format!(
                    "meta flag {tok:?} must start with a letter"
                )));
            }
            if b[0] == b'q' {
                return Err(MetaFlagsError("the quiet flag q is not supported".into()));
            }
            if let Some(&bad) = b.iter().find(|&&c| !(0x21..0x7f).contains(&c)) {
                return Err(MetaFlagsError(format!(
                    "meta flag {tok:?} contains byte 0x{bad:02x}; only printable characters are allowed"
                )));
            }
            tokens.push(tok);
        }
        Ok(MetaFlags(tokens.join(" ")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A command to send. Each gets exactly one response (see [`Command::expect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `get k1 k2 …`: one key is a get, several a multi-get.
    Get(Vec<Key>),
    /// `gets k1 k2 …`: like get, also returning CAS values.
    Gets(Vec<Key>),
    Set(Store),
    Add(Store),
    Delete(Key),
    Touch {
        key: Key,
        exptime: u32,
    },
    Incr {
        key: Key,
        delta: u64,
    },
    Decr {
        key: Key,
        delta: u64,
    },
    /// `stats` or `stats <group>` (e.g. `settings`, `slabs`).
    Stats(Option<Key>),
    Version,
    /// `mg <key> <flags>`.
    MetaGet {
        key: Key,
        flags: MetaFlags,
    },
    /// `ms <key> <datalen> <flags>` and the data.
    MetaSet {
        key: Key,
        data: Bytes,
        flags: MetaFlags,
    },
    /// `md <key> <flags>`.
    MetaDelete {
        key: Key,
        flags: MetaFlags,
    },
    /// `mn`: the meta no-op, answered with `MN`.
    MetaNoop,
}

/// The shape of the response a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `VALUE` frames closed by `END`.
    Values,
    /// `STAT` frames closed by `END`.
    Stats,
    /// Exactly one frame.
    Single,
}

impl Command {
    pub fn expect(&self) -> Expect {
        match self {
            Command::Get(_) | Command::Gets(_) => Expect::Values,
            Command::Stats(_) => Expect::Stats,
            _ => Expect::Single,
        }
    }

    /// Appends the wire form of the command to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let mut keys = |verb: &[u8], keys: &[Key]| {
            out.extend_from_slice(verb);
            for k in keys {
                out.push(b' ');
                out.extend_from_slice(k.as_bytes());
            }
            out.extend_from_slice(b"\r\n");
        };
        match self {
            Command::Get(ks) => keys(b"get", ks),
            Command::Gets(ks) => keys(b"gets", ks),
            Command::Set(s) | Command::Add(s) => {
                let verb: &[u8] = if matches!(self, Command::Set(_)) {
                    b"set "
                } else {
                    b"add "
                };
                out.extend_from_slice(verb);
                out.extend_from_slice(s.key.as_bytes());
                let _ = write!(out, " {} {} {}\r\n", s.flags, s.exptime, s.data.len());
                out.extend_from_slice(&s.data);
                out.extend_from_slice(b"\r\n");
            }
            Command::Delete(k) => keys(b"delete", std::slice::from_ref(k)),
            Command::Touch { key, exptime } => {
                out.extend_from_slice(b"touch ");
                out.extend_from_slice(key.as_bytes());
                let _ = write!(out, " {exptime}\r\n");
            }
            Command::Incr { key, delta } | Command::Decr { key, delta } => {
                let verb: &[u8] = if matches!(self, Command::Incr { .. }) {
                    b"incr "
                } else {
                    b"decr "
                };
                out.extend_from_slice(verb);
                out.extend_from_slice(key.as_bytes());
                let _ = write!(out, " {delta}\r\n");
            }
            Command::Stats(None) => out.extend_from_slice(b"stats\r\n"),
            Command::Stats(Some(group)) => keys(b"stats", std::slice::from_ref(group)),
            Command::Version => out.extend_from_slice(b"version\r\n"),
            Command::MetaGet { key, flags } => meta(out, b"mg", key, None, flags),
            Command::MetaSet { key, data, flags } => meta(out, b"ms", key, Some(data), flags),
            Command::MetaDelete { key, flags } => meta(out, b"md", key, None, flags),
            Command::MetaNoop => out.extend_from_slice(b"mn\r\n"),
        }
    }
}

fn meta(out: &mut Vec<u8>, verb: &[u8], key: &Key, data: Option<&Bytes>, flags: &MetaFlags) {
    use std::io::Write;
    out.extend_from_slice(verb);
    out.push(b' ');
    out.extend_from_slice(key.as_bytes());
    if let Some(d) = data {
        let _ = write!(out, " {}", d.len());
    }
    if !flags.0.is_empty() {
        out.push(b' ');
        out.extend_from_slice(flags.0.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if let Some(d) = data {
        out.extend_from_slice(d);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(c: Command) -> String {
        let mut out = Vec::new();
        c.encode(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn k(s: &str) -> Key {
        Key::new(s).unwrap()
    }

    #[test]
    fn text_commands_on_the_wire() {
        assert_eq!(wire(Command::Get(vec![k("a")])), "get a\r\n");
        assert_eq!(
            wire(Command::Get(vec![k("a"), k("b"), k("c")])),
            "get a b c\r\n"
        );
        assert_eq!(wire(Command::Gets(vec![k("a")])), "gets a\r\n");
        let store = Store {
            key: k("a"),
            flags: 3,
            exptime: 60,
            data: Bytes::from_static(b"x\r\ny"),
        };
        assert_eq!(
            wire(Command::Set(store.clone())),
            "set a 3 60 4\r\nx\r\ny\r\n"
        );
        assert_eq!(wire(Command::Add(store)), "add a 3 60 4\r\nx\r\ny\r\n");
        assert_eq!(wire(Command::Delete(k("a"))), "delete a\r\n");
        assert_eq!(
            wire(Command::Touch {
                key: k("a"),
                exptime: 10
            }),
            "touch a 10\r\n"
        );
        assert_eq!(
            wire(Command::Incr {
                key: k("n"),
                delta: 5
            }),
            "incr n 5\r\n"
        );
        assert_eq!(
            wire(Command::Decr {
                key: k("n"),
                delta: 1
            }),
            "decr n 1\r\n"
        );
        assert_eq!(wire(Command::Stats(None)), "stats\r\n");
        assert_eq!(
            wire(Command::Stats(Some(k("settings")))),
            "stats settings\r\n"
        );
        assert_eq!(wire(Command::Version), "version\r\n");
    }

    #[test]
    fn meta_commands_on_the_wire() {
        let f = |s: &str| MetaFlags::new(s).unwrap();
        assert_eq!(
            wire(Command::MetaGet {
                key: k("a"),
                flags: f("v  f t")
            }),
            "mg a v f t\r\n"
        );
        assert_eq!(
            wire(Command::MetaGet {
                key: k("a"),
                flags: f("")
            }),
            "mg a\r\n"
        );
        assert_eq!(
            wire(Command::MetaSet {
                key: k("a"),
                data: Bytes::from_static(b"hi"),
                flags: f("T60 F5")
            }),
            "ms a 2 T60 F5\r\nhi\r\n"
        );
        assert_eq!(
            wire(Command::MetaDelete {
                key: k("a"),
                flags: f("")
            }),
            "md a\r\n"
        );
        assert_eq!(wire(Command::MetaNoop), "mn\r\n");
    }

    #[test]
    fn meta_flags_cannot_inject() {
        assert!(MetaFlags::new("v\r\nflush_all").is_err());
        assert!(MetaFlags::new("q").is_err());
        assert!(MetaFlags::new("1v").is_err());
        assert!(MetaFlags::new("v\tf").is_err());
    }
}
