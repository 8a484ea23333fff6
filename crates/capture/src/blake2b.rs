//! Keyed BLAKE2b (RFC 7693) with an 8-byte digest: the pseudonym of a key, the same as
//! Python's `hashlib.blake2b(key_bytes, key=secret, digest_size=8)`.

const IV: [u64; 8] = [
    0x6a09e667f3bcc908,
    0xbb67ae8584caa73b,
    0x3c6ef372fe94f82b,
    0xa54ff53a5f1d36f1,
    0x510e527fade682d1,
    0x9b05688c2b3e6c1f,
    0x1f83d9abfb41bd6b,
    0x5be0cd19137e2179,
];

const SIGMA: [[usize; 16]; 12] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
];

#[inline(always)]
fn g(v: &mut [u64; 16], a: usize, b: usize, c: usize, d: usize, x: u64, y: u64) {
    v[a] = v[a].wrapping_add(v[b]).wrapping_add(x);
    v[d] = (v[d] ^ v[a]).rotate_right(32);
    v[c] = v[c].wrapping_add(v[d]);
    v[b] = (v[b] ^ v[c]).rotate_right(24);
    v[a] = v[a].wrapping_add(v[b]).wrapping_add(y);
    v[d] = (v[d] ^ v[a]).rotate_right(16);
    v[c] = v[c].wrapping_add(v[d]);
    v[b] = (v[b] ^ v[c]).rotate_right(63);
}

fn compress(h: &mut [u64; 8], block: &[u8; 128], t: u128, last: bool) {
    let mut m = [0u64; 16];
    for (i, w) in m.iter_mut().enumerate() {
        *w = u64::from_le_bytes(block[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    }
    let mut v = [0u64; 16];
    v[..8].copy_from_slice(h);
    v[8..].copy_from_slice(&IV);
    v[12] ^= t as u64;
    v[13] ^= (t >> 64) as u64;
    if last {
        v[14] = !v[14];
    }
    for s in &SIGMA {
        g(&mut v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
        g(&mut v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
        g(&mut v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
        g(&mut v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
        g(&mut v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
        g(&mut v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
        g(&mut v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
        g(&mut v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for i in 0..8 {
        h[i] ^= v[i] ^ v[i + 8];
    }
}

/// BLAKE2b keyed with a secret of at most 64 bytes, with an `out_len`-byte digest (1..=64).
#[derive(Clone)]
pub struct Keyed {
    /// The state after the key block (every message starts from it).
    h: [u64; 8],
    key_block: Option<[u8; 128]>,
    out_len: usize,
}

impl Keyed {
    /// # Panics
    /// When the secret is longer than 64 bytes or `out_len` is not in 1..=64.
    pub fn new(secret: &[u8], out_len: usize) -> Keyed {
        assert!(secret.len() <= 64 && (1..=64).contains(&out_len));
        let mut h = IV;
        h[0] ^= 0x0101_0000 ^ ((secret.len() as u64) << 8) ^ out_len as u64;
        let key_block = (!secret.is_empty()).then(|| {
            let mut b = [0u8; 128];
            b[..secret.len()].copy_from_slice(secret);
            b
        });
        Keyed {
            h,
            key_block,
            out_len,
        }
    }

    /// The digest of `msg` (its first `out_len` bytes are meaningful).
    pub fn digest(&self, msg: &[u8]) -> [u8; 64] {
        let mut h = self.h;
        let mut t: u128 = 0;
        // The key block is the first block; it is the last only for an empty message.
        if let Some(kb) = &self.key_block {
            t += 128;
            compress(&mut h, kb, t, msg.is_empty());
        }
        if !msg.is_empty() || self.key_block.is_none() {
            let mut rest = msg;
            while rest.len() > 128 {
                t += 128;
                compress(&mut h, rest[..128].try_into().expect("128 bytes"), t, false);
                rest = &rest[128..];
            }
            let mut b = [0u8; 128];
            b[..rest.len()].copy_from_slice(rest);
            t += rest.len() as u128;
            compress(&mut h, &b, t, true);
        }
        let mut out = [0u8; 64];
        for (i, w) in h.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// The first 8 digest bytes read as a big-endian number (Python's
    /// `int.from_bytes(digest, "big")` of an 8-byte digest).
    pub fn word(&self, msg: &[u8]) -> u64 {
        debug_assert_eq!(self.out_len, 8);
        u64::from_be_bytes(self.digest(msg)[..8].try_into().expect("8 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn rfc7693_abc() {
        // RFC 7693, Appendix A: BLAKE2b-512("abc").
        let d = Keyed::new(b"", 64).digest(b"abc");
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
        let k = Keyed::new(&key, 64);
        assert_eq!(
            hex(&k.digest(b"")),
            "10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786\
             b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568"
        );
        assert_eq!(
            hex(&k.digest(&[0])),
            "961f6dd1e4dd30f63901690c512e78e4b45e4742ed197c3c5e45c549fd25f2e4\
             187b0bc9fe30492b16b0d0bc4ef9b0f34c7003fac09a5ef1532e69430234cebd"
        );
    }

    #[test]
    fn eight_byte_digests_as_pythons_hashlib_gives_them() {
        // hashlib.blake2b(msg, key=bytes(range(32)), digest_size=8).hexdigest(): 200 bytes
        // (two blocks), exactly one block, and the empty message.
        let k = Keyed::new(&(0u8..32).collect::<Vec<_>>(), 8);
        let long: Vec<u8> = (0u8..200).collect();
        assert_eq!(k.word(&long), 0x6248f9d9c57a27a5);
        assert_eq!(k.word(&long[..128]), 0x6dfcc1df7ceb230f);
        assert_eq!(k.word(b""), 0xb6fbe0459eb623da);
    }
}
