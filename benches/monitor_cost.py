"""What a `cachelab trace capture` through MONITOR costs the Redis it watches: the same
open-loop `cachelab load --server redis://…` with and without a capture running, interleaved
round by round, in one session.

One private redis-server (``PrivateRedis``, 64 MB, allkeys-lru). Each round runs ``--rates``
requests/s (90 % GET, 10 % SET of 32-byte values, zipf 0.99 over 10,000 keys, 4 connections,
no prefill) for ``--duration`` seconds, either alone (*no capture*) or while ``python -m
cachelab trace capture --server redis://…`` (a separate process) reads the server's MONITOR
stream (*MONITOR capture*; the load starts once the capture writes, i.e. once MONITOR
answered). Reported per contender and rate (median over rounds, min–max): the server's CPU
per command and in % of a CPU (INFO ``used_cpu_sys`` + ``used_cpu_user`` deltas around the
load, over its wall time), the load's corrected p50/p99, and for the captured rounds the
commands the capture wrote against those the server counted (``commandstats`` calls of the
commands a capture writes, over the capture).

``--pin`` runs redis-server on CPU 0 and the load and the capture on CPU 1 (``taskset``).
``--record`` writes ``benches/runs/<date>-monitor-cost.md`` and the JSON. Exit 0 when every
run held its rate.
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
from cachelab.resp import RespLogin, read_info
from cachelab.servers import PrivateRedis
from records import header, markdown_table, median_range, write_record

CONTENDERS = ("no capture", "MONITOR capture")


def counters(address: str) -> dict[str, float]:
    """The server's CPU seconds and its GET and SET calls."""
    info = read_info(address, RespLogin(), section="everything")

    def calls(name: str) -> int:
        stat = info.get(f"cmdstat_{name}", "")
        return int(dict(kv.split("=") for kv in stat.split(","))["calls"]) if stat else 0

    return {"cpu_s": float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
            "commands": calls("get") + calls("set")}


def measured(spec: LoadSpec, address: str) -> dict[str, Any]:
    """One load, with the server's CPU around it."""
    before = counters(address)
    started = time.monotonic()
    r: LoadResult = load(spec, server=f"redis://{address}")
    wall = time.monotonic() - started
    after = counters(address)
    pct = (r.totals["corrected"] or r.totals["uncorrected"])["percentiles"]
    ops = max(1.0, after["commands"] - before["commands"])
    cpu = after["cpu_s"] - before["cpu_s"]
    return {"achieved": r.totals["throughput"], "held": bool(r.schedule and r.schedule["held"]),
            "server_cpu_us_per_op": cpu * 1e6 / ops, "server_cpu_pct": 100 * cpu / wall,
            "p50_us": pct["50"] / 1e3, "p99_us": pct["99"] / 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rates", default="5000,15000", help="requests/s, comma-separated")
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    if args.pin:
        os.sched_setaffinity(0, {1})
    env = {**os.environ, "PYTHONPATH": str(Path(cachelab.__file__).resolve().parents[1])}
    rows: dict[str, list[dict[str, Any]]] = {f"{c} @ {r:.0f}/s": [] for r in rates
                                             for c in CONTENDERS}
    load_avg = os.getloadavg()
    with PrivateRedis(memory_mb=64, wrapper=("taskset", "-c", "0") if args.pin else ()) as srv, \
            tempfile.TemporaryDirectory() as tmp:
        address = srv.address
        for rate in rates:
            spec = LoadSpec(connections=4, rate=rate, duration=args.duration, warmup=1.0,
                            interval=1.0, key_space=10_000, key_dist="zipf:0.99",
                            mix={"get": 0.9, "set": 0.1}, value_size="32", seed=1,
                            protocol="resp", prefill=False)
            for r in range(args.rounds):
                for name in CONTENDERS[r % 2:] + CONTENDERS[:r % 2]:
                    key = f"{name} @ {rate:.0f}/s"
                    if name == "no capture":
                        rows[key].append(measured(spec, address))
                        continue
                    out = Path(tmp) / f"r{rate:.0f}-{r}"
                    cmd = [sys.executable, "-m", "cachelab", "trace", "capture", "--server",
                           f"redis://{address}", "--duration", str(args.duration + 60),
                           "--out", str(out), "--format", "json"]
                    if args.pin:
                        cmd = ["taskset", "-c", "1", *cmd]
                    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True, env=env)
                    try:
                        # MONITOR answered once the capture writes (a temporary file in out).
                        deadline = time.monotonic() + 60
                        while not (out.exists() and any(out.iterdir())):
                            if proc.poll() is not None or time.monotonic() > deadline:
                                raise RuntimeError(f"the capture never started: {proc.args}")
                            time.sleep(0.05)
                        row = measured(spec, address)
                        time.sleep(0.5)
                        proc.send_signal(signal.SIGINT)
                        stdout, stderr = proc.communicate(timeout=120)
                    finally:
                        if proc.poll() is None:
                            proc.kill()
                            proc.wait(10)
                    cap = json.loads(stdout)
                    calls = cap["server"]["deltas"].get("calls") or {}
                    row.update(captured=cap["commands"], counted=sum(calls.values()),
                               buffer_peak_mb=cap["buffer_peak_bytes"] / 2**20)
                    rows[key].append(row)
        argv = " ".join(getattr(srv, "argv", None) or ["redis-server"])

    def cell(key: str, field: str, fmt: str = "{:.1f}") -> str:
        return median_range([r[field] for r in rows[key] if r.get(field) is not None], fmt)

    head = ["contender", "achieved/s", "held", "server CPU µs/op", "server CPU %", "p50 µs",
            "p99 µs", "captured / counted commands"]
    table = []
    for key, rs in rows.items():
        caught = "; ".join(f"{r['captured']:,}/{r['counted']:,}" for r in rs if "captured" in r)
        table.append([key, cell(key, "achieved", "{:.0f}"),
                      f"{sum(r['held'] for r in rs)}/{len(rs)}",
                      cell(key, "server_cpu_us_per_op", "{:.2f}"),
                      cell(key, "server_cpu_pct"), cell(key, "p50_us"), cell(key, "p99_us"),
                      caught or "—"])

    def median(key: str, field: str) -> float:
        return statistics.median([r[field] for r in rows[key]])

    lines = []
    for rate in rates:
        a, b = f"no capture @ {rate:.0f}/s", f"MONITOR capture @ {rate:.0f}/s"
        lines.append(f"At {rate:.0f}/s: server CPU {median(a, 'server_cpu_pct'):.1f} % -> "
                     f"{median(b, 'server_cpu_pct'):.1f} % of a CPU "
                     f"({median(b, 'server_cpu_us_per_op') / median(a, 'server_cpu_us_per_op'):.2f}"
                     f"× per command); p50 {median(a, 'p50_us'):.0f} -> "
                     f"{median(b, 'p50_us'):.0f} µs, p99 {median(a, 'p99_us'):.0f} -> "
                     f"{median(b, 'p99_us'):.0f} µs.")
    ok = all(r["held"] for rs in rows.values() for r in rs)
    md, commit = header(
        "the cost of a MONITOR capture to Redis", "monitor_cost.py", sys.argv[1:],
        [f"redis-server: `{argv}`; load: `cachelab load --server redis://…` open loop at "
         f"{args.rates}/s, 4 connections, 90 % GET, 10 % SET of 32 B, zipf 0.99 over 10,000 "
         f"keys, {args.duration:g} s after 1 s warm-up; {args.rounds} rounds interleaved"
         + ("; server on CPU 0, load and capture on CPU 1" if args.pin else ""),
         f"load average at the start: {load_avg[0]:.2f} {load_avg[1]:.2f} {load_avg[2]:.2f}"])
    md += ["Median over rounds (min–max); latency corrected:", "", *markdown_table(head, table),
           "", *lines, f"All runs held their rate: {'yes' if ok else 'NO'}."]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("monitor-cost", date.today().isoformat(), text,
                            {"args": vars(args), "rows": rows, "commit": commit})
        print(f"recorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
