//! RESP (Redis and Valkey's protocol), versions 2 and 3, without I/O.
//!
//! Layers, bottom up: [`frame`] (one type byte, its line and a bulk payload, decoded without
//! allocating), [`value`] (frames put together into one owned reply; [`complete_len`] finds
//! where it ends without allocating), and [`command`] (what a client sends: an array of bulk
//! strings, with binary-safe [`RespKey`]s). The decoder is incremental — a partial reply is
//! [`crate::DecodeError::Incomplete`], never an error — and bounded: a declared length or
//! element count past [`Limits`], or nesting deeper than it, is refused at once with the
//! offset of the frame. Errors reuse the memcached codec's [`crate::DecodeError`].

pub mod command;
pub mod frame;
pub mod value;

pub use command::{encode_command, validate_resp_key, Command, RespKey, MAX_RESP_KEY_LEN};
pub use frame::{Frame, Limits, MAX_DEPTH, MAX_LINE};
pub use value::{complete_len, parse, Value};
