//! Student's t distribution: the CDF from `statrs` (its regularised incomplete beta), and the
//! quantile by bisecting that CDF.
//!
//! statrs's own `inverse_cdf` is not used: it goes through its inverse incomplete beta, which
//! loses accuracy as the degrees of freedom grow (statrs 0.18 and 0.19 give 1.8266 for the
//! 0.975-quantile at df = 1e7, where the answer is 1.95996; 1e-8 relative at df = 1e4), while
//! bisecting the CDF stays within 1e-8 relative of the hand-written incomplete beta this
//! replaced at every df tried (1 to 1e7), at the same speed (about 50 µs a quantile).

use statrs::distribution::{ContinuousCDF, StudentsT};

/// P(T ≤ t) for Student's t with `df` > 0 degrees of freedom (NaN for any other `df`).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(d) if !t.is_nan() => d.cdf(t),
        _ => f64::NAN,
    }
}

/// The p-quantile of Student's t with `df` > 0 degrees of freedom (0 < p < 1).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    let valid = p > 0.0 && p < 1.0 && df > 0.0;
    if !valid {
        return f64::NAN;
    }
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    // Bracket, then bisect on the CDF: robust for every df, and cheap at ~110 steps.
    let mut hi = 1.0;
    while t_cdf(hi, df) < p {
        hi *= 2.0;
        if hi > 1e300 {
            return f64::INFINITY;
        }
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Critical values from standard printed t tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
    #[test]
    fn quantiles_match_printed_tables() {
        let cases = [
            (0.975, 1.0, 12.706),
            (0.975, 4.0, 2.776),
            (0.975, 8.0, 2.306),
            (0.975, 29.0, 2.045),
            (0.95, 10.0, 1.812),
            (0.995, 5.0, 4.032),
            (0.975, 100.0, 1.984),
        ];
        for (p, df, want) in cases {
            let got = t_quantile(p, df);
            assert!(
                (got - want).abs() < 6e-4,
                "t({p}, {df}) = {got}, table {want}"
            );
        }
    }

    #[test]
    fn cdf_and_quantile_are_inverse() {
        for df in [1.0, 2.5, 7.0, 30.0, 1e4] {
            for p in [0.001, 0.1, 0.5, 0.8, 0.975, 0.9999] {
                let t = t_quantile(p, df);
                assert!((t_cdf(t, df) - p).abs() < 1e-12, "df {df} p {p}");
            }
        }
    }

    #[test]
    fn large_df_approaches_normal() {
        assert!((t_quantile(0.975, 1e7) - 1.959_964).abs() < 1e-5);
    }
}
