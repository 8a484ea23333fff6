//! Property tests: every frame encodes to bytes that decode back to the same frame, every
//! strict prefix of those bytes is `Incomplete` (never `Invalid`), and no input panics.

use cachelab_proto::frame::{decode, encode, Frame, Meta, MetaStatus};
use cachelab_proto::response::{complete_len, parse};
use cachelab_proto::{DecodeError, Expect};
use proptest::prelude::*;

/// Bytes valid as a token: printable, no space.
fn token() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0x21u8..0x7f, 1..40)
}

/// Bytes valid as a message: printable with spaces, not starting or ending in a space.
fn message() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0x20u8..0x7f, 0..60).prop_map(|mut v| {
        while v.first() == Some(&b' ') {
            v.remove(0);
        }
        v
    })
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..300)
}

fn meta_flags() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        (
            prop::char::range('a', 'z'),
            prop::collection::vec(0x21u8..0x7f, 0..6),
        ),
        0..4,
    )
    .prop_map(|toks| {
        toks.into_iter()
            .map(|(c, rest)| {
                let mut t = vec![c as u8];
                t.extend(rest);
                t
            })
            .collect::<Vec<_>>()
            .join(&b' ')
    })
}

#[derive(Debug, Clone)]
enum Owned {
    Value(Vec<u8>, u32, Option<u64>, Vec<u8>),
    Stat(Vec<u8>, Vec<u8>),
    Simple(u8),
    Number(u64),
    Version(Vec<u8>),
    ClientError(Vec<u8>),
    ServerError(Vec<u8>),
    Meta(u8, Vec<u8>, Option<Vec<u8>>),
}

const SIMPLE: [Frame<'static>; 9] = [
    Frame::End,
    Frame::Stored,
    Frame::NotStored,
    Frame::Exists,
    Frame::NotFound,
    Frame::Deleted,
    Frame::Touched,
    Frame::Ok,
    Frame::Error,
];
const STATUS: [MetaStatus; 6] = [
    MetaStatus::Hd,
    MetaStatus::En,
    MetaStatus::Nf,
    MetaStatus::Ns,
    MetaStatus::Ex,
    MetaStatus::Mn,
];

impl Owned {
    fn frame(&self) -> Frame<'_> {
        match self {
            Owned::Value(k, f, c, d) => Frame::Value {
                key: k,
                flags: *f,
                cas: *c,
                data: d,
            },
            Owned::Stat(n, v) => Frame::Stat { name: n, value: v },
            Owned::Simple(i) => SIMPLE[*i as usize],
            Owned::Number(n) => Frame::Number(*n),
            Owned::Version(v) => Frame::Version(v),
            Owned::ClientError(m) => Frame::ClientError(m),
            Owned::ServerError(m) => Frame::ServerError(m),
            Owned::Meta(s, flags, Some(d)) => {
                let _ = s;
                Frame::Meta(Meta {
                    status: MetaStatus::Va,
                    flags,
                    data: Some(d),
                })
            }
            Owned::Meta(s, flags, None) => Frame::Meta(Meta {
                status: STATUS[*s as usize],
                flags,
                data: None,
            }),
        }
    }
}

fn any_frame() -> impl Strategy<Value = Owned> {
    prop_oneof![
        (token(), any::<u32>(), any::<Option<u64>>(), data())
            .prop_map(|(k, f, c, d)| Owned::Value(k, f, c, d)),
        (token(), message()).prop_map(|(n, v)| Owned::Stat(n, v)),
        (0u8..9).prop_map(Owned::Simple),
        any::<u64>().prop_map(Owned::Number),
        message().prop_map(Owned::Version),
        message().prop_map(Owned::ClientError),
        message().prop_map(Owned::ServerError),
        (0u8..6, meta_flags(), prop::option::of(data())).prop_map(|(s, f, d)| Owned::Meta(s, f, d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn frames_round_trip(owned in any_frame()) {
        let frame = owned.frame();
        let mut wire = Vec::new();
        encode(&frame, &mut wire);
        prop_assert_eq!(decode(&wire), Ok((frame, wire.len())));
        for cut in 0..wire.len() {
            prop_assert_eq!(decode(&wire[..cut]), Err(DecodeError::Incomplete), "prefix {}", cut);
        }
    }

    #[test]
    fn get_responses_round_trip(items in prop::collection::vec((token(), any::<u32>(), data()), 0..8)) {
        let mut wire = Vec::new();
        for (k, f, d) in &items {
            encode(&Frame::Value { key: k, flags: *f, cas: None, data: d }, &mut wire);
        }
        encode(&Frame::End, &mut wire);
        prop_assert_eq!(complete_len(Expect::Values, &wire), Ok(wire.len()));
        let cachelab_proto::Response::Values(values) = parse(Expect::Values, &bytes::Bytes::from(wire.clone())).unwrap() else {
            panic!("not values")
        };
        prop_assert_eq!(values.len(), items.len());
        for (v, (k, f, d)) in values.iter().zip(&items) {
            prop_assert_eq!((&v.key[..], v.flags, &v.data[..]), (&k[..], *f, &d[..]));
        }
        for cut in 0..wire.len() {
            prop_assert_eq!(complete_len(Expect::Values, &wire[..cut]), Err(DecodeError::Incomplete));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok((_, n)) = decode(&buf) {
            prop_assert!(n > 0 && n <= buf.len());
        }
        for e in [Expect::Values, Expect::Stats, Expect::Single] {
            if let Ok(n) = complete_len(e, &buf) {
                prop_assert!(n <= buf.len());
                let _ = parse(e, &bytes::Bytes::copy_from_slice(&buf[..n]));
            }
        }
    }

    #[test]
    fn protocol_shaped_noise_never_panics(parts in prop::collection::vec(prop_oneof![
        Just(&b"VALUE "[..]), Just(&b"VA "[..]), Just(&b"\r\n"[..]), Just(&b" "[..]), Just(&b"1"[..]),
        Just(&b"0"[..]), Just(&b"END"[..]), Just(&b"STAT"[..]), Just(&b"k"[..]), Just(&b"\n"[..]),
    ], 0..30)) {
        let buf: Vec<u8> = parts.concat();
        let _ = decode(&buf);
        let _ = complete_len(Expect::Values, &buf);
    }
}
