//! Redis Cluster's hash slots: a key's slot is the CRC16 (XMODEM) of its hash tag, or of the
//! whole key, modulo 16384 (the cluster specification's `HASH_SLOT`).

use crc::{Crc, CRC_16_XMODEM};

/// How many hash slots a Redis Cluster has.
pub const SLOTS: u16 = 16384;

/// CRC16/XMODEM (polynomial 0x1021, no reflection, init 0): the CRC the cluster spec names.
const CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_XMODEM);

/// The part of `key` that is hashed: the body of its first `{...}` when that body is not empty
/// (the first `{`, then the first `}` after it), else the whole key. `{user1000}.following`
/// hashes `user1000`; `foo{}{bar}` and `{}` hash the whole key (the first tag is empty);
/// `a{b}c{d}` hashes `b`; `{a` (no `}`) hashes the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}') {
            if close > 0 {
                return &rest[..close];
            }
        }
    }
    key
}

/// The hash slot (0 to 16383) that holds `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    CRC16.checksum(hash_tag(key)) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crc_is_the_specs() {
        // The cluster specification's check value for CRC16/XMODEM.
        assert_eq!(CRC16.checksum(b"123456789"), 0x31c3);
    }

    #[test]
    fn hash_tags_follow_the_first_non_empty_braces() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{}"), b"{}");
        assert_eq!(hash_tag(b"{a"), b"{a");
        assert_eq!(hash_tag(b"a}b{"), b"a}b{");
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert!(key_slot(b"\xff\x00{").lt(&SLOTS));
    }
}
