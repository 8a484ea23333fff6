"""``cachelab load`` side by side with memtier_benchmark, on the same memcached.

    python benches/load_vs_memtier.py --memtier /work/peers/memtier_benchmark/memtier_benchmark

memcached (``-t 1``) is pinned to core 1 and each client, in turn, to core 0 (``taskset``).
Both clients send 100-byte gets over the same prefilled key space (10,000 keys, uniform).
Scenarios (each client runs ``--seconds``):

1. ``server-bound``: 1 thread, 8 connections, pipeline 16 — memcached's core is the bottleneck;
   compare ops/s.
2. ``pipeline-1``: 1 thread, 4 connections, one request outstanding each; compare client CPU
   per op.
3. ``open-loop``: 20,000 requests/s over 4 connections (memtier: ``--rate-limiting 5000`` per
   connection); compare p50 (memtier measures from the actual send; cachelab reports both).

Client CPU is the child process's user + system time from ``wait4`` (so cachelab's includes
starting Python, prefilling its keys and deleting them); cachelab's engine threads alone are
reported too. Prints a markdown report (and writes it with ``--out``); prints "skipped" and
exits 0 when memtier_benchmark is not found.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cachelab import _core
from cachelab.servers import PrivateMemcached

KEYS, SIZE = 10_000, 100


def run_child(argv: list[str]) -> tuple[float, float, str]:
    """Runs ``argv`` pinned to core 0; returns (wall s, CPU s, stdout)."""
    with tempfile.TemporaryFile() as out:
        started = time.monotonic()
        p = subprocess.Popen(["taskset", "-c", "0", *argv], stdout=out,
                             stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        text = out.read().decode()
    if p.returncode not in (0, 1):
        raise RuntimeError(f"{argv[0]} exited {p.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, text


def memtier(path: str, address: str, seconds: int, conns: int, pipeline: int,
            rate_per_conn: int | None) -> dict:
    host, port = address.rsplit(":", 1)
    with tempfile.TemporaryDirectory() as d:
        js = Path(d) / "m.json"
        argv = [path, "-P", "memcache_text", "-s", host, "-p", port, "-t", "1", "-c", str(conns),
                f"--pipeline={pipeline}", "--ratio=0:1", "--key-prefix=memtier-",
                "--key-minimum=1", f"--key-maximum={KEYS}", "--key-pattern=R:R",
                f"--test-time={seconds}", "-d", str(SIZE), "--hide-histogram",
                f"--json-out-file={js}"]
        if rate_per_conn:
            argv.append(f"--rate-limiting={rate_per_conn}")
        wall, cpu, _ = run_child(argv)
        t = json.loads(js.read_text())["ALL STATS"]["Totals"]
    ops = t["Count"]
    return {"ops_s": t["Ops/sec"], "ops": ops, "cpu_s": cpu, "cpu_us_op": cpu * 1e6 / ops,
            "hits_s": t["Hits/sec"], "p50_us": t["Percentile Latencies"]["p50.00"] * 1000,
            "p99_us": t["Percentile Latencies"]["p99.00"] * 1000, "wall_s": wall}


def cachelab(address: str, seconds: int, conns: int, pipeline: int, rate: int | None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        argv = [sys.executable, "-m", "cachelab", "load", "--server", address, "--threads", "1",
                "--connections", str(conns), "--pipeline", str(pipeline), "--mix", "get=1",
                "--key-space", str(KEYS), "--value-size", str(SIZE), "--warmup", "0",
                "--duration", str(seconds), "--no-plots", "--out", d, "--format", "json"]
        if rate:
            argv += ["--rate", str(rate), "--max-outstanding", "100"]
        wall, cpu, text = run_child(argv)
    r = json.loads(text)
    a = r["all"]
    best = a["corrected"] or a["uncorrected"]
    return {"ops_s": a["throughput"], "ops": a["replies"], "cpu_s": cpu,
            "cpu_us_op": cpu * 1e6 / a["replies"], "engine_cpu_us_op": r["client"]["cpu_us_per_op"],
            "hits": a["hits"], "misses": a["misses"],
            "p50_us": best["percentiles"]["50"] / 1000,
            "p50_uncorrected_us": a["uncorrected"]["percentiles"]["50"] / 1000,
            "p99_us": best["percentiles"]["99"] / 1000, "wall_s": wall,
            "errors": sum(a["errors"].values())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memtier", default="/work/peers/memtier_benchmark/memtier_benchmark")
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--out", type=Path, help="also write the markdown report here")
    args = ap.parse_args()
    if not (Path(args.memtier).is_file() and os.access(args.memtier, os.X_OK)):
        print(f"skipped: memtier_benchmark not found at {args.memtier}")
        return 0
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        print("skipped: needs taskset and two cores")
        return 0
    scenarios = [("server-bound", 8, 16, None), ("pipeline-1", 4, 1, None),
                 ("open-loop", 4, 1, 20_000)]
    rows = []
    load_before = os.getloadavg()
    with PrivateMemcached(threads=1, memory_mb=64, cpus="1") as mc:
        with _core.Client(mc.address) as c:
            for i in range(1, KEYS + 1):
                c.set(f"memtier-{i}", b"x" * SIZE)
        version = mc.version
        for name, conns, pipeline, rate in scenarios:
            m = memtier(args.memtier, mc.address, args.seconds, conns, pipeline,
                        rate // conns if rate else None)
            c = cachelab(mc.address, args.seconds, conns, pipeline, rate)
            rows.append((name, conns, pipeline, rate, m, c))
        with _core.Client(mc.address) as cl:
            for i in range(1, KEYS + 1):
                cl.delete(f"memtier-{i}")
    load_after = os.getloadavg()
    mt_version = subprocess.run([args.memtier, "--version"], capture_output=True,
                                text=True).stdout.splitlines()[0]
    lines = [
        "# cachelab load vs memtier_benchmark",
        "",
        f"- command: `python benches/load_vs_memtier.py --memtier {args.memtier} "
        f"--seconds {args.seconds}`",
        f"- memcached {version}, `-t 1`, pinned to core 1; each client pinned to core 0",
        f"- memtier_benchmark: {mt_version}",
        f"- cachelab commit: {_commit()}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {_cpu()}, "
        f"kernel {platform.release()}",
        f"- load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        "(the machine is shared with other builds)",
        f"- workload: 100% get, {SIZE} B values, {KEYS} keys uniform, prefilled; "
        f"{args.seconds} s per client per scenario",
        "",
        "| scenario | conns | pipeline | rate | tool | ops/s | client CPU µs/op "
        "| engine CPU µs/op | p50 µs | p50 uncorrected µs | p99 µs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, conns, pipeline, rate, m, c in rows:
        r = f"{rate}/s" if rate else "closed"
        lines.append(f"| {name} | {conns} | {pipeline} | {r} | memtier | {m['ops_s']:.0f} | "
                     f"{m['cpu_us_op']:.2f} | — | {m['p50_us']:.1f} | (same) | {m['p99_us']:.1f} |")
        lines.append(f"| {name} | {conns} | {pipeline} | {r} | cachelab | {c['ops_s']:.0f} | "
                     f"{c['cpu_us_op']:.2f} | {c['engine_cpu_us_op']:.2f} | {c['p50_us']:.1f} | "
                     f"{c['p50_uncorrected_us']:.1f} | {c['p99_us']:.1f} |")
    lines += ["", "Ratios (cachelab / memtier):", ""]
    for name, _, _, rate, m, c in rows:
        parts = [f"ops/s {c['ops_s'] / m['ops_s']:.2f}",
                 f"client CPU/op {c['cpu_us_op'] / m['cpu_us_op']:.2f} "
                 f"(engine threads only {c['engine_cpu_us_op'] / m['cpu_us_op']:.2f})"]
        if rate:
            parts.append(f"p50 corrected {c['p50_us'] / m['p50_us']:.2f}, "
                         f"uncorrected {c['p50_uncorrected_us'] / m['p50_us']:.2f}")
        lines.append(f"- {name}: " + "; ".join(parts))
    errors = sum(c["errors"] for *_, c in rows)
    lines += ["", f"cachelab errors: {errors}; cachelab misses: "
              f"{sum(c['misses'] for *_, c in rows)}"]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    return 0


def _commit() -> str:
    from cachelab import environment

    return environment.commit()


def _cpu() -> str:
    from cachelab import environment

    return str(environment.facts().get("cpu", "unknown"))


if __name__ == "__main__":
    sys.exit(main())
