"""A load run's figure: latency over time, p50 / p99 / p99.9 per interval (log scale) above
the throughput per interval, with the warm-up, the stalls and the steady-state window marked.

This module imports matplotlib: import it inside the function that draws. Uses matplotlib's
object API only, like :mod:`cachelab.plots.latency`; output is deterministic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.plots.figure import new_figure, save
from cachelab.units import ns_per_unit, pick_unit

__all__ = ["latency_over_time"]

_SERIES = (("50", "p50"), ("99", "p99"), ("99.9", "p99.9"))


def latency_over_time(result: Any, out_base: Path) -> list[Path]:
    """Draws ``result``, a :class:`~cachelab.load.LoadResult` (its ``intervals``, ``steady``,
    ``mode`` and ``spec``; not imported here, as the result imports this module to draw
    itself), and writes ``<out_base>.png`` and ``.svg``; returns their paths."""
    ivs = result.intervals
    which = "corrected" if result.mode == "open" else "uncorrected"
    xs = [iv["start_s"] + iv["duration_s"] / 2 for iv in ivs]
    values = [iv[which]["percentiles"] for iv in ivs]
    unit = pick_unit([v["99"] for v in values if v["99"]])
    scale = ns_per_unit(unit)

    fig = new_figure((9.0, 6.0))
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    top.set_yscale("log")
    for key, label in _SERIES:
        ys = [v[key] / scale if v[key] else float("nan") for v in values]
        top.plot(xs, ys, marker=".", linewidth=1.2, label=f"{label} ({which})")
    if result.mode == "open":
        ys = [iv["uncorrected"]["percentiles"]["99"] / scale or float("nan") for iv in ivs]
        top.plot(xs, ys, linestyle=":", color="0.4", linewidth=1.0, label="p99 (uncorrected)")
    top.set_ylabel(f"latency ({unit})")
    top.grid(True, which="both", linewidth=0.4, alpha=0.4)
    bottom.bar(xs, [iv["throughput"] for iv in ivs],
               width=[iv["duration_s"] * 0.9 for iv in ivs], color="0.55")
    bottom.set_ylabel("replies/s")
    bottom.set_xlabel("time since start (s)")
    bottom.grid(True, linewidth=0.4, alpha=0.4)

    warm_end = max((iv["start_s"] + iv["duration_s"] for iv in ivs if iv["warmup"]), default=0)
    start = result.steady["start_index"]
    steady_from = ivs[start]["start_s"] if start < len(ivs) else None
    for ax in (top, bottom):
        if warm_end:
            ax.axvspan(0, warm_end, color="0.85", zorder=0,
                       label="warm-up" if ax is top else None)
        for i, st in enumerate(getattr(result, "stalls", None) or []):
            ax.axvspan(st["start_s"], max(st["end_s"], st["start_s"] + 0.02), color="tab:red",
                       alpha=0.18, zorder=0, label="stall" if ax is top and i == 0 else None)
        if steady_from is not None:
            ax.axvline(steady_from, color="tab:green", linestyle="--", linewidth=1.0,
                       label="steady state from" if ax is top else None)
    top.legend(loc="upper right", fontsize="small")
    spec = result.spec
    mode = (f"open loop {spec['rate']:.0f}/s" if result.mode == "open"
            else f"closed loop, pipeline {spec['pipeline']}")
    top.set_title(f"latency over time — {mode}, {spec['connections']} connection(s)")

    return save(fig, out_base)
