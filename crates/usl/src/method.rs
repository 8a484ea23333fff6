//! The fitting methods, found by name through one table.

use crate::error::UslError;

/// How the coefficients are estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Nonlinear least squares, α, β ∈ [0, 1], γ ≥ 0 (the bounds of R `usl` 3.x).
    Bounded,
    /// Nonlinear least squares without bounds (non-physical values are flagged, not prevented).
    Unbounded,
    /// Nonlinear least squares with γ fixed to the mean X at N = 1; α, β ∈ [0, 1].
    FixedGamma,
    /// The book's linearised method: γ = X(1), quadratic regression of N/C(N) − 1 on N − 1.
    Linearised,
    /// Amdahl's law: β fixed to 0, γ ≥ 0 and α ∈ [0, 1] fitted.
    Amdahl,
}

/// One row of [`METHODS`].
#[derive(Debug, Clone, Copy)]
pub struct MethodInfo {
    pub name: &'static str,
    pub method: Method,
    pub summary: &'static str,
    /// Which of (γ, α, β) the method estimates.
    pub free: [bool; 3],
    pub lower: [f64; 3],
    pub upper: [f64; 3],
}

const INF: f64 = f64::INFINITY;

/// Every method, by the name the CLI and Python use.
pub const METHODS: &[MethodInfo] = &[
    MethodInfo {
        name: "bounded",
        method: Method::Bounded,
        summary: "nonlinear least squares, alpha and beta in [0, 1], gamma >= 0 (R usl 3.x)",
        free: [true, true, true],
        lower: [0.0, 0.0, 0.0],
        upper: [INF, 1.0, 1.0],
    },
    MethodInfo {
        name: "unbounded",
        method: Method::Unbounded,
        summary: "nonlinear least squares without bounds; non-physical values are flagged",
        free: [true, true, true],
        lower: [-INF, -INF, -INF],
        upper: [INF, INF, INF],
    },
    MethodInfo {
        name: "fixed-gamma",
        method: Method::FixedGamma,
        summary: "nonlinear least squares with gamma fixed to X(1); alpha, beta in [0, 1]",
        free: [false, true, true],
        lower: [0.0, 0.0, 0.0],
        upper: [INF, 1.0, 1.0],
    },
    MethodInfo {
        name: "linearised",
        method: Method::Linearised,
        summary: "the book's method: gamma = X(1), quadratic regression of N/C(N) - 1 on N - 1",
        free: [false, true, true],
        lower: [-INF, -INF, -INF],
        upper: [INF, INF, INF],
    },
    MethodInfo {
        name: "amdahl",
        method: Method::Amdahl,
        summary: "Amdahl's law: beta fixed to 0; gamma >= 0 and alpha in [0, 1] fitted",
        free: [true, true, false],
        lower: [0.0, 0.0, 0.0],
        upper: [INF, 1.0, 0.0],
    },
];

impl Method {
    /// The method called `name` (also accepts `linearized`).
    pub fn from_name(name: &str) -> Result<Method, UslError> {
        let wanted = if name == "linearized" {
            "linearised"
        } else {
            name
        };
        METHODS
            .iter()
            .find(|m| m.name == wanted)
            .map(|m| m.method)
            .ok_or_else(|| UslError::UnknownMethod {
                name: name.to_string(),
                known: METHODS.iter().map(|m| m.name).collect(),
            })
    }

    pub fn info(self) -> &'static MethodInfo {
        METHODS
            .iter()
            .find(|m| m.method == self)
            .expect("every method is in METHODS")
    }

    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// True when γ is not estimated but taken from the measurement at N = 1.
    pub fn gamma_from_unit_load(self) -> bool {
        !self.info().free[crate::model::GAMMA]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in METHODS {
            assert_eq!(Method::from_name(m.name).unwrap(), m.method);
            assert_eq!(m.method.name(), m.name);
        }
        assert_eq!(Method::from_name("linearized").unwrap(), Method::Linearised);
        assert!(matches!(
            Method::from_name("nls"),
            Err(UslError::UnknownMethod { .. })
        ));
        let names: Vec<&str> = METHODS.iter().map(|m| m.name).collect();
        assert_eq!(
            Method::from_name("nls").unwrap_err().to_string(),
            format!("unknown USL method \"nls\"; known: {}", names.join(", "))
        );
    }
}
