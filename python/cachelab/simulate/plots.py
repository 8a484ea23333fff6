"""The simulation's figures: fractional latency increase by inverted percentile (request
traces), and miss ratio by cache size (flat traces).

:func:`fractional_increase_plot` is the seed's figure: x = inverted percentile ``100 - p`` (log
scale, tail on the right), y = added latency as a fraction of the request's base latency (log
scale), one line per strategy, with the band over repeated latency draws shaded around the
median line. Requests with no added latency cannot be shown on a log scale; the curve of a
strategy starts where its increase becomes positive.

:func:`miss_ratio_plot`: one line per eviction policy against capacity (log scale), the LRU
miss-ratio curve overlaid.

Like :mod:`cachelab.plots.latency`, only matplotlib's object API is used (no pyplot backend
is selected) and output is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.ticker import FuncFormatter

from cachelab.plots.figure import finish, new_figure
from cachelab.plots.latency import _plain, _style_x_axis, _style_y_axis
from cachelab.simulate.flat import FlatSimulation, MissRatioCurve
from cachelab.units import human_bytes, pct

__all__ = ["MRC_LABEL", "fractional_increase_plot", "miss_ratio_plot", "size_plot"]

#: Legend label of the overlaid LRU curve.
MRC_LABEL = "LRU miss-ratio curve (stack distances)"


def fractional_increase_plot(result: Any, out_base: Path) -> list[Path]:
    """Draw every strategy of a simulation result; writes ``<out_base>.png`` and ``.svg``."""
    d = result.to_dict() if hasattr(result, "to_dict") else result
    fig = new_figure()
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs_all, ys_all = [], []
    for index, s in enumerate(d["strategies"]):
        curve = s["curve"]
        x = 100.0 - np.asarray(curve["percentile"], dtype=float)
        med = np.asarray(curve["median"], dtype=float)
        lo = np.asarray(curve["low"], dtype=float)
        hi = np.asarray(curve["high"], dtype=float)
        keep = med > 0
        if not keep.any():
            continue
        (line,) = ax.plot(x[keep], med[keep], label=s["strategy"], linewidth=1.5)
        line.set_gid(f"cachelab-series-{index}")
        band = keep & (lo > 0)
        if band.any() and np.any(hi[band] > lo[band]):
            ax.fill_between(x[band], lo[band], hi[band], color=line.get_color(), alpha=0.18,
                            linewidth=0)
        xs_all.append(x[keep])
        ys_all += [float(v) for v in med[keep]]
    _style_x_axis(ax, np.concatenate(xs_all) if xs_all else np.empty(0))
    _style_y_axis(ax, ys_all, label=_percent)
    ax.set_ylabel("added latency / base latency (log scale)")
    model = d.get("model", {}).get("name", "")
    return finish(fig, ax, f"Simulated latency increase per request (model {model})",
                  out_base, legend="upper right")


def _percent(v: float) -> str:
    if not math.isfinite(v) or v <= 0:
        return ""
    return _plain(round(100.0 * v, 10)) + "%"


def miss_ratio_plot(
    simulation: FlatSimulation | None,
    curve: MissRatioCurve | None = None,
    *,
    title: str,
    out_base: Path,
    policies: Sequence[str] | None = None,
    byte_ratio: bool = False,
) -> list[Path]:
    """Draw miss ratio (or byte miss ratio) against capacity, log-scaled x.

    One marked line per policy of ``simulation`` (``policies`` picks and orders them) and,
    if given, ``curve`` as a thin dashed line. Writes ``<out_base>.png`` (120 dpi) and
    ``<out_base>.svg``, creating parent directories, and returns both paths. In the SVG the
    line of policy ``i`` has id ``cachelab-series-<i>`` and the curve ``cachelab-mrc``.
    """
    fig = new_figure()
    ax = fig.add_subplot()
    ax.set_xscale("log")
    unit = None
    if simulation is not None:
        unit = simulation.unit
        names = list(policies) if policies is not None else simulation.policies()
        for index, name in enumerate(names):
            rows = sorted(
                (r for r in simulation.results if r.policy == name and r.capacity > 0),
                key=lambda r: r.capacity,
            )
            xs = [r.capacity for r in rows]
            ys = [r.byte_miss_ratio if byte_ratio else r.miss_ratio for r in rows]
            (line,) = ax.plot(xs, ys, marker="o", markersize=3.5, linewidth=1.5, label=name)
            line.set_gid(f"cachelab-series-{index}")
    if curve is not None:
        unit = unit or curve.unit
        pts = [
            (c, b if byte_ratio else m)
            for c, m, b in zip(curve.capacities, curve.miss_ratios, curve.byte_miss_ratios)
            if c > 0
        ]
        label = MRC_LABEL if curve.exact else f"{MRC_LABEL}, SHARDS R={curve.sample_rate:g}"
        (line,) = ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            color="0.25",
            linestyle="--",
            linewidth=1.0,
            label=label,
        )
        line.set_gid("cachelab-mrc")
    ax.set_xlabel(f"cache size ({unit or 'objects'})")
    ax.set_ylabel("byte miss ratio" if byte_ratio else "miss ratio")
    ax.set_ylim(0.0, 1.0)
    return finish(fig, ax, title, out_base, legend="lower left")


def size_plot(d: dict[str, Any], out_base: Path) -> list[Path]:
    """``cachelab size``'s figure: hit ratio against memory (log scale) from the exact LRU
    curve, each target's memory marked, the server's memory as a vertical line and the
    reachable maximum as a dotted ceiling. ``d`` is a ``size.json`` (``SizeResult.to_dict``:
    the report re-draws it from the file)."""
    fig = new_figure()
    ax = fig.add_subplot()
    ax.set_xscale("log")
    curve = d["curve"]
    pts = [(b, 1 - m) for b, m in zip(curve["bytes"], curve["miss_ratio"]) if b > 0]
    (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], color="tab:blue",
                      linewidth=1.6, label="LRU hit ratio")
    line.set_gid("cachelab-size-curve")
    best = d["max_hit_ratio"]
    ax.axhline(best, color="0.4", linestyle=":", linewidth=1.0,
               label=f"best possible ({pct(best)}: first accesses miss)")
    for t in d["targets"]:
        if t["bytes"]:
            ax.plot([t["bytes"]], [t["hit_ratio"]], marker="o", color="tab:green", zorder=4)
            ax.annotate(f"{pct(t['hit_ratio'], 0)}: {human_bytes(int(t['bytes']))}",
                        (t["bytes"], t["hit_ratio"]), textcoords="offset points",
                        xytext=(6, -12), fontsize="small")
    memory, check = d.get("memory"), d.get("check")
    if memory:
        ax.axvline(memory, color="tab:red", linewidth=1.0,
                   label=f"server memory {human_bytes(int(memory))}")
        if check is not None:
            ax.plot([memory], [check["observed"]], marker="D", color="tab:red",
                    zorder=4, label=f"observed {pct(check['observed'])}")
    unit = "memcached memory" if d.get("accounting") == "memcached" else "value bytes"
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: human_bytes(int(v))))
    ax.set_xlabel(f"cache size ({unit})")
    ax.set_ylabel("hit ratio (requests)")
    ax.set_ylim(0.0, 1.0)
    return finish(fig, ax, "Memory for a hit ratio (exact LRU)", out_base,
                  legend="lower right", minor_grid=False)

