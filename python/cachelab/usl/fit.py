"""Fitting the Universal Scalability Law: :func:`fit_usl` asks the Rust fitter
(``cachelab-usl``) and returns a :class:`~cachelab.usl.result.UslFit`; :func:`t_quantile` is
its Student t."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import cachelab._core as _core
from cachelab.errors import CachelabError, UsageError
from cachelab.units import num
from cachelab.usl.result import UslFit, as_number
from cachelab.usl.superlinear import BOUNDED_ALPHA, describe, detect

__all__ = ["METHODS", "MIN_POINTS", "fit_usl", "t_quantile"]

MIN_POINTS = 6
#: Fitting methods by name, with a one-line description each.
METHODS: dict[str, str] = dict(_core.usl_methods())


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom."""
    return float(_core.t_quantile(float(p), float(df)))


def fit_usl(
    n: Sequence[float],
    x: Sequence[float],
    method: str = "bounded",
    *,
    level: float = 0.95,
    bootstrap: int = 1000,
    seed: int = 0,
    predict: Iterable[float] = (),
    threads: int = 0,
    source: Mapping[str, Any] | None = None,
) -> UslFit:
    """Fits the USL to loads ``n`` (fractional values are kept as they are) and throughputs
    ``x``. ``method`` is one of :data:`METHODS` (``bounded``: α, β ∈ [0, 1], γ ≥ 0, as R
    ``usl`` 3.x; ``unbounded``; ``fixed-gamma``: γ = X(1); ``linearised``: the book's
    regression with γ = X(1); ``amdahl``: β = 0). A method that bounds α at 0 also gets an
    unbounded fit of the same points; when its α is significantly negative,
    ``fit.superlinear`` describes the superlinear start (:mod:`cachelab.usl.superlinear`) and
    a ``superlinear`` warning says so; the bounded coefficients are unchanged. ``bootstrap``
    residual resamples (seeded by ``seed``) give intervals for Nmax and the peak; 0 skips
    them. Raises UsageError for fewer
    than 6 points, mismatched lengths, non-finite values, N ≤ 0 or X < 0."""
    if method not in METHODS and method != "linearized":
        raise UsageError(f"unknown USL method {method!r}; known: {', '.join(METHODS)}")
    if not (isinstance(bootstrap, int) and bootstrap >= 0):
        raise UsageError(f"bootstrap must be a whole number >= 0, not {bootstrap!r}")
    ns = [as_number(v, "N") for v in n]
    xs = [as_number(v, "X") for v in x]
    raw = _core.usl_fit(ns, xs, method, level=float(level), bootstrap=bootstrap,
                        seed=int(seed) & (2**64 - 1), threads=int(threads),
                        predict=[as_number(v, "N") for v in predict])
    fit = UslFit.from_core(raw, source or {})
    if method in BOUNDED_ALPHA:
        try:
            found = detect(ns, xs, lambda: UslFit.from_core(
                _core.usl_fit(ns, xs, "unbounded", level=float(level), bootstrap=0, seed=0,
                              threads=int(threads), predict=[]), {}))
        except CachelabError:
            found = None  # no unbounded fit: nothing to say about the start
        if found is not None:
            fit.superlinear = found
            fit.warnings.append({"code": "superlinear",
                                 "message": describe(found, lambda v: _sig(v))})
    return fit


def _sig(v: float | None) -> str:
    """Four significant digits, or — for none."""
    return num(v, 4)
