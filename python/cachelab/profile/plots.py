"""A profile's figures: per operation, the inverted-percentile plot of its cells (PNG and SVG).

This module imports matplotlib: import it inside the function that draws."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cachelab.plots.latency import inverted_percentile_plot, inverted_percentile_points
from cachelab.profile.cell import OPS, PLOT_FILES, PLOT_TITLES, Cell, floor_p50


def write_plots(name: str, cells: Sequence[Cell], out: Path) -> list[Path]:
    """``get-by-size``, ``set-by-size`` and ``multiget-by-keys`` (``.png``, ``.svg``) in
    ``out``, for the operations measured: a line per cell, and the loopback floor's p50.
    ``name`` (the profile's) goes in the titles."""
    points = inverted_percentile_points()
    floor_ns = floor_p50(cells)
    written: list[Path] = []
    for op in OPS:
        measured = [c for c in cells if c.op == op and c.samples]
        if not measured:
            continue
        series = [(c.label, list(zip(points, c.at(points)))) for c in measured]
        written += inverted_percentile_plot(
            series, title=f"{PLOT_TITLES[op]} — {name}", out_base=out / PLOT_FILES[op],
            floor_ns=floor_ns,
        )
    return written
