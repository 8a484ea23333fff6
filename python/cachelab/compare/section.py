"""The comparison's report section and its chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.artifacts import Artifact
from cachelab.compare.plots import compare_plot
from cachelab.compare.result import name_line
from cachelab.page import charts as ch
from cachelab.page.html import esc, table
from cachelab.page.section import Context, Section, chart_specs, figures
from cachelab.units import num

Spec = dict[str, Any]


def section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section(f"Comparison of {d['kind']} results", "compare", art.path)
    names = d["names"]
    partial = d.get("partial") or {}
    sec.body.append("<p>" + "; ".join(esc(name_line(names, partial, i)) for i in range(len(names)))
                    + f". {esc(d.get('method', ''))}</p>")
    rows, classes = [], []
    for r in d["rows"]:
        lo, hi = r.get("ci_low"), r.get("ci_high")
        rows.append([r["item"], r["metric"], r["versus"], num(r["a"]), num(r["b"]),
                     f"{100 * r['relative']:+.1f} %" if r.get("relative") is not None else "—",
                     f"[{100 * lo:+.1f} %, {100 * hi:+.1f} %]" if lo is not None else "—",
                     r["verdict"]])
        classes.append({"worse": "bad", "better": "good"}.get(r.get("direction", ""), ""))
    sec.body.append(table(["item", "metric", "pair", "first", "second", "change",
                           "95 % interval", "verdict"], rows, left=3, row_classes=classes))

    def redraw(out: Path) -> list[Path]:
        return compare_plot(d, out / "compare")

    figs = figures(art, ctx, [("compare", "relative change with its interval")], redraw,
                  chart_specs(lambda: {"compare": chart(d)}, sec))
    sec.add_figures(figs)
    sec.findings += d.get("summary", [])
    sec.notes += d.get("warnings", [])
    return sec


def chart(d: dict[str, Any], max_rows: int = 48) -> Spec | None:
    """The relative change of each result against A, with its interval, a row per (item,
    metric) and a dot per pair (as :func:`cachelab.compare.plots.compare_plot`)."""
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
            vals[j] = ch.rv(x["relative"])
            if ch.finite(x.get("ci_low")) and ch.finite(x.get("ci_high")):
                lo[j], hi[j] = ch.r(x["ci_low"]), ch.r(x["ci_high"])
        series.append({"name": pair, "style": "dot", "values": vals, "lo": lo, "hi": hi})
    return {"kind": "bars", "title": f"{d.get('kind', '')}: change relative to A",
            "categories": labels, "zero_line": True,
            "x": ch.axis("change relative to A (%), with its interval", fmt="percent"),
            "series": series}
