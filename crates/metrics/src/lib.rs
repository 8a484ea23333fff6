//! Latency histograms.
//!
//! Latencies are recorded in nanoseconds in an HdrHistogram with 3 significant digits, covering
//! 1 ns to 1 hour. Histograms travel between verbs (and to other HdrHistogram tools) in the
//! standard V2 compressed encoding, base64 encoded: the form `HistogramLogWriter` and
//! `Histogram.decodeFromCompressedByteBuffer` in the Java and Python libraries use.

use base64::Engine;
use std::borrow::Cow;

use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::Serialize;

pub use hdrhistogram;

/// The highest latency a histogram can hold: one hour, in nanoseconds.
pub const MAX_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits kept.
pub const SIGFIGS: u8 = 3;

/// A latency histogram in nanoseconds.
pub type Latency = Histogram<u64>;

/// An empty latency histogram (1 ns .. 1 h, 3 significant digits).
pub fn latency() -> Latency {
    Histogram::new_with_bounds(1, MAX_NS, SIGFIGS).expect("valid histogram bounds")
}

/// Records `ns`, clamped into the histogram's range so an outlier is kept, never dropped.
pub fn record(h: &mut Latency, ns: u64) {
    h.saturating_record(ns.clamp(1, MAX_NS));
}

/// Why a histogram could not be decoded.
#[derive(Debug)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid histogram: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// V2 compressed, base64.
pub fn encode(h: &Latency) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serializing into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// The inverse of [`encode`]; also reads uncompressed V2 as written by other tools.
pub fn decode(b64: &str) -> Result<Latency, DecodeError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| DecodeError(format!("not base64: {e}")))?;
    let h: Latency = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| DecodeError(format!("{e:?}")))?;
    Ok(h)
}

/// The value at each percentile (0–100), in nanoseconds, by the nearest-rank definition: the
/// smallest recorded value with at least p % of the samples at or below it. An empty histogram
/// gives zeros.
pub fn percentiles(h: &Latency, ps: &[f64]) -> Vec<u64> {
    ps.iter()
        .map(|&p| {
            if h.is_empty() {
                return 0;
            }
            // p / 100 in floating point can land just above the exact quantile (99.9 / 100 is
            // 0.9990000000000001), and the histogram would then round the rank up past the
            // sample that defines the percentile. Step back by far less than one rank.
            let q = (p.clamp(0.0, 100.0) / 100.0 - 1e-12).max(0.0);
            h.value_at_quantile(q)
        })
        .collect()
}

/// A finished histogram kept small: its V2 encoding, uncompressed.
///
/// A [`Latency`] holds a counter for every value it can tell apart from 1 ns to an hour,
/// ~34,000 of them (270 KB), however few values it holds; its encoding takes a few bytes per
/// distinct value recorded. A run keeps one histogram per interval (two in open loop) for its
/// whole length: as [`Latency`], an hour at one interval a second would hold ~2 GB.
#[derive(Debug, Clone)]
pub struct Packed {
    bytes: Vec<u8>,
    len: u64,
}

impl Packed {
    pub fn of(h: &Latency) -> Packed {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(h, &mut bytes)
            .expect("serializing into memory cannot fail");
        bytes.shrink_to_fit();
        Packed {
            bytes,
            len: h.len(),
        }
    }

    /// The histogram again, with the bounds it had.
    pub fn unpack(&self) -> Latency {
        Deserializer::new()
            .deserialize(&mut &self.bytes[..])
            .expect("a histogram this process encoded decodes")
    }

    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
}

/// A histogram as a [`Latency`] to read: borrowed from one, unpacked from a [`Packed`].
pub trait Hist {
    fn histogram(&self) -> Cow<'_, Latency>;
}

impl Hist for Latency {
    fn histogram(&self) -> Cow<'_, Latency> {
        Cow::Borrowed(self)
    }
}

impl Hist for Packed {
    fn histogram(&self) -> Cow<'_, Latency> {
        Cow::Owned(self.unpack())
    }
}

/// Builds a histogram from recorded values (used for built-in profiles made from tables).
pub fn from_values(values: impl IntoIterator<Item = u64>) -> Latency {
    let mut h = latency();
    for v in values {
        record(&mut h, v);
    }
    h
}

/// Count, range, mean and standard deviation of a histogram, in its unit (ns for
/// [`Latency`]). Serializes as `{"count", "min", "max", "mean", "stdev"}`: counts and bounds
/// integers, mean and stdev floats; an empty histogram gives zeros.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub stdev: f64,
}

impl Summary {
    pub fn of(h: &Latency) -> Summary {
        Summary {
            count: h.len(),
            min: if h.is_empty() { 0 } else { h.min() },
            max: h.max(),
            mean: h.mean(),
            stdev: h.stdev(),
        }
    }
}

/// The shape of a JSON value: every leaf replaced by its type (`null`, `bool`, `int`, `float`,
/// `str`), keys kept in their order, a list by its first element. Tests of serialized records
/// compare it with the shape Python reads (feature `json-shape`).
#[cfg(feature = "json-shape")]
pub fn json_shape(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) if n.is_f64() => "float".into(),
        Value::Number(_) => "int".into(),
        Value::String(_) => "str".into(),
        Value::Array(a) => format!("[{}]", a.first().map(json_shape).unwrap_or_default()),
        Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}:{}", json_shape(v)))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_keeps_every_count() {
        let h = from_values((1..=10_000u64).map(|i| i * 997));
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), 10_000);
        assert_eq!(back, h);
        assert_eq!(percentiles(&back, &[50.0]), percentiles(&h, &[50.0]));
    }

    #[test]
    fn a_packed_histogram_unpacks_to_the_same_one_in_a_fraction_of_the_memory() {
        // An interval's worth: 25,000 latencies spread over 20 µs .. 20 ms.
        let h = from_values((0..25_000u64).map(|i| 20_000 + (i * i) % 20_000_000));
        let p = Packed::of(&h);
        let back = p.unpack();
        assert_eq!(back, h);
        assert_eq!(
            (back.low(), back.high(), back.sigfig()),
            (1, MAX_NS, SIGFIGS)
        );
        assert_eq!(p.len(), 25_000);
        // Every counter of a full histogram is 8 bytes; packed, a few per distinct value.
        let full = 8 * latency().distinct_values();
        assert!(p.size() * 10 < full, "{} of {full} bytes", p.size());
        assert!(Packed::of(&latency()).is_empty());
        assert_eq!(Packed::of(&latency()).unpack(), latency());
    }

    #[test]
    fn percentiles_are_within_three_significant_digits() {
        let h = from_values((1..=100_000u64).map(|i| i * 1000));
        let [p50, p99] = percentiles(&h, &[50.0, 99.0])[..] else {
            panic!()
        };
        assert!((p50 as f64 / 50_000_000.0 - 1.0).abs() < 1e-3, "{p50}");
        assert!((p99 as f64 / 99_000_000.0 - 1.0).abs() < 1e-3, "{p99}");
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        // 1..=1000 are all exact in the histogram; p99.9 of 1000 samples is the 999th.
        let h = from_values(1..=1000u64);
        assert_eq!(
            percentiles(&h, &[0.0, 0.1, 50.0, 99.0, 99.9, 100.0]),
            vec![1, 1, 500, 990, 999, 1000]
        );
    }

    #[test]
    fn outliers_are_clamped_not_dropped() {
        let mut h = latency();
        record(&mut h, 0);
        record(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode("not base64!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }

    #[test]
    fn the_summary_has_its_names_and_types_in_order() {
        let v = serde_json::to_value(Summary::of(&from_values([1000, 2000]))).unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"count":2,"min":1000,"max":2000,"mean":1500.0,"stdev":500.0}"#
        );
        let empty = serde_json::to_string(&Summary::of(&latency())).unwrap();
        assert_eq!(
            empty,
            r#"{"count":0,"min":0,"max":0,"mean":0.0,"stdev":0.0}"#
        );
    }
}
