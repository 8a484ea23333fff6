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
from functools import lru_cache

import cachelab._core as _core

__all__ = ["LEVEL", "interval", "intervals", "ranks", "tail_samples"]

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
    # deferred: scipy.stats takes ~0.3 s to import; only intervals need it
    from scipy.stats import binom

    p, a = percentile / 100.0, (1.0 - level) / 2.0
    lo, hi = int(binom.ppf(a, n, p)), int(binom.ppf(1.0 - a, n, p)) + 1

    def coverage(l_: int, u_: int) -> float:
        return float(binom.cdf(u_ - 1, n, p) - binom.cdf(l_ - 1, n, p))

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


def tail_samples(n: int, percentile: float) -> int:
    """How many of ``n`` samples lie beyond ``percentile`` (at the far side from the median)."""
    share = 1.0 - percentile / 100.0 if percentile >= 50.0 else percentile / 100.0
    return math.floor(n * share + 1e-9)


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
