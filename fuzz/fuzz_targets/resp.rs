//! Fuzzes the RESP decoder: any bytes must give a reply, Incomplete, or Invalid — never a
//! panic, a length past the input, a deep recursion, or a reply that re-encodes differently.
#![no_main]

use bytes::Bytes;
use cachelab_proto::resp::{complete_len, frame, parse, Limits, Value};
use cachelab_proto::DecodeError;
use libfuzzer_sys::fuzz_target;

/// NaN is not equal to itself: compare doubles by their encoding instead.
fn same(a: &Value, b: &Value) -> bool {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    a.encode(&mut x);
    b.encode(&mut y);
    x == y
}

fuzz_target!(|data: &[u8]| {
    // Small limits as well as the defaults, so the fuzzer reaches the refusals.
    let small = Limits {
        max_bulk: 64,
        max_elements: 8,
        max_depth: 4,
    };
    for limits in [Limits::default(), small] {
        if let Ok((f, n)) = frame::decode(data, &limits) {
            assert!(n > 0 && n <= data.len());
            let mut wire = Vec::new();
            frame::encode(&f, &mut wire);
            let (g, m) = frame::decode(&wire, &limits).expect("a frame re-encodes to a frame");
            assert_eq!(m, wire.len());
            let mut again = Vec::new();
            frame::encode(&g, &mut again);
            assert_eq!(again, wire);
        }
        let len = complete_len(data, &limits);
        let whole = Bytes::copy_from_slice(data);
        let parsed = parse(&whole, &limits);
        assert_eq!(len, parsed.as_ref().map(|(_, n)| *n).map_err(|e| *e));
        if let Ok((v, n)) = parsed {
            assert!(n > 0 && n <= data.len());
            // Any strict prefix of a complete reply is incomplete.
            assert_eq!(
                complete_len(&data[..n - 1], &limits),
                Err(DecodeError::Incomplete)
            );
            // The reply re-encodes to bytes that decode to the same reply.
            let mut wire = Vec::new();
            v.encode(&mut wire);
            let (back, m) = parse(&Bytes::from(wire.clone()), &limits).expect("re-encoded");
            assert_eq!(m, wire.len());
            assert!(same(&back, &v));
        }
    }
});
