"""Miss ratio against cache size: one line per policy, the LRU miss-ratio curve overlaid.

Like :mod:`cachelab.plots.latency`, only matplotlib's object API is used (no pyplot backend
is selected) and output is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cachelab.flatsim import FlatSimulation, MissRatioCurve
from cachelab.plots.figure import new_figure, save

__all__ = ["MRC_LABEL", "miss_ratio_plot"]

#: Legend label of the overlaid LRU curve.
MRC_LABEL = "LRU miss-ratio curve (stack distances)"



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
    ax.set_title(title)
    ax.grid(True, which="major", linewidth=0.6, alpha=0.5)
    ax.grid(True, which="minor", linewidth=0.3, alpha=0.25)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower left", fontsize="small")

    return save(fig, out_base)
