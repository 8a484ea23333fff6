//! Small dense linear algebra (at most 3 unknowns) and the linearised USL fits: the book's
//! quadratic regression with γ = X(1), and a weighted quadratic in N/X used for starting values.

use crate::model::Params;

pub type Mat3 = [[f64; 3]; 3];

/// Solves the leading `k`×`k` system `a·x = b` by Gaussian elimination with partial pivoting.
/// None when the matrix is singular to working precision.
pub fn solve(mut a: Mat3, mut b: [f64; 3], k: usize) -> Option<[f64; 3]> {
    for col in 0..k {
        let pivot = (col..k).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        let usable = a[pivot][col].abs() > 0.0 && a[pivot][col].is_finite();
        if !usable {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (top, rest) = a.split_at_mut(col + 1);
        let pivot_row = &top[col];
        for (r, row) in rest.iter_mut().enumerate().take(k - col - 1) {
            let f = row[col] / pivot_row[col];
            for (v, p) in row.iter_mut().zip(pivot_row).take(k).skip(col) {
                *v -= f * p;
            }
            b[col + 1 + r] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for row in (0..k).rev() {
        let mut s = b[row];
        for c in row + 1..k {
            s -= a[row][c] * x[c];
        }
        x[row] = s / a[row][row];
    }
    x.iter().take(k).all(|v| v.is_finite()).then_some(x)
}

/// The inverse of the leading `k`×`k` block of a symmetric positive semi-definite matrix, with
/// the columns equilibrated first (parameters of very different scale, like γ ~ 1000 and
/// β ~ 1e-4, would otherwise lose digits). None when singular.
pub fn inverse_spd(a: &Mat3, k: usize) -> Option<Mat3> {
    let mut d = [1.0; 3];
    for i in 0..k {
        if a[i][i].is_nan() || a[i][i] <= 0.0 {
            return None;
        }
        d[i] = a[i][i].sqrt();
    }
    let mut scaled = [[0.0; 3]; 3];
    for i in 0..k {
        for j in 0..k {
            scaled[i][j] = a[i][j] / (d[i] * d[j]);
        }
    }
    let mut inv = [[0.0; 3]; 3];
    for col in 0..k {
        let mut e = [0.0; 3];
        e[col] = 1.0;
        let x = solve(scaled, e, k)?;
        for row in 0..k {
            inv[row][col] = x[row] / (d[row] * d[col]);
        }
    }
    // The reciprocal condition number of the equilibrated matrix must be sane.
    let mut norm = 0.0f64;
    let mut inv_norm = 0.0f64;
    for i in 0..k {
        norm = norm.max((0..k).map(|j| scaled[i][j].abs()).sum());
        inv_norm = inv_norm.max((0..k).map(|j| (inv[i][j] * d[i] * d[j]).abs()).sum());
    }
    (norm * inv_norm < 1e14).then_some(inv)
}

/// Least squares on `k` ≤ 3 columns: minimise Σ (row·c − y)². Columns are scaled to unit
/// norm before forming the normal equations. Returns the coefficients and (XᵀX)⁻¹.
pub fn lstsq(rows: &[([f64; 3], f64)], k: usize) -> Option<([f64; 3], Mat3)> {
    let mut xtx = [[0.0; 3]; 3];
    let mut xty = [0.0; 3];
    for (r, y) in rows {
        for i in 0..k {
            xty[i] += r[i] * y;
            for j in 0..k {
                xtx[i][j] += r[i] * r[j];
            }
        }
    }
    let inv = inverse_spd(&xtx, k)?;
    let mut c = [0.0; 3];
    for i in 0..k {
        c[i] = (0..k).map(|j| inv[i][j] * xty[j]).sum();
    }
    Some((c, inv))
}

/// The book's method (Gunther, *Guerrilla Capacity Planning*, ch. 5): with C(N) = X(N)/X(1),
/// regress y = N/C − 1 on x = N − 1 as y = a·x² + b·x through the origin; then β = a,
/// α = b − a. Returns (α, β), their 2×2 covariance (α, β order) and the residual degrees of
/// freedom, or None when the regression is singular. Every row is used; `x1` is X(1).
pub fn book_method(n: &[f64], x: &[f64], x1: f64) -> Option<(f64, f64, [[f64; 2]; 2], usize)> {
    let rows: Vec<([f64; 3], f64)> = n
        .iter()
        .zip(x)
        .filter(|(_, &xi)| xi > 0.0)
        .map(|(&ni, &xi)| {
            let u = ni - 1.0;
            ([u * u, u, 0.0], ni * x1 / xi - 1.0)
        })
        .collect();
    let (c, inv) = lstsq(&rows, 2)?;
    let (a, b) = (c[0], c[1]);
    let df = rows.len().checked_sub(2)?;
    let sse: f64 = rows
        .iter()
        .map(|(r, y)| (y - a * r[0] - b * r[1]).powi(2))
        .sum();
    let s2 = if df > 0 { sse / df as f64 } else { f64::NAN };
    // α = b − a, β = a: Var α = Var a + Var b − 2 Cov(a,b); Cov(α, β) = Cov(a,b) − Var a.
    let (vaa, vbb, vab) = (inv[0][0] * s2, inv[1][1] * s2, inv[0][1] * s2);
    let cov = [[vaa + vbb - 2.0 * vab, vab - vaa], [vab - vaa, vaa]];
    Some((b - a, a, cov, df))
}

/// Starting values from N/X = [(1−α) + (α−β)N + βN²] / γ, a quadratic in N fitted by least
/// squares weighted so that its residuals approximate those of X itself. Rows with X ≤ 0 are
/// skipped. None when the quadratic is singular or implies γ ≤ 0.
pub fn quadratic_start(n: &[f64], x: &[f64]) -> Option<Params> {
    let scale = n.iter().cloned().fold(0.0f64, f64::max);
    if scale.is_nan() || scale <= 0.0 {
        return None;
    }
    // d(N/X) = −(N/X²)·dX, so multiplying a row by X²/N puts it on the scale of X.
    let rows: Vec<([f64; 3], f64)> = n
        .iter()
        .zip(x)
        .filter(|(_, &xi)| xi > 0.0)
        .map(|(&ni, &xi)| {
            let w = xi * xi / ni;
            let t = ni / scale;
            ([w, w * t, w * t * t], w * ni / xi)
        })
        .collect();
    let (c, _) = lstsq(&rows, 3)?;
    let (c0, c1, c2) = (c[0], c[1] / scale, c[2] / (scale * scale));
    let inv_gamma = c0 + c1 + c2;
    if inv_gamma.is_nan() || inv_gamma <= 0.0 {
        return None;
    }
    let gamma = 1.0 / inv_gamma;
    Some(Params::new(gamma, 1.0 - c0 * gamma, c2 * gamma))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadratic_start_recovers_exact_data() {
        let p = Params::new(3.0, 0.05, 0.002);
        let n: Vec<f64> = (1..=20).map(f64::from).collect();
        let x: Vec<f64> = n.iter().map(|&v| p.throughput(v)).collect();
        let q = quadratic_start(&n, &x).unwrap();
        assert!((q.gamma - 3.0).abs() < 1e-9);
        assert!((q.alpha - 0.05).abs() < 1e-9);
        assert!((q.beta - 0.002).abs() < 1e-11);
    }

    #[test]
    fn inverse_of_a_badly_scaled_matrix() {
        let a = [[1e6, 2.0, 0.0], [2.0, 1e-6, 0.0], [0.0, 0.0, 1.0]];
        let inv = inverse_spd(&a, 2).unwrap();
        let i00 = a[0][0] * inv[0][0] + a[0][1] * inv[1][0];
        let i01 = a[0][0] * inv[0][1] + a[0][1] * inv[1][1];
        assert!((i00 - 1.0).abs() < 1e-9 && i01.abs() < 1e-9);
    }

    #[test]
    fn singular_is_none() {
        let a = [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]];
        assert!(inverse_spd(&a, 2).is_none());
    }
}
