//! The model X(N) = γN / (1 + α(N−1) + βN(N−1)), its derivatives, and its peak.

/// Parameter order everywhere (vectors, covariance rows): γ, α, β.
pub const GAMMA: usize = 0;
pub const ALPHA: usize = 1;
pub const BETA: usize = 2;
pub const NAMES: [&str; 3] = ["gamma", "alpha", "beta"];

/// USL coefficients: γ (throughput at N = 1), α (contention), β (coherency delay).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub gamma: f64,
    pub alpha: f64,
    pub beta: f64,
}

impl Params {
    pub fn new(gamma: f64, alpha: f64, beta: f64) -> Params {
        Params { gamma, alpha, beta }
    }

    pub fn to_array(self) -> [f64; 3] {
        [self.gamma, self.alpha, self.beta]
    }

    pub fn from_array(p: [f64; 3]) -> Params {
        Params::new(p[GAMMA], p[ALPHA], p[BETA])
    }

    /// 1 + α(N−1) + βN(N−1).
    pub fn denominator(&self, n: f64) -> f64 {
        1.0 + self.alpha * (n - 1.0) + self.beta * n * (n - 1.0)
    }

    /// Throughput X(N).
    pub fn throughput(&self, n: f64) -> f64 {
        self.gamma * n / self.denominator(n)
    }

    /// Response time R(N) = N / X(N) (Little's law with no think time).
    pub fn response_time(&self, n: f64) -> f64 {
        n / self.throughput(n)
    }

    /// ∂X/∂(γ, α, β) at N.
    pub fn gradient(&self, n: f64) -> [f64; 3] {
        let d = self.denominator(n);
        let base = n / d;
        let scaled = self.gamma * base / d;
        [base, -scaled * (n - 1.0), -scaled * n * (n - 1.0)]
    }

    /// The load of peak throughput, sqrt((1−α)/β): +∞ when β = 0 and α < 1 (Amdahl: X rises
    /// towards γ/α forever); None when X never rises (α ≥ 1) or β < 0 without a peak.
    pub fn n_max(&self) -> Option<f64> {
        let (a, b) = (self.alpha, self.beta);
        if !a.is_finite() || !b.is_finite() || a >= 1.0 {
            return None;
        }
        if b == 0.0 {
            return Some(f64::INFINITY);
        }
        let q = (1.0 - a) / b;
        (q > 0.0).then(|| q.sqrt())
    }

    /// X at the continuous N of the peak; γ/α (the Amdahl asymptote) when the peak is at
    /// infinity; None when there is no peak.
    pub fn peak_throughput(&self) -> Option<f64> {
        match self.n_max()? {
            n if n.is_infinite() => (self.alpha > 0.0).then(|| self.gamma / self.alpha),
            n => Some(self.throughput(n)),
        }
    }

    /// The whole N ≥ 1 of highest throughput: the better of ⌊Nmax⌋ and ⌈Nmax⌉.
    pub fn n_max_integer(&self) -> Option<u64> {
        let n = self.n_max()?;
        if !n.is_finite() || n > 9.0e15 {
            return None;
        }
        let lo = n.floor().max(1.0);
        let hi = n.ceil().max(1.0);
        let best = if self.throughput(hi) > self.throughput(lo) {
            hi
        } else {
            lo
        };
        Some(best as u64)
    }

    /// The Amdahl asymptote γ/α (X as N → ∞ when β = 0); None when α ≤ 0.
    pub fn amdahl_limit(&self) -> Option<f64> {
        (self.alpha > 0.0).then(|| self.gamma / self.alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_matches_finite_differences() {
        let p = Params::new(950.0, 0.027, 0.00077);
        for n in [1.0, 2.5, 7.0, 40.0] {
            let g = p.gradient(n);
            let arr = p.to_array();
            for k in 0..3 {
                let h = arr[k].abs() * 1e-6 + 1e-12;
                let (mut up, mut dn) = (arr, arr);
                up[k] += h;
                dn[k] -= h;
                let fd = (Params::from_array(up).throughput(n)
                    - Params::from_array(dn).throughput(n))
                    / (2.0 * h);
                assert!((fd - g[k]).abs() <= 1e-6 * (fd.abs() + 1.0), "k {k} n {n}");
            }
        }
    }

    #[test]
    fn peak_is_where_the_derivative_vanishes() {
        let p = Params::new(1.0, 0.02, 0.02);
        let n = p.n_max().unwrap();
        assert!((n - 7.0).abs() < 1e-12);
        assert!(p.throughput(n) >= p.throughput(n - 1e-3));
        assert!(p.throughput(n) >= p.throughput(n + 1e-3));
        assert_eq!(p.n_max_integer(), Some(7));
    }

    #[test]
    fn amdahl_and_no_peak() {
        let amdahl = Params::new(10.0, 0.05, 0.0);
        assert_eq!(amdahl.n_max(), Some(f64::INFINITY));
        assert_eq!(amdahl.peak_throughput(), Some(200.0));
        assert_eq!(amdahl.n_max_integer(), None);
        assert_eq!(Params::new(10.0, 1.2, 0.01).n_max(), None);
    }
}
