//! The hash functions production memcached clients place keys with: MD5 (RFC 1321; ketama)
//! from the `md-5` crate; and, written from their specifications, Bob Jenkins' one-at-a-time
//! as libmemcached runs it (its default key hash; bytes read as signed `char`), MurmurHash3
//! x86_32 (pymemcache's rendezvous hash) and twemproxy's `fnv1a_64` (its default key hash:
//! FNV-1a kept to 32 bits, bytes signed).

use md5::{Digest, Md5};

/// The 16-byte MD5 digest of `data` (the `md-5` crate).
pub fn md5(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// Bytes `4 * n .. 4 * n + 4` of `digest` as a little-endian number: ketama's point `n` of a
/// digest (libmemcached reads the key's hash the same way, with `n = 0`).
pub fn digest_word(digest: &[u8; 16], n: usize) -> u32 {
    u32::from_le_bytes([
        digest[4 * n],
        digest[4 * n + 1],
        digest[4 * n + 2],
        digest[4 * n + 3],
    ])
}

/// Jenkins' one-at-a-time hash as libmemcached computes it: each byte is read as a C `char`,
/// which is signed on the platforms it ships for, so bytes >= 0x80 are sign-extended.
pub fn one_at_a_time(data: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &byte in data {
        h = h.wrapping_add(byte as i8 as i32 as u32);
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// twemproxy's `fnv1a_64` key hash: FNV-1a with its 64-bit offset basis and prime, both cut
/// to 32 bits, over a 32-bit state. For ASCII that is the low half of the true 64-bit FNV-1a;
/// like twemproxy's C, each byte is read as a signed `char`, so bytes >= 0x80 are
/// sign-extended before the XOR and the results part there.
pub fn fnv1a_64_twemproxy(data: &[u8]) -> u32 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET as u32;
    for &byte in data {
        h ^= byte as i8 as i32 as u32;
        h = h.wrapping_mul(PRIME as u32);
    }
    h
}

/// MurmurHash3, x86 32-bit variant, of `data` with `seed`.
///
/// Our own rather than a crate's: rendezvous routing hashes `host:port-key` once per member
/// for every request, and the crates are slower there. `benches/hand_vs_library.py` (record
/// `benches/runs/2026-11-29-hand-vs-library.md`, pinned, medians of 7 rounds) per ~40-byte
/// text: ours 17.4 ns, the `murmur3` crate 65.0 (3.7×; it reads through `std::io::Read`),
/// TiKV's `mur3` 16.6; but through `Distribution::server_for` on a pool of 3, `mur3` cost
/// 129.7 ns a key against our 124.8 (1.04×, medians of 11 alternating runs, every `mur3` run
/// above our median; ours is likely inlined there). The tests below check ours against both
/// crates.
pub fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mix = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for b in &mut blocks {
        h ^= mix(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &byte) in tail.iter().enumerate() {
            k |= u32::from(byte) << (8 * i);
        }
        h ^= mix(k);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(d: &[u8]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn md5_matches_the_rfc_1321_test_suite() {
        let cases: [(&str, &str); 7] = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                "abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(hex(&md5(input.as_bytes())), want, "md5({input:?})");
        }
    }

    #[test]
    fn murmur3_matches_published_vectors() {
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(murmur3_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_32(b"", 0xffff_ffff), 0x81f1_6f39);
        assert_eq!(murmur3_32(&[0xff, 0xff, 0xff, 0xff], 0), 0x7629_3b50);
        assert_eq!(murmur3_32(&[0x21, 0x43, 0x65, 0x87], 0), 0xf55b_516b);
        assert_eq!(murmur3_32(&[0x21, 0x43, 0x65], 0), 0x7e4a_8634);
        assert_eq!(murmur3_32(&[0x21], 0), 0x7266_1cf4);
        assert_eq!(murmur3_32(b"Hello, world!", 1234), 0xfaf6_cdb3);
    }

    proptest::proptest! {
        /// The `murmur3` and `mur3` crates agree with ours on any bytes and seed.
        #[test]
        fn murmur3_agrees_with_the_crates(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..80),
            seed in proptest::num::u32::ANY,
        ) {
            let ours = murmur3_32(&data, seed);
            let crate_a = murmur3::murmur3_32(&mut std::io::Cursor::new(&data), seed).unwrap();
            proptest::prop_assert_eq!(ours, crate_a);
            proptest::prop_assert_eq!(ours, mur3::murmurhash3_x86_32(&data, seed));
        }
    }

    #[test]
    fn one_at_a_time_sign_extends_high_bytes_like_libmemcached() {
        assert_eq!(one_at_a_time(b""), 0);
        // A byte >= 0x80 is not the same as its unsigned value added in.
        let mut h: u32 = 0x80;
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
        h = h.wrapping_add(h << 3);
        h ^= h >> 11;
        h = h.wrapping_add(h << 15);
        assert_ne!(one_at_a_time(&[0x80]), h);
    }

    #[test]
    fn fnv1a_64_twemproxy_is_the_low_half_of_fnv1a_64_for_ascii() {
        // Published FNV-1a 64 vectors: "" -> cbf29ce484222325, "a" -> af63dc4c8601ec8c,
        // "foobar" -> 85944171f73967e8.
        assert_eq!(fnv1a_64_twemproxy(b""), 0x8422_2325);
        assert_eq!(fnv1a_64_twemproxy(b"a"), 0x8601_ec8c);
        assert_eq!(fnv1a_64_twemproxy(b"foobar"), 0xf739_67e8);
        // A byte >= 0x80 is XORed in sign-extended: not the low half of FNV-1a 64 any more.
        let one = (0x8422_2325u32 ^ 0xffff_ffe9).wrapping_mul(0x1b3);
        assert_eq!(fnv1a_64_twemproxy(&[0xe9]), one);
    }
}
