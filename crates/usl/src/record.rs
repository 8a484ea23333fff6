//! A fit as it is written down: [`Fit::record`] gives a [`FitRecord`], which implements
//! [`serde::Serialize`]; this module alone decides the record's names, nesting and derived
//! figures (Python receives it as nested dicts and lists; the scale artifact stores it).
//!
//! ```text
//! {
//!   "method", "level", "n": [..], "x": [..],
//!   "params" / "free" / "at_bound" / "se": {"gamma", "alpha", "beta"},
//!   "ci": {"gamma" | "alpha" | "beta": [lo, hi] | null}, "cov": 3×3 | null,
//!   "sse", "sigma", "df", "t", "r_squared", "fitted": [..], "residuals": [..],
//!   "iterations", "converged",
//!   "peak": {"n_max", "n_max_integer", "n_max_floor", "x_max", "amdahl_limit"},
//!   "bootstrap": {"resamples", "seed", "level", "failed", "gamma", "alpha", "beta",
//!                 "n_max", "x_max" ({"lo", "median", "hi"} | null),
//!                 "infinite_n_max", "no_peak"} | null,
//!   "warnings": [{"code", "message"}],
//!   "predictions": [Prediction]
//! }
//! Prediction = {"n", "x", "x_se", "x_lo", "x_hi", "x_pred_lo", "x_pred_hi", "r", "r_lo",
//!               "r_hi", "extrapolated"}
//! ```
//!
//! Nmax is +∞ when β = 0: a serializer that can carry infinities keeps it (JSON cannot).

use serde::{Serialize, Serializer};

use crate::bootstrap::Bootstrap;
use crate::fit::{Fit, Peak, Prediction, Warning};
use crate::linear::Mat3;
use crate::model::NAMES;

/// A fit with its predictions at the loads asked for, ready to serialize.
#[derive(Debug, Clone, Serialize)]
pub struct FitRecord<'a> {
    method: &'static str,
    level: f64,
    n: &'a [f64],
    x: &'a [f64],
    params: ByName<f64>,
    free: ByName<bool>,
    at_bound: ByName<bool>,
    se: ByName<Option<f64>>,
    ci: ByName<Option<[f64; 2]>>,
    cov: Option<Mat3>,
    sse: f64,
    sigma: f64,
    df: usize,
    t: f64,
    r_squared: f64,
    fitted: &'a [f64],
    residuals: &'a [f64],
    iterations: usize,
    converged: bool,
    peak: &'a Peak,
    bootstrap: Option<&'a Bootstrap>,
    /// The fit's warnings, then one about extrapolated predictions if any is.
    warnings: Vec<Warning>,
    predictions: Vec<Prediction>,
}

impl Fit {
    /// The fit as it is written down, with predictions at each of `ns`.
    pub fn record(&self, ns: &[f64]) -> FitRecord<'_> {
        FitRecord {
            method: self.method.name(),
            level: self.level,
            n: &self.n,
            x: &self.x,
            params: ByName(self.params.to_array()),
            free: ByName(self.free),
            at_bound: ByName(self.at_bound),
            se: ByName(self.se),
            ci: ByName(self.ci.map(|c| c.map(|(lo, hi)| [lo, hi]))),
            cov: self.cov,
            sse: self.sse,
            sigma: self.sigma,
            df: self.df,
            t: self.t,
            r_squared: self.r_squared,
            fitted: &self.fitted,
            residuals: &self.residuals,
            iterations: self.iterations,
            converged: self.converged,
            peak: &self.peak,
            bootstrap: self.bootstrap.as_ref(),
            warnings: self
                .warnings
                .iter()
                .cloned()
                .chain(self.extrapolation_warning(ns))
                .collect(),
            predictions: self.predict(ns),
        }
    }
}

/// One value per coefficient, as `{"gamma", "alpha", "beta"}`.
#[derive(Debug, Clone, Copy)]
struct ByName<T>([T; 3]);

impl<T: Serialize> Serialize for ByName<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(NAMES.iter().zip(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::fit::{fit, Options};
    use crate::method::Method;

    #[test]
    fn the_record_has_every_name_in_order() {
        let n = [1.0, 2.0, 4.0, 6.0, 8.0, 10.0];
        let x = [1.0, 1.8868, 3.0769, 3.5294, 3.5398, 3.3557];
        let options = Options {
            method: Method::Bounded,
            bootstrap: 20,
            threads: 1,
            ..Options::default()
        };
        let f = fit(&n, &x, &options).unwrap();
        let v = serde_json::to_value(f.record(&[2.0, 100.0])).unwrap();
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(&v),
            [
                "method",
                "level",
                "n",
                "x",
                "params",
                "free",
                "at_bound",
                "se",
                "ci",
                "cov",
                "sse",
                "sigma",
                "df",
                "t",
                "r_squared",
                "fitted",
                "residuals",
                "iterations",
                "converged",
                "peak",
                "bootstrap",
                "warnings",
                "predictions"
            ]
        );
        assert_eq!(v["method"], "bounded");
        for by_name in ["params", "free", "at_bound", "se", "ci"] {
            assert_eq!(keys(&v[by_name]), ["gamma", "alpha", "beta"], "{by_name}");
        }
        assert_eq!(
            v["free"],
            json!({"gamma": true, "alpha": true, "beta": true})
        );
        assert_eq!(v["ci"]["alpha"].as_array().unwrap().len(), 2);
        assert_eq!(v["cov"].as_array().unwrap().len(), 3);
        assert!(v["df"].is_u64() && v["iterations"].is_u64() && v["sse"].is_f64());
        assert_eq!(
            keys(&v["peak"]),
            [
                "n_max",
                "n_max_integer",
                "n_max_floor",
                "x_max",
                "amdahl_limit"
            ]
        );
        assert_eq!(
            keys(&v["bootstrap"]),
            [
                "resamples",
                "seed",
                "level",
                "failed",
                "gamma",
                "alpha",
                "beta",
                "n_max",
                "x_max",
                "infinite_n_max",
                "no_peak"
            ]
        );
        assert_eq!(keys(&v["bootstrap"]["gamma"]), ["lo", "median", "hi"]);
        assert_eq!(
            keys(&v["predictions"][0]),
            [
                "n",
                "x",
                "x_se",
                "x_lo",
                "x_hi",
                "x_pred_lo",
                "x_pred_hi",
                "r",
                "r_lo",
                "r_hi",
                "extrapolated"
            ]
        );
        assert_eq!(v["predictions"][1]["extrapolated"], true);
        let last = v["warnings"].as_array().unwrap().last().unwrap();
        assert_eq!(keys(last), ["code", "message"]);
        assert_eq!(last["code"], "extrapolation");
    }
}
