"""What every comparison shares: the rows (values, relative change, interval, verdict), the
intervals — a bootstrap over HdrHistograms for percentiles, Fieller's interval (Welch's
degrees of freedom) for a ratio of means — and the
check that the compared results measured the same thing.

The bootstrap without expanding a histogram: resampling n values from a histogram and taking
the nearest-rank percentile q gives the k-th smallest of n uniform draws mapped through the
histogram's quantile function, k = ⌈q·n⌉; that order statistic is Beta(k, n − k + 1)
distributed, so each resample costs one Beta draw and one quantile lookup per histogram —
exact for the recorded histogram. The interval is the percentile interval of the resampled
ratio B/A − 1.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.artifacts import Artifact
from cachelab.usl import t_quantile

__all__ = ["MIN_TAIL", "PERCENTILES", "boot_percentile", "change_row", "exact_row", "hist_rows",
           "require_same", "verdict", "versus", "welch"]

#: Percentiles compared for latency distributions.
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
#: Fewer samples than this beyond a percentile and its interval is not trusted.
MIN_TAIL = 10


def versus(j: int) -> str:
    """The name of the pair of result ``j`` and the baseline: ``"B vs A"``."""
    return f"{chr(65 + j)} vs A"


def boot_percentile(hist: str, n: int, q: float, rng: np.random.Generator,
                    resamples: int) -> np.ndarray:
    """Bootstrap replicates of the nearest-rank ``q`` percentile of the histogram's n values."""
    k = max(1, min(n, math.ceil(q / 100.0 * n)))
    u = rng.beta(k, n - k + 1, size=resamples)
    return np.asarray(_core.hist_percentiles(hist, [float(x) for x in 100.0 * u]), dtype=float)


def verdict(lo: float | None, hi: float | None, *, higher_is_better: bool,
            few: bool = False) -> tuple[str, str]:
    """(verdict, direction): "higher"/"lower" only when the interval excludes zero."""
    if few:
        return "too few samples", ""
    if lo is None or hi is None:
        return "no interval", ""
    if lo > 0:
        return "higher", "better" if higher_is_better else "worse"
    if hi < 0:
        return "lower", "worse" if higher_is_better else "better"
    return "no clear difference", ""


def change_row(item: str, metric: str, pair: str, a: float, b: float, lo: float | None,
               hi: float | None, *, higher_is_better: bool, few: bool = False,
               unit: str = "") -> dict[str, Any]:
    """One row of a comparison: A's value, the other's, the change and its interval."""
    rel = (b / a - 1.0) if a else None
    word, direction = verdict(lo, hi, higher_is_better=higher_is_better, few=few)
    return {"item": item, "metric": metric, "versus": pair, "a": a, "b": b, "unit": unit,
            "delta": b - a, "relative": rel, "ci_low": lo, "ci_high": hi, "verdict": word,
            "direction": direction}


def exact_row(item: str, metric: str, pair: str, a: float, b: float, *,
              higher_is_better: bool, unit: str = "") -> dict[str, Any]:
    """A row for a value with no sampling error (a count, a deterministic simulation): the
    interval is the difference itself, and equal values are "same"."""
    exact = (b / a - 1) if a else (0.0 if b == a else None)
    row = change_row(item, metric, pair, a, b, exact, exact, higher_is_better=higher_is_better,
                     unit=unit)
    if b == a:
        row["verdict"] = "same"
    return row


def hist_rows(item: str, pair: str, ha: str, na: int, hb: str, nb: int,
              rng: np.random.Generator, resamples: int, level: float) -> list[dict[str, Any]]:
    """A row per percentile of two latency histograms (ns), with bootstrap intervals."""
    out = []
    alpha = (1 - level) / 2
    for q in PERCENTILES:
        a = float(_core.hist_percentiles(ha, [q])[0])
        b = float(_core.hist_percentiles(hb, [q])[0])
        few = min(na, nb) * (1 - q / 100.0) < MIN_TAIL
        ba = boot_percentile(ha, na, q, rng, resamples)
        bb = boot_percentile(hb, nb, q, rng, resamples)
        ratio = bb / np.maximum(ba, 1.0) - 1.0
        lo, hi = (float(x) for x in np.quantile(ratio, [alpha, 1 - alpha]))
        out.append(change_row(item, f"p{q:g}", pair, a, b, lo, hi, higher_is_better=False,
                              few=few, unit="ns"))
    return out


def welch(xa: Sequence[float], xb: Sequence[float], level: float) -> tuple[float, float] | None:
    """The interval of the relative change mean(b)/mean(a) − 1, from two independent samples
    of a quantity that cannot be negative (throughput, latency, wait).

    Fieller's interval for the ratio of the two means, with Welch's degrees of freedom: the r
    with ``(mean_b − r·mean_a)² ≤ t²·(var_b/n_b + r²·var_a/n_a)``. Unlike Welch's interval of
    the difference divided by mean(a), it is asymmetric as a ratio's must be, and a lower end
    below −100 % (a negative ratio, impossible for such quantities) is cut there. None below
    two values per side, or when mean(a) is not distinguishable from 0 (the ratio is then
    unbounded).
    """
    if len(xa) < 2 or len(xb) < 2:
        return None
    ma, mb = statistics.fmean(xa), statistics.fmean(xb)
    va, vb = statistics.variance(xa) / len(xa), statistics.variance(xb) / len(xb)
    if ma <= 0:
        return None
    if va + vb == 0:
        return (mb / ma - 1, mb / ma - 1)
    df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))
    t2 = t_quantile(1 - (1 - level) / 2, max(1.0, df)) ** 2
    # (ma² − t²va)·r² − 2·ma·mb·r + (mb² − t²vb) ≤ 0
    a = ma * ma - t2 * va
    b = -2 * ma * mb
    c = mb * mb - t2 * vb
    disc = b * b - 4 * a * c
    if a <= 0 or disc < 0:
        return None
    root = math.sqrt(disc)
    lo, hi = (-b - root) / (2 * a), (-b + root) / (2 * a)
    return max(lo, 0.0) - 1.0, hi - 1.0


def require_same(arts: Sequence[Artifact], get: Callable[[dict[str, Any]], Any], what: str,
                 problems: list[str]) -> None:
    """Adds a problem when the results differ in ``get(data)`` (a setting that changes what
    is measured)."""
    values = [get(a.data) for a in arts]
    if any(v != values[0] for v in values[1:]):
        shown = "; ".join(f"{chr(65 + i)} {v!r}" for i, v in enumerate(values))
        problems.append(f"different {what} ({shown})")
