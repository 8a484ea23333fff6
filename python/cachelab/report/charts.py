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
    sharing one colour say so)}``.
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

__all__ = ["chart_json", "compare_chart", "flat_chart", "load_charts", "profile_charts",
           "replay_chart", "scale_latency_chart", "script", "simulation_chart", "tiers_charts",
           "usl_chart"]

Spec = dict[str, Any]

_INVPCT_LABEL = "inverted percentile, 100 − p (log scale; 1 = p99, 0.1 = p99.9)"


def _axis(label: str, scale: str = "linear", *, fmt: str = "num", unit: str = "",
          reverse: bool = False) -> dict[str, Any]:
    return {"label": label, "scale": scale, "reverse": reverse, "format": fmt, "unit": unit}


def _invpct_axis() -> dict[str, Any]:
    return _axis(_INVPCT_LABEL, "log", fmt="invpct", reverse=True)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _r(v: float) -> float:
    """Ten significant digits: the JSON stays short, the readout exact to what is shown."""
    return float(f"{float(v):.10g}")


def _rv(v: Any) -> float | None:
    """A bar's value, or None (no bar) when it is missing or not finite."""
    return _r(v) if _finite(v) else None


def _xy(points: Iterable[tuple[Any, Any]], *, logx: bool = False,
        logy: bool = False) -> list[list[float]]:
    out = []
    for x, y in points:
        if not (_finite(x) and _finite(y)):
            continue
        if (logx and x <= 0) or (logy and y <= 0):
            continue
        out.append([_r(x), _r(y)])
    return out


def _latency_unit(values_ns: Iterable[float]) -> tuple[str, float]:
    from cachelab.units import ns_per_unit, pick_unit

    unit = pick_unit([v for v in values_ns if _finite(v)])
    return unit, ns_per_unit(unit)


def _inverted_series(name: str, pcts: Sequence[float], values_ns: Sequence[float],
                     scale: float) -> dict[str, Any]:
    pts = sorted(zip(pcts, values_ns))
    return {"name": name, "type": "line",
            "points": _xy(((100.0 - p, v / scale) for p, v in pts if _finite(v)), logx=True,
                          logy=True)}


# -- profile ------------------------------------------------------------------------------

_PROFILE_TITLES = {"get": "get latency by value size", "set": "set latency by value size",
                   "multiget": "multi-get latency by key count"}
_PROFILE_FILES = {"get": "get-by-size", "set": "set-by-size", "multiget": "multiget-by-keys"}


def profile_charts(d: dict[str, Any], where: str = "profile") -> dict[str, Spec]:
    """Plot base name -> spec: one inverted-percentile chart per operation, a line per cell
    (as :func:`cachelab.cli.profile.write_plots` draws), with the loopback floor's p50."""
    from cachelab.plots.latency import inverted_percentile_points
    from cachelab.profiles import OPS, LatencyProfile

    p = LatencyProfile.from_dict(d, where)
    pcts = inverted_percentile_points()
    floor = p.floor
    floor_ns = floor.percentiles.get("50") if floor and floor.samples else None
    out: dict[str, Spec] = {}
    for op in OPS:
        cells = [c for c in p.cells_of(op) if c.samples]
        if not cells:
            continue
        values = [(c.label, [float(v) for v in c.at(pcts)]) for c in cells]
        unit, scale = _latency_unit([v for _, vs in values for v in vs] +
                                    ([floor_ns] if floor_ns else []))
        series = [_inverted_series(label, pcts, vs, scale) for label, vs in values]
        if floor_ns:
            series.append({"name": "loopback floor (p50)", "type": "line", "dash": True,
                           "color": -1, "points": [[100.0, _r(floor_ns / scale)],
                                                   [_r(100.0 - pcts[-1]), _r(floor_ns / scale)]]})
        out[_PROFILE_FILES[op]] = {"kind": "xy", "title": f"{_PROFILE_TITLES[op]} — {p.name}",
                                   "x": _invpct_axis(),
                                   "y": _axis(f"latency ({unit})", "log", unit=unit),
                                   "series": series}
    return out


# -- load ---------------------------------------------------------------------------------


def load_charts(d: dict[str, Any]) -> list[Spec]:
    """Latency (p50, p99, p99.9 per interval, log scale) over time, then throughput per
    interval, with the warm-up and the start of the steady state marked (as
    :func:`cachelab.plots.load.latency_over_time`)."""
    ivs = d.get("intervals") or []
    if not ivs:
        return []
    mode = d.get("mode")
    which = "corrected" if mode == "open" else "uncorrected"
    xs = [iv["start_s"] + iv["duration_s"] / 2 for iv in ivs]
    values = [iv[which]["percentiles"] for iv in ivs]
    unit, scale = _latency_unit([v.get("99") for v in values if v.get("99")])
    series = []
    for key, label in (("50", "p50"), ("99", "p99"), ("99.9", "p99.9")):
        series.append({"name": f"{label} ({which})", "type": "line", "marker": True,
                       "points": _xy(((x, (v.get(key) or 0) / scale) for x, v in zip(xs, values)),
                                     logy=True)})
    if mode == "open":
        series.append({"name": "p99 (uncorrected)", "type": "line", "dash": True, "color": -1,
                       "points": _xy(((x, (iv["uncorrected"]["percentiles"].get("99") or 0)
                                      / scale) for x, iv in zip(xs, ivs)), logy=True)})
    marks: list[dict[str, Any]] = []
    warm_end = max((iv["start_s"] + iv["duration_s"] for iv in ivs if iv.get("warmup")),
                   default=0)
    if warm_end:
        marks.append({"type": "vspan", "from": 0.0, "to": _r(warm_end), "label": "warm-up"})
    start = (d.get("steady") or {}).get("start_index")
    if isinstance(start, int) and start < len(ivs):
        marks.append({"type": "vline", "x": _r(ivs[start]["start_s"]),
                      "label": "steady state from"})
    time_axis = _axis("time since start (s)", unit="s")
    lat = {"kind": "xy", "title": "latency over time", "x": time_axis,
           "y": _axis(f"latency ({unit})", "log", unit=unit), "series": series, "marks": marks}
    thr = {"kind": "xy", "title": "throughput over time", "x": time_axis,
           "y": _axis("replies/s", unit="/s"), "marks": marks, "zero": True,
           "series": [{"name": "throughput", "type": "bars", "color": -1,
                       "points": _xy((x, iv.get("throughput")) for x, iv in zip(xs, ivs)),
                       "widths": [_r(iv["duration_s"] * 0.9) for iv in ivs
                                  if _finite(iv.get("throughput"))]}]}
    return [lat, thr]


# -- scale / usl --------------------------------------------------------------------------


def usl_chart(fit: dict[str, Any], *, xlabel: str = "load N", ylabel: str = "throughput",
              title: str = "USL fit", where: str = "usl") -> Spec:
    """Measured points, the fitted curve with its confidence band, linear scaling and the
    peak (as :func:`cachelab.plots.usl.usl_plot`)."""
    from cachelab.usl import UslFit

    f = UslFit.from_dict(fit, where)
    ns = [float(v) for v in f.n]
    right = max([*ns, *(float(p["n"]) for p in f.predictions)])
    n_max = f.peak.get("n_max")
    show_peak = _finite(n_max) and n_max <= 3 * max(ns)
    if show_peak:
        right = max(right, n_max * 1.15)
    right *= 1.05
    lo_n = min(1.0, min(ns)) * 0.5
    grid = [lo_n + (right - lo_n) * i / 199 for i in range(200)]
    preds = f.predict(grid)
    curve = {"name": f"USL fit ({f.method}): α = {f.alpha:.4g}, β = {f.beta:.3g}, "
                     f"γ = {f.gamma:.4g}", "type": "line",
             "color": 0, "points": _xy((g, p["x"]) for g, p in zip(grid, preds))}
    band = [[_r(g), _r(p["x_lo"]), _r(p["x_hi"])] for g, p in zip(grid, preds)
            if _finite(p.get("x_lo")) and _finite(p.get("x_hi"))]
    if len(band) == len(grid):
        curve["band"] = band
        curve["band_name"] = f"{round(f.level * 100)} % confidence band"
    series = [
        {"name": "measured", "type": "points", "color": -1, "points": _xy(zip(f.n, f.x))},
        curve,
        {"name": "linear scaling γN", "type": "line", "dash": True, "color": -1,
         "points": _xy((g, f.gamma * g) for g in (grid[0], grid[-1]))},
    ]
    extra = [p for p in f.predictions if p["n"] > max(ns)]
    if extra:
        series.append({"name": "predicted", "type": "points",
                       "points": _xy((p["n"], p["x"]) for p in extra)})
    if show_peak and f.peak.get("x_max") is not None:
        series.append({"name": f"Nmax = {n_max:.3g}", "type": "points",
                       "points": _xy([(n_max, f.peak["x_max"])])})
    return {"kind": "xy", "title": title, "x": _axis(xlabel), "y": _axis(ylabel),
            "series": series, "zero": True}


def scale_latency_chart(summary: Sequence[dict[str, Any]], vary: str) -> Spec | None:
    """Each load point's latency distribution as an inverted-percentile line (as
    :func:`cachelab.plots.usl.scale_latency_plot`)."""
    from cachelab import _core
    from cachelab.plots.latency import inverted_percentile_points

    pcts = inverted_percentile_points(100.0, 0.1)
    rows = []
    for row in summary:
        h = row["latency"].get("histogram")
        if h:
            rows.append((f"N = {row['n']}", [float(v) for v in _core.hist_percentiles(h, pcts)]))
    if not rows:
        return None
    unit, scale = _latency_unit([v for _, vs in rows for v in vs])
    return {"kind": "xy", "title": f"latency by load ({vary})", "x": _invpct_axis(),
            "y": _axis(f"latency ({unit})", "log", unit=unit),
            "series": [_inverted_series(name, pcts, vs, scale) for name, vs in rows]}


# -- simulation ---------------------------------------------------------------------------


def simulation_chart(d: dict[str, Any]) -> Spec | None:
    """Fractional latency increase by inverted percentile, log-log, a line per strategy with
    its band over latency draws (as :func:`cachelab.plots.simulate.fractional_increase_plot`)."""
    series = []
    for s in d.get("strategies", []):
        c = s.get("curve") or {}
        pts = list(zip(c.get("percentile", []), c.get("median", [])))
        line = {"name": s["strategy"], "type": "line",
                "points": _xy(((100.0 - p, m) for p, m in pts), logx=True, logy=True)}
        if not line["points"]:
            continue
        band = [[_r(100.0 - p), _r(lo), _r(hi)] for p, m, lo, hi in
                zip(c.get("percentile", []), c.get("median", []), c.get("low", []),
                    c.get("high", []))
                if _finite(m) and m > 0 and _finite(lo) and lo > 0 and _finite(hi)]
        if any(hi > lo for _, lo, hi in band):
            line["band"] = band
        series.append(line)
    if not series:
        return None
    model = (d.get("model") or {}).get("name", "")
    return {"kind": "xy", "title": f"Simulated latency increase per request (model {model})",
            "x": _invpct_axis(),
            "y": _axis("added latency / base latency (log scale)", "log", fmt="percent"),
            "series": series}


def flat_chart(d: dict[str, Any], byte_ratio: bool = False) -> Spec | None:
    """Miss ratio by cache size, a line per policy, the LRU miss-ratio curve overlaid (as
    :func:`cachelab.plots.mrc.miss_ratio_plot`)."""
    rows = [r for r in d.get("results", []) if isinstance(r, dict) and r.get("capacity", 0) > 0]
    key = "byte_miss_ratio" if byte_ratio else "miss_ratio"
    series = []
    for name in dict.fromkeys(r.get("policy") for r in rows):
        rs = sorted((r for r in rows if r.get("policy") == name), key=lambda r: r["capacity"])
        series.append({"name": str(name), "type": "line", "marker": True,
                       "points": _xy(((r["capacity"], r.get(key)) for r in rs), logx=True)})
    mrc = d.get("mrc")
    if isinstance(mrc, dict):
        label = "LRU miss-ratio curve (stack distances)"
        if not mrc.get("exact", True):
            label += f", SHARDS R={mrc.get('sample_rate'):g}"
        ys = mrc.get("byte_miss_ratios" if byte_ratio else "miss_ratios", [])
        series.append({"name": label, "type": "line", "dash": True, "color": -1,
                       "points": _xy(zip(mrc.get("capacities", []), ys), logx=True)})
    if not any(s["points"] for s in series):
        return None
    unit = d.get("unit") or "objects"
    return {"kind": "xy", "title": ("Byte miss ratio" if byte_ratio else "Miss ratio")
            + " by cache size", "x": _axis(f"cache size ({unit})", "log"),
            "y": _axis("byte miss ratio" if byte_ratio else "miss ratio"),
            "series": series, "zero": True}


# -- tiers, replay, compare ---------------------------------------------------------------

_TIER_TITLES = {"record": "one ~60 KB record", "list": "a list of 1,000 small records"}


def tiers_charts(d: dict[str, Any]) -> list[Spec]:
    """Per data shape, time per read by method: median wall time and mean CPU time (as
    :func:`cachelab.plots.tiers.tiers_plot`)."""
    out = []
    shapes = list(dict.fromkeys(r["shape"] for r in d.get("rows", [])))
    for shape in shapes:
        rows = [r for r in d["rows"] if r["shape"] == shape]
        out.append({"kind": "bars", "title": f"Reading {_TIER_TITLES.get(shape, shape)}",
                    "categories": [r["method"] for r in rows],
                    "x": _axis("µs per read (log scale)", "log", unit="µs"),
                    "series": [
                        {"name": "wall time per read (median)", "style": "bar",
                         "values": [_rv(r.get("wall_p50_us")) for r in rows]},
                        {"name": "CPU time per read (mean)", "style": "bar", "thin": True,
                         "values": [_rv(r.get("cpu_mean_us")) for r in rows]}]})
    return out


def replay_chart(d: dict[str, Any]) -> Spec | None:
    """Added latency as a share of the base latency at each percentile, measured (solid) and
    predicted (dashed, the same colour), a pair of lines per strategy."""
    series = []
    for i, s in enumerate(d.get("strategies", [])):
        inc = s.get("increase") or {}
        keys = sorted(inc, key=float)
        for what, dash in (("measured", False), ("predicted", True)):
            series.append({"name": f"{s['strategy']} {what}", "type": "line", "marker": True,
                           "dash": dash, "color": i,
                           "points": _xy(((100.0 - float(k), inc[k].get(what)) for k in keys),
                                         logx=True)})
    if not any(s["points"] for s in series):
        return None
    return {"kind": "xy", "title": "Replay: measured vs predicted added latency",
            "x": _invpct_axis(), "y": _axis("added latency / base latency", fmt="percent"),
            "series": series, "zero": True}


def compare_chart(d: dict[str, Any], max_rows: int = 48) -> Spec | None:
    """The relative change of each result against A, with its interval, a row per (item,
    metric) and a dot per pair (as :func:`cachelab.compare.compare_plot`)."""
    rows = [x for x in d.get("rows", []) if x.get("relative") is not None][: max_rows * 4]
    labels = list(dict.fromkeys(f"{x['item']} · {x['metric']}" for x in rows))[:max_rows]
    pairs = list(dict.fromkeys(x["versus"] for x in rows))
    if not labels:
        return None
    series = []
    for pair in pairs:
        vals: list[float | None] = [None] * len(labels)
        lo: list[float | None] = [None] * len(labels)
        hi: list[float | None] = [None] * len(labels)
        for x in rows:
            lab = f"{x['item']} · {x['metric']}"
            if x["versus"] != pair or lab not in labels:
                continue
            j = labels.index(lab)
            vals[j] = _rv(x["relative"])
            if _finite(x.get("ci_low")) and _finite(x.get("ci_high")):
                lo[j], hi[j] = _r(x["ci_low"]), _r(x["ci_high"])
        series.append({"name": pair, "style": "dot", "values": vals, "lo": lo, "hi": hi})
    return {"kind": "bars", "title": f"{d.get('kind', '')}: change relative to A",
            "categories": labels, "zero_line": True,
            "x": _axis("change relative to A (%), with its interval", fmt="percent"),
            "series": series}


# -- embedding ----------------------------------------------------------------------------


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
    text = resources.files("cachelab.report").joinpath("charts.js").read_text(encoding="utf-8")
    low = text.lower()
    if "</script" in low or "<!--" in low:
        raise RuntimeError("charts.js must not contain '</script' or '<!--' (it is inlined)")
    return text

