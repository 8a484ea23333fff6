"""Open-loop send lateness as a user sees it: ``cachelab load --rate R`` run by run, the client's
queueing (intended → actual send) and the validity verdict's arrivals check, with the spin off
and on; then a fresh clone's ``cachelab load --rate 2000`` with no other flag.

    python benches/pacer_lateness.py --runs 10 [--rates 1000,5000,20000,50000] [--spins 0,300]
                                     [--default-runs 10] [--record]

One private memcached (``-t 1 -U 0 -m 64``, a free loopback port, stopped by PID) pinned to
``--server-cpus`` (default 0). Each run is a process, ``python -m cachelab load --server ADDR
--rate R --connections 4 --duration D --spin-us S --no-plots --format json``, pinned to
``--client-cpus`` (default 1: the client's core its own); the runs interleave (run 1 of every
rate and spin, then run 2, ...), so drift lands on every cell. From each run's ``load.json``:
``client.queueing`` (p50, p99, the sends ≥ 1 ms late), the verdict and its failed checks, the
arrivals check (the gaps of 0 between sends: requests due at different times sent in one
wake-up), ``client.pacing_s`` (the CPU spent waiting awake for a send) and the engine's CPU per
request.

The last part runs ``cachelab load --rate 2000 --duration D`` ``--default-runs`` times as a
user of a fresh clone would: no pinning, no flag but the output's, on the private server the
verb starts itself.

Goals (issue 33 item 1): on a quiet machine with the client on its own core, with the spin,
queueing p50 ≤ 5 µs and p99 ≤ 50 µs at 1,000 to 50,000/s and the arrivals check passing in
≥ 9 of 10 runs at each rate; the default ``load --rate 2000`` VALID in ≥ 9 of 10. memtier's
``--rate-limiting`` sends each connection's requests at a fixed rate and reports no send
times, so it has no lateness to set beside these (see load_vs_memtier.py for its CPU).

``--quiet-below L`` waits (up to ``--max-wait`` s) for the 1-minute load average to drop below
L before each round. ``--record`` writes ``benches/runs/<date>-pacer-lateness.md`` and the JSON.
Exit 0 when every goal is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

from cachelab.servers import PrivateMemcached
from records import header, markdown_table, median_range, write_record

PYTHONPATH = str(Path(__file__).resolve().parent.parent / "python")


def wait_quiet(below: float | None, max_wait: float) -> float:
    """Waits for the 1-minute load average to drop below ``below``; returns it."""
    deadline = time.monotonic() + max_wait
    while below is not None and os.getloadavg()[0] >= below and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def one_run(pin: list[str], args: list[str], timeout: float) -> dict[str, Any]:
    """Runs ``cachelab load ARGS`` (after the ``pin`` command, e.g. ``taskset -c 1``) into a
    scratch directory; returns the figures of its load.json."""
    out = Path(tempfile.mkdtemp(prefix="pacer-"))
    try:
        env = {**os.environ, "PYTHONPATH": PYTHONPATH}
        cmd = [*pin, sys.executable, "-m", "cachelab", "load", *args, "--no-plots",
               "--format", "json", "--out", str(out / "r")]
        load_avg = os.getloadavg()[0]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        path = out / "r" / "load.json"
        if not path.exists():
            return {"exit": p.returncode, "error": p.stderr.strip()[-500:], "load_avg": load_avg}
        d = json.loads(path.read_text())
        c, v = d["client"], d["validity"]
        q = c.get("queueing") or {}
        arrivals = v["checks"].get("arrivals", {})
        requests = d["totals"].get("requests") or q.get("sends") or 0
        return {
            "exit": p.returncode, "load_avg": load_avg,
            "verdict": v["verdict"], "failed": v["failed"],
            "arrivals": arrivals.get("status"), "zero_gaps": arrivals.get("zero_gaps"),
            "gaps": arrivals.get("gaps"),
            "queue_p50_us": q.get("p50_ns", 0) / 1e3, "queue_p99_us": q.get("p99_ns", 0) / 1e3,
            "late_sends": q.get("late_sends"), "sends": q.get("sends"),
            "pacing_s": c.get("pacing_s"), "cpu_us_per_op": c.get("cpu_us_per_op"),
            "requests_per_write": c.get("requests_per_write"), "requests": requests,
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1000,5000,20000,50000")
    ap.add_argument("--spins", default="0,300", help="--spin-us values, comma-separated")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--default-runs", type=int, default=10,
                    help="runs of the plain `cachelab load --rate 2000` (0: none)")
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--quiet-below", type=float, default=None)
    ap.add_argument("--max-wait", type=float, default=600)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    if not shutil.which("taskset") or not shutil.which("memcached"):
        print("skipped: taskset or memcached is missing")
        return 0
    rates = [int(x) for x in args.rates.split(",")]
    spins = [int(x) for x in args.spins.split(",")]
    timeout = args.duration + 60
    cells: dict[tuple[int, int], list[dict[str, Any]]] = {(r, s): [] for r in rates for s in spins}
    defaults: list[dict[str, Any]] = []
    loads: list[float] = []
    with PrivateMemcached(threads=1, memory_mb=64, cpus=args.server_cpus) as mc:
        server_argv = " ".join(mc.argv)
        for i in range(args.runs):
            loads.append(wait_quiet(args.quiet_below, args.max_wait))
            for rate in rates:
                for spin in spins:
                    r = one_run(["taskset", "-c", args.client_cpus],
                                ["--server", mc.address, "--rate", str(rate), "--connections",
                                 str(args.connections), "--duration", f"{args.duration:g}",
                                 "--spin-us", str(spin)], timeout)
                    cells[(rate, spin)].append(r)
                    print(f"run {i + 1} rate {rate} spin {spin}: "
                          + json.dumps({k: r.get(k) for k in ("verdict", "failed", "queue_p50_us",
                                                               "queue_p99_us", "zero_gaps")}),
                          flush=True)
    for i in range(args.default_runs):
        loads.append(wait_quiet(args.quiet_below, args.max_wait))
        r = one_run([], ["--rate", "2000", "--duration", f"{args.duration:g}"], timeout)
        defaults.append(r)
        print(f"default run {i + 1}: " + json.dumps({k: r.get(k) for k in (
            "verdict", "failed", "queue_p50_us", "queue_p99_us", "zero_gaps")}), flush=True)

    def vals(rs: list[dict[str, Any]], key: str) -> list[float]:
        return [float(r[key]) for r in rs if r.get(key) is not None]

    head = ["rate", "--spin-us", "runs", "queueing p50 (µs)", "p99 (µs)", "sends ≥ 1 ms late",
            "arrivals pass", "VALID", "failed checks", "pacing (s)", "engine CPU/request (µs)",
            "requests/write", "load avg"]
    table, goals = [], []
    for (rate, spin), rs in cells.items():
        ok = [r for r in rs if "verdict" in r]
        arrivals = sum(r["arrivals"] == "pass" for r in ok)
        valid = sum(r["verdict"] == "VALID" for r in ok)
        failed = sorted({c for r in ok for c in r["failed"]})
        late = sum(int(r["late_sends"] or 0) for r in ok)
        sends = sum(int(r["sends"] or 0) for r in ok)
        table.append([f"{rate:,}/s", str(spin), f"{len(ok)}/{len(rs)}",
                      median_range(vals(ok, "queue_p50_us"), "{:.2f}"),
                      median_range(vals(ok, "queue_p99_us"), "{:.0f}"),
                      f"{late}/{sends}", f"{arrivals}/{len(rs)}", f"{valid}/{len(rs)}",
                      ",".join(failed) or "—", median_range(vals(ok, "pacing_s"), "{:.2f}"),
                      median_range(vals(ok, "cpu_us_per_op"), "{:.1f}"),
                      median_range(vals(ok, "requests_per_write"), "{:.2f}"),
                      median_range(vals(ok, "load_avg"), "{:.2f}")])
        if spin > 0:
            p50 = statistics.median(vals(ok, "queue_p50_us") or [float("inf")])
            p99 = statistics.median(vals(ok, "queue_p99_us") or [float("inf")])
            goals.append((f"{rate:,}/s, --spin-us {spin}: queueing p50 ≤ 5 µs (median of runs)",
                           f"{p50:.2f} µs", p50 <= 5))
            goals.append((f"{rate:,}/s, --spin-us {spin}: queueing p99 ≤ 50 µs (median of runs)",
                           f"{p99:.0f} µs", p99 <= 50))
            goals.append((f"{rate:,}/s, --spin-us {spin}: arrivals pass in ≥ 9 of 10 runs",
                           f"{arrivals}/{len(rs)}", arrivals >= 0.9 * len(rs)))
    if defaults:
        ok = [r for r in defaults if "verdict" in r]
        valid = sum(r["verdict"] == "VALID" for r in ok)
        failed = sorted({c for r in ok for c in r["failed"]})
        table.append(["2,000/s (default flags)", "default", f"{len(ok)}/{len(defaults)}",
                      median_range(vals(ok, "queue_p50_us"), "{:.2f}"),
                      median_range(vals(ok, "queue_p99_us"), "{:.0f}"),
                      f"{sum(int(r['late_sends'] or 0) for r in ok)}/"
                      f"{sum(int(r['sends'] or 0) for r in ok)}",
                      f"{sum(r['arrivals'] == 'pass' for r in ok)}/{len(defaults)}",
                      f"{valid}/{len(defaults)}", ",".join(failed) or "—",
                      median_range(vals(ok, "pacing_s"), "{:.2f}"),
                      median_range(vals(ok, "cpu_us_per_op"), "{:.1f}"),
                      median_range(vals(ok, "requests_per_write"), "{:.2f}"),
                      median_range(vals(ok, "load_avg"), "{:.2f}")])
        goals.append(("`cachelab load --rate 2000` (default flags) VALID in ≥ 9 of 10 runs",
                      f"{valid}/{len(defaults)}", valid >= 0.9 * len(defaults)))
    md, commit = header(
        "open-loop send lateness and the arrivals check", "pacer_lateness.py", sys.argv[1:],
        [f"memcached: `{server_argv}` pinned to CPU {args.server_cpus}; each `cachelab load` a "
         f"process pinned to CPU {args.client_cpus}, {args.connections} connections, "
         f"{args.duration:g} s after its 1 s warm-up, gets of its own prefilled keys; "
         f"{args.runs} run(s) per cell, interleaved",
         f"the default-flag runs: `python -m cachelab load --rate 2000 --duration "
         f"{args.duration:g}` unpinned, on its own private server",
         f"1-minute load average before each round {min(loads):.2f}–{max(loads):.2f}"])
    md += ["Median over runs (min–max). Queueing is `client.queueing` of `load.json`: the "
           "intended send time to the actual one; pacing is the CPU spent waiting awake for a "
           "send (`client.pacing_s`).", "", *markdown_table(head, table), "",
           *markdown_table(["goal", "measured", "met"],
                           [[g, m, "yes" if ok else "NO"] for g, m, ok in goals])]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("pacer-lateness", date.today().isoformat(), text,
                            {"args": vars(args), "cells": {f"{r}:{s}": v
                                                           for (r, s), v in cells.items()},
                             "defaults": defaults, "commit": commit})
        print(f"recorded {path}")
    return 0 if all(ok for _, _, ok in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
