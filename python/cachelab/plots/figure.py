"""What every cachelab figure shares: its size, and deterministic PNG + SVG output.

Only matplotlib's object API is used (:class:`~matplotlib.figure.Figure` and ``savefig``), so
no pyplot backend is selected or switched. Fixed SVG ids and no embedded date make the output
reproducible: re-drawing the same data gives byte-identical files; real ``<text>`` elements
keep the labels searchable and the SVG small.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from pathlib import Path

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from cachelab.artifacts import atomic_file

__all__ = ["DPI", "FIGSIZE", "finish", "new_figure", "save", "svg_only"]

DPI = 120
FIGSIZE = (8.0, 5.0)
_RC = {"svg.hashsalt": "cachelab", "svg.fonttype": "none"}


def new_figure(figsize: tuple[float, float] = FIGSIZE) -> Figure:
    """A figure with constrained layout, the house size by default."""
    return Figure(figsize=figsize, layout="constrained")


#: What :func:`save` writes: PNG and SVG, or the SVG alone (:func:`svg_only`).
_PNG_TOO: contextvars.ContextVar[bool] = contextvars.ContextVar("cachelab_png_too", default=True)


@contextlib.contextmanager
def svg_only() -> Iterator[None]:
    """Inside, :func:`save` writes the SVG alone: for a page that re-draws plots from the JSON
    and embeds only SVGs (the PNG was 45 % of a figure's drawing time)."""
    token = _PNG_TOO.set(False)
    try:
        yield
    finally:
        _PNG_TOO.reset(token)


def save(fig: Figure, out_base: Path | str) -> list[Path]:
    """Write ``<out_base>.png`` (120 dpi) and ``<out_base>.svg``, creating parent
    directories, each atomically (:func:`~cachelab.artifacts.atomic_file`); returns both
    paths (only the SVG's inside :func:`svg_only`). The constrained layout is worked out once,
    for the SVG, and kept for the PNG: working it out again took a fifth of the drawing."""
    base = Path(out_base)
    png, svg = base.with_name(base.name + ".png"), base.with_name(base.name + ".svg")
    with matplotlib.rc_context(_RC):
        with atomic_file(svg) as tmp:
            fig.savefig(tmp, format="svg", metadata={"Date": None})
        if not _PNG_TOO.get():
            return [svg]
        fig.set_layout_engine("none")
        with atomic_file(png) as tmp:
            fig.savefig(tmp, format="png", dpi=DPI)
    return [png, svg]


def finish(fig: Figure, ax: Axes, title: str, out_base: Path | str, *, legend: str,
           minor_grid: bool = True) -> list[Path]:
    """The house ending of a one-axes figure: ``title``, the major grid (and the minor one),
    a small legend at ``legend`` (``"upper left"`` …) when a line is labelled; then
    :func:`save`."""
    ax.set_title(title)
    ax.grid(True, which="major", linewidth=0.6, alpha=0.5)
    if minor_grid:
        ax.grid(True, which="minor", linewidth=0.3, alpha=0.25)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc=legend, fontsize="small")
    return save(fig, out_base)
