"""Simulations compared.

* Request-level: each common strategy × p50/p90/p99 increase and the share slowed ≥10 %,
  from the min–max bands over latency draws paired least and most favourably; hit ratios do
  not depend on the draws, so their difference is exact.
* Flat (miss-ratio): each (policy, capacity) run in all × miss ratio and byte miss ratio, and
  the LRU miss-ratio curve at up to ~10 capacities both curves have. These are deterministic,
  so a difference is exact — except for a SHARDS-sampled curve, whose points get no interval
  and no verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cachelab.artifacts import Artifact
from cachelab.compare.stats import change_row, exact_row, require_same, versus
from cachelab.errors import UsageError
from cachelab.simulate.summary import band_at

__all__ = ["compare_flat_simulations", "compare_simulations"]

#: (field, key, at, metric) of the request-level bands compared.
_BANDS = (("percentiles", "percentile", 50.0, "p50 increase"),
          ("percentiles", "percentile", 90.0, "p90 increase"),
          ("percentiles", "percentile", 99.0, "p99 increase"),
          ("slowed", "threshold", 0.1, "slowed ≥10 %"))


def compare_flat_simulations(arts: Sequence[Artifact], problems: list[str],
                             warnings: list[str]) -> list[dict[str, Any]]:
    """Miss ratios of flat-trace simulations: per (policy, capacity) run both have, and the
    LRU miss-ratio curve at the capacities both curves have."""
    if any(a.data.get("mode") != "flat" for a in arts):
        raise UsageError("cannot compare a flat (miss-ratio) simulation with a request-level one")
    require_same(arts, lambda d: {k: d["trace"].get(k) for k in ("requests", "unique_keys",
                                                                 "total_bytes")},
                 "trace (requests, unique keys, bytes)", problems)
    require_same(arts, lambda d: d.get("unit"), "capacity unit", problems)
    rows: list[dict[str, Any]] = []
    runs = [{(r["policy"], int(r["capacity"])): r for r in a.data.get("results") or []}
            for a in arts]
    curves = [a.data.get("mrc") for a in arts]
    unit = arts[0].data.get("unit") or "objects"
    for j in range(1, len(arts)):
        pair = versus(j)
        common = [k for k in runs[0] if k in runs[j]]
        for policy, cap in common:
            ra, rb = runs[0][(policy, cap)], runs[j][(policy, cap)]
            item = f"{policy} @ {cap:,} {unit}"
            for metric in ("miss_ratio", "byte_miss_ratio"):
                if ra.get(metric) is None or rb.get(metric) is None:
                    continue
                rows.append(exact_row(item, metric.replace("_", " "), pair,
                                      float(ra[metric]), float(rb[metric]),
                                      higher_is_better=False))
        rows += _curve_rows(curves[0], curves[j], pair, unit, warnings)
    if not rows:
        if problems:
            raise UsageError(f"incompatible flat simulations: {'; '.join(problems)}")
        raise UsageError("these flat simulations share no (policy, capacity) run and no "
                         "miss-ratio curve points: nothing to compare")
    return rows


def _curve_rows(ca: dict[str, Any] | None, cb: dict[str, Any] | None, pair: str, unit: str,
                warnings: list[str]) -> list[dict[str, Any]]:
    """The two LRU miss-ratio curves at a handful of the capacities both have."""
    if not ca or not cb:
        return []
    rows = []
    pa = dict(zip(ca["capacities"], ca["miss_ratios"]))
    pb = dict(zip(cb["capacities"], cb["miss_ratios"]))
    shared = [c for c in ca["capacities"] if c in pb]
    # A handful of points along the curve, not hundreds of rows.
    step = max(1, len(shared) // 8)
    picked = shared[::step] + ([shared[-1]] if shared and (len(shared) - 1) % step else [])
    sampled = not (ca.get("exact", True) and cb.get("exact", True))
    for c in picked:
        item = f"LRU curve @ {c:,} {ca.get('unit', unit)}"
        if sampled:
            rows.append(change_row(item, "miss ratio", pair, float(pa[c]), float(pb[c]),
                                   None, None, higher_is_better=False))
        else:
            rows.append(exact_row(item, "miss ratio", pair, float(pa[c]), float(pb[c]),
                                  higher_is_better=False))
    if sampled and picked:
        warnings.append("a miss-ratio curve is SHARDS-sampled: its points carry sampling "
                        "error that is not estimated, so they get no verdict")
    return rows


def compare_simulations(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int,
                        level: float, problems: list[str],
                        warnings: list[str]) -> list[dict[str, Any]]:
    if any(a.data.get("mode") == "flat" for a in arts):
        return compare_flat_simulations(arts, problems, warnings)
    require_same(arts, lambda d: {k: d["trace"].get(k) for k in ("requests", "items", "source")},
                 "trace", problems)
    require_same(arts, lambda d: (d["trace"].get("generator") or {}).get("params"),
                 "synthetic trace parameters", problems)
    require_same(arts, lambda d: d["spec"].get("train"), "training share", problems)
    rows = []
    base = {s["strategy"]: s for s in arts[0].data["strategies"]}
    for j in range(1, len(arts)):
        pair = versus(j)
        other = {s["strategy"]: s for s in arts[j].data["strategies"]}
        common = [k for k in base if k in other]
        if not common:
            raise UsageError("these simulations share no strategy: nothing to compare")
        for name in common:
            sa, sb = base[name], other[name]
            for field_, key, at, metric in _BANDS:
                ba, bb = band_at(sa, field_, key, at), band_at(sb, field_, key, at)
                if not ba or not bb or ba["median"] <= 0:
                    continue
                lo = bb["low"] / ba["high"] - 1 if ba["high"] > 0 else None
                hi = bb["high"] / ba["low"] - 1 if ba["low"] > 0 else None
                rows.append(change_row(name, metric, pair, ba["median"], bb["median"], lo, hi,
                                       higher_is_better=False))
            # Hit ratios do not depend on the latency draws: a difference is exact.
            rows.append(exact_row(name, "hit ratio", pair, float(sa["hit_ratio"]),
                                  float(sb["hit_ratio"]), higher_is_better=True))
    return rows
