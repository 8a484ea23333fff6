"""The storage-tiers benchmark's report section and its charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.artifacts import Artifact
from cachelab.page import charts as ch
from cachelab.page.html import esc, table
from cachelab.page.section import Context, Section, chart_specs, figures
from cachelab.tiers.result import partial_text, reads_text
from cachelab.tiers.spec import SHAPE_TITLES

Spec = dict[str, Any]


def section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section(f"Storage tiers: {d.get('store', '?')} vs memcached vs process memory", "tiers",
                  art.path)
    partial = partial_text(d)
    if partial:
        sec.notes.append(partial)
    if not d["rows"]:  # cut short before a round of reads was done
        sec.body.append("<p>No round of reads finished: nothing was measured.</p>")
        return sec
    sec.body.append(f"<p>Each method read {esc(reads_text(d))}, interleaved; "
                    "wall time per read (median, p90) and CPU time (mean).</p>")
    rows = [[r["shape"], r["method"], f"{r['wall_p50_us']:,.2f}", f"{r['wall_p90_us']:,.2f}",
             f"{r['cpu_mean_us']:,.2f}", f"{r['stored_bytes']:,}" if r["stored_bytes"] else "—"]
            for r in d["rows"]]
    sec.body.append(table(["shape", "method", "p50 µs", "p90 µs", "CPU µs", "stored B"], rows,
                          left=2))
    fs = d.get("findings", [])
    if fs:
        sec.body.append("<h3>The seed's findings on this machine</h3>")
        sec.body.append(table(["claim", "here", "evidence"],
                              [[f["claim"], "reproduces" if f["reproduces"] else "does not",
                                f["evidence"]] for f in fs], left=3,
                              row_classes=["good" if f["reproduces"] else "bad" for f in fs]))
        n = sum(1 for f in fs if f["reproduces"])
        sec.findings.append(f"{n} of {len(fs)} findings of the seed's storage benchmark "
                            "reproduce here.")

    def redraw(out: Path) -> list[Path]:
        # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
        from cachelab.tiers.plots import tiers_plot

        return tiers_plot(d, out / "tiers")

    figs = figures(art, ctx, [("tiers", "time per read by method")], redraw,
                  chart_specs(lambda: {"tiers": charts(d)}, sec))
    sec.add_figures(figs)
    return sec


def charts(d: dict[str, Any]) -> list[Spec]:
    """Per data shape, time per read by method: median wall time and mean CPU time (as
    :func:`cachelab.tiers.plots.tiers_plot`)."""
    out = []
    shapes = list(dict.fromkeys(r["shape"] for r in d.get("rows", [])))
    for shape in shapes:
        rows = [r for r in d["rows"] if r["shape"] == shape]
        out.append({"kind": "bars", "title": f"Reading {SHAPE_TITLES.get(shape, shape)}",
                    "categories": [r["method"] for r in rows],
                    "x": ch.axis("µs per read (log scale)", "log", unit="µs"),
                    "series": [
                        {"name": "wall time per read (median)", "style": "bar",
                         "values": [ch.rv(r.get("wall_p50_us")) for r in rows]},
                        {"name": "CPU time per read (mean)", "style": "bar", "thin": True,
                         "values": [ch.rv(r.get("cpu_mean_us")) for r in rows]}]})
    return out
