//! RESP property tests: every value encodes to bytes that decode back to it, every strict
//! prefix of those bytes is `Incomplete`, a stream of replies cut anywhere decodes to the same
//! replies as whole, and no input panics.

use bytes::Bytes;
use cachelab_proto::resp::{complete_len, encode_command, parse, Frame, Limits, Value};
use cachelab_proto::DecodeError;
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

/// A line's text: no `\r` or `\n`.
fn line() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..40,
    )
    .prop_map(Bytes::from)
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        line().prop_map(Value::Simple),
        line().prop_map(Value::Error),
        any::<i64>().prop_map(Value::Integer),
        bytes(200).prop_map(Value::Bulk),
        Just(Value::NullBulk),
        Just(Value::NullArray),
        Just(Value::Null),
        any::<bool>().prop_map(Value::Boolean),
        // Any double but NaN, which is not equal to itself (its encoding is tested apart).
        any::<f64>()
            .prop_filter("not NaN", |d| !d.is_nan())
            .prop_map(Value::Double),
        ("-?[0-9]{1,60}").prop_map(|s| Value::BigNumber(Bytes::from(s))),
        bytes(80).prop_map(Value::BulkError),
        ("[a-z]{3}", bytes(80)).prop_map(|(f, t)| Value::Verbatim {
            format: Bytes::from(f),
            text: t
        }),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 6, |inner| {
        let pairs = prop::collection::vec((inner.clone(), inner.clone()), 0..4);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Set),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Push),
            pairs.clone().prop_map(Value::Map),
            (pairs, inner).prop_map(|(attributes, v)| Value::Attributed {
                attributes,
                value: Box::new(v)
            }),
        ]
    })
}

fn wire(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode(&mut out);
    out
}

/// Reads replies from `chunks` as a client would: bytes appended as they arrive, each
/// complete reply parsed and removed.
fn read_stream(chunks: &[&[u8]], limits: &Limits) -> Result<Vec<Value>, DecodeError> {
    let mut buf = Vec::new();
    let mut got = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match complete_len(&buf, limits) {
                Ok(n) => {
                    let whole = Bytes::copy_from_slice(&buf[..n]);
                    let (v, used) = parse(&whole, limits)?;
                    assert_eq!(used, n);
                    got.push(v);
                    buf.drain(..n);
                }
                Err(DecodeError::Incomplete) => break,
                Err(e) => return Err(e),
            }
        }
    }
    assert!(buf.is_empty(), "{} bytes left over", buf.len());
    Ok(got)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn values_round_trip(v in value()) {
        let limits = Limits::default();
        let w = wire(&v);
        prop_assert_eq!(complete_len(&w, &limits), Ok(w.len()));
        let (back, n) = parse(&Bytes::from(w.clone()), &limits).unwrap();
        prop_assert_eq!(n, w.len());
        prop_assert_eq!(&back, &v);
        for cut in 0..w.len() {
            prop_assert_eq!(complete_len(&w[..cut], &limits), Err(DecodeError::Incomplete), "prefix {}", cut);
        }
    }

    #[test]
    fn a_stream_cut_anywhere_decodes_as_whole(
        values in prop::collection::vec(value(), 1..6),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let limits = Limits::default();
        let stream: Vec<u8> = values.iter().flat_map(wire).collect();
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks = Vec::new();
        let mut prev = 0;
        for c in at.into_iter().chain([stream.len()]) {
            chunks.push(&stream[prev..c]);
            prev = c;
        }
        prop_assert_eq!(read_stream(&[&stream], &limits).unwrap(), values.clone());
        prop_assert_eq!(read_stream(&chunks, &limits).unwrap(), values);
    }

    #[test]
    fn commands_are_arrays_of_bulk_strings(args in prop::collection::vec(bytes(64), 1..8)) {
        let mut out = Vec::new();
        encode_command(&args, &mut out);
        let (v, n) = parse(&Bytes::from(out.clone()), &Limits::default()).unwrap();
        prop_assert_eq!(n, out.len());
        prop_assert_eq!(v, Value::Array(args.into_iter().map(Value::Bulk).collect()));
    }

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..512)) {
        check_agreement(&buf);
    }

    #[test]
    fn protocol_shaped_noise_never_panics(parts in prop::collection::vec(prop_oneof![
        Just(&b"*"[..]), Just(&b"%"[..]), Just(&b"|"[..]), Just(&b"$"[..]), Just(&b"="[..]),
        Just(&b">"[..]), Just(&b"~"[..]), Just(&b","[..]), Just(&b"#t"[..]), Just(&b"_"[..]),
        Just(&b"\r\n"[..]), Just(&b"1"[..]), Just(&b"2"[..]), Just(&b"-1"[..]), Just(&b"0"[..]),
        Just(&b"txt:"[..]), Just(&b"99999999999"[..]), Just(&b"\n"[..]), Just(&b":"[..]),
    ], 0..40)) {
        check_agreement(&parts.concat());
    }
}

/// `complete_len` and `parse` agree on any bytes, and neither panics.
fn check_agreement(buf: &[u8]) {
    let limits = Limits::default();
    let len = complete_len(buf, &limits);
    let parsed = parse(&Bytes::copy_from_slice(buf), &limits).map(|(_, n)| n);
    assert_eq!(len, parsed, "{:?}", String::from_utf8_lossy(buf));
    if let Ok(n) = len {
        assert!(n > 0 && n <= buf.len());
    }
}

#[test]
fn nan_and_infinities_encode_as_resp3_spells_them() {
    for (d, text) in [
        (f64::NAN, &b",nan\r\n"[..]),
        (f64::INFINITY, b",inf\r\n"),
        (f64::NEG_INFINITY, b",-inf\r\n"),
    ] {
        let w = wire(&Value::Double(d));
        assert_eq!(w, text);
        let (back, _) = parse(&Bytes::from(w), &Limits::default()).unwrap();
        let Value::Double(b) = back else { panic!() };
        assert!(b.to_bits() == d.to_bits() || (b.is_nan() && d.is_nan()));
    }
    let mut out = Vec::new();
    cachelab_proto::resp::frame::encode(&Frame::Double(-0.5), &mut out);
    assert_eq!(out, b",-0.5\r\n");
}
