"""Confidence intervals of percentiles, read from the histograms the measurements keep.

For *n* independent samples the *p*-quantile lies between the order statistics of ranks
*l* and *u* (1-based) with probability ``F(u − 1) − F(l − 1)``, *F* the Binomial(*n*, *p*)
distribution function: the count of samples below the quantile is binomial, whatever the
latency's distribution. :func:`ranks` takes the pair of ranks around the binomial's
2.5 % and 97.5 % points whose exact coverage is closest to 95 % (the textbook pair is
conservative — 97.6 % for the p99 of 1,000 samples). When no pair within the samples covers
at least 93 % (the upper rank would pass the largest sample, or the lower one the smallest),
the samples do not pin the percentile down: it is "n/a", with the count of samples beyond it
(``n/a (k samples)``), never a number.

The interval's ends are the histogram's values at those ranks (HdrHistogram: 3 significant
digits). It assumes independent samples; a measurement whose samples are not (consecutive
latencies of one loaded connection often are not) says so next to the interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.errors import UsageError

__all__ = ["LEVEL", "MIN_TAIL", "block_length", "certifiable", "check_precision",
           "check_precision_percentile", "dependence", "effective", "highest_certifiable",
           "interval", "intervals", "parse_precision", "parse_precision_percentile", "ranks",
           "relative_half_width", "samples_to_certify", "tail_samples", "within"]

#: The intervals' confidence level.
LEVEL = 0.95
#: An interval whose exact coverage would fall further than this below the level (too few
#: samples beyond the percentile for any pair of ranks) is not given.
SLACK = 0.02


@lru_cache(maxsize=4096)
def ranks(n: int, percentile: float, level: float = LEVEL) -> tuple[int, int] | None:
    """The 1-based ranks ``(l, u)`` of the order statistics around ``percentile`` of ``n``
    samples, coverage closest to ``level``; None when the samples cannot bracket it."""
    if n < 1 or not 0.0 < percentile < 100.0:
        return None
    # deferred: scipy.special takes ~0.2 CPU-s to import; only intervals need it
    from scipy.special import bdtr

    p, a = percentile / 100.0, (1.0 - level) / 2.0
    lo, hi = int(_binom_ppf(a, n, p)), int(_binom_ppf(1.0 - a, n, p)) + 1

    def coverage(l_: int, u_: int) -> float:
        # bdtr(k, n, p) = P(Binomial(n, p) <= k), as binom.cdf for k >= 0, without its
        # per-call overhead (a dependent series' effective n differs from run to run)
        return float(bdtr(u_ - 1, n, p) - bdtr(l_ - 1, n, p))

    best = None
    for l_ in (lo, lo + 1):
        for u_ in (hi - 1, hi):
            if 1 <= l_ < u_ <= n:
                c = coverage(l_, u_)
                if best is None or abs(c - level) < abs(best[0] - level):
                    best = (c, l_, u_)
    if best is None or best[0] < level - SLACK:
        return None
    return best[1], best[2]


def _binom_ppf(q: float, n: int, p: float) -> float:
    """``scipy.stats.binom.ppf(q, n, p)`` for 0 < q < 1: the ufunc it calls, without
    importing ``scipy.stats`` (~1 CPU-s; every load run's intervals come here)."""
    try:
        # deferred: scipy.special takes ~0.2 CPU-s to import (binom._ppf calls this ufunc)
        from scipy.special._ufuncs import _binom_ppf as ppf
    except ImportError:  # older scipy: the public distribution
        # deferred: scipy.stats takes ~1 CPU-s to import
        from scipy.stats import binom

        return float(binom.ppf(q, n, p))
    return float(ppf(q, n, p))


def tail_samples(n: int, percentile: float) -> int:
    """How many of ``n`` samples lie beyond ``percentile`` (at the far side from the median)."""
    share = 1.0 - percentile / 100.0 if percentile >= 50.0 else percentile / 100.0
    return math.floor(n * share + 1e-9)


# -- which percentile a sample count can certify ------------------------------------------------
#
# A precision target ("p99 within ±5 %") is a bound on the interval's relative half-width, and
# the interval's ends are order statistics. With k = n (1 − p) samples beyond the percentile,
# the binomial puts the interval's outer rank about 1.96 √k ranks further out, so the outer end
# is the latency at a tail share of about k (1 − 1.96/√k) / n: the tail share is known only to
# within ±1.96/√k of itself. With k = 5 (the p99 of 500 samples) the outer rank is 499 of 500 —
# the interval's end is the second-largest latency, a single outlier, and no target can be
# reached but by luck. With k = 50 the outer end keeps ~37 samples beyond it and the tail share
# is pinned to ±28 %; the interval then narrows as 1/√n like any other. So MIN_TAIL samples
# beyond a percentile is what a target on it needs to be reachable at all: a p99 needs 5,000
# samples, a p90 500, a p50 100. Whether ±5 % is then reached depends on how steep the latency
# distribution is there, which only the measurement tells (a loaded machine's p90 sits where the
# latencies are spread out: benches/runs/2026-11-29-quick-precision.md).

#: The fewest samples beyond a percentile (at the far side from the median) with which its
#: interval can certify a precision target (above).
MIN_TAIL = 50


def samples_to_certify(percentile: float) -> int:
    """The fewest samples that put :data:`MIN_TAIL` beyond ``percentile`` (p99: 5,000)."""
    share = 1.0 - percentile / 100.0 if percentile >= 50.0 else percentile / 100.0
    return math.ceil(round(MIN_TAIL / share, 6))


def certifiable(n: int, percentile: float) -> bool:
    """Whether ``n`` samples can certify a precision target on ``percentile``: an interval
    exists (:func:`ranks`) and :data:`MIN_TAIL` samples lie beyond the percentile."""
    return ranks(n, percentile) is not None and tail_samples(n, percentile) >= MIN_TAIL


def highest_certifiable(n: int, percentiles: Sequence[str]) -> str | None:
    """The highest of ``percentiles`` (keys such as ``"90"``, from the median up) that ``n``
    samples can certify; None when not even the lowest."""
    ok = [k for k in percentiles if float(k) >= 50.0 and certifiable(n, float(k))]
    return max(ok, key=float) if ok else None


def parse_precision_percentile(text: str | float | None) -> str | None:
    """``"p90"``, ``"90"`` or ``90`` -> ``"90"`` (the key the tables use; 99.9 stays
    ``"99.9"``); None as None. The choice is checked against the verb's percentiles by
    :func:`check_precision_percentile`."""
    if text is None:
        return None
    raw = str(text).strip().lower().removeprefix("p")
    try:
        value = float(raw)
    except ValueError:
        return str(text)
    return f"{value:g}"


def check_precision_percentile(value: object, shown: Sequence[str]) -> None:
    """A spec's ``precision_percentile``: one of the percentiles the verb's tables show with
    an interval (``shown``, keys such as ``"99"``), from the median up; UsageError naming the
    field otherwise."""
    allowed = [k for k in shown if float(k) >= 50.0]
    if not isinstance(value, str) or value not in allowed:
        raise UsageError(f"precision_percentile must be one of the percentiles the tables show "
                         f"with an interval ({', '.join(allowed)}), not {value!r}")


def interval(histogram: str, n: int, percentile: float,
             level: float = LEVEL) -> tuple[int, int] | None:
    """The ``level`` interval of ``percentile`` (ns) from ``histogram``'s ``n`` samples, or
    None when the samples cannot bracket it."""
    r = ranks(n, percentile, level)
    if r is None:
        return None
    # A value at percentile q is the sample of rank ceil(q n / 100): aim between ranks.
    at = [100.0 * (k - 0.5) / n for k in r]
    low, high = _core.hist_percentiles(histogram, at)
    return int(low), int(high)


def intervals(histogram: str, n: int, percentiles: dict[str, float],
              level: float = LEVEL) -> dict[str, list[int] | None]:
    """``{key: [low, high] or None}`` for each of ``percentiles`` (key -> percentile)."""
    out: dict[str, list[int] | None] = {}
    for key, pct in percentiles.items():
        iv = interval(histogram, n, pct, level)
        out[key] = None if iv is None else [iv[0], iv[1]]
    return out


# -- dependent samples: the moving-block bootstrap ----------------------------------------------
#
# A sample quantile's error is, to first order, the error of the empirical distribution function
# at the quantile divided by the density there (Bahadur's representation), so dependence enters
# the interval only through the variance of the mean of the indicator series 1{x_t ≤ q}. For
# independent samples that variance is p(1 − p) / n, which the order-statistic ranks above
# encode. For a dependent series the moving-block bootstrap (Künsch 1989) estimates it: its
# variance of the mean is exactly ``var(block means) / (n / b)`` over every block of ``b``
# consecutive values (the ideal bootstrap, no resampling noise). The ratio ``d`` of that
# variance to p(1 − p) / n says how many samples count as one: the interval is then the
# order-statistic one of ``n / d`` effective samples, read from the whole distribution — the
# same construction as thinning, with ``d`` estimated instead of found by a test.


def block_length(segments: Sequence[np.ndarray]) -> int:
    """:func:`_politis_white`'s block length."""
    return _politis_white(segments)[0]


def _politis_white(segments: Sequence[np.ndarray]) -> tuple[int, float]:
    """The block length for a moving- (or circular-) block bootstrap of the mean of a series
    given as ``segments`` of consecutive values (autocovariances pooled over the segments, none
    across their joins): Politis & White (2004), "Automatic block-length selection for the
    dependent bootstrap", Econometric Reviews 23(1), with the correction of Patton, Politis &
    White (2009), Econometric Reviews 28(4) (D_CB = 4/3 ĝ(0)²).

    The correlogram is cut at m̂, the smallest lag after which K_N = max(5, ⌈√log10 n⌉)
    consecutive autocorrelations are all within ±2 √(log10 n / n); the flat-top (trapezoid)
    kernel over M = 2 m̂ lags estimates G = Σ λ(k/M) |k| R(k) and ĝ(0) = Σ λ(k/M) R(k), and
    b = (2 G² / D_CB)^(1/3) n^(1/3), at most min(3 √n, n / 3) and the shortest segment."""
    xs = [np.asarray(s, dtype=np.float64) for s in segments if len(s) > 1]
    n = sum(len(s) for s in xs)
    if n < 8:
        return 1, 0.0
    mean = float(np.concatenate(xs).mean())
    eps = [s - mean for s in xs]
    kn = max(5, math.ceil(math.sqrt(math.log10(n))))
    shortest = min(len(s) for s in xs)
    m_max = min(math.ceil(math.sqrt(n)) + kn, shortest - 1)
    acv = np.array([sum(float(e[k:] @ e[:len(e) - k]) for e in eps) / n
                    for k in range(m_max + 1)])
    if acv[0] <= 0:
        return 1, 0.0
    rho = np.abs(acv / acv[0])
    crit = 2.0 * math.sqrt(math.log10(n) / n)
    m_hat = m_max
    for m in range(0, m_max - kn + 1):
        if np.all(rho[m + 1:m + kn + 1] < crit):
            m_hat = m
            break
    big_m = min(2 * max(m_hat, 1), m_max)
    k = np.arange(1, big_m + 1)
    t = k / big_m
    lam = np.where(t <= 0.5, 1.0, 2.0 * (1.0 - t))
    g = 2.0 * float(np.sum(lam * k * acv[1:big_m + 1]))
    g0 = acv[0] + 2.0 * float(np.sum(lam * acv[1:big_m + 1]))
    d_cb = 4.0 / 3.0 * g0 ** 2
    if g == 0.0 or d_cb == 0.0:
        return 1, g
    b = (2.0 * g ** 2 / d_cb) ** (1.0 / 3.0) * n ** (1.0 / 3.0)
    b_max = math.ceil(min(3.0 * math.sqrt(n), n / 3.0))
    return max(1, min(round(b), b_max, shortest)), g


def dependence(segments: Sequence[np.ndarray], percentile: float) -> dict[str, Any] | None:
    """How dependent a series (``segments`` of consecutive values) is at ``percentile``:
    ``{"block": b, "factor": d}``, ``d`` the moving-block bootstrap's variance of the share
    of values at or below the series' own ``percentile`` over the independent one
    (p(1 − p) / n), at least 1 (dependence never narrows an interval); ``b`` from
    :func:`block_length` on the indicator series. None when no value lies beyond it."""
    xs = [np.asarray(s, dtype=np.float64) for s in segments if len(s) > 0]
    if not xs:
        return None
    q = float(np.quantile(np.concatenate(xs), percentile / 100.0, method="inverted_cdf"))
    ind = [(x <= q).astype(np.float64) for x in xs]
    p = float(np.concatenate(ind).mean())
    if p <= 0.0 or p >= 1.0:
        return None
    b, g = _politis_white(ind)
    means = []
    for s in ind:
        if len(s) >= b:
            c = np.concatenate(([0.0], np.cumsum(s)))
            means.append((c[b:] - c[:-b]) / b)
    every = np.concatenate(means)
    factor = (b * float(np.var(every)) + g / b) / (p * (1.0 - p))
    return {"block": b, "factor": round(max(1.0, factor), 4)}


def effective(n: int, factor: float) -> int:
    """The samples ``n`` dependent ones count for, given their :func:`dependence` factor."""
    return int(n / max(1.0, factor))


def relative_half_width(rng: Sequence[float] | None, value: float | None) -> float | None:
    """An interval's half-width relative to its estimate, ``(high − low) / 2 / value``: what
    ``--precision`` targets; None without an interval or a value."""
    if not rng or not value:
        return None
    return (rng[1] - rng[0]) / 2 / value


def within(half_width: float | None, target: float) -> bool:
    """Whether a relative half-width reaches ``target`` (False without one)."""
    return half_width is not None and half_width <= target + 1e-12


def parse_precision(text: str | float | None) -> float | None:
    """``"5%"`` (or ``5``) -> 0.05: a target relative half-width, above 0 and below 100 %
    (below 1, the % sign is required: ``0.05`` alone could be a share). UsageError
    otherwise."""
    if text is None:
        return None
    raw = str(text).strip()
    try:
        value = float(raw[:-1] if raw.endswith("%") else raw)
    except ValueError:
        raise UsageError(f"--precision {raw!r}: give a percentage above 0 and below 100, "
                         "e.g. 5%") from None
    if not 0.0 < value < 100.0:
        raise UsageError(f"--precision {raw!r}: give a percentage above 0 and below 100, "
                         "e.g. 5%")
    if not raw.endswith("%") and value < 1.0:
        # 0.05 could mean 5 % (a share) or 0.05 %: say which.
        raise UsageError(f"--precision {raw!r}: below 1, give the % sign (5% for a share of "
                         f"0.05; {raw}% for {raw} %)")
    return value / 100.0


def check_precision(value: object) -> None:
    """A spec's ``precision`` (load, profile, scale): None, or a share above 0 and below 1
    (0.05: ±5 %); UsageError otherwise."""
    if value is None:
        return
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not 0 < value < 1):
        raise UsageError("precision must be a share above 0 and below 1 (0.05: ±5 %), "
                         f"not {value!r}")
