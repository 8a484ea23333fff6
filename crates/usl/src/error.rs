//! Why a fit was refused. Each variant names the offending row (0-based) where there is one,
//! so callers reading a file can turn it into `path:line`.

use std::fmt;

/// The smallest number of measurements a three-parameter fit accepts.
pub const MIN_POINTS: usize = 6;

/// The range the largest throughput must lie in: beyond it the squares a fit sums (and the
/// Jacobian's products) underflow to zero or overflow in double precision, and the fit could
/// not move from its starting values.
pub const X_SCALE: (f64, f64) = (1e-150, 1e150);

#[derive(Debug, Clone, PartialEq)]
pub enum UslError {
    /// `n` and `x` have different lengths.
    LengthMismatch { n: usize, x: usize },
    /// Fewer than [`MIN_POINTS`] measurements.
    TooFewPoints { points: usize },
    /// Fewer than three distinct loads: the three parameters cannot be told apart.
    TooFewLoads { distinct: usize },
    /// A load or throughput that is NaN or infinite.
    NotFinite { row: usize, column: &'static str },
    /// A load that is not above zero.
    NonPositiveLoad { row: usize, value: f64 },
    /// A throughput below zero.
    NegativeThroughput { row: usize, value: f64 },
    /// γ fixed to X(1) needs a measurement at N = 1.
    NoUnitLoad,
    /// A method name not in [`METHODS`](crate::METHODS), and the names that are.
    UnknownMethod {
        name: String,
        known: Vec<&'static str>,
    },
    /// The largest throughput lies outside [`X_SCALE`]: the fit's sums of squares would
    /// underflow or overflow. (Refused rather than rescaled: the user picks the unit.)
    OutOfScale { largest: f64 },
    /// A confidence level outside (0, 1).
    BadLevel(f64),
    /// The data cannot determine the parameters (e.g. every throughput is zero).
    Degenerate(String),
}

impl fmt::Display for UslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UslError::LengthMismatch { n, x } => {
                write!(
                    f,
                    "{n} loads but {x} throughputs: give one throughput per load"
                )
            }
            UslError::TooFewPoints { points } => write!(
                f,
                "{points} measurement(s) is too few to fit the USL's three parameters: \
                 give at least {MIN_POINTS}"
            ),
            UslError::TooFewLoads { distinct } => write!(
                f,
                "only {distinct} distinct load value(s): the USL needs measurements at \
                 3 or more different loads"
            ),
            UslError::NotFinite { row, column } => {
                write!(f, "row {row}: {column} is not a finite number")
            }
            UslError::NonPositiveLoad { row, value } => {
                write!(f, "row {row}: load N = {value} must be above 0")
            }
            UslError::NegativeThroughput { row, value } => {
                write!(f, "row {row}: throughput X = {value} must not be negative")
            }
            UslError::NoUnitLoad => write!(
                f,
                "fixing gamma to X(1) needs a measurement at N = 1; use the bounded method \
                 (gamma fitted) instead"
            ),
            UslError::UnknownMethod { name, known } => write!(
                f,
                "unknown USL method {name:?}; known: {}",
                known.join(", ")
            ),
            UslError::OutOfScale { largest } => {
                let (lo, hi) = X_SCALE;
                let (what, unit) = if *largest < lo {
                    ("small", "a longer time unit (per hour, not per second)")
                } else {
                    (
                        "large",
                        "a shorter time unit (per millisecond, not per second)",
                    )
                };
                write!(
                    f,
                    "the throughputs are too {what} to fit in double precision (the largest \
                     is {largest:e}; their squares {}): give X in {unit} so that the largest \
                     lies between {lo:e} and {hi:e}",
                    if *largest < lo {
                        "underflow to 0"
                    } else {
                        "overflow"
                    }
                )
            }
            UslError::BadLevel(l) => {
                write!(f, "confidence level {l} must lie strictly between 0 and 1")
            }
            UslError::Degenerate(why) => write!(f, "the data cannot determine a USL fit: {why}"),
        }
    }
}

impl std::error::Error for UslError {}
