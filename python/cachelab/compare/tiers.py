"""Tiers results compared: each (shape, method) in all × p50/p90/p99 read time (bootstrap over
each row's HdrHistogram), CPU per read (means only: no interval) and stored bytes (exact)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cachelab.artifacts import Artifact
from cachelab.compare.stats import change_row, exact_row, hist_rows, require_same, versus
from cachelab.errors import UsageError

__all__ = ["compare_tiers"]


def compare_tiers(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int,
                  level: float, problems: list[str],
                  warnings: list[str]) -> list[dict[str, Any]]:
    require_same(arts, lambda d: d.get("store"), "store", problems)
    require_same(arts, lambda d: {k: (d.get("spec") or {}).get(k)
                                  for k in ("record_bytes", "list_items", "item_bytes", "codec")},
                 "data shapes and codec", problems)
    keyed = [{(r["shape"], r["method"]): r for r in a.data.get("rows") or []
              if r.get("histogram") and r.get("reads")} for a in arts]
    common = [k for k in keyed[0] if all(k in m for m in keyed[1:])]
    if not common:
        raise UsageError("these tiers results have no (shape, method) in common: nothing to "
                         "compare")
    rows: list[dict[str, Any]] = []
    for j in range(1, len(arts)):
        pair = versus(j)
        for key in common:
            ra, rb = keyed[0][key], keyed[j][key]
            item = f"{key[0]} / {key[1]}"
            rows += [r for r in hist_rows(item, pair, ra["histogram"], int(ra["reads"]),
                                          rb["histogram"], int(rb["reads"]), rng, resamples,
                                          level) if r["metric"] in ("p50", "p90", "p99")]
            if ra.get("cpu_mean_us") is not None and rb.get("cpu_mean_us") is not None:
                rows.append(change_row(item, "CPU per read (mean)", pair,
                                       float(ra["cpu_mean_us"]) * 1000,
                                       float(rb["cpu_mean_us"]) * 1000,
                                       None, None, higher_is_better=False, unit="ns"))
            if ra.get("stored_bytes") and rb.get("stored_bytes"):
                rows.append(exact_row(item, "stored bytes", pair, float(ra["stored_bytes"]),
                                      float(rb["stored_bytes"]), higher_is_better=False))
    return rows
