"""Load results compared over their measured runs (``totals``: every interval after the
warm-up, as the headline): throughput (Welch's t over the intervals) and latency percentiles
(bootstrap over the HdrHistogram; corrected in open loop)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cachelab.artifacts import Artifact
from cachelab.compare.stats import change_row, hist_rows, require_same, versus, welch
from cachelab.units import of_asked, partial_note

__all__ = ["compare_loads", "partial_load", "measured_throughputs"]


def partial_load(d: dict[str, Any]) -> str | None:
    """A load result's partial note, with the replies it got against the run asked for (a
    duration, or a number of requests)."""
    spec, replies = d.get("spec") or {}, int((d.get("all") or {}).get("replies", 0))
    if spec.get("requests"):
        done = f"replies: {of_asked([replies], spec['requests'])}"
    else:
        asked = f"; {spec['duration']:g} s asked" if spec.get("duration") else ""
        done = f"{replies:,} replies{asked}"
    return partial_note(d.get("run"), done)


def measured_throughputs(d: dict[str, Any]) -> list[float]:
    """The throughput of each interval of a load result's measured run (``totals``)."""
    t = d["totals"]
    ivs = d["intervals"][t["first_index"]:t["first_index"] + t["intervals"]]
    return [iv["replies"] / iv["duration_s"] for iv in ivs if iv["duration_s"] > 0]


def compare_loads(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int,
                  level: float, problems: list[str],
                  warnings: list[str]) -> list[dict[str, Any]]:
    require_same(arts, lambda d: d["mode"], "load mode (open/closed loop)", problems)
    require_same(arts, lambda d: d["server"].get("transport", "tcp"),
                 "transport (tcp, tls or unix)", problems)
    for f in ("mix", "value_size", "key_space", "key_dist", "pipeline", "rate"):
        require_same(arts, lambda d, f=f: d["spec"].get(f), f"workload {f.replace('_', ' ')}",
                     problems)
    rows = []
    base = arts[0].data
    for j in range(1, len(arts)):
        pair = versus(j)
        other = arts[j].data
        xa, xb = measured_throughputs(base), measured_throughputs(other)
        ci = welch(xa, xb, level)
        rows.append(change_row("run", "throughput", pair, base["totals"]["throughput"],
                               other["totals"]["throughput"], *(ci or (None, None)),
                               higher_is_better=True, unit="/s"))
        which = "corrected" if base["totals"].get("corrected") else "uncorrected"
        la, lb = base["totals"][which], other["totals"].get(which)
        if lb is None or not la.get("count") or not lb.get("count"):
            warnings.append(f"{pair}: no {which} latency histogram in both results")
            continue
        rows += hist_rows(f"{which} latency", pair, la["histogram"], la["count"],
                          lb["histogram"], lb["count"], rng, resamples, level)
    warnings.append("latency intervals treat the samples as independent; samples of one run "
                    "are correlated in time, so the intervals are narrower than repeats would "
                    "give — compare repeated, interleaved runs before trusting a small change")
    return rows
