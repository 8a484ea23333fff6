//! Estimating the coefficients alone (what a fit starts with and the bootstrap repeats): data
//! checks, the least-squares estimate from several starting points, and (JᵀJ)⁻¹.

use crate::error::{UslError, MIN_POINTS, X_SCALE};
use crate::linear::{book_method, inverse_spd, quadratic_start, Mat3};
use crate::lm::{Problem, Solution};
use crate::method::Method;
use crate::model::{Params, ALPHA, BETA};

/// The estimate alone (what the bootstrap repeats).
#[derive(Debug, Clone, Copy)]
pub struct Estimate {
    pub params: Params,
    pub sse: f64,
    /// Covariance of (γ, α, β) before scaling by s², i.e. (JᵀJ)⁻¹; zero rows for fixed
    /// parameters. None when singular.
    pub unscaled_cov: Option<Mat3>,
    pub iterations: usize,
    pub converged: bool,
}

/// Refuses data a USL fit cannot use.
pub fn validate(n: &[f64], x: &[f64], method: Method) -> Result<(), UslError> {
    if n.len() != x.len() {
        return Err(UslError::LengthMismatch {
            n: n.len(),
            x: x.len(),
        });
    }
    for (row, (&ni, &xi)) in n.iter().zip(x).enumerate() {
        if !ni.is_finite() {
            return Err(UslError::NotFinite { row, column: "N" });
        }
        if !xi.is_finite() {
            return Err(UslError::NotFinite { row, column: "X" });
        }
        if ni <= 0.0 {
            return Err(UslError::NonPositiveLoad { row, value: ni });
        }
        if xi < 0.0 {
            return Err(UslError::NegativeThroughput { row, value: xi });
        }
    }
    if n.len() < MIN_POINTS {
        return Err(UslError::TooFewPoints { points: n.len() });
    }
    let mut sorted = n.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    if sorted.len() < 3 {
        return Err(UslError::TooFewLoads {
            distinct: sorted.len(),
        });
    }
    if x.iter().all(|&v| v == 0.0) {
        return Err(UslError::Degenerate("every throughput is zero".into()));
    }
    let largest = x.iter().copied().fold(0.0, f64::max);
    if !(X_SCALE.0..=X_SCALE.1).contains(&largest) {
        return Err(UslError::OutOfScale { largest });
    }
    if method.gamma_from_unit_load() && !n.contains(&1.0) {
        return Err(UslError::NoUnitLoad);
    }
    Ok(())
}

/// Mean throughput over the rows at N = 1.
fn unit_throughput(n: &[f64], x: &[f64]) -> Option<f64> {
    let (sum, count) = n
        .iter()
        .zip(x)
        .filter(|(&ni, _)| ni == 1.0)
        .fold((0.0, 0usize), |(s, c), (_, &xi)| (s + xi, c + 1));
    (count > 0).then(|| sum / count as f64)
}

/// (JᵀJ)⁻¹ over the free parameters, spread into a 3×3 with zeros for fixed ones.
fn unscaled_covariance(n: &[f64], p: &Params, free: [bool; 3]) -> Option<Mat3> {
    let idx: Vec<usize> = (0..3).filter(|&i| free[i]).collect();
    let mut a = [[0.0; 3]; 3];
    for &ni in n {
        let g = p.gradient(ni);
        for (r, &i) in idx.iter().enumerate() {
            for (c, &j) in idx.iter().enumerate() {
                a[r][c] += g[i] * g[j];
            }
        }
    }
    let inv = inverse_spd(&a, idx.len())?;
    let mut out = [[0.0; 3]; 3];
    for (r, &i) in idx.iter().enumerate() {
        for (c, &j) in idx.iter().enumerate() {
            out[i][j] = inv[r][c];
        }
    }
    Some(out)
}

fn sse_of(n: &[f64], x: &[f64], p: &Params) -> f64 {
    n.iter()
        .zip(x)
        .map(|(&ni, &xi)| (xi - p.throughput(ni)).powi(2))
        .sum()
}

/// Estimates the coefficients of already validated data. `hint`, when given, is tried as a
/// starting point first (the bootstrap passes the original fit).
pub fn estimate(
    n: &[f64],
    x: &[f64],
    method: Method,
    hint: Option<Params>,
) -> Result<Estimate, UslError> {
    let info = method.info();
    let x1 = if method.gamma_from_unit_load() {
        Some(unit_throughput(n, x).ok_or(UslError::NoUnitLoad)?)
    } else {
        None
    };
    if method == Method::Linearised {
        let x1 = x1.expect("linearised fixes gamma");
        let (alpha, beta, cov2, _) = book_method(n, x, x1)
            .ok_or_else(|| UslError::Degenerate("the linearised regression is singular".into()))?;
        let params = Params::new(x1, alpha, beta);
        // book_method's covariance is already scaled by the regression's own residual
        // variance (in the transformed space); `fit` uses it as it is.
        let mut cov = [[0.0; 3]; 3];
        cov[ALPHA][ALPHA] = cov2[0][0];
        cov[ALPHA][BETA] = cov2[0][1];
        cov[BETA][ALPHA] = cov2[1][0];
        cov[BETA][BETA] = cov2[1][1];
        return Ok(Estimate {
            params,
            sse: sse_of(n, x, &params),
            unscaled_cov: Some(cov),
            iterations: 1,
            converged: true,
        });
    }

    let problem = Problem {
        n,
        x,
        free: info.free,
        lower: info.lower,
        upper: info.upper,
    };
    let fixed = |mut p: Params| {
        if let Some(g) = x1 {
            p.gamma = g;
        }
        if !info.free[BETA] {
            p.beta = 0.0;
        }
        p
    };
    let slope = n
        .iter()
        .zip(x)
        .map(|(&ni, &xi)| xi / ni)
        .fold(0.0f64, f64::max);
    let mut starts: Vec<Params> = Vec::with_capacity(6);
    starts.extend(hint);
    starts.extend(quadratic_start(n, x));
    if hint.is_none() {
        if let Some(g) = x1 {
            if let Some((a, b, _, _)) = book_method(n, x, g) {
                starts.push(Params::new(g, a, b));
            }
        }
        // R usl's starting point, then "nearly linear" and "strong contention" corners.
        starts.push(Params::new(slope, 0.01, 1e-4));
        starts.push(Params::new(slope, 0.0, 0.0));
        starts.push(Params::new(slope, 0.1, 0.0));
    }
    let mut best: Option<Solution> = None;
    for start in starts {
        let start = fixed(start);
        if let Some(sol) = problem.minimise(start) {
            let better = best.is_none_or(|b| sol.sse < b.sse);
            if better {
                best = Some(sol);
            }
        }
    }
    let sol = best.ok_or_else(|| {
        UslError::Degenerate("no starting point gave a finite sum of squares".into())
    })?;
    // A sum of squares of 0 while the curve misses a point: the squares underflowed, so no
    // step could lower it and the "fit" is its starting point. Never reported as a fit.
    let underflows = |(&ni, &xi): (&f64, &f64)| {
        let r = xi - sol.params.throughput(ni);
        r != 0.0 && r * r == 0.0
    };
    if sol.sse == 0.0 && n.iter().zip(x).any(underflows) {
        return Err(UslError::Degenerate(
            "the sum of squares underflows to 0 though the curve misses the points, so the \
             fit cannot move from its starting values; give X in a larger unit"
                .into(),
        ));
    }
    Ok(Estimate {
        params: sol.params,
        sse: sol.sse,
        unscaled_cov: unscaled_covariance(n, &sol.params, info.free),
        iterations: sol.iterations,
        converged: sol.converged,
    })
}
