"""Inverted-percentile latency plots, in the style of the seed post's figures.

The x axis shows the *inverted* percentile ``100 - p`` on a log scale, running from 100 (p0)
on the left to 0.01 (p99.99) on the right, so every "nine" of the tail gets the same width and
the tail is where the eye ends up.  The y axis is latency on a log scale.

Only matplotlib's object API is used (:class:`~matplotlib.figure.Figure` and ``savefig``), so
these functions never select or switch a pyplot backend and work whether or not pyplot has been
imported.  Output is deterministic: re-drawing the same data gives byte-identical files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from cachelab.plots.figure import finish, new_figure
from cachelab.units import ns_per_unit, pick_unit

__all__ = ["FLOOR_LABEL", "inverted_percentile_plot", "inverted_percentile_points"]

#: Legend label of the optional horizontal reference line.
FLOOR_LABEL = "loopback floor (p50)"

# Fixed SVG ids and no embedded date make SVG output reproducible; real <text> elements keep
# the labels searchable and the file small.
_MIN_INVERTED = 1e-6  # p99.9999: finer than any run cachelab can afford
_NICE_MANTISSAS = (1, 2, 5)
_MAX_Y_TICKS = 10


def inverted_percentile_points(
    max_inverted: float = 100.0, min_inverted: float = 0.01, per_decade: int = 20
) -> list[float]:
    """Percentiles to sample for a smooth inverted-percentile curve, in ascending order.

    The points are evenly spaced on a log scale of ``100 - p``, at least ``per_decade`` per
    factor of ten, from ``max_inverted`` down to ``min_inverted``.  With the defaults that is
    81 points from p0 to p99.99, and when the range spans whole decades every decade boundary
    (p90, p99, p99.9) is hit exactly.
    """
    if not _MIN_INVERTED <= min_inverted < max_inverted <= 100.0:
        raise ValueError(
            f"need {_MIN_INVERTED:g} <= min_inverted < max_inverted <= 100, "
            f"got {min_inverted!r} and {max_inverted!r}"
        )
    if per_decade < 1:
        raise ValueError(f"per_decade must be at least 1, got {per_decade!r}")
    decades = math.log10(max_inverted / min_inverted)
    count = max(2, math.ceil(decades * per_decade - 1e-9) + 1)
    exponents = np.linspace(math.log10(max_inverted), math.log10(min_inverted), count)
    # Rounding removes float noise such as 99.90000000000001 while keeping points distinct.
    points = [round(100.0 - 10.0 ** float(e), 10) for e in exponents]
    points[0], points[-1] = 100.0 - max_inverted, 100.0 - min_inverted
    return points


def inverted_percentile_plot(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    title: str,
    out_base: Path,
    unit: str | None = None,
    ylabel: str = "latency",
    floor_ns: float | None = None,
) -> list[Path]:
    """Draw one line per ``(label, [(percentile, latency_ns), ...])`` series and save it.

    Percentiles must lie in [0, 100); points whose latency is not a positive finite number
    cannot be shown on a log scale and are left out.  ``unit`` defaults to
    :func:`~cachelab.units.pick_unit` over all latencies.  ``floor_ns``, if given, is drawn as a
    dashed horizontal line labelled :data:`FLOOR_LABEL`.

    Writes ``<out_base>.png`` (120 dpi) and ``<out_base>.svg``, creating parent directories,
    and returns those two paths.  In the SVG, the line of series ``i`` is the group with id
    ``cachelab-series-<i>``.
    """
    curves = [(label, *_curve(label, points)) for label, points in series]
    latencies = [float(y) for _, _, ys in curves for y in ys]
    if floor_ns is not None:
        latencies.append(float(floor_ns))
    if unit is None:
        unit = pick_unit(latencies)
    scale = ns_per_unit(unit)

    fig = new_figure()
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    for index, (label, xs, ys) in enumerate(curves):
        (line,) = ax.plot(xs, ys / scale, label=label, linewidth=1.5)
        line.set_gid(f"cachelab-series-{index}")
    if floor_ns is not None:
        ax.axhline(floor_ns / scale, color="0.35", linestyle="--", linewidth=1.0, label=FLOOR_LABEL)

    _style_x_axis(ax, np.concatenate([xs for _, xs, _ in curves]) if curves else np.empty(0))
    _style_y_axis(ax, [v / scale for v in latencies if v > 0 and math.isfinite(v)])
    ax.set_ylabel(f"{ylabel} ({unit})")
    return finish(fig, ax, title, out_base, legend="upper left")


def _curve(label: str, points: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """A series as arrays of (100 - p, latency_ns), sorted by p, dropping unplottable points."""
    data = np.array(sorted(points), dtype=float).reshape(-1, 2)
    percentiles, latencies = data[:, 0], data[:, 1]
    if not np.all((percentiles >= 0.0) & (percentiles < 100.0)):
        raise ValueError(f"series {label!r}: percentiles must lie in [0, 100)")
    keep = np.isfinite(latencies) & (latencies > 0.0)
    return 100.0 - percentiles[keep], latencies[keep]


def _style_x_axis(ax: Axes, inverted: np.ndarray) -> None:
    """Log-scaled inverted percentiles, tail on the right, with p-labels along the top."""
    low = float(inverted.min()) if inverted.size else 0.01
    high = float(inverted.max()) if inverted.size else 100.0
    left = min(100.0, 10.0 ** math.ceil(math.log10(high) - 1e-9))
    right = 10.0 ** math.floor(math.log10(low) + 1e-9)
    if right >= left:
        right = left / 10.0
    ax.set_xlim(left, right)  # left > right: the axis runs from 100 down to the tail

    exponents = range(round(math.log10(left)), round(math.log10(right)) - 1, -1)
    ticks = [float(Decimal(1).scaleb(exponent)) for exponent in exponents]
    if left == 100.0:
        ticks.insert(1, 50.0)  # the median deserves a label
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: _plain(value)))
    ax.xaxis.set_minor_locator(LogLocator(base=10.0, subs=tuple(range(2, 10))))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("inverted percentile, 100 \u2212 p (log scale; 1 = p99, 0.1 = p99.9)")

    top = ax.secondary_xaxis("top")
    top.set_xticks(ticks, labels=[f"p{_plain(round(100.0 - t, 10))}" for t in ticks])
    top.xaxis.set_minor_locator(NullLocator())


def _style_y_axis(ax: Axes, values: Sequence[float],
                  label: Callable[[float], str] | None = None) -> None:
    """Log-scaled latency labelled with plain numbers (or ``label(value)``) on the 1-2-5
    sequence.

    The limits are the nice numbers just outside the data (with a 5% margin); when that would
    make more than ``_MAX_Y_TICKS`` ticks, powers of ten are used instead.
    """
    if not values:
        return
    low, high = min(values) / 1.05, max(values) * 1.05
    ticks = _nice_ticks(low, high, _NICE_MANTISSAS)
    if len(ticks) > _MAX_Y_TICKS:
        ticks = _nice_ticks(low, high, (1,))
    ax.set_ylim(ticks[0], ticks[-1])
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: (label or _plain)(value)))
    ax.yaxis.set_minor_locator(LogLocator(base=10.0, subs=tuple(range(2, 10))))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _nice_ticks(low: float, high: float, mantissas: Sequence[int]) -> list[float]:
    """The numbers ``m * 10**k`` (``m`` in ``mantissas``) from the last one <= ``low`` to the
    first one >= ``high``, ascending."""
    first, last = math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1
    nice = [
        float(Decimal(mantissa).scaleb(exponent))
        for exponent in range(first, last + 1)
        for mantissa in mantissas
    ]
    bottom = max(v for v in nice if v <= low)
    top = min(v for v in nice if v >= high)
    return [v for v in nice if bottom <= v <= top]


def _plain(value: float) -> str:
    """The shortest plain decimal for ``value``: 100.0 -> "100", 0.001 -> "0.001"."""
    return format(Decimal(repr(float(value))).normalize(), "f")
