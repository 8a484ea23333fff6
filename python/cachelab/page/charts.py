"""Chart specs for the report's interactive plots, built from an artifact's JSON alone.

A spec is plain JSON that ``charts.js`` (in this package, inlined into the page) draws as an
inline SVG: axes with ticks, a legend that toggles series, a hover readout and drag-to-zoom.
Each spec draws the same data as the static matplotlib figure it sits beside
(:mod:`cachelab.plots`), which stays in the page as the fallback and the static version.

Two kinds of chart:

``{"kind": "xy", "title", "x": AXIS, "y": AXIS, "series": [SERIES, ...], "marks": [MARK, ...]}``
    AXIS is ``{"label": str, "scale": "linear"|"log", "reverse": bool, "format": FORMAT,
    "unit": str}``; FORMAT is ``"num"``, ``"percent"`` (fractions shown as %) or ``"invpct"``
    (an inverted percentile ``100 - p``, read out as ``p<p>``); values are in the axis's unit.
    SERIES is ``{"name", "type": "line"|"points"|"bars", "points": [[x, y], ...], "dash": bool,
    "band": [[x, lo, hi], ...] (optional), "widths": [bar width in x units, one per point]
    (bars only), "color": index into the palette (optional; -1 is a neutral grey; series
    sharing one colour say so), "ref": bool (optional: a reference line — linear scaling, an
    ideal, a fitted curve drawn past the data — drawn clipped to the plot, but the axes are
    scaled to the other series)}``. With ``"zero": true`` the y axis includes 0.
    MARK is ``{"type": "vspan", "from", "to", "label"}`` or ``{"type": "vline", "x", "label"}``.
``{"kind": "bars", "title", "categories": [str, ...], "x": AXIS, "series": [BARS, ...]}``
    Horizontal bars (or dots with an interval) per category: BARS is ``{"name", "style":
    "bar"|"dot", "values": [v or null, ...], "lo": [...], "hi": [...] (optional), "thin": bool}``.

Builders return ``None`` (or an empty list) when the JSON has nothing to draw.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from cachelab.units import ns_per_unit, pick_unit

__all__ = ["INVPCT_LABEL", "axis", "chart_json", "finite", "inverted_series", "invpct_axis",
           "latency_unit", "r", "rv", "script", "xy"]

Spec = dict[str, Any]


INVPCT_LABEL = "inverted percentile, 100 − p (log scale; 1 = p99, 0.1 = p99.9)"


def axis(label: str, scale: str = "linear", *, fmt: str = "num", unit: str = "",
          reverse: bool = False) -> dict[str, Any]:
    return {"label": label, "scale": scale, "reverse": reverse, "format": fmt, "unit": unit}


def invpct_axis() -> dict[str, Any]:
    return axis(INVPCT_LABEL, "log", fmt="invpct", reverse=True)


def finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def r(v: float) -> float:
    """Ten significant digits: the JSON stays short, the readout exact to what is shown."""
    return float(f"{float(v):.10g}")


def rv(v: Any) -> float | None:
    """A bar's value, or None (no bar) when it is missing or not finite."""
    return r(v) if finite(v) else None


def xy(points: Iterable[tuple[Any, Any]], *, logx: bool = False,
        logy: bool = False) -> list[list[float]]:
    out = []
    for x, y in points:
        if not (finite(x) and finite(y)):
            continue
        if (logx and x <= 0) or (logy and y <= 0):
            continue
        out.append([r(x), r(y)])
    return out


def latency_unit(values_ns: Iterable[float]) -> tuple[str, float]:
    unit = pick_unit([v for v in values_ns if finite(v)])
    return unit, ns_per_unit(unit)


def inverted_series(name: str, pcts: Sequence[float], values_ns: Sequence[float],
                     scale: float) -> dict[str, Any]:
    pts = sorted(zip(pcts, values_ns))
    return {"name": name, "type": "line",
            "points": xy(((100.0 - p, v / scale) for p, v in pts if finite(v)), logx=True,
                          logy=True)}


def chart_json(spec: Spec) -> str:
    """``spec`` as JSON safe inside a ``<script type="application/json">`` element: no ``<``,
    ``>`` or ``&`` appear literally, so no ``</script>`` or ``<!--`` can end the element early.
    Non-finite numbers are refused (JSON has none)."""
    text = json.dumps(spec, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


@lru_cache(maxsize=1)
def script() -> str:
    """The source of ``charts.js``, checked to be safe to inline in a ``<script>`` element."""
    text = resources.files("cachelab.page").joinpath("charts.js").read_text(encoding="utf-8")
    low = text.lower()
    if "</script" in low or "<!--" in low:
        raise RuntimeError("charts.js must not contain '</script' or '<!--' (it is inlined)")
    return text
