//! Fuzzes the response decoders: any bytes must give a frame, Incomplete, or Invalid — never a
//! panic, an out-of-bounds length, or a frame that re-encodes differently.
#![no_main]

use bytes::Bytes;
use cachelab_proto::frame::{decode, encode};
use cachelab_proto::response::{complete_len, parse};
use cachelab_proto::{DecodeError, Expect};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((frame, n)) = decode(data) {
        assert!(n > 0 && n <= data.len());
        // A decoded frame re-encodes to bytes that decode to the same frame.
        let mut wire = Vec::new();
        encode(&frame, &mut wire);
        assert_eq!(decode(&wire).map(|(f, _)| f), Ok(frame));
    }
    for expect in [Expect::Values, Expect::Stats, Expect::Single] {
        match complete_len(expect, data) {
            Ok(n) => {
                assert!(n <= data.len());
                let whole = Bytes::copy_from_slice(&data[..n]);
                assert!(parse(expect, &whole).is_ok(), "complete_len accepted what parse refused");
                // Any strict prefix of a complete response is incomplete.
                if n > 0 {
                    assert_eq!(complete_len(expect, &data[..n - 1]), Err(DecodeError::Incomplete));
                }
            }
            Err(DecodeError::Incomplete) | Err(DecodeError::Invalid(_)) => {}
        }
    }
});
