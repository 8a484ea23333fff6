//! One USL fit: the estimate (see `estimate`) with its uncertainty (t intervals and, if asked,
//! the bootstrap), fit quality, derived figures, warnings and predictions.

use serde::Serialize;

use crate::bootstrap::{self, Bootstrap, Sample};
use crate::dist::t_quantile;
use crate::error::UslError;
use crate::estimate::{estimate, validate};
use crate::linear::Mat3;
use crate::method::Method;
use crate::model::{Params, ALPHA, BETA, NAMES};

/// Predictions beyond this multiple of the largest measured N are flagged as extrapolation.
pub const EXTRAPOLATION_FACTOR: f64 = 2.0;
/// A residual standard error above this share of the mean throughput is a poor fit. (R² is
/// not reported as a measure of fit: it is not valid for nonlinear regression, and R `usl`
/// dropped it in 3.0.0.)
pub const POOR_FIT_RELATIVE_SE: f64 = 0.10;
/// Fewer distinct loads than this draw a warning: the curve's shape is barely sampled.
pub const MIN_DISTINCT_LOADS: usize = 6;

/// What to fit and how much uncertainty work to do.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub method: Method,
    /// Confidence level of every interval, e.g. 0.95.
    pub level: f64,
    /// Bootstrap resamples for Nmax and the peak (0: none).
    pub bootstrap: usize,
    pub seed: u64,
    /// Threads for the bootstrap (0: up to 4, as the machine allows).
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            method: Method::Bounded,
            level: 0.95,
            bootstrap: 0,
            seed: 0,
            threads: 0,
        }
    }
}

/// A note about the fit a reader should see; `code` is stable, `message` is for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warning {
    pub code: &'static str,
    pub message: String,
}

impl Warning {
    fn new(code: &'static str, message: String) -> Warning {
        Warning { code, message }
    }
}

/// Where throughput peaks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Peak {
    /// sqrt((1−α)/β); +∞ when β = 0 (Amdahl); None when X never rises (α ≥ 1, or β < 0).
    pub n_max: Option<f64>,
    /// The whole N of highest throughput (⌊Nmax⌋ or ⌈Nmax⌉); None when Nmax is not finite.
    pub n_max_integer: Option<u64>,
    /// ⌊Nmax⌋, the most a conservative plan would use.
    pub n_max_floor: Option<u64>,
    /// X at the continuous Nmax (γ/α when Nmax = ∞).
    pub x_max: Option<f64>,
    /// γ/α: the ceiling on throughput that contention alone imposes.
    pub amdahl_limit: Option<f64>,
}

impl Peak {
    pub fn of(p: &Params) -> Peak {
        let n_max = p.n_max();
        Peak {
            n_max,
            n_max_integer: p.n_max_integer(),
            n_max_floor: n_max
                .filter(|n| n.is_finite() && *n >= 1.0)
                .map(|n| n as u64),
            x_max: p.peak_throughput(),
            amdahl_limit: p.amdahl_limit(),
        }
    }
}

/// X(N) and R(N) = N/X(N) at one load, with confidence and prediction intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    pub n: f64,
    pub x: f64,
    /// Standard error of the fitted mean X(N) (delta method).
    pub x_se: f64,
    /// Confidence interval of the mean X(N).
    pub x_lo: f64,
    pub x_hi: f64,
    /// Prediction interval of one new measurement at N.
    pub x_pred_lo: f64,
    pub x_pred_hi: f64,
    /// Response time N/X(N) and its interval (the X interval mapped through N/X).
    pub r: f64,
    pub r_lo: f64,
    pub r_hi: f64,
    /// N lies beyond [`EXTRAPOLATION_FACTOR`] × the largest measured N.
    pub extrapolated: bool,
}

/// A finished fit.
#[derive(Debug, Clone)]
pub struct Fit {
    pub method: Method,
    pub level: f64,
    pub n: Vec<f64>,
    pub x: Vec<f64>,
    pub params: Params,
    /// Which of (γ, α, β) were estimated.
    pub free: [bool; 3],
    /// Estimated parameters sitting on a bound.
    pub at_bound: [bool; 3],
    /// Standard errors (None for fixed parameters or a singular fit).
    pub se: [Option<f64>; 3],
    /// t-based confidence intervals at `level`, clipped to the method's bounds.
    pub ci: [Option<(f64, f64)>; 3],
    /// Covariance of (γ, α, β): (JᵀJ)⁻¹·s².
    pub cov: Option<Mat3>,
    pub sse: f64,
    /// Residual standard error s = sqrt(SSE / df).
    pub sigma: f64,
    /// Residual degrees of freedom: points − estimated parameters.
    pub df: usize,
    /// The Student t quantile used for intervals.
    pub t: f64,
    pub r_squared: f64,
    pub fitted: Vec<f64>,
    pub residuals: Vec<f64>,
    pub iterations: usize,
    pub converged: bool,
    pub peak: Peak,
    pub bootstrap: Option<Bootstrap>,
    pub warnings: Vec<Warning>,
}

/// Fits the USL to loads `n` and throughputs `x`.
pub fn fit(n: &[f64], x: &[f64], options: &Options) -> Result<Fit, UslError> {
    if !(options.level > 0.0 && options.level < 1.0) {
        return Err(UslError::BadLevel(options.level));
    }
    validate(n, x, options.method)?;
    let method = options.method;
    let info = method.info();
    let est = estimate(n, x, method, None)?;
    let p = est.params;
    let k = info.free.iter().filter(|f| **f).count();
    let df = n.len() - k;
    let s2 = est.sse / df as f64;
    let cov = est.unscaled_cov.map(|u| {
        if method == Method::Linearised {
            u // already scaled (by the regression's own residual variance)
        } else {
            u.map(|row| row.map(|v| v * s2))
        }
    });
    let t = t_quantile(1.0 - (1.0 - options.level) / 2.0, df as f64);
    let arr = p.to_array();
    let mut se = [None; 3];
    let mut ci = [None; 3];
    let mut at_bound = [false; 3];
    for i in 0..3 {
        if !info.free[i] {
            continue;
        }
        at_bound[i] = arr[i] <= info.lower[i] || arr[i] >= info.upper[i];
        if let Some(c) = cov {
            let s = c[i][i].max(0.0).sqrt();
            se[i] = Some(s);
            let lo = (arr[i] - t * s).max(info.lower[i]);
            let hi = (arr[i] + t * s).min(info.upper[i]);
            ci[i] = Some((lo, hi));
        }
    }
    let fitted: Vec<f64> = n.iter().map(|&v| p.throughput(v)).collect();
    let residuals: Vec<f64> = x.iter().zip(&fitted).map(|(a, b)| a - b).collect();
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    let sst: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
    let mut out = Fit {
        method,
        level: options.level,
        n: n.to_vec(),
        x: x.to_vec(),
        params: p,
        free: info.free,
        at_bound,
        se,
        ci,
        cov,
        sse: est.sse,
        sigma: s2.sqrt(),
        df,
        t,
        r_squared: if sst > 0.0 {
            1.0 - est.sse / sst
        } else {
            f64::NAN
        },
        fitted,
        residuals,
        iterations: est.iterations,
        converged: est.converged,
        peak: Peak::of(&p),
        bootstrap: None,
        warnings: Vec::new(),
    };
    out.warnings = warnings(&out);
    if options.bootstrap > 0 {
        let sample = Sample {
            n: &out.n,
            fitted: &out.fitted,
            residuals: &out.residuals,
            df: out.df,
            method,
            params: p,
            level: options.level,
        };
        out.bootstrap = Some(bootstrap::run(
            &sample,
            options.bootstrap,
            options.seed,
            options.threads,
        ));
    }
    Ok(out)
}

fn warnings(f: &Fit) -> Vec<Warning> {
    let mut w = Vec::new();
    let p = f.params;
    let max_n = f.n.iter().cloned().fold(0.0f64, f64::max);
    if !f.converged {
        w.push(Warning::new(
            "not_converged",
            format!(
                "the fit stopped after {} iterations without converging; treat the \
                 coefficients with suspicion",
                f.iterations
            ),
        ));
    }
    if p.alpha < 0.0 {
        w.push(Warning::new(
            "non_physical",
            format!(
                "alpha = {:.4} is negative: the data scale better than linearly (superlinear \
                 speed-up, e.g. from a growing cache), which the USL does not describe",
                p.alpha
            ),
        ));
    }
    if p.alpha > 1.0 {
        w.push(Warning::new(
            "non_physical",
            format!(
                "alpha = {:.4} is above 1: throughput falls from the first added unit of load",
                p.alpha
            ),
        ));
    }
    if p.beta < 0.0 {
        w.push(Warning::new(
            "non_physical",
            format!(
                "beta = {:.3e} is negative: throughput keeps rising faster than Amdahl's \
                 law allows; there is no peak",
                p.beta
            ),
        ));
    }
    if f.gamma_negative() {
        w.push(Warning::new(
            "non_physical",
            format!("gamma = {:.4} is not positive", p.gamma),
        ));
    }
    let info = f.method.info();
    for (i, name) in NAMES.iter().enumerate() {
        if !f.at_bound[i] {
            continue;
        }
        let value = p.to_array()[i];
        let which = if value <= info.lower[i] {
            "lower"
        } else {
            "upper"
        };
        let meaning = match (i, which) {
            (BETA, "lower") => {
                let limit = p
                    .amdahl_limit()
                    .map(|l| format!(" (throughput approaches gamma/alpha = {})", sig4(l)))
                    .unwrap_or_default();
                format!("no coherency delay is detectable: the fit is Amdahl's law{limit}")
            }
            (ALPHA, "lower") => "no contention is detectable".to_string(),
            _ => "the data push this parameter against its bound".to_string(),
        };
        w.push(Warning::new(
            "at_bound",
            format!("{name} is at its {which} bound {value}: {meaning}; its interval is one-sided"),
        ));
    }
    let mean = f.x.iter().sum::<f64>() / f.x.len() as f64;
    if f.df > 0 && mean > 0.0 && f.sigma / mean > POOR_FIT_RELATIVE_SE {
        w.push(Warning::new(
            "poor_fit",
            format!(
                "the residual standard error ({}) is {:.0} % of the mean throughput: the \
                 measurements may be too noisy (or not in steady state) to support the \
                 coefficients",
                sig4(f.sigma),
                100.0 * f.sigma / mean
            ),
        ));
    }
    let mut distinct: Vec<f64> = f.n.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < MIN_DISTINCT_LOADS {
        w.push(Warning::new(
            "few_loads",
            format!(
                "only {} distinct loads: three coefficients from fewer than \
                 {MIN_DISTINCT_LOADS} loads rest on repeats, not on the shape of the curve; \
                 measure more values of N",
                distinct.len()
            ),
        ));
    }
    let min_n = distinct[0];
    let at_min: Vec<usize> = (0..f.n.len()).filter(|&i| f.n[i] == min_n).collect();
    if let [only] = at_min[..] {
        let off = f.residuals[only].abs();
        if f.method.gamma_from_unit_load() {
            w.push(Warning::new(
                "single_unit_point",
                format!(
                    "gamma is taken from one measurement at N = {min_n}: its noise goes \
                     straight into every coefficient; repeat the N = {min_n} point"
                ),
            ));
        } else if f.df > 0 && f.sigma > 0.0 && off > 2.0 * f.sigma {
            w.push(Warning::new(
                "single_unit_point",
                format!(
                    "the one measurement at N = {min_n} lies {:.1} residual standard errors \
                     from the fit: a single noisy point where the curve starts steers \
                     gamma and alpha; repeat it",
                    off / f.sigma
                ),
            ));
        }
    }
    if f.cov.is_none() {
        w.push(Warning::new(
            "singular",
            "the Jacobian is singular at the fit: standard errors and intervals are not \
             available"
                .to_string(),
        ));
    }
    if let Some(nm) = f.peak.n_max.filter(|v| v.is_finite()) {
        if nm > EXTRAPOLATION_FACTOR * max_n {
            w.push(Warning::new(
                "peak_extrapolated",
                format!(
                    "Nmax = {} is more than {EXTRAPOLATION_FACTOR}x the largest measured \
                     load ({max_n}): the peak is an extrapolation",
                    sig4(nm)
                ),
            ));
        }
    }
    w
}

/// X(N) and R(N) = N/X(N) with intervals, from coefficients, their covariance (None: no
/// intervals), the residual standard error, the t quantile and the largest measured N (for
/// the extrapolation flag). What [`Fit::predict`] does, also for a fit read back from storage.
pub fn predict(
    p: &Params,
    cov: Option<&Mat3>,
    sigma: f64,
    t: f64,
    max_n: f64,
    ns: &[f64],
) -> Vec<Prediction> {
    let limit = EXTRAPOLATION_FACTOR * max_n;
    ns.iter()
        .map(|&n| {
            let x = p.throughput(n);
            let var = cov.map_or(f64::NAN, |c| {
                let g = p.gradient(n);
                (0..3)
                    .map(|i| (0..3).map(|j| g[i] * c[i][j] * g[j]).sum::<f64>())
                    .sum::<f64>()
                    .max(0.0)
            });
            let se = var.sqrt();
            let half = t * se;
            let pred_half = t * (var + sigma * sigma).sqrt();
            let (x_lo, x_hi) = ((x - half).max(0.0), x + half);
            // R = N/X falls as X rises: the X interval maps to [N/X_hi, N/X_lo].
            let r_of = |v: f64| if v > 0.0 { n / v } else { f64::INFINITY };
            Prediction {
                n,
                x,
                x_se: se,
                x_lo,
                x_hi,
                x_pred_lo: (x - pred_half).max(0.0),
                x_pred_hi: x + pred_half,
                r: r_of(x),
                r_lo: r_of(x_hi),
                r_hi: r_of(x_lo),
                extrapolated: n > limit,
            }
        })
        .collect()
}

/// `v` to four significant figures, without trailing zeros.
fn sig4(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

impl Fit {
    fn gamma_negative(&self) -> bool {
        self.params.gamma <= 0.0
    }

    /// The largest measured load.
    pub fn max_n(&self) -> f64 {
        self.n.iter().cloned().fold(0.0f64, f64::max)
    }

    /// X(N) and R(N) with intervals at the fit's level, for each N (fractional N allowed).
    pub fn predict(&self, ns: &[f64]) -> Vec<Prediction> {
        predict(
            &self.params,
            self.cov.as_ref(),
            self.sigma,
            self.t,
            self.max_n(),
            ns,
        )
    }

    /// A warning when any of `ns` is beyond [`EXTRAPOLATION_FACTOR`] × the largest measured N.
    pub fn extrapolation_warning(&self, ns: &[f64]) -> Option<Warning> {
        let max_n = self.max_n();
        let far: Vec<String> = ns
            .iter()
            .filter(|&&n| n > EXTRAPOLATION_FACTOR * max_n)
            .map(|n| format!("{n}"))
            .collect();
        (!far.is_empty()).then(|| {
            Warning::new(
                "extrapolation",
                format!(
                    "N = {} is beyond {EXTRAPOLATION_FACTOR}x the largest measured load \
                     ({max_n}): the prediction is an extrapolation and its interval assumes \
                     the model still holds there",
                    far.join(", ")
                ),
            )
        })
    }
}
