"""Scale sweeps compared: the mean throughput at each load N present in all, with Welch's t
interval over the repeats (none with one run per N)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from cachelab.artifacts import Artifact
from cachelab.compare.stats import change_row, require_same, versus, welch
from cachelab.errors import UsageError

__all__ = ["compare_scales"]


def compare_scales(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int,
                   level: float, problems: list[str],
                   warnings: list[str]) -> list[dict[str, Any]]:
    require_same(arts, lambda d: d["spec"]["vary"], "swept variable", problems)
    require_same(arts, lambda d: d["spec"].get("workload"), "workload", problems)
    rows = []
    for j in range(1, len(arts)):
        pair = versus(j)
        common = sorted({r["n"] for r in arts[0].data["runs"]}
                        & {r["n"] for r in arts[j].data["runs"]})
        if not common:
            raise UsageError("these sweeps share no load N: nothing to compare")
        for n in common:
            xa = [r["throughput"] for r in arts[0].data["runs"] if r["n"] == n]
            xb = [r["throughput"] for r in arts[j].data["runs"] if r["n"] == n]
            ci = welch(xa, xb, level)
            rows.append(change_row(f"N = {n}", "throughput", pair, statistics.fmean(xa),
                                   statistics.fmean(xb), *(ci or (None, None)),
                                   higher_is_better=True, unit="/s"))
    if any(len(a.data["runs"]) <= len(a.data["summary"]) for a in arts):
        warnings.append("a sweep has one run per N: its throughput has no interval (use "
                        "--repeats 2 or more)")
    return rows
