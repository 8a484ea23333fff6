//! Keyed BLAKE2b (RFC 7693) with an 8-byte digest, from the `blake2` crate: the pseudonym of a
//! key, the same as Python's `hashlib.blake2b(key_bytes, key=secret, digest_size=8)`.

use blake2::digest::consts::U8;
use blake2::digest::{Digest, KeyInit, Mac};
use blake2::{Blake2b, Blake2bMac};

/// BLAKE2b keyed with a secret of at most 64 bytes, with an 8-byte digest.
#[derive(Clone)]
pub struct Keyed {
    /// The state after the key block, cloned for every message; `None` for an empty secret,
    /// which hashlib treats as no key at all (no key block), unlike a MAC with an empty key.
    mac: Option<Blake2bMac<U8>>,
}

impl Keyed {
    /// # Panics
    /// When the secret is longer than 64 bytes.
    pub fn new(secret: &[u8]) -> Keyed {
        assert!(secret.len() <= 64, "a BLAKE2b key is at most 64 bytes");
        let mac = (!secret.is_empty()).then(|| {
            <Blake2bMac<U8> as KeyInit>::new_from_slice(secret).expect("at most 64 bytes")
        });
        Keyed { mac }
    }

    /// The 8-byte digest of `msg`.
    pub fn digest(&self, msg: &[u8]) -> [u8; 8] {
        match &self.mac {
            Some(mac) => mac.clone().chain_update(msg).finalize().into_bytes().into(),
            None => Blake2b::<U8>::digest(msg).into(),
        }
    }

    /// The digest read as a big-endian number (Python's `int.from_bytes(digest, "big")`).
    pub fn word(&self, msg: &[u8]) -> u64 {
        u64::from_be_bytes(self.digest(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blake2::digest::consts::U64;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn rfc7693_abc() {
        // RFC 7693, Appendix A: BLAKE2b-512("abc").
        let d = Blake2b::<U64>::digest(b"abc");
        assert_eq!(
            hex(&d),
            "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1\
             7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923"
        );
    }

    #[test]
    fn keyed_vectors_from_the_blake2_reference() {
        // blake2b-kat.txt (the BLAKE2 reference's keyed known answers): key 00..3f,
        // messages of 0 and 1 byte (00), 64-byte digests.
        let key: Vec<u8> = (0u8..64).collect();
        let k = <Blake2bMac<U64> as KeyInit>::new_from_slice(&key).unwrap();
        assert_eq!(
            hex(&k.clone().chain_update(b"").finalize().into_bytes()),
            "10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786\
             b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568"
        );
        assert_eq!(
            hex(&k.chain_update([0]).finalize().into_bytes()),
            "961f6dd1e4dd30f63901690c512e78e4b45e4742ed197c3c5e45c549fd25f2e4\
             187b0bc9fe30492b16b0d0bc4ef9b0f34c7003fac09a5ef1532e69430234cebd"
        );
    }

    #[test]
    fn eight_byte_digests_as_pythons_hashlib_gives_them() {
        // hashlib.blake2b(msg, key=bytes(range(32)), digest_size=8).hexdigest(): 200 bytes
        // (two blocks), exactly one block, and the empty message.
        let k = Keyed::new(&(0u8..32).collect::<Vec<_>>());
        let long: Vec<u8> = (0u8..200).collect();
        assert_eq!(k.word(&long), 0x6248f9d9c57a27a5);
        assert_eq!(k.word(&long[..128]), 0x6dfcc1df7ceb230f);
        assert_eq!(k.word(b""), 0xb6fbe0459eb623da);
    }

    #[test]
    fn an_empty_secret_is_no_key_as_in_hashlib() {
        // hashlib.blake2b(b"abc", digest_size=8) == hashlib.blake2b(b"abc", key=b"", ...).
        assert_eq!(Keyed::new(b"").word(b"abc"), 0xd8bb14d833d59559);
    }
}
