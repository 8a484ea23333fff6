"""The USL plot from the slides: measured points, the fitted curve with its confidence band,
linear (ideal) scaling, and the Nmax marker; Amdahl's ceiling γ/α when β = 0.

This module imports matplotlib: import it inside the function that draws. Uses matplotlib's
object API only, like :mod:`cachelab.plots.latency`; output is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cachelab.plots.figure import new_figure, save
from cachelab.units import num
from cachelab.usl.quality import relative_se

__all__ = ["usl_plot"]

_GRID_POINTS = 200


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def usl_plot(
    fit: Any,
    out_base: Path,
    *,
    title: str | None = None,
    xlabel: str = "load N",
    ylabel: str = "throughput X(N)",
    points: Sequence[tuple[float, float]] | None = None,
) -> list[Path]:
    """Draws ``fit``, a :class:`~cachelab.usl.UslFit` (not imported here, as the fit imports
    this module to draw itself), and writes ``<out_base>.png`` and ``.svg``; returns their
    paths.

    ``points`` overrides the measured points drawn (default: the fit's own data). The x range
    covers the data and any predictions, and Nmax when it is within 3x the largest load; the y
    range covers the measured and predicted points and the peak, so they span the plot's
    height: linear scaling, the curve and its band are clipped to it.
    """
    ns = np.asarray(fit.n, dtype=float)
    right = float(ns.max())
    for p in fit.predictions:
        right = max(right, float(p["n"]))
    n_max = fit.peak.get("n_max")
    show_peak = n_max is not None and math.isfinite(n_max) and n_max <= 3 * float(ns.max())
    if show_peak:
        right = max(right, n_max * 1.15)
    right *= 1.05
    grid = np.linspace(min(1.0, float(ns.min())) * 0.5, right, _GRID_POINTS)
    preds = fit.predict(grid.tolist())
    curve = np.array([p["x"] for p in preds])
    lo = np.array([p["x_lo"] for p in preds])
    hi = np.array([p["x_hi"] for p in preds])

    fig = new_figure()
    ax = fig.add_subplot()
    level = round(fit.level * 100)
    if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)):
        band = ax.fill_between(grid, lo, hi, color="tab:blue", alpha=0.18, linewidth=0,
                               label=f"{level} % confidence band")
        band.set_gid("cachelab-usl-band")
    (line,) = ax.plot(grid, curve, color="tab:blue", linewidth=1.8,
                      label=f"USL fit ({fit.method}): α = {num(fit.alpha, 4)}, "
                      f"β = {num(fit.beta)}, γ = {num(fit.gamma, 4)}")
    line.set_gid("cachelab-usl-fit")
    shown = points if points is not None else list(zip(fit.n, fit.x))
    pts = np.asarray(shown, dtype=float).reshape(-1, 2)
    extra = [p for p in fit.predictions if p["n"] > float(ns.max())]
    ys = [*pts[:, 1], *(p["x"] for p in extra)]
    if show_peak and fit.peak.get("x_max") is not None:
        ys.append(fit.peak["x_max"])
    ys = [y for y in ys if math.isfinite(y)] or [0.0, float(np.nanmax(curve))]
    pad = 0.08 * (max(ys) - min(ys)) or 0.1 * abs(max(ys)) or 1.0
    bottom, top = max(0.0, min(ys) - pad), max(ys) + pad
    (ideal,) = ax.plot(grid, fit.gamma * grid, color="0.45", linestyle="--", linewidth=1.0,
                       label="linear scaling γN")
    ideal.set_gid("cachelab-usl-linear")
    if fit.amdahl and fit.peak.get("amdahl_limit"):
        limit = fit.peak["amdahl_limit"]
        if limit <= top * 1.5:
            ax.axhline(limit, color="0.45", linestyle=":", linewidth=1.0,
                       label=f"Amdahl ceiling γ/α = {_fmt(limit)}")
            top = max(top, limit * 1.05)
    scatter = ax.scatter(pts[:, 0], pts[:, 1], color="black", s=18, zorder=3, label="measured")
    scatter.set_gid("cachelab-usl-measured")
    if extra:
        ax.errorbar([p["n"] for p in extra], [p["x"] for p in extra],
                    yerr=[[p["x"] - p["x_lo"] for p in extra], [p["x_hi"] - p["x"] for p in extra]],
                    fmt="o", mfc="white", color="tab:orange", capsize=3, zorder=3,
                    label="predicted")
    if show_peak and fit.peak.get("x_max") is not None:
        x_max = fit.peak["x_max"]
        ax.axvline(n_max, color="tab:red", linestyle="-.", linewidth=1.0)
        ax.plot([n_max], [x_max], marker="D", color="tab:red", zorder=4,
                label=f"Nmax = {num(n_max)} (X = {_fmt(x_max)})")
    ax.set_xlim(0, right)
    ax.set_ylim(bottom, top)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)  # no "1e5" or "+6.8e4"
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is None:
        pct = relative_se(fit.x, fit.sigma)
        title = "Universal Scalability Law fit" + (
            f" (residual s.e. {num(pct, 2)} % of mean X)" if pct is not None else "")
    ax.set_title(title)
    ax.grid(True, linewidth=0.5, alpha=0.4)
    ax.legend(loc="best", fontsize="small", framealpha=0.9)

    return save(fig, out_base)
