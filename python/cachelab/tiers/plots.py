"""The seed's bar charts for ``cachelab tiers``: median time per read of each method, one panel
per data shape (log scale: process memory and the store differ by orders of magnitude), CPU
time per read as a darker inner bar. Matplotlib's object API only; output is deterministic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.plots.figure import new_figure, save
from cachelab.tiers.spec import SHAPE_TITLES, SHAPES

__all__ = ["tiers_plot"]


def tiers_plot(result: Any, out_base: Path) -> list[Path]:
    """Writes ``<out_base>.png`` and ``.svg``; returns their paths."""
    d = result.to_dict() if hasattr(result, "to_dict") else result
    shapes = [s for s in SHAPES if any(r["shape"] == s for r in d["rows"])]
    fig = new_figure((9.0, 2.2 + 0.42 * len(d["rows"])))
    axes = fig.subplots(len(shapes), 1, squeeze=False)[:, 0]
    for ax, shape in zip(axes, shapes):
        rows = [r for r in d["rows"] if r["shape"] == shape][::-1]
        names = [r["method"] for r in rows]
        wall = [max(r["wall_p50_us"], 1e-3) for r in rows]
        cpu = [max(min(r["cpu_mean_us"], r["wall_p50_us"]), 1e-3) for r in rows]
        ys = range(len(rows))
        ax.barh(ys, wall, color="#8fb3d9", label="wall time per read (median)")
        ax.barh(ys, cpu, height=0.35, color="#2b5d8c", label="CPU time per read (mean)")
        for y, w in zip(ys, wall):
            ax.text(w * 1.08, y, f"{w:,.2f} µs" if w < 10 else f"{w:,.0f} µs",
                    va="center", fontsize=8)
        ax.set_yticks(list(ys), names, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlim(min(cpu + wall) / 2, max(wall) * 6)
        ax.set_title(f"Reading {SHAPE_TITLES.get(shape, shape)}", fontsize=10, loc="left")
        ax.grid(axis="x", which="major", alpha=0.3)
    axes[-1].set_xlabel("µs per read (log scale)")
    axes[0].legend(loc="upper right", fontsize=8)
    return save(fig, out_base)
