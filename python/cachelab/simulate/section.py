"""The simulation's report section (request level and flat) and its charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.artifacts import Artifact
from cachelab.page import charts as ch
from cachelab.page.html import esc, table
from cachelab.page.section import Context, Section, chart_specs, figures
from cachelab.profile import builtin
from cachelab.simulate.summary import band_at, best_strategy
from cachelab.units import num, pct

Spec = dict[str, Any]


def section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    if d.get("mode") == "flat":
        return flat_section(art, ctx)
    model = d.get("model", {}).get("name", "?")
    sec = Section(f"Simulation: latency model {model}", "simulation", art.path)
    tr = d.get("trace", {})
    sec.body.append(
        f"<p>Trace: {esc(tr.get('source', '?'))}, {tr.get('requests', 0):,} requests over "
        f"{tr.get('items', 0):,} items; the first {pct(d['spec'].get('train'), 0)} trains, the "
        f"rest is evaluated. Median of {esc(d['spec'].get('draws'))} latency draws "
        "(min–max band in simulate.json).</p>")
    header = ["strategy", "p50", "p90", "p99", "≥10 %", "≥25 %", "≥50 %", "hit", "RT/req",
              "KB/req"]
    rows = []
    for s in d["strategies"]:
        def p(at: float, s: dict[str, Any] = s) -> str:
            b = band_at(s, "percentiles", "percentile", at)
            return pct(b["median"]) if b else "—"

        def sl(at: float, s: dict[str, Any] = s) -> str:
            b = band_at(s, "slowed", "threshold", at)
            return pct(b["median"]) if b else "—"

        rows.append([s["strategy"], p(50.0), p(90.0), p(99.0), sl(0.1), sl(0.25), sl(0.5),
                     pct(s.get("hit_ratio")), f"{s.get('round_trips_per_request', 0):.2f}",
                     f"{s.get('bytes_per_request', 0) / 1000:.1f}"])
    sec.body.append("<p>Added memcached time as a share of each request's base latency, and the "
                    "share of requests slowed by at least 10/25/50 %.</p>")
    sec.body.append(table(header, rows))
    sec.findings += findings(d)
    sec.notes += d.get("warnings", [])

    def redraw(out: Path) -> list[Path]:
        # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
        from cachelab.simulate.plots import fractional_increase_plot

        return fractional_increase_plot(d, out / "simulate")

    figs = figures(art, ctx, [("simulate", "fractional latency increase by inverted percentile")],
                  redraw, chart_specs(lambda: {"simulate": chart(d)}, sec))
    sec.add_figures(figs)
    return sec


def findings(d: dict[str, Any]) -> list[str]:
    out = []
    best = best_strategy(d)
    model = d.get("model", {}).get("name", "?")
    if best is None:
        return out
    p90 = band_at(best, "percentiles", "percentile", 90.0)["median"]
    slowed = band_at(best, "slowed", "threshold", 0.1)
    none = next((s for s in d["strategies"] if s["strategy"] == "none"), None)
    who = (f"the {model} model" if model in builtin.PROFILES
           else f"the latency profile measured here ({model})")
    text = (f"With {who}, {best['strategy']} keeps p90 added latency at "
            f"{pct(p90)} of the base latency")
    if none is not None and none is not best:
        base = band_at(none, "percentiles", "percentile", 90.0)
        text += f" (no in-process cache: {pct(base['median'])})" if base else ""
    if slowed:
        text += f"; {pct(slowed['median'])} of requests are slowed by 10 % or more"
    out.append(text + ".")
    return out


def _cell(v: object) -> str:
    """A flat result's field in its table: counts with thousands separators, ratios to four
    significant digits (never in exponent form), text as it is."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return f"{v:,}" if isinstance(v, int) else num(v, 4)


def flat_section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section(f"Miss-ratio simulation: {d.get('trace', {}).get('path', '')}", "simulation",
                  art.path)
    rows = d.get("results") or d.get("rows") or []
    if rows and isinstance(rows, list) and isinstance(rows[0], dict):
        keys = [k for k in rows[0] if not isinstance(rows[0][k], (list, dict))]
        sec.body.append(table(keys, [[_cell(r.get(k, "")) for k in keys] for r in rows], left=1))
    figs = figures(art, ctx, [("simulate-miss-ratio", "miss ratio by cache size"),
                             ("simulate-byte-miss-ratio", "byte miss ratio by cache size")],
                  None, chart_specs(lambda: {"simulate-miss-ratio": flat_chart(d),
                                         "simulate-byte-miss-ratio": flat_chart(d, True)},
                                sec))
    sec.add_figures(figs)
    return sec


def chart(d: dict[str, Any]) -> Spec | None:
    """Fractional latency increase by inverted percentile, log-log, a line per strategy with
    its band over latency draws (as :func:`cachelab.simulate.plots.fractional_increase_plot`)."""
    series = []
    for s in d.get("strategies", []):
        c = s.get("curve") or {}
        pts = list(zip(c.get("percentile", []), c.get("median", [])))
        line = {"name": s["strategy"], "type": "line",
                "points": ch.xy(((100.0 - p, m) for p, m in pts), logx=True, logy=True)}
        if not line["points"]:
            continue
        band = [[ch.r(100.0 - p), ch.r(lo), ch.r(hi)] for p, m, lo, hi in
                zip(c.get("percentile", []), c.get("median", []), c.get("low", []),
                    c.get("high", []))
                if ch.finite(m) and m > 0 and ch.finite(lo) and lo > 0 and ch.finite(hi)]
        if any(hi > lo for _, lo, hi in band):
            line["band"] = band
        series.append(line)
    if not series:
        return None
    model = (d.get("model") or {}).get("name", "")
    return {"kind": "xy", "title": f"Simulated latency increase per request (model {model})",
            "x": ch.invpct_axis(),
            "y": ch.axis("added latency / base latency (log scale)", "log", fmt="percent"),
            "series": series}


def flat_chart(d: dict[str, Any], byte_ratio: bool = False) -> Spec | None:
    """Miss ratio by cache size, a line per policy, the LRU miss-ratio curve overlaid (as
    :func:`cachelab.simulate.plots.miss_ratio_plot`)."""
    rows = [r for r in d.get("results", []) if isinstance(r, dict) and r.get("capacity", 0) > 0]
    key = "byte_miss_ratio" if byte_ratio else "miss_ratio"
    series = []
    for name in dict.fromkeys(r.get("policy") for r in rows):
        rs = sorted((r for r in rows if r.get("policy") == name), key=lambda r: r["capacity"])
        series.append({"name": str(name), "type": "line", "marker": True,
                       "points": ch.xy(((r["capacity"], r.get(key)) for r in rs), logx=True)})
    mrc = d.get("mrc")
    if isinstance(mrc, dict):
        label = "LRU miss-ratio curve (stack distances)"
        if not mrc.get("exact", True):
            label += f", SHARDS R={mrc.get('sample_rate'):g}"
        ys = mrc.get("byte_miss_ratios" if byte_ratio else "miss_ratios", [])
        series.append({"name": label, "type": "line", "dash": True, "color": -1,
                       "points": ch.xy(zip(mrc.get("capacities", []), ys), logx=True)})
    if not any(s["points"] for s in series):
        return None
    unit = d.get("unit") or "objects"
    return {"kind": "xy", "title": ("Byte miss ratio" if byte_ratio else "Miss ratio")
            + " by cache size", "x": ch.axis(f"cache size ({unit})", "log"),
            "y": ch.axis("byte miss ratio" if byte_ratio else "miss ratio"),
            "series": series, "zero": True}
