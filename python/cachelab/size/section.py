"""The size result's report section: the answers first, the tables of the memory each target
needs and of the hit ratio at multiples of the server's memory, a capture's check, and the
hit-ratio curve as a chart (beside the static plot ``size`` drew)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachelab.artifacts import Artifact
from cachelab.page import charts as ch
from cachelab.page.html import esc, table
from cachelab.page.section import Context, Section, chart_specs, figures
from cachelab.size.sizing import answers, hit_text
from cachelab.units import byte_unit, human_bytes, pct, times

Spec = dict[str, Any]

#: How a size result counts a byte, by its ``accounting``.
_COUNTED = {"memcached": "memcached's memory (each item's slab chunk)",
            "value": "value bytes"}


def section(art: Artifact, ctx: Context) -> Section:
    d = art.data
    trace = d["spec"]["trace"] or art.path.parent.name
    sec = Section(f"Memory for a hit ratio: {trace}", "size", art.path)
    sec.findings += answers(d)
    how = _COUNTED.get(d.get("accounting"), str(d.get("accounting")))
    sampled = "exact LRU" if d.get("exact", True) else "LRU from a SHARDS sample of keys"
    sec.body.append(
        f"<p>{d['requests']:,} requests over {d['keys']:,} keys, working set "
        f"{esc(human_bytes(d['working_set_bytes']))} counted in {esc(how)}; {sampled}. "
        f"The best any size does is {esc(pct(d['max_hit_ratio'], 2))}: each key's first "
        "access misses.</p>")
    memory = d.get("memory")
    rows = []
    for t in d["targets"]:
        need = t.get("bytes")
        row = [hit_text(t["hit_ratio"]),
               human_bytes(need) if need is not None else "out of reach"]
        if memory:
            row.append(times(need, memory) if need is not None else "—")
        rows.append(row)
    sec.body.append(table(["hit ratio", "memory needed",
                           *(["× the server's"] if memory else [])], rows))
    if memory and d.get("at_memory"):
        sec.body.append(table(["memory", "× the server's", "hit ratio (starting empty)"],
                              [[human_bytes(r["bytes"]), f"{r['multiple']:g}×",
                                pct(r["hit_ratio"])] for r in d["at_memory"]]))
    check = d.get("check")
    if check:
        sec.body.append(
            f"<p>Check at the server's memory ({esc(human_bytes(check['memory']))}): the server "
            f"had {esc(pct(check['observed']))}; predicted {esc(pct(check['predicted_cold']))} "
            f"starting empty, {esc(pct(check['predicted_warm']))} warm (each key whose first "
            f"get hit on the server counted as a hit) — {esc(check['verdict'])}.</p>")
        if check.get("lost_lines"):
            sec.notes.append(f"the capture lost {check['lost_lines']:,} lines of the server's "
                             "stream: the observed hit ratio is of what was captured")

    def redraw(out: Path) -> list[Path]:
        # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
        from cachelab.simulate.plots import size_plot

        return size_plot(d, out / "size")

    sec.add_figures(figures(art, ctx, [("size", "hit ratio by memory (exact LRU)")], redraw,
                            chart_specs(lambda: {"size": chart(d)}, sec)))
    return sec


def chart(d: dict[str, Any]) -> Spec | None:
    """Hit ratio against memory (log scale) from the LRU curve, as
    :func:`cachelab.simulate.plots.size_plot` draws it: the curve, the best possible hit ratio,
    each reachable target's memory, the hit ratio at ½×–4× the server's memory (a line at the
    server's memory) and, for a capture, the hit ratio the server had. Memory is in the unit
    that reads best for the largest size shown."""
    c = d["curve"]
    memory = d.get("memory")
    at = d.get("at_memory") or []
    pts = [(b, 1 - m) for b, m in zip(c["bytes"], c["miss_ratio"])
           if ch.finite(b) and b > 0 and ch.finite(m)]
    if not pts:
        return None
    largest = max([b for b, _ in pts] + [r["bytes"] for r in at])
    unit, scale = byte_unit(largest)
    series: list[Spec] = [{"name": "LRU hit ratio", "type": "line",
                           "points": ch.xy(((b / scale, h) for b, h in pts), logx=True)}]
    lo, hi = pts[0][0] / scale, largest / scale
    best = d["max_hit_ratio"]
    series.append({"name": f"best possible ({pct(best, 2)}: first accesses miss)",
                   "type": "line", "dash": True, "color": -1,
                   "points": ch.xy([(lo, best), (hi, best)], logx=True)})
    reached = [t for t in d["targets"] if t.get("bytes")]
    if reached:
        series.append({"name": "memory for each target", "type": "points",
                       "points": ch.xy(((t["bytes"] / scale, t["hit_ratio"]) for t in reached),
                                       logx=True)})
    marks = []
    if memory:
        if at:
            series.append({"name": "½×, 1×, 2×, 4× the server's memory", "type": "points",
                           "points": ch.xy(((r["bytes"] / scale, r["hit_ratio"]) for r in at),
                                           logx=True)})
        marks.append({"type": "vline", "x": ch.r(memory / scale),
                      "label": f"server memory {human_bytes(memory)}"})
        check = d.get("check")
        if check and ch.finite(check.get("observed")):
            series.append({"name": f"the server had {pct(check['observed'])}", "type": "points",
                           "points": ch.xy([(memory / scale, check["observed"])], logx=True)})
    counted = "memcached memory" if d.get("accounting") == "memcached" else "value bytes"
    return {"kind": "xy", "title": "Memory for a hit ratio (exact LRU)"
            if d.get("exact", True) else "Memory for a hit ratio (LRU, SHARDS sample)",
            "x": ch.axis(f"cache size ({counted}, {unit}; log scale)", "log", unit=unit),
            "y": ch.axis("hit ratio (requests)", fmt="percent"),
            "series": series, "marks": marks, "zero": True}
