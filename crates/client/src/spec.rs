//! What the engines' specs share: the ranges of their numeric fields ([`Limit`]), and the
//! deserializers of the fields Python gives in its own units (seconds, milliseconds, µs, TLS
//! settings) — each engine's `Spec` derives `serde::Deserialize` with them, and the bindings
//! build it from the Python spec in one conversion.

use std::fmt;
use std::time::Duration;

use serde::de::{Deserialize, Deserializer, Error as _};
use serde::Serialize;

use crate::{Address, Tls, TlsConfig};

/// A range's end: whole for an integer field (so Python's flags get an `int`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Num {
    Int(u64),
    Real(f64),
}

impl Num {
    fn value(self) -> f64 {
        match self {
            Num::Int(v) => v as f64,
            Num::Real(v) => v,
        }
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::Int(v) => write!(f, "{v}"),
            Num::Real(v) => write!(f, "{v}"),
        }
    }
}

/// The range of one numeric spec field, the one place it is written: the engine's
/// `validate` checks it, the bindings export it (`_core.LOAD_LIMITS`, …) for the command
/// line's flags, and both refuse a value with [`Limit::refusal`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Limit {
    /// The spec field (as Python and the Rust struct name it).
    #[serde(skip)]
    pub field: &'static str,
    pub lo: Num,
    pub hi: Num,
    /// `lo` itself is refused (a time or a rate must be above 0).
    pub above: bool,
    /// What the number counts (`seconds`, `requests/s`), or empty.
    pub unit: &'static str,
}

impl Limit {
    /// A whole number from `lo` to `hi`.
    pub const fn int(field: &'static str, lo: u64, hi: u64, unit: &'static str) -> Limit {
        Limit {
            field,
            lo: Num::Int(lo),
            hi: Num::Int(hi),
            above: false,
            unit,
        }
    }

    /// A finite number from `lo` to `hi`.
    pub const fn real(field: &'static str, lo: f64, hi: f64, unit: &'static str) -> Limit {
        Limit {
            field,
            lo: Num::Real(lo),
            hi: Num::Real(hi),
            above: false,
            unit,
        }
    }

    /// A finite number above `lo`, at most `hi`.
    pub const fn above(field: &'static str, lo: f64, hi: f64, unit: &'static str) -> Limit {
        Limit {
            above: true,
            ..Limit::real(field, lo, hi, unit)
        }
    }

    /// The field as a flag names it: `give-up-after`.
    pub fn name(&self) -> String {
        self.field.replace('_', "-")
    }

    /// What the field takes: `a number of seconds above 0 and at most 3600`.
    pub fn rule(&self) -> String {
        let of = if self.unit.is_empty() {
            String::new()
        } else {
            format!(" of {}", self.unit)
        };
        match (self.lo, self.above) {
            (Num::Int(_), _) => format!("a whole number{of} from {} to {}", self.lo, self.hi),
            (_, true) => format!("a number{of} above {} and at most {}", self.lo, self.hi),
            (_, false) => format!("a number{of} from {} to {}", self.lo, self.hi),
        }
    }

    /// The one-line refusal of `got`: `connections must be a whole number from 1 to 4096, not 0`.
    pub fn refusal(&self, got: impl fmt::Display) -> String {
        format!("{} must be {}, not {got}", self.name(), self.rule())
    }

    /// Whether `v` is in range.
    pub fn holds(&self, v: f64) -> bool {
        let (lo, hi) = (self.lo.value(), self.hi.value());
        v.is_finite() && (if self.above { v > lo } else { v >= lo }) && v <= hi
    }

    /// `Err(refusal)` for a number out of range.
    pub fn check(&self, v: f64) -> Result<(), String> {
        if self.holds(v) {
            Ok(())
        } else {
            Err(self.refusal(v))
        }
    }

    /// [`check`](Limit::check) for a whole number (shown as given).
    pub fn check_int(&self, v: u64) -> Result<(), String> {
        if self.holds(v as f64) {
            Ok(())
        } else {
            Err(self.refusal(v))
        }
    }

    /// [`check`](Limit::check) for a time kept as a [`Duration`], given in `per_second`s of
    /// a second (1 for seconds, 1000 for ms, 1e6 for µs).
    pub fn check_duration(&self, d: Duration, per_second: f64) -> Result<(), String> {
        self.check(d.as_secs_f64() * per_second)
    }
}

/// A time in `per_second`ths of a second: a negative, non-finite or huge number is refused
/// (the spec's `validate` then checks the field's range).
fn duration<'de, D: Deserializer<'de>>(d: D, per_second: f64) -> Result<Duration, D::Error> {
    let v = f64::deserialize(d)?;
    Duration::try_from_secs_f64(v / per_second)
        .map_err(|_| D::Error::custom(format!("invalid value: {v}, expected a time")))
}

/// A time given in seconds.
pub fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    duration(d, 1.0)
}

/// A time given in milliseconds.
pub fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    duration(d, 1e3)
}

/// A whole number of microseconds.
pub fn micros<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_micros)
}

/// TLS settings (a [`TlsConfig`], or None for plain TCP), compiled: their files are read
/// here, and one that can't be read or parsed is refused naming it.
pub fn tls<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Tls>, D::Error> {
    match Option::<TlsConfig>::deserialize(d)? {
        None => Ok(None),
        Some(c) => Tls::new(&c).map(Some).map_err(D::Error::custom),
    }
}

/// A flattened part of a spec (`#[serde(flatten, deserialize_with = "flat")]`): a bad field
/// in it is named in the error as `field: why` (serde would lose its name there).
pub fn flat<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    serde_path_to_error::deserialize(d).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            D::Error::custom(e.into_inner())
        } else {
            D::Error::custom(format!("{path}: {}", e.into_inner()))
        }
    })
}

impl<'de> Deserialize<'de> for Address {
    /// From `host:port`, `[v6]:port`, `unix:/path` or an absolute path.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Address, D::Error> {
        String::deserialize(d)?.parse().map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_says_its_range_and_the_value_refused() {
        let c = Limit::int("connections", 1, 4096, "");
        assert_eq!(
            c.check_int(0).unwrap_err(),
            "connections must be a whole number from 1 to 4096, not 0"
        );
        assert!(c.check_int(4096).is_ok() && c.check_int(4097).is_err());
        let t = Limit::above("give_up_after", 0.0, 3600.0, "seconds");
        assert_eq!(
            t.check(0.0).unwrap_err(),
            "give-up-after must be a number of seconds above 0 and at most 3600, not 0"
        );
        assert!(t.check(f64::NAN).is_err() && t.check(3600.0).is_ok());
        let w = Limit::real("warmup", 0.0, 600.0, "seconds");
        assert!(w.check(0.0).is_ok());
        assert_eq!(
            w.check_duration(Duration::from_secs(601), 1.0).unwrap_err(),
            "warmup must be a number of seconds from 0 to 600, not 601"
        );
    }
}
