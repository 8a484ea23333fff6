"""A sweep's figures: throughput against N with the USL fit (``scale-usl``), and each point's
latency distribution as inverted-percentile curves (``scale-latency``).

This module imports matplotlib: import it inside the function that draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cachelab._core as _core
from cachelab.plots.latency import inverted_percentile_plot, inverted_percentile_points
from cachelab.scale.verdicts import series_name
from cachelab.usl.plots import usl_plot

__all__ = ["scale_latency_plot", "scale_usl_plot", "write_plots"]


def write_plots(fit: Any, summary: Sequence[dict], vary: str, out_dir: Path) -> list[Path]:
    """``scale-usl`` (when ``fit``, a :class:`~cachelab.usl.UslFit`, is not None) and
    ``scale-latency`` (``.png``, ``.svg``) in ``out_dir``; returns their paths."""
    written: list[Path] = []
    if fit is not None:
        written += scale_usl_plot(fit, out_dir / "scale-usl", vary=vary)
    written += scale_latency_plot(summary, out_dir / "scale-latency", vary=vary)
    return written


def scale_usl_plot(fit: Any, out_base: Path, *, vary: str) -> list[Path]:
    """The sweep's throughput against N with the USL fit (:func:`cachelab.usl.plots.usl_plot`
    with the sweep's labels)."""
    return usl_plot(fit, out_base, xlabel=f"N ({vary})", ylabel="throughput (replies/s)",
                    title=f"memcached scalability: N = {vary}")


def scale_latency_plot(summary: Sequence[dict], out_base: Path, *, vary: str) -> list[Path]:
    """Each load point's latency distribution (repeats merged) as inverted-percentile curves,
    in the style of :func:`cachelab.plots.latency.inverted_percentile_plot`."""
    pcts = inverted_percentile_points(100.0, 0.1)
    series = []
    for row in summary:
        h = row["latency"].get("histogram")
        if not h:
            continue
        values = _core.hist_percentiles(h, pcts)
        series.append((series_name(row), list(zip(pcts, [float(v) for v in values]))))
    return inverted_percentile_plot(series, title=f"latency by load ({vary})", out_base=out_base)
