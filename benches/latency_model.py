"""How well does the latency model predict cells it was not fitted on? Held-back cells of a
real memcached's profile, at p50 / p90 / p99.

    python benches/latency_model.py                    # 2 rounds, 5,000 samples per cell
    python benches/latency_model.py --record

The simulator draws memcached latencies from a model of a latency profile
(``cachelab.simulate.model``): between measured key counts (value sizes) it interpolates on
a log scale at the same quantile, beyond the largest it extrapolates linearly by the per-key
(per-byte) slope of the two largest cells at that quantile. This measures the rule's error.

Each round profiles a private memcached (``-t 1``) with ``cachelab.profile`` — the function
behind ``cachelab profile`` — at every key count of ``--keys`` (multi-gets of 1 KB values,
default 1, 2, 3, 5, 7, 10, 14, 20, 30, 50, 70, 100, 150, 200) and every value size of
``--sizes`` (gets, default 1 B … 1 MB in steps of about 3×), all cells interleaved sample by
sample, so drift falls on all alike. Then, per *fit* (a subset of the cells: the profile's
default cells, and a shorter one that leaves the largest out), the model is built from the
fit's cells alone and predicts every other cell; the error is predicted / measured − 1 at
p50, p90 and p99, and for cells beyond the fit's largest the error of the old rule (the
largest cell's value) is given beside it. The second round measures the same cells again:
its difference from the first (*repeat*) is the noise the errors should be read against.

**Lead-in cells.** The profile engine runs its cells round-robin: per round the gets and
sets by size, then one pipelined write of every multi-get's values, then the multi-gets in
the order given. The first cells after a switch are slower (in a trial run with 14 key counts
and 2,000 samples a cell: the 1-key multi-get right after the write had a p50 of 2.9 ms, and
61 µs when placed fourth; the 1-byte get, first of its round, 86 µs against 72 µs at 10
bytes), which would be charged to the model. So ``--lead-in-keys`` (default 4, 6, 8) and
``--lead-in-sizes`` (2, 4) are profiled first in their rounds and left out of every fit and
comparison; their figures are printed, beside the first measured cell's, to show the effect.

Unless ``--no-pin``, memcached runs on CPU 1 and this process (with the Rust threads that
measure, which inherit it) on CPU 0. ``--record`` writes ``benches/runs/<date>-latency-model.md``
and the JSON beside it. Exit status 0 when the profiles were clean (no errors, mismatches,
misses or keys left), 1 otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from datetime import date
from typing import Any

from cachelab.errors import UsageError
from cachelab.profile import Cell, LatencyProfile, ProfileSpec, profile
from cachelab.profile.spec import item_size_mib
from cachelab.servers import PrivateMemcached
from cachelab.simulate.model import latency_model
from cachelab.units import parse_int_list, parse_size_list
from records import header, markdown_table, write_record

PERCENTILES = (50.0, 90.0, 99.0)
KEYS = "1,2,3,5,7,10,14,20,30,50,70,100,150,200"
SIZES = "1,10,100,1K,3K,10K,30K,100K,300K,1M"
#: (name, op, cells the model is fitted on): the profile's default cells, and a shorter fit
#: that leaves the largest out, to see the extrapolation further from its cells.
FITS = (
    ("keys: default cells 1, 3, 5, 10, 100", "multiget", (1, 3, 5, 10, 100)),
    ("keys: 1, 3, 5, 10, 50", "multiget", (1, 3, 5, 10, 50)),
    ("sizes: default cells 1 B … 1 MB (×10)", "get",
     (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)),
    ("sizes: 1 B … 100 KB (×10)", "get", (1, 10, 100, 1_000, 10_000, 100_000)),
)


def at(c: Cell) -> int:
    """A cell's key count (multiget) or value size."""
    return c.keys if c.op == "multiget" else c.value_size


def without(p: LatencyProfile, lead_in: dict[str, set[int]]) -> LatencyProfile:
    """``p`` without its lead-in cells."""
    out = copy.copy(p)
    out.cells = [c for c in p.cells if at(c) not in lead_in.get(c.op, set())]
    return out


def measured(p: LatencyProfile, op: str) -> dict[int, list[float]]:
    """Each cell's p50 / p90 / p99 in µs, by key count (multiget) or value size (get)."""
    return {at(c): [ns / 1e3 for ns in c.at(list(PERCENTILES))] for c in p.cells_of(op)
            if c.samples}


def predict(p: LatencyProfile, op: str, fit: tuple[int, ...], cells: list[int]
            ) -> dict[int, dict[str, list[float]]]:
    """The model of ``fit``'s cells alone at every other cell, and the old rule's value
    (the nearest fitted cell) beyond the largest."""
    sub = copy.copy(p)
    sub.cells = [c for c in p.cells if c.op in ("get", "multiget") and
                 (c.op != op or at(c) in fit)]
    model = latency_model(sub, sequence=False).to_core()
    draw = model.draw_multiget if op == "multiget" else model.draw_get
    out = {}
    for k in cells:
        if k in fit:
            continue
        row = {"model": [draw(k, q / 100) for q in PERCENTILES]}
        if k > max(fit):
            row["nearest"] = [draw(max(fit), q / 100) for q in PERCENTILES]
        out[k] = row
    return out


def err(pred: float, meas: float) -> float:
    return pred / meas - 1.0


def signed(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.0f} %"


def evaluate(rounds: list[LatencyProfile]) -> list[dict[str, Any]]:
    """Per fit and held-back cell: the measured values of each round, the model's and the
    old rule's errors in each round, and the repeat difference (round 2 / round 1 − 1)."""
    out = []
    for name, op, fit in FITS:
        meas = [measured(p, op) for p in rounds]
        cells = sorted(meas[0])
        if not set(fit) <= set(cells):
            continue
        preds = [predict(p, op, fit, cells) for p in rounds]
        rows = []
        for k in cells:
            if k in fit:
                continue
            rows.append({
                "cell": k, "beyond": k > max(fit),
                "measured_us": [m[k] for m in meas],
                "model_us": [pr[k]["model"] for pr in preds],
                "model_err": [[err(a, b) for a, b in zip(pr[k]["model"], m[k])]
                              for pr, m in zip(preds, meas)],
                "nearest_err": [[err(a, b) for a, b in zip(pr[k]["nearest"], m[k])]
                                for pr, m in zip(preds, meas)] if k > max(fit) else None,
                "repeat": ([err(a, b) for a, b in zip(meas[1][k], meas[0][k])]
                           if len(meas) > 1 else None),
            })
        out.append({"fit": name, "op": op, "fit_cells": list(fit), "rows": rows})
    return out


def summary(rows: list[dict[str, Any]], key: str, i: int) -> str:
    """Median |error| at percentile index ``i`` over rows and rounds."""
    vals = [abs(e[i]) for r in rows if r.get(key) for e in
            (r[key] if key != "repeat" else [r[key]])]
    return f"{100 * statistics.median(vals):.0f} %" if vals else "—"


def label(op: str, k: int) -> str:
    if op == "multiget":
        return f"{k} key" + ("" if k == 1 else "s")
    return f"{k / 1e6:g} MB" if k >= 1_000_000 else (f"{k / 1e3:g} KB" if k >= 1000 else
                                                       f"{k} B")


def report(results: list[dict[str, Any]], n_rounds: int) -> list[str]:
    lines: list[str] = []
    for f in results:
        lines += [f"### {f['fit']}", ""]
        head = ["cell", "measured p50 / p90 / p99 µs (round 1)"]
        head += [f"model error p{q:g}" for q in PERCENTILES]
        head += [f"old rule p{q:g}" for q in PERCENTILES]
        if n_rounds > 1:
            head += ["repeat p50 / p90 / p99"]
        rows = []
        for r in f["rows"]:
            errs = [" / ".join(signed(e[i]) for e in r["model_err"]) for i in range(3)]
            old = ([" / ".join(signed(e[i]) for e in r["nearest_err"]) for i in range(3)]
                   if r["nearest_err"] else ["—"] * 3)
            row = [label(f["op"], r["cell"]) + (" (beyond)" if r["beyond"] else ""),
                   " / ".join(f"{v:.1f}" for v in r["measured_us"][0]), *errs, *old]
            if n_rounds > 1:
                row.append(" / ".join(signed(x) for x in r["repeat"]))
            rows.append(row)
        lines += markdown_table(head, rows)
        between = [r for r in f["rows"] if not r["beyond"]]
        beyond = [r for r in f["rows"] if r["beyond"]]
        for what, sel in (("between fitted cells", between), ("beyond the largest", beyond)):
            if not sel:
                continue
            lines += ["", f"Median |error| {what}, p50 / p90 / p99: model "
                      + " / ".join(summary(sel, "model_err", i) for i in range(3))
                      + ("; old rule " + " / ".join(summary(sel, "nearest_err", i)
                                                    for i in range(3)) if sel is beyond else "")
                      + ("; repeat " + " / ".join(summary(sel, "repeat", i) for i in range(3))
                         if n_rounds > 1 else "")]
        lines.append("")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2, help="profiles taken (default 2)")
    ap.add_argument("--samples", type=int, default=5000, help="samples per cell (default 5000)")
    ap.add_argument("--warmup", type=int, default=200, help="warm-up samples per cell (200)")
    ap.add_argument("--keys", default=KEYS, help=f"multi-get key counts (default {KEYS})")
    ap.add_argument("--sizes", default=SIZES, help=f"get value sizes (default {SIZES})")
    ap.add_argument("--lead-in-keys", default="4,6,8",
                    help="key counts profiled first and left out (default 4,6,8)")
    ap.add_argument("--lead-in-sizes", default="2,4",
                    help="value sizes profiled first and left out (default 2,4)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin server and client")
    ap.add_argument("--record", action="store_true",
                    help="write benches/runs/<date>-latency-model.md and .json")
    args = ap.parse_args()
    try:
        keys, sizes = parse_int_list(args.keys), parse_size_list(args.sizes)
        lead_keys = parse_int_list(args.lead_in_keys) if args.lead_in_keys else []
        lead_sizes = parse_size_list(args.lead_in_sizes) if args.lead_in_sizes else []
        if set(keys) & set(lead_keys) or set(sizes) & set(lead_sizes):
            raise UsageError("lead-in cells must not be among the cells measured")
        spec = ProfileSpec(sizes=(*lead_sizes, *sizes), key_counts=(*lead_keys, *keys),
                           samples=args.samples, warmup=args.warmup, seed=1)
        spec.check()
        if not 1 <= args.rounds <= 10:
            raise UsageError("--rounds must be between 1 and 10")
    except UsageError as e:
        print(f"latency_model.py: {e}", file=sys.stderr)
        return 2
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    if pin:
        os.sched_setaffinity(0, {0})
    mib = item_size_mib(spec)
    rounds: list[LatencyProfile] = []
    loads: list[float] = []
    started = time.perf_counter()
    with PrivateMemcached(threads=1, memory_mb=64, cpus="1" if pin else None,
                          item_size_max=f"{mib}m" if mib else None) as mc:
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}: profiling {len(spec.key_counts)} key counts "
                  f"and {len(spec.sizes)} sizes ...", flush=True)
            rounds.append(profile(spec, server=mc.address, server_facts={"private": True}))
            loads.append(os.getloadavg()[0])
        argv = " ".join(mc.argv)
    elapsed = time.perf_counter() - started
    problems = [p.problems() for p in rounds]
    lead_in = {"multiget": set(lead_keys), "get": set(lead_sizes)}
    results = evaluate([without(p, lead_in) for p in rounds])
    first = {"multiget": keys[0], "get": sizes[0]}
    lead_rows = [[f"{c.op} {label(c.op, at(c))}" + ("" if at(c) in lead_in[c.op] else
                                                     " (first measured)"),
                  " / ".join(f"{ns / 1e3:.1f}" for ns in c.at(list(PERCENTILES)))]
                 for c in rounds[0].cells if c.op in lead_in and
                 (at(c) in lead_in[c.op] or at(c) == first[c.op])]
    md, commit = header(
        "latency model: error on held-back cells", "latency_model.py", sys.argv[1:],
        [f"memcached: `{argv}`" + ("; server on CPU 1, client on CPU 0" if pin else
                                   "; unpinned"),
         f"{args.rounds} round(s) of one profile each: {args.samples:,} samples per cell after "
         f"{args.warmup} warm-up, every cell interleaved; multi-gets of 1 KB values; lead-in "
         f"cells (left out): keys {args.lead_in_keys or 'none'}, sizes "
         f"{args.lead_in_sizes or 'none'}",
         f"1-minute load average after each round: {', '.join(f'{x:.2f}' for x in loads)}; "
         f"{elapsed:.0f} s in all" + ("; the machine was shared with other work (load above "
                                      "1.5): read the errors against the repeat column"
                                      if max(loads) > 1.5 else ""),
         "errors are predicted / measured − 1, one per round (round 1 / round 2); the old "
         "rule is the nearest fitted cell; repeat is round 2 / round 1 − 1 of the measured cell"])
    md += report(results, args.rounds)
    if lead_rows:
        md += ["### Lead-in cells (profiled first in their rounds, left out; round 1)", "",
               *markdown_table(["cell", "p50 / p90 / p99 µs"], lead_rows), ""]
    if any(problems):
        md.append(f"Problems in the profiles: {problems}")
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("latency-model", date.today().isoformat(), text, {
            "args": vars(args), "commit": commit, "loads": loads, "elapsed_s": elapsed,
            "percentiles": PERCENTILES, "results": results, "lead_in": lead_rows,
            "problems": problems})
        print(f"recorded {path}")
    return 1 if any(problems) else 0


if __name__ == "__main__":
    sys.exit(main())
