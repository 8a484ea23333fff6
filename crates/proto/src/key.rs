//! Keys that cannot inject a command.
//!
//! memcached's text protocol separates tokens with spaces and ends a command with `\r\n`, so a
//! key holding a space, a newline or any other control byte would let the rest of it be read as
//! a second command. Every key that reaches an encoder in this crate has passed [`Key::new`].

use std::fmt;

/// The longest key memcached accepts.
pub const MAX_KEY_LEN: usize = 250;

/// A validated key: 1 to 250 bytes, none of them whitespace or control bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(Box<[u8]>);

/// Why a key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// The key has no bytes.
    Empty,
    /// The key is longer than [`MAX_KEY_LEN`] bytes.
    TooLong { len: usize },
    /// A RESP key is longer than [`crate::resp::MAX_RESP_KEY_LEN`] bytes.
    RespTooLong { len: usize },
    /// The byte at `pos` is a space, a control byte (including `\r` and `\n`) or DEL.
    BadByte { pos: usize, byte: u8 },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Empty => write!(f, "key is empty"),
            KeyError::TooLong { len } => {
                write!(f, "key is {len} bytes long; memcached allows at most {MAX_KEY_LEN}")
            }
            KeyError::RespTooLong { len } => write!(
                f,
                "key is {len} bytes long; cachelab sends RESP keys of at most {} bytes",
                crate::resp::MAX_RESP_KEY_LEN
            ),
            KeyError::BadByte { pos, byte } => write!(
                f,
                "key byte {pos} is 0x{byte:02x}; keys may not contain whitespace or control characters"
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// Checks a key without copying it.
pub fn validate_key(bytes: &[u8]) -> Result<(), KeyError> {
    if bytes.is_empty() {
        return Err(KeyError::Empty);
    }
    if bytes.len() > MAX_KEY_LEN {
        return Err(KeyError::TooLong { len: bytes.len() });
    }
    match bytes.iter().position(|&b| b <= b' ' || b == 0x7f) {
        Some(pos) => Err(KeyError::BadByte {
            pos,
            byte: bytes[pos],
        }),
        None => Ok(()),
    }
}

impl Key {
    /// Validates and copies `bytes` into a key.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Key, KeyError> {
        let bytes = bytes.as_ref();
        validate_key(bytes)?;
        Ok(Key(bytes.into()))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a key has at least one byte. Present for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl TryFrom<&str> for Key {
    type Error = KeyError;
    fn try_from(s: &str) -> Result<Key, KeyError> {
        Key::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_printable_keys_up_to_250_bytes() {
        assert!(Key::new("a").is_ok());
        assert!(Key::new("cachelab:ab12:get:1000:0:17").is_ok());
        assert!(Key::new("é-utf8-is-fine").is_ok());
        assert_eq!(Key::new(vec![b'k'; 250]).unwrap().len(), 250);
    }

    #[test]
    fn refuses_what_could_inject_a_command() {
        assert_eq!(Key::new(""), Err(KeyError::Empty));
        assert_eq!(
            Key::new(vec![b'k'; 251]),
            Err(KeyError::TooLong { len: 251 })
        );
        assert_eq!(
            Key::new("a b"),
            Err(KeyError::BadByte { pos: 1, byte: b' ' })
        );
        assert_eq!(
            Key::new("x\r\nflush_all"),
            Err(KeyError::BadByte {
                pos: 1,
                byte: b'\r'
            })
        );
        assert_eq!(
            Key::new("x\n"),
            Err(KeyError::BadByte {
                pos: 1,
                byte: b'\n'
            })
        );
        assert_eq!(
            Key::new("\tx"),
            Err(KeyError::BadByte {
                pos: 0,
                byte: b'\t'
            })
        );
        assert_eq!(Key::new("x\0"), Err(KeyError::BadByte { pos: 1, byte: 0 }));
        assert_eq!(
            Key::new("x\x7f"),
            Err(KeyError::BadByte { pos: 1, byte: 0x7f })
        );
    }
}
