"""A superlinear start, found and described (Gunther's superlinear USL).

Methods that bound α at 0 (``bounded``, as R ``usl`` 3.x; ``fixed-gamma``; ``amdahl``) cannot
represent data whose capacity first grows faster than N: α pins at 0 and β absorbs the error.
:func:`detect` fits the same points without bounds; when that fit's α is negative and its
whole interval is below 0, the start is superlinear, and the unbounded coefficients describe
it:

* ``n_cross`` (N×), the payback point: capacity C(N) = X(N)/X(1) equals N again there,
  ``N× = −α/β`` (C(N) > N below it); with β ≤ 0 it is never reached (None);
* ``n_star`` (N*), the peak, ``sqrt((1 − α)/β)``, and ``x_star``, the throughput there.

The decision and the intervals use a heteroscedasticity-consistent covariance (HC3, the
sandwich with leverage-corrected squared residuals) of the unbounded fit, not its
(JᵀJ)⁻¹·s²: throughput noise grows with throughput, and under such noise the plain covariance
called a linear start superlinear in 10 % of simulated runs and its N× interval covered the
truth 73 % of the time; with HC3, 3 % and 98 % (200 simulated sweeps, 1 % multiplicative
noise; tests/usl/test_usl_superlinear.py checks the coverage). α is significantly negative
when the upper end of its interval (the fit's level, two-sided t) is below 0; N×'s interval
is the delta method's. Nothing is claimed from fewer than :data:`MIN_LOADS` distinct loads,
or when the unbounded fit's residual standard error is above :data:`MAX_RELATIVE_SE` of the
mean throughput (a three-point sweep with 61 % residual error was called superlinear before
this guard).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["BOUNDED_ALPHA", "MAX_RELATIVE_SE", "MIN_LOADS", "describe", "detect",
           "robust_cov"]

#: Fewer distinct loads than this, or an unbounded fit whose residual standard error is above
#: this share of the mean throughput, and nothing is said about the start.
MIN_LOADS = 5
MAX_RELATIVE_SE = 0.10

#: The methods whose α cannot go below 0: these get the unbounded check.
BOUNDED_ALPHA = ("bounded", "fixed-gamma", "amdahl")


def detect(n: Sequence[float], x: Sequence[float], fit_unbounded: Callable[[], Any],
           ) -> dict[str, Any] | None:
    """The superlinear description of the points, or None when the start is not
    significantly superlinear. ``fit_unbounded`` returns the unbounded
    :class:`~cachelab.usl.UslFit` of the same points (asked only here, so callers need not
    fit twice when it is not needed)."""
    if len(set(n)) < MIN_LOADS:
        return None  # too few loads to tell a curve's start from noise
    free = fit_unbounded()
    if not (free.alpha < 0 and free.gamma > 0):
        return None
    mean = sum(x) / len(x)
    if not (mean > 0 and free.sigma / mean <= MAX_RELATIVE_SE):
        return None  # the model does not describe these points: no claim about their start
    cov = robust_cov(free)
    if cov is None:
        return None
    t = free.t
    se = [math.sqrt(max(cov[i][i], 0.0)) for i in range(3)]
    ci = {k: [v - t * e, v + t * e]
          for k, v, e in zip(("gamma", "alpha", "beta"), (free.gamma, free.alpha, free.beta), se)}
    if not ci["alpha"][1] < 0:
        return None
    alpha, beta, gamma = free.alpha, free.beta, free.gamma
    out: dict[str, Any] = {
        "method": "unbounded",
        "gamma": gamma, "alpha": alpha, "beta": beta,
        "ci": ci, "covariance": "HC3",
        "sigma": free.sigma, "df": free.df,
        "n_cross": None, "n_cross_ci": None, "n_star": None, "x_star": None,
        "measured_max_n": max(n),
    }
    if beta > 0:
        n_cross = -alpha / beta
        out["n_cross"] = n_cross
        out["n_cross_ci"] = _delta_interval(alpha, beta, cov, t, n_cross)
        n_star = math.sqrt((1 - alpha) / beta)
        out["n_star"] = n_star
        out["x_star"] = gamma * n_star / (1 + alpha * (n_star - 1) + beta * n_star * (n_star - 1))
    return out


def robust_cov(fit: Any) -> list[list[float]] | None:
    """The HC3 covariance of (γ, α, β) of a fit (:class:`~cachelab.usl.UslFit`):
    ``M Jᵀ diag(e²/(1−h)²) J M`` with ``M = (JᵀJ)⁻¹``, J the model's Jacobian at the fitted
    coefficients, e the residuals and h the leverages; None when it cannot be formed."""
    n = np.asarray(fit.n, dtype=float)
    g, a, b = fit.gamma, fit.alpha, fit.beta
    d = 1 + a * (n - 1) + b * n * (n - 1)
    if np.any(d <= 0):
        return None
    jac = np.column_stack([n / d, -g * n * (n - 1) / d**2, -g * n * n * (n - 1) / d**2])
    try:
        m = np.linalg.inv(jac.T @ jac)
    except np.linalg.LinAlgError:
        return None
    h = np.einsum("ij,jk,ik->i", jac, m, jac)
    if np.any(h >= 1 - 1e-9):
        return None
    w = (np.asarray(fit.residuals, dtype=float) / (1 - h)) ** 2
    cov = m @ (jac.T * w) @ jac @ m
    if not np.all(np.isfinite(cov)):
        return None
    return [[float(v) for v in row] for row in cov]


def _delta_interval(alpha: float, beta: float, cov: list[list[float]], t: float,
                    n_cross: float) -> list[float] | None:
    """The interval of N× = −α/β from the covariance ``cov`` (delta method)."""
    # d/dα = −1/β, d/dβ = α/β²; γ (index 0) does not enter.
    grad = [0.0, -1.0 / beta, alpha / beta**2]
    var = sum(grad[i] * cov[i][j] * grad[j] for i in range(3) for j in range(3))
    if not (var >= 0 and math.isfinite(var) and math.isfinite(t)):
        return None
    half = t * math.sqrt(var)
    return [max(1.0, n_cross - half), n_cross + half]


def describe(s: dict[str, Any], fmt: Callable[[float | None], str]) -> str:
    """One paragraph on a superlinear start ``s`` (from :func:`detect`), numbers through
    ``fmt``."""
    a_ci = s["ci"].get("alpha") or [None, None]
    text = (f"superlinear start: fitted without bounds, α = {fmt(s['alpha'])} "
            f"[{fmt(a_ci[0])}, {fmt(a_ci[1])}] is significantly below 0, so capacity grows "
            f"faster than N at first (Gunther's superlinear USL); the bounded fit pins α at 0 "
            f"and hides it.")
    if s["n_cross"] is None:
        return text + " With β ≤ 0 the payback point is never reached in this model."
    ci = s.get("n_cross_ci")
    interval = f" [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else ""
    where = ("within" if s["n_cross"] <= s["measured_max_n"] else "beyond")
    return (text + f" Payback N× = {fmt(s['n_cross'])}{interval} ({where} the measured "
            f"loads): past it capacity is below linear again; the superlinear fit peaks at "
            f"N* = {fmt(s['n_star'])} with {fmt(s['x_star'])}/s.")
