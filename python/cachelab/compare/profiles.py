"""Latency profiles compared: each cell measured in all of them (operation, value size, key
count) × p50, p90, p99, p99.9, with bootstrap intervals over the cells' HdrHistograms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cachelab.artifacts import Artifact
from cachelab.compare.stats import hist_rows, require_same, versus
from cachelab.errors import UsageError
from cachelab.profile.render import partial
from cachelab.profile.section import cell_label

__all__ = ["compare_profiles", "partial_profile"]


def partial_profile(d: dict[str, Any]) -> str | None:
    """A profile's partial note, with the samples its cells really hold."""
    return partial(d.get("run") or {}, (d.get("client") or {}).get("samples"),
                   (c.get("samples", 0) for c in d.get("cells", [])))


def compare_profiles(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int,
                     level: float, problems: list[str],
                     warnings: list[str]) -> list[dict[str, Any]]:
    require_same(arts, lambda d: d.get("client", {}).get("protocol"), "protocol", problems)
    require_same(arts, lambda d: d.get("client", {}).get("concurrency"), "concurrency",
                 problems)
    keyed = [{(c["op"], c["value_size"], c["keys"]): c for c in a.data["cells"]
              if c.get("samples")} for a in arts]
    common = [k for k in keyed[0] if all(k in m for m in keyed[1:])]
    if not common:
        raise UsageError("these profiles have no measured cell in common (same operation, value "
                         "size and key count): nothing to compare")
    dropped = sum(len(m) for m in keyed) - len(common) * len(keyed)
    if dropped:
        warnings.append(f"{dropped} cell(s) measured in only some of the profiles were left out")
    rows = []
    for j in range(1, len(arts)):
        pair = versus(j)
        for key in common:
            ca, cb = keyed[0][key], keyed[j][key]
            item = "floor" if key[0] == "floor" else f"{key[0]} {cell_label(ca)}"
            rows += hist_rows(item, pair, ca["histogram"], ca["samples"], cb["histogram"],
                              cb["samples"], rng, resamples, level)
    return rows
