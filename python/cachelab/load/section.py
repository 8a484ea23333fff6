"""The load result's report section and its interactive charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.artifacts import Artifact
from cachelab.load.result import LoadResult
from cachelab.page import charts as ch
from cachelab.page.html import esc, table
from cachelab.page.section import Context, Section, chart_specs, figures
from cachelab.units import dur

Spec = dict[str, Any]


def section(art: Artifact, ctx: Context) -> Section:
    """The load run in ``art``: the steady window's throughput, percentiles, errors, and the
    latency-over-time figure."""
    d = art.data
    r = LoadResult.from_dict(d, str(art.path))
    sec = Section(f"Load: {d['mode']} loop against {d['server'].get('address', '?')}", "load",
                  art.path)
    spec = d["spec"]
    lat = r.latency()
    p = lat.get("percentiles_ns") or lat.get("percentiles") or {}
    tot = d["totals"]
    sec.body.append(
        f"<p>{esc(spec.get('connections'))} connection(s) × {esc(spec.get('threads'))} "
        f"thread(s), {esc(spec.get('duration'))} s; steady state "
        f"{'reached' if d['steady'].get('reached') else 'NOT reached'}.</p>")
    rows = [["throughput", f"{tot.get('throughput', 0):,.0f} /s"]]
    for k in ("50", "90", "99", "99.9"):
        if k in p:
            rows.append([f"p{k} latency", dur(p[k])])
    rows.append(["errors", str(sum(d["all"]["errors"].values()))])
    rows.append(["lost requests", str(d["all"].get("lost", 0))])
    sec.body.append(table(["", "steady window"], rows))

    def redraw(out: Path) -> list[Path]:
        # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
        from cachelab.load.plots import latency_over_time

        return latency_over_time(r, out / "load-latency")

    figs = figures(art, ctx, [("load-latency", "latency and throughput over time")], redraw,
                  chart_specs(lambda: {"load-latency": charts(d)}, sec))
    sec.add_figures(figs)
    if "50" in p:
        sec.findings.append(f"{tot.get('throughput', 0):,.0f} requests/s at p50 {dur(p['50'])} "
                            f"and p99 {dur(p.get('99'))} ({lat.get('which', '')} latency).")
    for k, n in r.problems().items():
        sec.notes.append(f"{n} {k.replace('_', ' ')}")
    return sec


def charts(d: dict[str, Any]) -> list[Spec]:
    """Latency (p50, p99, p99.9 per interval, log scale) over time, then throughput per
    interval, with the warm-up and the start of the steady state marked (as
    :func:`cachelab.load.plots.latency_over_time`)."""
    ivs = d.get("intervals") or []
    if not ivs:
        return []
    mode = d.get("mode")
    which = "corrected" if mode == "open" else "uncorrected"
    xs = [iv["start_s"] + iv["duration_s"] / 2 for iv in ivs]
    values = [iv[which]["percentiles"] for iv in ivs]
    unit, scale = ch.latency_unit([v.get("99") for v in values if v.get("99")])
    series = []
    for key, label in (("50", "p50"), ("99", "p99"), ("99.9", "p99.9")):
        series.append({"name": f"{label} ({which})", "type": "line", "marker": True,
                       "points": ch.xy(((x, (v.get(key) or 0) / scale) for x, v in zip(xs, values)),
                                     logy=True)})
    if mode == "open":
        series.append({"name": "p99 (uncorrected)", "type": "line", "dash": True, "color": -1,
                       "points": ch.xy(((x, (iv["uncorrected"]["percentiles"].get("99") or 0)
                                      / scale) for x, iv in zip(xs, ivs)), logy=True)})
    marks: list[dict[str, Any]] = []
    warm_end = max((iv["start_s"] + iv["duration_s"] for iv in ivs if iv.get("warmup")),
                   default=0)
    if warm_end:
        marks.append({"type": "vspan", "from": 0.0, "to": ch.r(warm_end), "label": "warm-up"})
    start = (d.get("steady") or {}).get("start_index")
    if isinstance(start, int) and start < len(ivs):
        marks.append({"type": "vline", "x": ch.r(ivs[start]["start_s"]),
                      "label": "steady state from"})
    time_axis = ch.axis("time since start (s)", unit="s")
    lat = {"kind": "xy", "title": "latency over time", "x": time_axis,
           "y": ch.axis(f"latency ({unit})", "log", unit=unit), "series": series, "marks": marks}
    thr = {"kind": "xy", "title": "throughput over time", "x": time_axis,
           "y": ch.axis("replies/s", unit="/s"), "marks": marks, "zero": True,
           "series": [{"name": "throughput", "type": "bars", "color": -1,
                       "points": ch.xy((x, iv.get("throughput")) for x, iv in zip(xs, ivs)),
                       "widths": [ch.r(iv["duration_s"] * 0.9) for iv in ivs
                                  if ch.finite(iv.get("throughput"))]}]}
    return [lat, thr]
