"""One report section per artifact kind, found through one registry table (:data:`SECTIONS`).

A section is built from the artifact's JSON alone: its tables, its plots (the SVGs the verb
wrote beside the JSON when they are there, else re-drawn from the JSON, each with the spec of
an interactive chart of the same data: :mod:`cachelab.report.charts`), short plain-language
findings, and notes — the warnings and limits the result carries, errors it counted — so the
page says what the numbers can and cannot support.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cachelab.report import charts as ch
from cachelab.report.discover import Artifact
from cachelab.report.html import esc, figure, table

__all__ = ["SECTIONS", "Context", "Section", "build_section", "dur", "pct"]


@dataclass
class Context:
    """What section builders share: a scratch directory for re-drawn plots."""

    scratch: Path
    redraw: bool = False  # re-draw plots even when SVGs are found beside the JSON
    #: Every figure embedded, in order: (file, caption), for the static copy.
    used: list[tuple[Path, str]] = field(default_factory=list)
    #: How many interactive chart specs the page holds.
    charts: int = 0
    _count: int = 0

    def figure(self, path: Path, caption: str, charts: Sequence[dict[str, Any]] = ()) -> str:
        self.used.append((path, caption))
        self.charts += len(charts)
        return figure(path, caption, charts)

    def new_dir(self) -> Path:
        self._count += 1
        d = self.scratch / f"plots-{self._count}"
        d.mkdir(parents=True, exist_ok=True)
        return d


@dataclass
class Section:
    """A rendered section: its title, HTML body, findings and notes (plain text)."""

    title: str
    kind: str
    source: Path
    body: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: int = 0


# -- formatting ---------------------------------------------------------------------------


def dur(ns: float | None) -> str:
    """A duration in ns, in the unit that keeps 3 significant digits readable."""
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "—"
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if abs(v) < 100 else f"{v:.0f} {unit}"
    return f"{ns:.0f} ns"


def pct(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage."""
    if x is None or not math.isfinite(float(x)):
        return "—"
    v = 100 * float(x)
    if v != 0 and abs(v) < 0.1:
        return f"{v:.2f} %"
    return f"{v:.{digits}f} %"


def _num(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(float(x)):
        return "—"
    return f"{float(x):,.{digits}g}" if abs(float(x)) < 1000 else f"{float(x):,.0f}"


def _times(a: float, b: float) -> str:
    """``a / b`` as "4.2×"."""
    if not b:
        return "—"
    r = a / b
    return f"{r:.2g}×" if r < 10 else f"{r:.0f}×"


ChartSpecs = dict[str, "list[dict[str, Any]] | dict[str, Any] | None"]


def _plots(art: Artifact, ctx: Context, names: Sequence[tuple[str, str]],
           redraw: Callable[[Path], list[Path]] | None,
           charts: ChartSpecs | None = None) -> list[str]:
    """Figures for ``names`` ((file base name, caption) pairs): the SVGs (or PNGs) beside the
    artifact when every one is there and the artifact has its verb's own file name, else
    whatever ``redraw(dir)`` draws from the JSON. ``charts`` maps a base name to the chart
    spec(s) drawn with that figure."""
    charts = charts or {}

    def specs(base: str) -> list[dict[str, Any]]:
        c = charts.get(base)
        return [] if c is None else [c] if isinstance(c, dict) else list(c)

    beside: list[tuple[Path, str]] = []
    default_names = {"run.json", "profile.json", "load.json", "scale.json", "usl.json",
                     "simulate.json", "tiers.json", "replay.json", "compare.json"}
    if not ctx.redraw and art.path.name in default_names:
        for base, caption in names:
            for ext in (".svg", ".png"):
                f = art.directory / (base + ext)
                if f.is_file():
                    beside.append((f, caption))
                    break
    if (names and len(beside) == len(names)) or redraw is None:
        return [ctx.figure(f, c, specs(f.stem)) for f, c in beside]
    drawn = redraw(ctx.new_dir())
    captions = dict(names)
    out = []
    for f in drawn:
        if f.suffix == ".svg":
            out.append(ctx.figure(f, captions.get(f.stem, f.stem), specs(f.stem)))
    return out


def _charts(build: Callable[[], ChartSpecs], sec: Section) -> ChartSpecs:
    """The chart specs ``build`` makes; a result the charts cannot read keeps its static
    plots and gets a note instead of failing the section."""
    try:
        return build()
    except (KeyError, TypeError, ValueError, IndexError) as e:
        sec.notes.append(f"no interactive chart: missing or bad field ({type(e).__name__}: {e})")
        return {}


def _env_notes(d: dict[str, Any]) -> list[str]:
    run = d.get("run") or {}
    notes = []
    if run.get("cancelled"):
        notes.append("the run was interrupted: these are partial results")
    if run.get("aborted"):
        notes.append(f"the run gave up: {run['aborted']}")
    if run.get("leftover_keys"):
        notes.append(f"{run['leftover_keys']} key(s) written could not be deleted")
    return notes


# -- profile ------------------------------------------------------------------------------

_PROFILE_ROWS = ("5", "25", "50", "75", "90", "95", "99", "99.9", "max")
_OP_TITLES = {"get": "get by value size", "set": "set by value size",
              "multiget": "multi-get by key count"}


def _cell_label(c: dict[str, Any]) -> str:
    from cachelab.units import format_size

    if c["op"] == "multiget":
        return f"{c['keys']} key" + ("" if c["keys"] == 1 else "s")
    return format_size(int(c["value_size"]))


def profile_section(art: Artifact, ctx: Context) -> Section:
    from cachelab.profiles import LatencyProfile

    d = art.data
    sec = Section(f"Latency profile: {d.get('name', '')}", "profile", art.path)
    cells = d.get("cells", [])
    client = d.get("client", {})
    if d.get("source") == "published":
        pub = d.get("published") or {}
        sec.body.append(f"<p>Published profile: {esc(pub.get('source', ''))}</p>")
    else:
        sec.body.append(
            f"<p>{esc(client.get('samples'))} samples per cell after {esc(client.get('warmup'))}"
            f" warm-up, {esc(client.get('protocol'))} protocol, {esc(client.get('concurrency'))}"
            f" connection(s). Latencies are read from each cell's HdrHistogram.</p>")
    floor = next((c for c in cells if c["op"] == "floor" and c.get("samples")), None)
    floor_p50 = floor["percentiles"].get("50") if floor else None
    if floor_p50:
        sec.body.append(f"<p>Loopback floor ({esc(client.get('floor_command', 'mn'))} on a raw "
                        f"socket): p50 {dur(floor_p50)}, p99 {dur(floor['percentiles'].get('99'))}"
                        "</p>")
    for op in ("get", "set", "multiget"):
        cs = [c for c in cells if c["op"] == op]
        if not cs:
            continue
        header = ["percentile", *(_cell_label(c) for c in cs)]
        rows = [[("p" + r) if r != "max" else "max",
                 *(dur(c["percentiles"].get(r)) if c.get("samples") else "—" for c in cs)]
                for r in _PROFILE_ROWS]
        rows.append(["samples", *(str(c.get("samples", 0)) for c in cs)])
        if floor_p50:
            rows.append(["p50 / floor", *(_times(c["percentiles"].get("50", 0), floor_p50)
                                          if c.get("samples") else "—" for c in cs)])
        errs = [sum(c.get("errors", {}).values()) for c in cs]
        if any(errs):
            rows.append(["errors", *map(str, errs)])
        bad = [c.get("mismatches", 0) + c.get("misses", 0) for c in cs]
        if any(bad):
            rows.append(["mismatches + misses", *map(str, bad)])
        sec.body.append(f"<h3>{esc(_OP_TITLES[op])}</h3>")
        sec.body.append(table(header, rows))

    def redraw(out: Path) -> list[Path]:
        from cachelab.cli.profile import write_plots

        return write_plots(LatencyProfile.from_dict(d, str(art.path)), out)

    plots = {"get": ("get-by-size", "get latency by value size (inverted percentiles)"),
             "set": ("set-by-size", "set latency by value size"),
             "multiget": ("multiget-by-keys", "multi-get latency by key count")}
    present = {c["op"] for c in cells if c.get("samples")}
    figs = _plots(art, ctx, [v for op, v in plots.items() if op in present], redraw,
                  _charts(lambda: ch.profile_charts(d, str(art.path)), sec))
    sec.body += figs
    sec.figures = len(figs)
    sec.findings += profile_findings(d)
    sec.notes += _env_notes(d)
    total_err = sum(sum(c.get("errors", {}).values()) for c in cells)
    if total_err:
        sec.notes.append(f"{total_err} request(s) failed and are not in the histograms")
    mism = sum(c.get("mismatches", 0) for c in cells)
    if mism:
        sec.notes.append(f"{mism} read(s) returned bytes that differ from what was written")
    return sec


def profile_findings(d: dict[str, Any]) -> list[str]:
    """Plain-language facts from a profile's p50s."""
    from cachelab.units import format_size

    out = []
    cells = [c for c in d.get("cells", []) if c.get("samples")]
    gets = {c["value_size"]: c for c in cells if c["op"] == "get"}
    if gets:
        small = min(gets, key=lambda s: (abs(math.log10(s) - 3), s))  # nearest to 1 KB
        big = max(gets)
        if big != small:
            a, b = gets[big]["percentiles"]["50"], gets[small]["percentiles"]["50"]
            out.append(f"A {format_size(big)} get is {_times(a, b)} slower than a "
                       f"{format_size(small)} get at p50 ({dur(a)} vs {dur(b)}).")
        c = gets[small]
        out.append(f"A {format_size(small)} get: p50 {dur(c['percentiles']['50'])}, p99 "
                   f"{dur(c['percentiles']['99'])} — the p99 is "
                   f"{_times(c['percentiles']['99'], c['percentiles']['50'])} the p50.")
    multi = {c["keys"]: c for c in cells if c["op"] == "multiget"}
    if len(multi) >= 2:
        lo, hi = min(multi), max(multi)
        a, b = multi[hi]["percentiles"]["50"], multi[lo]["percentiles"]["50"]
        per_key = a / hi
        out.append(f"A {hi}-key multi-get takes {dur(a)} at p50, {_times(a, b)} a {lo}-key one: "
                   f"{dur(per_key)} per key, so one multi-get beats {hi} separate gets "
                   f"by about {_times(b * hi / lo, a)}.")
    return out


# -- load ---------------------------------------------------------------------------------


def load_section(art: Artifact, ctx: Context) -> Section:
    from cachelab.load import LoadResult

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
        from cachelab.plots.load import latency_over_time

        return latency_over_time(r, out / "load-latency")

    figs = _plots(art, ctx, [("load-latency", "latency and throughput over time")], redraw,
                  _charts(lambda: {"load-latency": ch.load_charts(d)}, sec))
    sec.body += figs
    sec.figures = len(figs)
    if "50" in p:
        sec.findings.append(f"{tot.get('throughput', 0):,.0f} requests/s at p50 {dur(p['50'])} "
                            f"and p99 {dur(p.get('99'))} ({lat.get('which', '')} latency).")
    for k, n in r.problems().items():
        sec.notes.append(f"{n} {k.replace('_', ' ')}")
    return sec


# -- scale / usl --------------------------------------------------------------------------


def _fit_rows(f: dict[str, Any]) -> list[list[str]]:
    ci = f.get("ci") or {}
    boot = f.get("bootstrap") or {}
    peak = f.get("peak") or {}

    def iv(lo: Any, hi: Any) -> str:
        return f"[{_num(lo)}, {_num(hi)}]" if lo is not None or hi is not None else "—"

    rows = []
    for k, what in (("gamma", "γ (throughput at N = 1)"), ("alpha", "α (contention)"),
                    ("beta", "β (coherency)")):
        c = ci.get(k) or [None, None]
        rows.append([what, _num(f.get(k), 4), iv(*c)])
    nb = boot.get("n_max") or {}
    xb = boot.get("x_max") or {}
    nmax = "∞" if peak.get("n_max_infinite") else _num(peak.get("n_max"))
    rows.append(["Nmax (peak load)", nmax, iv(nb.get("lo"), nb.get("hi"))])
    rows.append(["peak throughput", _num(peak.get("x_max")), iv(xb.get("lo"), xb.get("hi"))])
    rows.append(["R²", _num(f.get("r_squared")), ""])
    return rows


def _fit_findings(f: dict[str, Any], what: str) -> list[str]:
    peak = f.get("peak") or {}
    out = []
    if peak.get("n_max_infinite"):
        out.append(f"The {what} fit has no peak (β = 0): throughput keeps rising, towards "
                   f"{_num(peak.get('amdahl_limit'))}/s (Amdahl).")
    elif peak.get("n_max") is not None:
        out.append(f"The {what} fit peaks at N ≈ {_num(peak['n_max'])} with "
                   f"{_num(peak.get('x_max'))}/s (R² {_num(f.get('r_squared'))}).")
    return out


def scale_section(art: Artifact, ctx: Context) -> Section:
    from cachelab.usl import UslFit

    d = art.data
    spec = d["spec"]
    sec = Section(f"Scalability: N = {spec['vary']}", "scale", art.path)
    sec.body.append(f"<p>{len(d['runs'])} run(s): {esc(spec['repeats'])} repeat(s) of each "
                    f"point in interleaved order, {esc(spec['window'])} s measured from the "
                    "steady state.</p>")
    rows = []
    for row in d["summary"]:
        p = row["latency"]["percentiles_ns"]
        sd = row.get("throughput_sd")
        rows.append([row["n"], f"{row['throughput_mean']:,.0f}",
                     "—" if sd is None else f"{sd:,.0f}", dur(p.get("50")), dur(p.get("99")),
                     dur(p.get("99.9"))])
    sec.body.append(table(["N", "throughput /s (mean)", "sd", "p50", "p99", "p99.9"], rows))
    fit = d.get("fit")
    if fit:
        sec.body.append("<h3>Universal Scalability Law fit</h3>")
        sec.body.append(table(["", "value", f"{int(100 * fit.get('level', 0.95))} % interval"],
                              _fit_rows(fit)))
        sec.findings += _fit_findings(fit, "USL")
        sec.notes += [w["message"] for w in fit.get("warnings", [])]
    best = max(d["summary"], key=lambda r: r["throughput_mean"], default=None)
    if best:
        sec.findings.append(f"The highest measured throughput was {best['throughput_mean']:,.0f}"
                            f"/s at N = {best['n']}.")
    sec.notes += list(d.get("limits", []))

    def redraw(out: Path) -> list[Path]:
        from cachelab.plots.usl import scale_latency_plot, usl_plot

        drawn: list[Path] = []
        if fit:
            drawn += usl_plot(UslFit.from_dict(fit, str(art.path)), out / "scale-usl",
                              xlabel=f"N ({spec['vary']})", ylabel="throughput (replies/s)",
                              title=f"memcached scalability: N = {spec['vary']}")
        drawn += scale_latency_plot(d["summary"], out / "scale-latency", vary=spec["vary"])
        return drawn

    names = [("scale-latency", "latency distribution at each N")]
    if fit:
        names.insert(0, ("scale-usl", "throughput vs N with the USL fit and its band"))

    def specs() -> ChartSpecs:
        out: ChartSpecs = {"scale-latency": ch.scale_latency_chart(d["summary"], spec["vary"])}
        if fit:
            out["scale-usl"] = ch.usl_chart(fit, xlabel=f"N ({spec['vary']})",
                                            ylabel="throughput (replies/s)",
                                            title=f"memcached scalability: N = {spec['vary']}",
                                            where=str(art.path))
        return out

    figs = _plots(art, ctx, names, redraw, _charts(specs, sec))
    sec.body += figs
    sec.figures = len(figs)
    return sec


def usl_section(art: Artifact, ctx: Context) -> Section:
    from cachelab.usl import UslFit

    d = art.data
    sec = Section("USL fit", "usl", art.path)
    rows = [[_num(n), _num(x), _num(f)] for n, x, f in zip(d["n"], d["x"], d["fitted"])]
    sec.body.append(table(["N", "measured", "fitted"], rows))
    sec.body.append(table(["", "value", f"{int(100 * d.get('level', 0.95))} % interval"],
                          _fit_rows(d)))
    sec.findings += _fit_findings(d, "USL")
    sec.notes += [w["message"] for w in d.get("warnings", [])]

    def redraw(out: Path) -> list[Path]:
        from cachelab.plots.usl import usl_plot

        return usl_plot(UslFit.from_dict(d, str(art.path)), out / "usl", xlabel="load N",
                        ylabel="throughput", title="USL fit")

    figs = _plots(art, ctx, [("usl", "measured points, the fit and its band")], redraw,
                  _charts(lambda: {"usl": ch.usl_chart(d, where=str(art.path))}, sec))
    sec.body += figs
    sec.figures = len(figs)
    return sec


# -- simulation ---------------------------------------------------------------------------


def band_at(s: dict[str, Any], field_: str, key: str, at: float) -> dict[str, float] | None:
    """The band of a simulated strategy's ``field_`` list ("percentiles" by "percentile",
    "slowed" by "threshold") whose ``key`` is ``at``, or None."""
    for b in s.get(field_, []):
        if abs(float(b[key]) - at) < 1e-9:
            return b
    return None


def best_strategy(d: dict[str, Any]) -> dict[str, Any] | None:
    """The strategy with the lowest median p90 fractional increase (ties: fewer round trips)."""
    ss = [s for s in d.get("strategies", []) if band_at(s, "percentiles", "percentile", 90.0)]
    if not ss:
        return None
    return min(ss, key=lambda s: (band_at(s, "percentiles", "percentile", 90.0)["median"],
                                  s.get("round_trips_per_request", 0)))


def simulation_section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    if d.get("mode") == "flat":
        return _flat_section(art, ctx)
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
    sec.findings += simulation_findings(d)

    def redraw(out: Path) -> list[Path]:
        from cachelab.plots.simulate import fractional_increase_plot

        return fractional_increase_plot(d, out / "simulate")

    figs = _plots(art, ctx, [("simulate", "fractional latency increase by inverted percentile")],
                  redraw, _charts(lambda: {"simulate": ch.simulation_chart(d)}, sec))
    sec.body += figs
    sec.figures = len(figs)
    return sec


def simulation_findings(d: dict[str, Any]) -> list[str]:
    out = []
    best = best_strategy(d)
    model = d.get("model", {}).get("name", "?")
    if best is None:
        return out
    p90 = band_at(best, "percentiles", "percentile", 90.0)["median"]
    slowed = band_at(best, "slowed", "threshold", 0.1)
    none = next((s for s in d["strategies"] if s["strategy"] == "none"), None)
    from cachelab import builtin

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


def _flat_section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section(f"Miss-ratio simulation: {d.get('trace', {}).get('path', '')}", "simulation",
                  art.path)
    rows = d.get("results") or d.get("rows") or []
    if rows and isinstance(rows, list) and isinstance(rows[0], dict):
        keys = [k for k in rows[0] if not isinstance(rows[0][k], (list, dict))]
        sec.body.append(table(keys, [[r.get(k, "") for k in keys] for r in rows], left=1))
    figs = _plots(art, ctx, [("simulate-miss-ratio", "miss ratio by cache size"),
                             ("simulate-byte-miss-ratio", "byte miss ratio by cache size")],
                  None, _charts(lambda: {"simulate-miss-ratio": ch.flat_chart(d),
                                         "simulate-byte-miss-ratio": ch.flat_chart(d, True)},
                                sec))
    sec.body += figs
    sec.figures = len(figs)
    return sec


# -- tiers, replay ------------------------------------------------------------------------


def tiers_section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section(f"Storage tiers: {d.get('store', '?')} vs memcached vs process memory", "tiers",
                  art.path)
    sec.body.append(f"<p>Each method read {esc(d['spec'].get('reads'))} times, interleaved; "
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
        from cachelab.plots.tiers import tiers_plot

        return tiers_plot(d, out / "tiers")

    figs = _plots(art, ctx, [("tiers", "time per read by method")], redraw,
                  _charts(lambda: {"tiers": ch.tiers_charts(d)}, sec))
    sec.body += figs
    sec.figures = len(figs)
    return sec


def replay_section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section("Replay: the tiered cache on a real memcached vs the simulation", "replay",
                  art.path)
    rows, classes = [], []
    for s in d["strategies"]:
        for k, v in s["increase"].items():
            rows.append([s["strategy"], f"p{k}", pct(v["measured"]), pct(v["predicted"]),
                         f"{100 * v['error']:+.0f} %",
                         f"{s['added_ms'][k]['measured']:.2f}"])
            classes.append("" if s.get("within_tolerance") else "bad")
    sec.body.append("<p>Added latency as a share of the base latency, measured through "
                    "<code>cachelab.tiered</code> and predicted by <code>simulate</code> with a "
                    "profile measured in the same run.</p>")
    sec.body.append(table(["strategy", "percentile", "measured", "predicted", "error",
                           "measured added ms"], rows, left=2, row_classes=classes))
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
    spec = _charts(lambda: {"replay": ch.replay_chart(d)}, sec).get("replay")
    if isinstance(spec, dict):
        # No verb draws a static replay plot: with scripts off, the table above is the figure.
        ctx.charts += 1
        sec.body.append(figure(None, "added latency by percentile: measured (solid) vs "
                               "predicted (dashed), the numbers of the table above", [spec]))
    return sec


# -- run and compare ----------------------------------------------------------------------


def run_section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section("The run", "run", art.path)
    rows, classes = [], []
    for s in d["steps"]:
        rows.append([s["name"], s["status"], f"{s.get('elapsed_s', 0):.1f} s",
                     s.get("summary") or s.get("error") or ""])
        classes.append({"ok": "", "problems": "bad", "failed": "bad"}.get(s["status"], ""))
    sec.body.append(table(["step", "status", "time", "summary"], rows, left=1,
                          row_classes=classes))
    sec.body.append(f"<p>Total {d.get('elapsed_s', 0):.1f} s; server "
                    f"{esc(d.get('server', {}).get('address', '?'))}"
                    f"{' (private)' if d.get('server', {}).get('private') else ''}.</p>")
    for s in d["steps"]:
        if s["status"] == "failed":
            sec.notes.append(f"step {s['name']} failed: {s.get('error')}")
    return sec


def compare_section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    sec = Section(f"Comparison of {d['kind']} results", "compare", art.path)
    names = d["names"]
    sec.body.append("<p>" + "; ".join(f"{esc(chr(65 + i))} = {esc(n)}" for i, n in enumerate(names))
                    + f". {esc(d.get('method', ''))}</p>")
    rows, classes = [], []
    for r in d["rows"]:
        lo, hi = r.get("ci_low"), r.get("ci_high")
        rows.append([r["item"], r["metric"], r["versus"], _num(r["a"]), _num(r["b"]),
                     f"{100 * r['relative']:+.1f} %" if r.get("relative") is not None else "—",
                     f"[{100 * lo:+.1f} %, {100 * hi:+.1f} %]" if lo is not None else "—",
                     r["verdict"]])
        classes.append({"worse": "bad", "better": "good"}.get(r.get("direction", ""), ""))
    sec.body.append(table(["item", "metric", "pair", "first", "second", "change",
                           "95 % interval", "verdict"], rows, left=3, row_classes=classes))

    def redraw(out: Path) -> list[Path]:
        from cachelab.compare import compare_plot

        return compare_plot(d, out / "compare")

    figs = _plots(art, ctx, [("compare", "relative change with its interval")], redraw,
                  _charts(lambda: {"compare": ch.compare_chart(d)}, sec))
    sec.body += figs
    sec.figures = len(figs)
    sec.findings += d.get("summary", [])
    sec.notes += d.get("warnings", [])
    return sec


#: Artifact kind -> section builder.
SECTIONS: dict[str, Callable[[Artifact, Context], Section]] = {
    "run": run_section,
    "profile": profile_section,
    "load": load_section,
    "scale": scale_section,
    "usl": usl_section,
    "simulation": simulation_section,
    "tiers": tiers_section,
    "replay": replay_section,
    "compare": compare_section,
}


def build_section(art: Artifact, ctx: Context) -> Section:
    """The section of one artifact; a result this cachelab cannot render becomes a section
    that says so rather than a failed report."""
    try:
        return SECTIONS[art.kind](art, ctx)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        sec = Section(f"{art.kind}: {art.path.name}", art.kind, art.path)
        sec.notes.append(f"this {art.kind} result could not be rendered: missing or bad field "
                         f"({type(e).__name__}: {e})")
        return sec
