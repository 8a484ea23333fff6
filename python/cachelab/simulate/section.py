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
from cachelab.units import byte_unit, human_bytes, pct

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


def flat_section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    tr = d.get("trace") or {}
    source = tr.get("source") or tr.get("path")
    sec = Section("Miss-ratio simulation" + (f": {source}" if source else ""), "simulation",
                  art.path)
    unit = d.get("unit") or "objects"
    facts = [f"{tr[k]:,} {what}" for k, what in (("requests", "requests"),
                                                  ("unique_keys", "unique keys"))
             if isinstance(tr.get(k), int)]
    if isinstance(tr.get("working_set_bytes"), (int, float)):
        facts.append(f"working set {human_bytes(tr['working_set_bytes'])}")
    sizes = f"cache sizes in {unit}"
    if unit == "bytes":
        sizes += " of the items' sizes"
        if str(source).endswith(".capture.parquet"):
            sizes += (" (a capture's value bytes: cachelab size counts memcached's memory, slab "
                      "chunks included)")
    sec.body.append(f"<p>{esc('; '.join([', '.join(facts), sizes] if facts else [sizes]))}.</p>")
    header, rows = flat_table(d)
    if rows:
        sec.body.append(table(header, rows))
    sec.findings += flat_findings(d)
    figs = figures(art, ctx, [("simulate-miss-ratio", "miss ratio by cache size"),
                             ("simulate-byte-miss-ratio", "byte miss ratio by cache size")],
                  None, chart_specs(lambda: {"simulate-miss-ratio": flat_chart(d),
                                         "simulate-byte-miss-ratio": flat_chart(d, True)},
                                sec))
    sec.add_figures(figs)
    return sec


def _size(cap: float, unit: str) -> str:
    return human_bytes(cap) if unit == "bytes" else f"{cap:,.0f}"


def _by_size(d: dict[str, Any]) -> tuple[list[str], dict[float, dict[str, dict[str, Any]]]]:
    """A flat result's policies, and its rows by capacity then policy (capacities sorted)."""
    rows = [r for r in d.get("results") or [] if isinstance(r, dict)]
    policies = list(dict.fromkeys(str(r["policy"]) for r in rows))
    by: dict[float, dict[str, dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["capacity"]):
        by.setdefault(r["capacity"], {})[str(r["policy"])] = r
    return policies, by


def flat_table(d: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The miss ratio (and byte miss ratio, by bytes) of each policy at each cache size, as
    the terminal shows them, in percent."""
    unit = d.get("unit") or "objects"
    policies, by = _by_size(d)

    def cell(r: dict[str, Any] | None) -> str:
        if r is None:
            return "—"
        text = pct(r.get("miss_ratio"), 2)
        return text + (f" ({pct(r.get('byte_miss_ratio'), 2)})" if unit == "bytes" else "")

    what = "miss ratio (byte miss ratio)" if unit == "bytes" else "miss ratio"
    return ([f"cache size ({unit})", *(f"{p}: {what}" for p in policies)],
            [[_size(cap, unit), *(cell(at.get(p)) for p in policies)]
             for cap, at in by.items()])


def flat_findings(d: dict[str, Any]) -> list[str]:
    """With more than one policy: the one that misses least at each cache size."""
    unit = d.get("unit") or "objects"
    policies, by = _by_size(d)
    if len(policies) < 2:
        return []
    parts = []
    for cap, at in by.items():
        rated = sorted((r["miss_ratio"], p) for p, r in at.items()
                       if isinstance(r.get("miss_ratio"), (int, float)))
        if len(rated) < 2:
            continue
        (best, name), rest = rated[0], rated[1:]
        others = ", ".join(f"{p} {pct(m, 2)}" for m, p in rest)
        parts.append(f"at {_size(cap, unit)} {name} misses {pct(best, 2)} ({others})")
    return ["Lowest miss ratio: " + "; ".join(parts) + "."] if parts else []


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
    :func:`cachelab.simulate.plots.miss_ratio_plot`). Sizes in bytes are shown in the unit
    that reads best for the largest (kB, MB, GB)."""
    rows = [r for r in d.get("results", []) if isinstance(r, dict) and r.get("capacity", 0) > 0]
    key = "byte_miss_ratio" if byte_ratio else "miss_ratio"
    unit = d.get("unit") or "objects"
    mrc = d.get("mrc")
    scale = 1.0
    if unit == "bytes":
        caps = [r["capacity"] for r in rows]
        caps += list(mrc.get("capacities", [])) if isinstance(mrc, dict) else []
        unit, scale = byte_unit(max((c for c in caps if ch.finite(c)), default=0))
    series = []
    for name in dict.fromkeys(r.get("policy") for r in rows):
        rs = sorted((r for r in rows if r.get("policy") == name), key=lambda r: r["capacity"])
        series.append({"name": str(name), "type": "line", "marker": True,
                       "points": ch.xy(((r["capacity"] / scale, r.get(key)) for r in rs),
                                       logx=True)})
    if isinstance(mrc, dict):
        label = "LRU miss-ratio curve (stack distances)"
        if not mrc.get("exact", True):
            label += f", SHARDS R={mrc.get('sample_rate'):g}"
        ys = mrc.get("byte_miss_ratios" if byte_ratio else "miss_ratios", [])
        series.append({"name": label, "type": "line", "dash": True, "color": -1,
                       "points": ch.xy(((c / scale, y) for c, y in
                                        zip(mrc.get("capacities", []), ys)), logx=True)})
    if not any(s["points"] for s in series):
        return None
    return {"kind": "xy", "title": ("Byte miss ratio" if byte_ratio else "Miss ratio")
            + " by cache size", "x": ch.axis(f"cache size ({unit})", "log",
                                             unit="" if scale == 1 else unit),
            "y": ch.axis("byte miss ratio" if byte_ratio else "miss ratio"),
            "series": series, "zero": True}
