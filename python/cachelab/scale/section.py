"""The scale sweep's report section and its interactive charts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cachelab._core as _core
from cachelab.artifacts import Artifact
from cachelab.load import stopped_notes, unused_notes
from cachelab.load.precision import p99_interval_text, point_precision_text
from cachelab.load.section import behind_table
from cachelab.page import charts as ch
from cachelab.page.html import esc, table
from cachelab.page.section import ChartSpecs, Context, Section, chart_specs, figures
from cachelab.scale.answers import ceiling_line
from cachelab.scale.pinning import layout_text
from cachelab.scale.result import (
    ScaleResult,
    in_fit_text,
    mean_text,
    partial_text,
    precision_missed,
    target_percentile,
)
from cachelab.scale.verdicts import latency_verdict, series_name, verdict_lines
from cachelab.units import dur
from cachelab.usl import UslFit
from cachelab.usl import section as usl_section

Spec = dict[str, Any]


def section(art: Artifact, ctx: Context) -> Section:
    """The sweep in ``art``: throughput and latency per N, the USL fit, the notes on what
    limits it, and the two figures."""
    d = art.data
    spec = d["spec"]
    sec = Section(f"Scalability: N = {spec['vary']}", "scale", art.path)
    partial = partial_text(d)
    if partial:
        sec.notes.append(partial)
    target = spec.get("precision")
    measured = (f"{esc(spec['window'])} s measured from the steady state" if target is None
                else f"each run until its {target_percentile(spec)} was within "
                f"±{100 * target:g} % (at most {spec['settle'] + spec['window']:g} s after the "
                "warm-up), measured from the steady state to its end")
    layout = layout_text(d.get("server", {}).get("cpus"))
    sec.body.append(f"<p>{len(d['runs'])} run(s): {esc(spec['repeats'])} repeat(s) of each "
                    f"point in interleaved order, {measured}"
                    + (f"; {esc(layout)}" if layout else "") + ".</p>")
    missed = precision_missed(spec, d["runs"])
    ceiling = ceiling_line(d)
    for line in [*verdict_lines(spec, d["runs"]), *([missed] if missed else []),
                 *([ceiling] if ceiling else [])]:
        sec.findings.append(line[0].upper() + line[1:] + ".")
    rows = []
    for row in d["summary"]:
        p = row["latency"]["percentiles_ns"]
        sd = row.get("throughput_sd")
        rows.append([row["n"], mean_text(row["throughput_mean"]),
                     "—" if sd is None else f"{sd:,.0f}", in_fit_text(row), dur(p.get("50")),
                     dur(p.get("99")), p99_interval_text(row["latency"].get("p99_interval")),
                     dur(p.get("99.9")), latency_verdict(d["runs"], row["n"]),
                     *([point_precision_text(row.get("precision"))] if target else [])])
    sec.body.append(table(["N", "throughput /s (mean of the runs in the fit)", "sd",
                           "runs in the fit (throughput VALID)", "p50", "p99",
                           "p99 95 % interval (µs)", "p99.9", "latency verdict",
                           *([f"{target_percentile(spec)} ±, runs reached"] if target else [])],
                          rows))
    behind = ScaleResult.from_dict(d, str(art.path)).behind_totals()
    if behind:
        sec.body.append(behind_table(behind, "every run, warm-up included"))
        sec.findings += [n[0].upper() + n[1:] + "."
                         for n in [*stopped_notes(behind), *unused_notes(behind)]]
    fit = d.get("fit")
    if not fit:  # said, not left to a missing plot
        sec.findings.append("No USL fit, so where throughput stops rising is not measured: "
                            + next((n for n in d.get("limits") or [] if n.endswith("no fit")),
                                   "too few usable measurements") + ".")
    if fit:
        sec.body.append("<h3>Universal Scalability Law fit</h3>" + (
            "<p>The load client's ceiling, not memcached's: the client saturated (see the "
            "findings).</p>" if ceiling else ""))
        sec.body.append(table(["", "value", f"{int(100 * fit.get('level', 0.95))} % interval"],
                              usl_section.fit_rows(fit)))
        sec.findings += [f.replace("The USL fit ", "The USL fit (the load client's ceiling, not "
                                   "memcached's) ", 1) if ceiling else f
                         for f in usl_section.fit_findings(fit, "USL")]
        sec.notes += [w["message"] for w in fit.get("warnings", [])]
    best = max((r for r in d["summary"] if r["throughput_mean"] is not None),
               key=lambda r: r["throughput_mean"], default=None)
    if best:
        sec.findings.append(f"The highest measured throughput was {best['throughput_mean']:,.0f}"
                            f"/s at N = {best['n']}.")
    sec.notes += list(d.get("limits", []))

    def redraw(out: Path) -> list[Path]:
        # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
        from cachelab.scale.plots import write_plots

        usl = UslFit.from_dict(fit, str(art.path)) if fit else None
        return write_plots(usl, d["summary"], spec["vary"], out)

    names = [("scale-latency", "latency distribution at each N")]
    if fit:
        names.insert(0, ("scale-usl", "throughput vs N with the USL fit and its band"))

    server_name = ("Redis" if (d.get("server") or {}).get("protocol") == "resp"
                   else "memcached")

    def specs() -> ChartSpecs:
        out: ChartSpecs = {"scale-latency": latency_chart(d["summary"], spec["vary"])}
        if fit:
            out["scale-usl"] = usl_section.chart(
                fit, xlabel=f"N ({spec['vary']})", ylabel="throughput (replies/s)",
                title=f"{server_name} scalability: N = {spec['vary']}", where=str(art.path))
        return out

    figs = figures(art, ctx, names, redraw, chart_specs(specs, sec))
    sec.add_figures(figs)
    return sec


def latency_chart(summary: Sequence[dict[str, Any]], vary: str) -> Spec | None:
    """Each load point's latency distribution as an inverted-percentile line (as
    :func:`cachelab.scale.plots.scale_latency_plot`)."""
    # deferred: matplotlib takes ~0.4 s to import, and this module imports it
    from cachelab.plots.latency import inverted_percentile_points

    pcts = inverted_percentile_points(100.0, 0.1)
    rows = []
    for row in summary:
        h = row["latency"].get("histogram")
        if h:
            rows.append((series_name(row),
                         [float(v) for v in _core.hist_percentiles(h, pcts)]))
    if not rows:
        return None
    unit, scale = ch.latency_unit([v for _, vs in rows for v in vs])
    return {"kind": "xy", "title": f"latency by load ({vary})", "x": ch.invpct_axis(),
            "y": ch.axis(f"latency ({unit})", "log", unit=unit),
            "series": [ch.inverted_series(name, pcts, vs, scale) for name, vs in rows]}
