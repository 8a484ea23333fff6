"""The load result's report section and its interactive charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.artifacts import Artifact
from cachelab.load.precision import SHOWN, precision_text
from cachelab.load.probe import probe_finding
from cachelab.load.repeats import Z95, comparison_lines
from cachelab.load.result import (
    LoadResult,
    restart_lines,
    stopped_notes,
    stopped_text,
    unused_notes,
)
from cachelab.load.timeline import stall_text
from cachelab.load.validity import headline, with_fix
from cachelab.page import charts as ch
from cachelab.page.html import esc, table
from cachelab.page.section import Context, Section, chart_specs, figures
from cachelab.units import dur

Spec = dict[str, Any]


def _interval_cell(ivs: dict, key: str) -> str:
    """A percentile's 95 % interval for the report's table (docs/load.md, "Percentile
    intervals and precision"): "low – high", "n/a (k)", or why none is given."""
    if not ivs or key not in SHOWN:
        return ""
    if ivs.get("ranges") is None:
        return "not given: " + str(ivs["basis"]["withheld"])
    rng = ivs["ranges"].get(key)
    return f"n/a ({ivs['tail'][key]})" if rng is None else f"{dur(rng[0])} – {dur(rng[1])}"


def section(art: Artifact, ctx: Context) -> Section:
    """The load run in ``art``: the measured run's throughput, percentiles (max included),
    errors and stalls, the steady window as extra information, and the latency-over-time
    figure."""
    d = art.data
    r = LoadResult.from_dict(d, str(art.path))
    sec = Section(f"Load: {d['mode']} loop against {d['server'].get('address', '?')}", "load",
                  art.path)
    spec = d["spec"]
    lat = r.latency()
    p = lat.get("percentiles") or {}
    tot = d["totals"]
    run = d.get("run") or {}
    if run.get("aborted") or run.get("cancelled"):
        why = run.get("aborted") or "interrupted"
        sec.body.append(f"<p><strong>PARTIAL</strong>: the run ended after "
                        f"{run.get('elapsed_s', 0):.1f} s ({esc(why)}).</p>")
    for line in restart_lines(r):  # a server restarted: its counters are per life
        sec.body.append(f"<p><strong>{esc(line)}</strong></p>")
        sec.notes.append(line)
    v = d.get("validity")
    if v:
        sec.body.append(f"<p><strong>{esc(v['verdict'])}</strong>: "
                        + esc("; ".join(v["reasons"]) if v["reasons"] else
                              (headline(v) or "").split(": ", 1)[-1]) + "</p>")
        if v["verdict"] == "INVALID":
            sec.notes.append("the run is INVALID as a measurement: " + "; ".join(
                with_fix(v, i) for i in range(len(v["reasons"])))
                + " (docs/load.md, \"Validity\")")
    steady = d["steady"]
    sec.body.append(
        f"<p>{esc(spec.get('connections'))} connection(s) × {esc(spec.get('threads'))} "
        f"thread(s), {tot.get('duration_s', 0):.1f} s measured after a "
        f"{esc(spec.get('warmup'))} s warm-up; steady state "
        f"{'reached' if steady.get('reached') else 'NOT reached'}"
        f"{' (for less than half the run)' if steady.get('short') else ''}.</p>")
    ivs = lat.get("intervals") or {}
    rows = [["throughput", f"{tot.get('throughput', 0):,.0f} /s", ""]]
    for k in ("50", "90", "99", "99.9", "max"):
        if k in p:
            rows.append([f"p{k} latency" if k != "max" else "max latency", dur(p[k]),
                         _interval_cell(ivs, k)])
    rows.append(["errors", str(sum(tot["errors"].values())), ""])
    rows.append(["lost requests", str(tot.get("lost", 0)), ""])
    rows.append(["stalls", str(len(r.stalls)), ""])
    rows += _probe_rows(r.probe)
    sec.body.append(table(["", "measured run", "95 % interval"], rows))
    if r.probe:
        sec.findings.append(probe_finding(r.probe, tot, d["mode"] == "open"))
    said = precision_text(r.precision)
    if said:
        sec.body.append(f"<p>{esc(said)}</p>")
        if not r.precision["reached"]:
            sec.notes.append(said)
    if r.repeats:
        sec.body.append(repeats_table(r.repeats))
        for key in r.repeats["comparison"].get("disagree", []):
            sec.findings.append(r.repeats["comparison"][key]["why"] + ".")
    if d.get("members"):
        sec.body.append(member_table(d))
        for m in d["members"]:
            if m["down"]:
                sec.findings.append(
                    f"Pool member {m['address']} was marked down {len(m['down'])} time(s), "
                    f"{m['down_s']:.2f} s in all; its requests failed at once (member_down).")
        skew = (d.get("pool") or {}).get("skew")
        if skew and skew["ratio"] > 1.2:
            sec.findings.append(
                f"Key skew: {skew['hottest']} took {skew['share']:.1%} of the requests, "
                f"{skew['ratio']:.2f}× its fair share ({skew['fair_share']:.1%}).")
    if r.behind:
        sec.body.append(behind_table(r.behind, "the run"))
        sec.findings += [n[0].upper() + n[1:] + "."
                         for n in [*stopped_notes(r.behind), *unused_notes(r.behind)]]
    if r.stalls:
        sec.body.append("<p>Stalls (requests waiting "
                        f"{esc(spec.get('stall_ms', 100))} ms or more):</p><ul>"
                        + "".join(f"<li>{esc(stall_text(st))}</li>" for st in r.stalls[:20])
                        + "</ul>")
    def redraw(out: Path) -> list[Path]:
        # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
        from cachelab.load.plots import latency_over_time

        return latency_over_time(r, out / "load-latency")

    figs = figures(art, ctx, [("load-latency", "latency and throughput over time")], redraw,
                  chart_specs(lambda: {"load-latency": charts(d)}, sec))
    sec.add_figures(figs)
    if "50" in p:
        sec.findings.append(f"{tot.get('throughput', 0):,.0f} requests/s at p50 {dur(p['50'])}, "
                            f"p99 {dur(p.get('99'))} and max {dur(p.get('max'))} over the "
                            f"measured run.")
    if r.stalls:
        worst = max(r.stalls, key=lambda st: st["end_s"] - st["start_s"])
        sec.findings.append(f"{len(r.stalls)} stall(s); the longest: {stall_text(worst)}.")
    for k, n in r.problems().items():
        sec.notes.append(f"{n} {k.replace('_', ' ')}")
    return sec


def repeats_table(rep: dict[str, Any]) -> str:
    """``load --repeats``: how the server was treated, one row per repeat (its server's pid,
    throughput, p50 and p99 with their 95 % intervals, verdict), and the comparison."""
    rows = []
    for x in rep["runs"]:
        m = x["metrics"]
        t = m["throughput"]
        cells = [f"{t['value']:,.0f} /s" + (f" ± {Z95 * t['se']:,.0f}" if t.get("se") else "")]
        for key in ("p50", "p99"):
            rng = m[key].get("interval")
            cells.append(dur(m[key].get("value")) + (f" [{dur(rng[0])} – {dur(rng[1])}]"
                                                    if rng else " [n/a]"))
        rows.append([str(x["repeat"]) + (" (shown)" if x["repeat"] == rep["shown"] + 1 else ""),
                     str(x["server_pid"] or "–"), *cells, x["verdict"]])
    notes = "".join(f"<li>{esc(line)}</li>" for line in comparison_lines(rep["comparison"]))
    return (f"<p>{len(rep['runs'])} repeats: {esc(rep['server'])}.</p>"
            + table(["repeat", "server pid", "throughput", "p50 (95 %)", "p99 (95 %)",
                     "verdict"], rows) + f"<ul>{notes}</ul>")


def _probe_rows(probe: dict[str, Any] | None) -> list[list[str]]:
    """The latency probe's rows (``load --probe-rate``): its percentiles (from the intended
    send time), their intervals, its errors and its own verdict."""
    if not probe:
        return []
    h = probe["totals"]["corrected"]
    ivs = h.get("intervals") or {}
    rows = [[f"probe p{k} latency" if k != "max" else "probe max latency",
             dur(h["percentiles"][k]), _interval_cell(ivs, k)] for k in ("50", "99", "max")]
    rows.append(["probe errors", str(sum(probe["all"]["errors"].values())), ""])
    rows.append(["probe verdict", probe["validity"]["verdict"],
                 "; ".join(probe["validity"]["reasons"])])
    return rows


def member_table(d: dict[str, Any]) -> str:
    """A pool's members, one row each, and the pool's row (whole run, warm-up included):
    a slow or failing member stands out."""
    pool = d.get("pool") or {}
    rows = []
    for m in d["members"]:
        p = m["latency"]["percentiles"]
        errors = ", ".join(f"{k} {n}" for k, n in sorted(m["errors"].items())) or "0"
        down = (f"{len(m['down'])}× ({m['down_s']:.2f} s)" if m["down"] else "–")
        rows.append([m["address"], f"{m['keys']:,}", f"{m['sent']:,}", f"{m['replies']:,}",
                     errors, dur(p.get("50")), dur(p.get("99")), dur(p.get("max")), down])
    a = d["all"]
    p = (a.get("corrected") or a["uncorrected"])["percentiles"]
    rows.append(["pool", f"{sum(m['keys'] for m in d['members']):,}", f"{a['sent']:,}",
                 f"{a['replies']:,}", str(sum(a["errors"].values())), dur(p.get("50")),
                 dur(p.get("99")), dur(p.get("max")), ""])
    head = (f"<p>Pool of {len(d['members'])} members ({esc(pool.get('distribution'))}); "
            "whole run, warm-up included. A member's requests are its parts: a multi-get "
            "split over the pool counts once per member it touches, once in the pool row.</p>")
    return head + table(["member", "keys", "sent", "replies", "errors", "p50", "p99", "max",
                         "down"], rows)


def behind_table(behind: list[dict[str, Any]], over: str) -> str:
    """Through a proxy: a row per server behind it, by ``host:port``, with what it counted
    over ``over`` (its ``stats`` deltas) and, for one that stopped answering, when (its
    counts are up to then)."""
    gets = [int(b["server"]["deltas"].get("cmd_get", 0)) for b in behind]
    total = sum(gets) or 1
    rows = []
    for b, g in zip(behind, gets):
        d = b["server"]["deltas"]
        rows.append([b["address"], f"{g:,}", f"{int(d.get('get_hits', 0)):,}",
                     f"{int(d.get('cmd_set', 0)):,}", f"{g / total:.1%}",
                     stopped_text(b.get("stopped")) or "–"])
    head = (f"<p>Behind the proxy, as each server counted (its stats deltas over "
            f"{esc(over)}).</p>")
    return head + table(["server", "cmd_get", "get_hits", "cmd_set", "share of gets",
                         "stopped"], rows)


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
    for st in d.get("stalls") or []:
        marks.append({"type": "vspan", "from": ch.r(st["start_s"]), "to": ch.r(st["end_s"]),
                      "label": "stall"})
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
