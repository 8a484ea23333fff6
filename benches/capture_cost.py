"""What a `cachelab trace capture` costs the memcached it watches: the same open-loop load
with and without a capture running, interleaved round by round, in one session.

One private memcached (``-t 2``). Each round runs ``--rate`` requests/s (90 % gets, 10 %
sets, zipf keys) for ``--duration`` seconds, either alone (*no watcher*) or while a capture
(``python -m cachelab trace capture``, a separate process) reads the server's key stream
with its Rust reader (*watched, rust reader*, the default) or its Python one (*watched,
python reader*, ``--reader python``, the reference the Rust one replaced). Reported per
contender (median over rounds, min–max): the server's CPU per request (from its
``/proc/PID/task/*/schedstat``, as ``load`` reads it), the corrected
p50/p99/p99.9, and for the watched rounds the lines the capture lost out of those produced, and
how many of them the server dropped before any reader could see them (``log_worker_dropped``:
its worker threads' log buffers, ``-o worker_logbuf_size``, default 64 KB, were full because
its logger thread fell behind); the rest it skipped because the reader fell behind.
``--server-args`` passes memcached options, e.g. ``-o worker_logbuf_size=1024``.

``--pin`` puts memcached on CPU 0 and the load client and the capture on CPU 1 (they compete
for it: the capture's own cost shows as lost lines, not as server CPU). ``--record`` writes
``benches/runs/<date>-capture-cost.md`` and the JSON. Exit 0 when every run held its rate.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import cachelab
from cachelab.load import LoadResult, LoadSpec, load
from cachelab.servers import PrivateMemcached
from records import header, markdown_table, median_range, write_record

CONTENDERS = ("no watcher", "watched, python reader", "watched, rust reader")


def figures(r: LoadResult) -> dict[str, Any]:
    pct = (r.totals["corrected"] or r.totals["uncorrected"])["percentiles"]
    sched = r.server.get("schedstat") or {}
    replies = max(1, r.all["replies"])
    on_cpu = sched.get("on_cpu_s")
    return {"achieved": r.totals["throughput"],
            "held": bool(r.schedule and r.schedule["held"]),
            "server_cpu_us_per_op": None if on_cpu is None else on_cpu * 1e6 / replies,
            "p50_us": pct["50"] / 1e3, "p99_us": pct["99"] / 1e3, "p999_us": pct["99.9"] / 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--rate", type=float, default=20_000.0)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--server-args", default="",
                    help="extra memcached arguments, e.g. '-o worker_logbuf_size=1024'")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {1})
    spec = LoadSpec(connections=4, rate=args.rate, duration=args.duration, warmup=1.0,
                    interval=1.0, key_space=50_000, key_dist="zipf:0.99",
                    mix={"get": 0.9, "set": 0.1}, seed=1)
    env = {**os.environ, "PYTHONPATH": str(Path(cachelab.__file__).resolve().parents[1])}
    rows: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
    with PrivateMemcached(threads=2, cpus="0" if args.pin else None,
                          extra_args=args.server_args.split()) as mc, \
            tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name in CONTENDERS[r % 3:] + CONTENDERS[:r % 3]:
                if name == "no watcher":
                    rows[name].append(figures(load(spec, server=mc.address)))
                    continue
                out = Path(tmp) / f"r{r}.capture.parquet"
                cmd = [sys.executable, "-m", "cachelab", "trace", "capture", "--server",
                       mc.address, "--duration", str(args.duration + 30), "--out", str(out),
                       "--format", "json", "--reader", name.split()[1]]
                if args.pin:
                    cmd = ["taskset", "-c", "1", *cmd]
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env)
                try:
                    time.sleep(1.5)  # the watcher is registered
                    row = figures(load(spec, server=mc.address))
                    proc.send_signal(signal.SIGINT)
                    stdout, _ = proc.communicate(timeout=60)
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait(10)
                cap = json.loads(stdout)
                d = cap["server"]["deltas"]
                produced = d.get("log_watcher_sent", 0) + cap["lost"]
                # Where they were lost: in the server's worker log buffers (its logger thread
                # fell behind), or skipped for this watcher (the capture fell behind).
                row.update(lost=cap["lost"], produced=produced,
                           worker_dropped=d.get("log_worker_dropped", 0))
                rows[name].append(row)
        argv = " ".join(mc.argv)

    def cell(name: str, key: str, fmt: str = "{:.1f}") -> str:
        return median_range([r[key] for r in rows[name] if r.get(key) is not None], fmt)

    head = ["contender", "achieved/s", "held", "server CPU µs/op", "p50 µs", "p99 µs",
            "p99.9 µs", "lines lost / produced (of them dropped in the server's worker buffers)"]
    table = []
    for name in CONTENDERS:
        lost = "; ".join(f"{r['lost']:,}/{r['produced']:,} ({r.get('worker_dropped', 0):,} in "
                         "the server)" for r in rows[name] if "lost" in r)
        table.append([name, cell(name, "achieved", "{:.0f}"),
                      f"{sum(r['held'] for r in rows[name])}/{len(rows[name])}",
                      cell(name, "server_cpu_us_per_op", "{:.2f}"), cell(name, "p50_us"),
                      cell(name, "p99_us"), cell(name, "p999_us"), lost or "—"])
    cpu = [statistics.median([r["server_cpu_us_per_op"] for r in rows[c]
                              if r["server_cpu_us_per_op"] is not None] or [float("nan")])
           for c in CONTENDERS]
    ok = all(r["held"] for rs in rows.values() for r in rs)
    md, commit = header(
        "the cost of a capture to the server", "capture_cost.py", sys.argv[1:],
        [f"memcached: `{argv}`; load: open loop {args.rate:.0f}/s, 4 connections, 90 % gets, "
         f"zipf 0.99 over 50,000 keys, {args.duration:g} s after 1 s warm-up; {args.rounds} "
         "rounds interleaved" + ("; server on CPU 0, client and capture on CPU 1"
                                 if args.pin else "")])
    lost = {c: statistics.median([r["lost"] / max(1, r["produced"]) for r in rows[c]])
            for c in CONTENDERS[1:]}
    md += ["Median over rounds (min–max); latency corrected:", "", *markdown_table(head, table),
           "", "Server CPU per request watched / unwatched: "
           f"{cpu[1] / cpu[0]:.2f}× (python reader), {cpu[2] / cpu[0]:.2f}× (rust reader).",
           "Lines lost (median share of those produced): "
           f"{lost[CONTENDERS[1]]:.1%} (python reader), {lost[CONTENDERS[2]]:.1%} (rust reader).",
           f"All runs held their rate: {'yes' if ok else 'NO'}."]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("capture-cost", date.today().isoformat(), text,
                            {"args": vars(args), "rows": rows, "commit": commit})
        print(f"recorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
