"""The profile's report section and its interactive charts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from cachelab.answers import ratio_bounds, ratio_text, spans_one
from cachelab.artifacts import Artifact
from cachelab.page import charts as ch
from cachelab.page.html import esc, table
from cachelab.page.section import Context, Section, chart_specs, env_notes, figures
from cachelab.profile.cell import (
    OPS,
    PLOT_FILES,
    PLOT_TITLES,
    TABLE_ROWS,
    Cell,
    floor_p50,
    interval_text,
    shown_percentiles,
)
from cachelab.profile.model import LatencyProfile
from cachelab.profile.precise import precision_line, precision_percentile, precision_text
from cachelab.profile.render import CI_ROWS, floor_words, samples_per_cell
from cachelab.profile.tlscost import tls_cost_rows
from cachelab.units import PARTIAL, dur, format_size, partial_note, times

Spec = dict[str, Any]

#: Each operation's heading over its table.
_OP_TITLES = {"get": "get by value size", "set": "set by value size",
              "multiget": "multi-get by key count"}

#: Each operation's figure caption.
_CAPTIONS = {"get": "get latency by value size (inverted percentiles)",
             "set": "set latency by value size",
             "multiget": "multi-get latency by key count"}


def cell_label(c: dict[str, Any]) -> str:
    """A stored cell's column heading: its value size, or its key count for a multi-get."""
    if c["op"] == "multiget":
        return f"{c['keys']} key" + ("" if c["keys"] == 1 else "s")
    return format_size(int(c["value_size"]))


def section(art: Artifact, ctx: Context) -> Section:
    """The section of a latency profile: its tables, figures, findings and notes."""
    d = art.data
    sec = Section(f"Latency profile: {d.get('name', '')}", "profile", art.path)
    cells = d.get("cells", [])
    client = d.get("client", {})
    counts = [int(c.get("samples", 0)) for c in cells]
    if d.get("source") == "published":
        pub = d.get("published") or {}
        sec.body.append(f"<p>Published profile: {esc(pub.get('source', ''))}</p>")
    else:
        samples = samples_per_cell(client.get("samples"), counts, client.get("warmup"))
        sec.body.append(
            f"<p>{esc(samples)}, {esc(client.get('protocol'))} protocol, "
            f"{esc(client.get('concurrency'))} connection(s). Latencies are read from each "
            "cell's HdrHistogram.</p>")
    said = precision_line(d.get("precision"),
                          [Cell.from_dict(c, str(art.path)) for c in cells])
    if said:
        sec.body.append(f"<p>{esc(said)}</p>")
        if "NOT" in said:
            sec.findings.append(said[0].upper() + said[1:] + ".")
    floor = next((c for c in cells if c["op"] == "floor" and c.get("samples")), None)
    floor_ns = floor["percentiles"].get("50") if floor else None
    if floor_ns:
        words = floor_words(client.get("floor_command"), d.get("server", {}).get("transport"))
        p99 = dur(floor["percentiles"].get("99"))
        sec.body.append(f"<p>{esc(words[0].upper() + words[1:])}: p50 {dur(floor_ns)}, "
                        f"p99 {p99}</p>")
    for op in OPS:
        cs = [c for c in cells if c["op"] == op]
        if not cs:
            continue
        header = ["percentile", *(cell_label(c) for c in cs)]
        parsed = [Cell.from_dict(c, str(art.path)) for c in cs]
        shown = [shown_percentiles(c) for c in parsed]
        rows = [[("p" + r) if r != "max" else "max",
                 *(v if isinstance(v := col.get(r), str) else dur(v) if v is not None else "—"
                   for col in shown)]
                for r in TABLE_ROWS]
        rows.append(["samples", *(str(c.get("samples", 0)) for c in cs)])
        if any(c.intervals for c in parsed):
            rows += [[f"p{r} 95 % CI", *(interval_text(c, r) for c in parsed)] for r in CI_ROWS]
        if any(c.precision for c in parsed):
            rows.append([f"p{precision_percentile(d.get('precision'))} precision",
                         *(precision_text(c) for c in parsed)])
        if floor_ns:
            rows.append(["p50 / floor", *(times(c["percentiles"].get("50", 0), floor_ns)
                                          if c.get("samples") else "—" for c in cs)])
        errs = [sum(c.get("errors", {}).values()) for c in cs]
        if any(errs):
            rows.append(["errors", *map(str, errs)])
        bad = [c.get("mismatches", 0) + c.get("misses", 0) for c in cs]
        if any(bad):
            rows.append(["mismatches + misses", *map(str, bad)])
        heading = _OP_TITLES[op] if not partial_note(d.get("run")) else \
            f"{PARTIAL}: {_OP_TITLES[op]}"
        sec.body.append(f"<h3>{esc(heading)}</h3>")
        sec.body.append(table(header, rows))

    if d.get("tls_cost"):
        header, rows = tls_cost_rows(d["tls_cost"])
        sec.body.append("<h3>TLS cost</h3>")
        if not d["tls_cost"].get("plain_address"):
            sec.body.append("<p>No plain listener was given (--plain-port): TLS figures "
                            "only, nothing to compare with.</p>")
        sec.body.append(table(header, rows))

    def redraw(out: Path) -> list[Path]:
        # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
        from cachelab.profile.plots import write_plots

        p = LatencyProfile.from_dict(d, str(art.path))
        return write_plots(p.name, p.cells, out)

    present = {c["op"] for c in cells if c.get("samples")}
    names = [(PLOT_FILES[op], _CAPTIONS[op]) for op in OPS if op in present]
    figs = figures(art, ctx, names, redraw, chart_specs(lambda: charts(d, str(art.path)), sec))
    sec.add_figures(figs)
    sec.findings += findings(d)
    sec.notes += env_notes(d, samples_per_cell(client.get("samples"), counts))
    total_err = sum(sum(c.get("errors", {}).values()) for c in cells)
    if total_err:
        sec.notes.append(f"{total_err} request(s) failed and are not in the histograms")
    mism = sum(c.get("mismatches", 0) for c in cells)
    if mism:
        sec.notes.append(f"{mism} read(s) returned bytes that differ from what was written")
    return sec


def _iv(c: dict[str, Any], key: str) -> list[float] | None:
    """A stored cell's 95 % interval at percentile ``key``, None without one."""
    return (c.get("intervals") or {}).get(key)


def _ratio(a: float, a_iv: list[float] | None, b: float, b_iv: list[float] | None,
           published: bool) -> str | None:
    """``a / b`` with its ≥ 90 % interval (:func:`~cachelab.answers.ratio_bounds`); None when
    that interval holds 1 (the finding is left out: the run cannot tell them apart); a
    published profile's ratio says it has no interval."""
    bounds = ratio_bounds(a, a_iv, b, b_iv)
    if bounds is None:
        return f"{times(a, b)} (published figures: no interval)" if published else None
    return None if spans_one(bounds) else ratio_text(a, b, bounds)


def findings(d: dict[str, Any]) -> list[str]:
    """Plain-language facts from a profile's p50s. Each ratio carries its interval, from both
    ends of its cells' 95 % intervals (≥ 90 % when both hold); a ratio whose interval holds 1,
    or a measured one without intervals, is left out."""
    out = []
    published = d.get("source") == "published"
    cells = [c for c in d.get("cells", []) if c.get("samples")]
    gets = {c["value_size"]: c for c in cells if c["op"] == "get"}
    if gets:
        small = min(gets, key=lambda s: (abs(math.log10(s) - 3), s))  # nearest to 1 KB
        big = max(gets)
        if big != small:
            a, b = gets[big]["percentiles"]["50"], gets[small]["percentiles"]["50"]
            r = _ratio(a, _iv(gets[big], "50"), b, _iv(gets[small], "50"), published)
            if r is not None:
                out.append(f"A {format_size(big)} get is {r} slower than a "
                           f"{format_size(small)} get at p50 ({dur(a)} vs {dur(b)}).")
        c = gets[small]
        p50, p99 = c["percentiles"]["50"], c["percentiles"]["99"]
        r = _ratio(p99, _iv(c, "99"), p50, _iv(c, "50"), published)
        out.append(f"A {format_size(small)} get: p50 {dur(p50)}, p99 {dur(p99)}"
                   + (f" — the p99 is {r} the p50." if r is not None else "."))
    multi = {c["keys"]: c for c in cells if c["op"] == "multiget"}
    if len(multi) >= 2:
        lo, hi = min(multi), max(multi)
        a, b = multi[hi]["percentiles"]["50"], multi[lo]["percentiles"]["50"]
        a_iv, b_iv = _iv(multi[hi], "50"), _iv(multi[lo], "50")
        per_key = a / hi
        slower = _ratio(a, a_iv, b, b_iv, published)
        # hi/lo separate lo-key multi-gets against one hi-key multi-get.
        n = hi / lo
        beats = _ratio(b * n, [v * n for v in b_iv] if b_iv else None, a, a_iv, published)
        text = (f"A {hi}-key multi-get takes {dur(a)} at p50"
                + (f", {slower} a {lo}-key one" if slower is not None else "")
                + f": {dur(per_key)} per key")
        if beats is not None and b * n > a:
            text += f", so one multi-get beats {hi} separate gets by about {beats}"
        out.append(text + ".")
    return out


def charts(d: dict[str, Any], where: str = "profile") -> dict[str, Spec]:
    """Plot base name -> spec: one inverted-percentile chart per operation, a line per cell
    (as :func:`cachelab.profile.plots.write_plots` draws), with the loopback floor's p50."""
    # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
    from cachelab.plots.latency import inverted_percentile_points

    p = LatencyProfile.from_dict(d, where)
    pcts = inverted_percentile_points()
    floor_ns = floor_p50(p.cells)
    out: dict[str, Spec] = {}
    for op in OPS:
        cells = [c for c in p.cells_of(op) if c.samples]
        if not cells:
            continue
        values = [(c.label, [float(v) for v in c.at(pcts)]) for c in cells]
        unit, scale = ch.latency_unit([v for _, vs in values for v in vs] +
                                      ([floor_ns] if floor_ns else []))
        series = [ch.inverted_series(label, pcts, vs, scale) for label, vs in values]
        if floor_ns:
            y = ch.r(floor_ns / scale)
            series.append({"name": "loopback floor (p50)", "type": "line", "dash": True,
                           "color": -1, "points": [[100.0, y], [ch.r(100.0 - pcts[-1]), y]]})
        out[PLOT_FILES[op]] = {"kind": "xy", "title": f"{PLOT_TITLES[op]} — {p.name}",
                               "x": ch.invpct_axis(),
                               "y": ch.axis(f"latency ({unit})", "log", unit=unit),
                               "series": series}
    return out
