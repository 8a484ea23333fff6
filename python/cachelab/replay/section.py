"""The replay's report section and its chart."""

from __future__ import annotations

from typing import Any

from cachelab.artifacts import Artifact
from cachelab.page import charts as ch
from cachelab.page.html import figure, table
from cachelab.page.section import Context, Section, chart_specs
from cachelab.replay.result import partial_text
from cachelab.units import pct

Spec = dict[str, Any]


def section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section("Replay: the tiered cache on a real memcached vs the simulation", "replay",
                  art.path)
    partial = partial_text(d)
    if partial:
        sec.notes.append(partial)
    rows, classes = [], []
    for s in d["strategies"]:
        for k, v in s["increase"].items():
            added = s["added_ms"].get(k)
            rows.append([s["strategy"], f"p{k}", pct(v["measured"]), pct(v["predicted"]),
                         f"{100 * v['error']:+.0f} %",
                         "—" if added is None else f"{added['measured']:.2f}"])
            classes.append("" if s.get("within_tolerance") else "bad")
    sec.body.append("<p>Added latency as a share of the base latency, measured through "
                    "<code>cachelab.tiered</code> and predicted by <code>simulate</code> with a "
                    "profile measured in the same run.</p>")
    sec.body.append(table(["strategy", "percentile", "measured", "predicted", "error",
                           "measured added ms"], rows, left=2, row_classes=classes))
    machine = d.get("machine") or {}
    if machine.get("busy"):
        sec.notes.append(f"the machine was busy: other processes used "
                         f"{machine['others_cores']:.2f} of {machine['cores']} cores during the "
                         "replay; measured and predicted may differ for that reason alone")
    bad = [s["strategy"] for s in d["strategies"] if not s.get("within_tolerance")]
    if bad:
        sec.notes.append("measured and predicted latency disagree beyond the tolerance for "
                         + ", ".join(bad) + ": trust the simulation's ranking of strategies "
                         "more than its absolute numbers on this machine")
    else:
        sec.findings.append("The replay agrees with the simulation within tolerance for every "
                            "strategy.")
    for s in d["strategies"]:
        over = s.get("library_overhead_share")
        if over is not None and s["strategy"] != "none":
            sec.findings.append(f"{s['strategy']}: the library's own overhead is {pct(over)} "
                                "of the added latency.")
            break
    spec = chart_specs(lambda: {"replay": chart(d)}, sec).get("replay")
    if isinstance(spec, dict):
        # No verb draws a static replay plot: with scripts off, the table above is the figure.
        ctx.charts += 1
        sec.body.append(figure(None, "added latency by percentile: measured (solid) vs "
                               "predicted (dashed), the numbers of the table above", [spec]))
    return sec


def chart(d: dict[str, Any]) -> Spec | None:
    """Added latency as a share of the base latency at each percentile, measured (solid) and
    predicted (dashed, the same colour), a pair of lines per strategy."""
    series = []
    for i, s in enumerate(d.get("strategies", [])):
        inc = s.get("increase") or {}
        keys = sorted(inc, key=float)
        for what, dash in (("measured", False), ("predicted", True)):
            series.append({"name": f"{s['strategy']} {what}", "type": "line", "marker": True,
                           "dash": dash, "color": i,
                           "points": ch.xy(((100.0 - float(k), inc[k].get(what)) for k in keys),
                                         logx=True)})
    if not any(s["points"] for s in series):
        return None
    return {"kind": "xy", "title": "Replay: measured vs predicted added latency",
            "x": ch.invpct_axis(), "y": ch.axis("added latency / base latency", fmt="percent"),
            "series": series, "zero": True}
