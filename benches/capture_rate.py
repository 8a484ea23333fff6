"""How fast a `cachelab trace capture` can read a memcached's key stream without losing lines:
an open-loop `load` at each ``--rates`` for ``--duration`` seconds while a capture (a separate
process, ``python -m cachelab trace capture``) reads the server's stream, round by round.

One private memcached (``-t 1``) pinned to ``--server-cpus`` (default 0). The load (90 % gets,
10 % sets, zipf keys, 4 connections) runs in this process, on the other core
(``--load-cpus``, default 1); the capture in its own (``--capture-cpus``, default 1: beside
the load, not taking the server's core). Reported per rate and contender (median over rounds,
min–max): the rate achieved and whether the load held it, the lines the server produced
(captured + lost), the lines lost and where (``log_worker_dropped``: the server's worker
threads' log buffers overflowed before its logger thread moved them; ``skipped``: the server
skipped them because the capture fell behind), the capture process's CPU (user + system,
start-up included, from its rusage) per second of load and per line, and the most stream
bytes it held read and not parsed yet. ``--baseline PATH`` runs the capture from another
tree's ``python/`` too (e.g. main's), alternating with this one. ``--record`` writes
``benches/runs/<date>-capture-rate.md`` and the JSON. Exit 0 when every load held its rate
and no line was lost while it did (lines lost in the load's own prefill and clean-up bursts,
far above the rate, are reported apart).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any

import cachelab
from cachelab.load import LoadSpec, load
from cachelab.servers import PrivateMemcached, read_stats
from records import header, markdown_table, median_range, write_record


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


_COUNTERS = ("cmd_get", "cmd_set", "delete_hits", "delete_misses", "log_worker_dropped",
             "log_watcher_skipped")


class Sampler(threading.Thread):
    """The server's counters every 0.25 s while the load runs: the lines lost while it held its
    rate, apart from those lost in its own bursts (the prefill before, the clean-up after,
    both as fast as the server answers)."""

    def __init__(self, address: str) -> None:
        super().__init__(daemon=True)
        self.address, self.halt, self.samples = address, threading.Event(), []

    def run(self) -> None:
        while not self.halt.is_set():
            st = read_stats(self.address)
            self.samples.append((time.monotonic(), *(int(st[k]) for k in _COUNTERS)))
            self.halt.wait(0.25)

    def split(self, rate: float) -> tuple[int, int]:
        """Lines lost in intervals at most 1.5x the rate, and in the others."""
        steady = burst = 0
        for a, b in zip(self.samples, self.samples[1:]):
            requests = sum(b[i] - a[i] for i in range(1, 5))
            lost = (b[5] - a[5]) + (b[6] - a[6])
            if requests <= 1.5 * rate * (b[0] - a[0]):
                steady += lost
            else:
                burst += lost
        return steady, burst


def one_run(mc: PrivateMemcached, spec: LoadSpec, pythonpath: str, cpus: str,
            out: Path) -> dict[str, Any]:
    """A capture process around one load; its figures."""
    cmd = ["taskset", "-c", cpus, sys.executable, "-m", "cachelab", "trace", "capture",
           "--server", mc.address, "--duration", str(spec.duration + 60), "--out", str(out),
           "--format", "json"]
    watchers = int(read_stats(mc.address)["log_watchers"])
    cpu0 = children_cpu()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": pythonpath})
    try:
        deadline = time.monotonic() + 60
        while int(read_stats(mc.address)["log_watchers"]) <= watchers:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the capture never watched: {proc.communicate()[1]}")
            time.sleep(0.05)
        time.sleep(3.5)      # its start: the logger woken, the clock started
        sampler = Sampler(mc.address)
        sampler.start()
        r = load(spec, server=mc.address)
        time.sleep(1.0)      # the stream's tail
        sampler.halt.set()
        sampler.join(10)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    cpu = children_cpu() - cpu0
    cap = json.loads(stdout)
    d = cap["server"]["deltas"]
    lines = cap["gets"] + cap["stores"] + cap["store_lookups"]
    steady, burst = sampler.split(spec.rate or 0.0)
    return {"achieved": r.totals["throughput"], "held": bool(r.schedule and r.schedule["held"]),
            "captured_lines": lines, "produced": lines + cap["lost"], "lost": cap["lost"],
            "lost_steady": steady, "lost_bursts": burst,
            "worker_dropped": d.get("log_worker_dropped", 0),
            "skipped": d.get("log_watcher_skipped", 0), "capture_cpu_s": cpu,
            "cpu_per_load_s": cpu / spec.duration,
            "cpu_ns_per_line": cpu * 1e9 / max(1, lines),
            "buffer_peak_mib": cap.get("buffer_peak_bytes", 0) / 2**20,
            "exit": proc.returncode, "stderr": stderr.strip()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")],
                    default=[20_000.0, 100_000.0])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--load-cpus", default="1")
    ap.add_argument("--capture-cpus", default="1")
    ap.add_argument("--baseline", metavar="PATH",
                    help="another tree's python/ directory: its capture runs too, alternating")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    os.sched_setaffinity(0, {int(c) for c in args.load_cpus.split(",")})
    here = str(Path(cachelab.__file__).resolve().parents[1])
    contenders = {"this tree": here}
    if args.baseline:
        contenders["baseline"] = str(Path(args.baseline).resolve())
    rows: list[dict[str, Any]] = []
    loads = []
    with PrivateMemcached(threads=1, memory_mb=256, cpus=args.server_cpus) as mc, \
            tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for rate in args.rates:
                names = list(contenders)
                for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                    spec = LoadSpec(connections=4, rate=rate, duration=args.duration,
                                    warmup=1.0, key_space=50_000, key_dist="zipf:0.99",
                                    mix={"get": 0.9, "set": 0.1}, seed=rnd + 1)
                    row = one_run(mc, spec, contenders[name], args.capture_cpus,
                                  Path(tmp) / f"{name.replace(' ', '-')}-{rate:.0f}-{rnd}")
                    row.update(contender=name, rate=rate, round=rnd,
                               load1=os.getloadavg()[0])
                    print(json.dumps(row), flush=True)
                    rows.append(row)
        argv = " ".join(mc.argv)
        loads = [r["load1"] for r in rows]

    def cell(rs: list[dict[str, Any]], key: str, fmt: str) -> str:
        return median_range([r[key] for r in rs], fmt)

    head = ["rate/s", "capture", "achieved/s", "held", "lines produced", "lost",
            "lost at the rate", "lost in the load's prefill / clean-up bursts",
            "dropped in the server's workers", "skipped for the capture",
            "capture CPU s per s", "capture CPU ns/line", "peak held MiB", "exit"]
    table = []
    for rate in args.rates:
        for name in contenders:
            rs = [r for r in rows if r["rate"] == rate and r["contender"] == name]
            table.append([f"{rate:,.0f}", name, cell(rs, "achieved", "{:,.0f}"),
                          f"{sum(r['held'] for r in rs)}/{len(rs)}",
                          cell(rs, "produced", "{:,.0f}"), cell(rs, "lost", "{:,.0f}"),
                          cell(rs, "lost_steady", "{:,.0f}"), cell(rs, "lost_bursts", "{:,.0f}"),
                          cell(rs, "worker_dropped", "{:,.0f}"), cell(rs, "skipped", "{:,.0f}"),
                          cell(rs, "cpu_per_load_s", "{:.2f}"),
                          cell(rs, "cpu_ns_per_line", "{:,.0f}"),
                          cell(rs, "buffer_peak_mib", "{:.1f}"),
                          ",".join(str(r["exit"]) for r in rs)])
    ok = all(r["held"] and r["lost_steady"] == 0 for r in rows)
    md, commit = header(
        "how fast a capture reads without losing lines", "capture_rate.py", sys.argv[1:],
        [f"memcached: `{argv}`; load: open loop, 4 connections, 90 % gets, zipf 0.99 over "
         f"50,000 keys, {args.duration:g} s after 1 s warm-up; server on CPU {args.server_cpus}, "
         f"load on CPU {args.load_cpus}, capture on CPU {args.capture_cpus}; {args.rounds} "
         "round(s); 1-minute load "
         f"average {min(loads):.1f}–{max(loads):.1f}"])
    md += ["Median over rounds (min–max). A store is two lines (the server's lookup, the "
           "store); CPU is the capture process's whole life (start-up, the 3.5 s before the "
           "load, the 1 s after) over the load's seconds.", "", *markdown_table(head, table),
           "", "Lost at the rate / in bursts: from the server's counters every 0.25 s, by whether "
           "the interval's requests were at most 1.5x the rate (the load's prefill of its key "
           "space and its clean-up run as fast as the server answers).",
           f"Every load held its rate and no line was lost at the rate: {'yes' if ok else 'NO'}."]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("capture-rate", date.today().isoformat(), text,
                            {"args": vars(args), "rows": rows, "commit": commit})
        print(f"recorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
