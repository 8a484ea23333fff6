//! The Universal Scalability Law (Gunther): X(N) = γN / (1 + α(N−1) + βN(N−1)).
//!
//! γ is the throughput of one unit of load, α the cost of contention (queueing for a shared
//! resource), β the cost of coherency (units exchanging data pairwise). Throughput peaks at
//! Nmax = sqrt((1−α)/β); with β = 0 the law is Amdahl's and X approaches γ/α.
//!
//! ```
//! use cachelab_usl::{fit, Method, Options};
//! let n = [1.0, 2.0, 4.0, 6.0, 8.0, 10.0];
//! let x = [1.0, 1.8868, 3.0769, 3.5294, 3.5398, 3.3557];
//! let f = fit(&n, &x, &Options { method: Method::Bounded, ..Options::default() }).unwrap();
//! assert!((f.params.alpha - 0.02).abs() < 1e-3 && (f.params.beta - 0.02).abs() < 1e-3);
//! ```
//!
//! Estimation is nonlinear least squares (Levenberg–Marquardt with an analytic Jacobian, box
//! bounds by projection, several starting points including a linearised fit), or the book's
//! linearised regression. Uncertainty: standard errors from (JᵀJ)⁻¹·s², t intervals, and a
//! seeded residual bootstrap for Nmax and the peak. Fewer than six points are refused.
//! [`Fit::record`] gives the fit as it is written down (serde), predictions included.
//!
//! The modules, each using only those after it: `record` (the serialized fit), `fit` (a fit
//! with its uncertainty, figures and warnings), `bootstrap`, `estimate` (the coefficients
//! alone), `lm` (Levenberg–Marquardt), `linear`, `method`, and at the ground [`dist`],
//! `model`, [`rng`] and `error`.

#![forbid(unsafe_code)]

mod bootstrap;
pub mod dist;
mod error;
mod estimate;
mod fit;
mod linear;
mod lm;
mod method;
mod model;
mod record;
pub mod rng;

pub use bootstrap::{Bootstrap, Interval};
pub use error::{UslError, MIN_POINTS};
pub use estimate::{estimate, validate, Estimate};
pub use fit::{fit, predict, Fit, Options, Peak, Prediction, Warning, EXTRAPOLATION_FACTOR};
pub use linear::Mat3;
pub use method::{Method, MethodInfo, METHODS};
pub use model::{Params, ALPHA, BETA, GAMMA, NAMES};
pub use record::FitRecord;
