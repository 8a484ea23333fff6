//! Levenberg–Marquardt for the USL with an analytic Jacobian and box bounds.
//!
//! Bounds are handled by an active set plus projection: a parameter sitting on a bound whose
//! gradient points out of the box is held for that iteration; the others take the damped
//! Gauss–Newton step, which is then projected back into the box. A step is kept only when it
//! lowers the sum of squares, so the iteration cannot diverge; a trial point where the model's
//! denominator is not positive at some measured N (possible only without bounds) is rejected
//! like an uphill step.

use crate::linear::{solve, Mat3};
use crate::model::Params;

const MAX_ITERATIONS: usize = 500;
const LAMBDA_START: f64 = 1e-3;
const LAMBDA_MAX: f64 = 1e16;
/// Converged when a kept step moves the fitted values by less than this fraction of their size.
const STEP_TOL: f64 = 1e-11;
/// ... or lowers the sum of squares by less than this fraction.
const COST_TOL: f64 = 1e-15;

/// Which parameters move and where they may go (index order γ, α, β).
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    pub n: &'a [f64],
    pub x: &'a [f64],
    pub free: [bool; 3],
    pub lower: [f64; 3],
    pub upper: [f64; 3],
}

#[derive(Debug, Clone, Copy)]
pub struct Solution {
    pub params: Params,
    pub sse: f64,
    pub iterations: usize,
    pub converged: bool,
}

impl Problem<'_> {
    /// Σ (X − X̂)², or None where the model is undefined (a denominator ≤ 0).
    pub fn sse(&self, p: &Params) -> Option<f64> {
        let mut s = 0.0;
        for (&n, &x) in self.n.iter().zip(self.x) {
            let d = p.denominator(n);
            if d.is_nan() || d <= 0.0 {
                return None;
            }
            let r = x - p.gamma * n / d;
            s += r * r;
        }
        s.is_finite().then_some(s)
    }

    fn clamp(&self, mut p: [f64; 3]) -> [f64; 3] {
        for (i, v) in p.iter_mut().enumerate() {
            if self.free[i] {
                *v = v.clamp(self.lower[i], self.upper[i]);
            }
        }
        p
    }

    /// JᵀJ, the gradient Jᵀ(X̂ − X) of ½·SSE, and Σ X̂² (all over the free parameters' slots).
    fn normal_equations(&self, p: &Params) -> (Mat3, [f64; 3], f64) {
        let mut a = [[0.0; 3]; 3];
        let mut g = [0.0; 3];
        let mut fitted_sq = 0.0;
        for (&n, &x) in self.n.iter().zip(self.x) {
            let j = p.gradient(n);
            let f = p.throughput(n);
            fitted_sq += f * f;
            for i in 0..3 {
                g[i] += j[i] * (f - x);
                for k in 0..3 {
                    a[i][k] += j[i] * j[k];
                }
            }
        }
        (a, g, fitted_sq)
    }

    /// Minimises the sum of squares from `start` (projected into the box first).
    pub fn minimise(&self, start: Params) -> Option<Solution> {
        let mut p = self.clamp(start.to_array());
        let mut sse = self.sse(&Params::from_array(p))?;
        let mut lambda = LAMBDA_START;
        let mut iterations = 0;
        let mut converged = false;
        while iterations < MAX_ITERATIONS {
            iterations += 1;
            let params = Params::from_array(p);
            let (a, g, fitted_sq) = self.normal_equations(&params);
            // Active set: free parameters not pinned against a bound by their gradient.
            let active: Vec<usize> = (0..3)
                .filter(|&i| self.free[i])
                .filter(|&i| {
                    let pinned_low = p[i] <= self.lower[i] && g[i] > 0.0;
                    let pinned_high = p[i] >= self.upper[i] && g[i] < 0.0;
                    !(pinned_low || pinned_high)
                })
                .collect();
            if active.is_empty() || sse == 0.0 {
                converged = true;
                break;
            }
            let k = active.len();
            let mut kept = None;
            while lambda <= LAMBDA_MAX {
                let mut m = [[0.0; 3]; 3];
                let mut rhs = [0.0; 3];
                for (r, &i) in active.iter().enumerate() {
                    rhs[r] = -g[i];
                    for (c, &j) in active.iter().enumerate() {
                        m[r][c] = a[i][j];
                    }
                    m[r][r] += lambda * a[i][i].max(f64::MIN_POSITIVE);
                }
                if let Some(step) = solve(m, rhs, k) {
                    let mut trial = p;
                    for (r, &i) in active.iter().enumerate() {
                        trial[i] += step[r];
                    }
                    let trial = self.clamp(trial);
                    if let Some(t_sse) = self.sse(&Params::from_array(trial)) {
                        if t_sse < sse {
                            kept = Some((trial, t_sse));
                            break;
                        }
                    }
                }
                lambda *= 4.0;
            }
            let Some((trial, t_sse)) = kept else {
                // No damped step lowers the SSE: a minimum to working precision.
                converged = true;
                break;
            };
            // Size of the move in fitted values: sqrt(Σ_i A_ii δ_i²).
            let moved: f64 = (0..3)
                .map(|i| a[i][i] * (trial[i] - p[i]).powi(2))
                .sum::<f64>()
                .sqrt();
            let drop = sse - t_sse;
            p = trial;
            sse = t_sse;
            lambda = (lambda / 3.0).max(1e-12);
            if moved <= STEP_TOL * fitted_sq.sqrt() || drop <= COST_TOL * sse {
                converged = true;
                break;
            }
        }
        Some(Solution {
            params: Params::from_array(p),
            sse,
            iterations,
            converged,
        })
    }
}
