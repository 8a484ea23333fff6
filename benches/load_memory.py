"""``cachelab load``'s peak memory as a run's intervals grow, beside memtier_benchmark's.

    python benches/load_memory.py [--seconds 20] [--rate 2000] [--runs 3]
                                  [--memtier PATH] [--record]

One private memcached (``-t 1``, a free loopback port, stopped by PID). Each run is a process:
``python -m cachelab load --server ADDR --rate R --connections 4 --duration S --warmup 0
--interval I`` at ``I`` = 1 s and 0.01 s (S and 100·S intervals), and memtier_benchmark at the
same rate over the same seconds (``--rate-limiting``, 4 connections; skipped without it). The
peak resident memory of each is its ``ru_maxrss`` from ``wait4``; the figure to read is the
growth per interval, (many − few) / (intervals − intervals), which a run keeps to its end.

Goal: a run's memory grows by at most 20 KB per interval (each interval's two histograms kept
packed, not 0.5 MB whole), so an hour at 1 s intervals stays within ~70 MB of a short run;
and the short run's peak beside memtier's, as a ratio. ``--record`` writes
``benches/runs/<date>-load-memory.md`` and the JSON. Exit 0 when the goal is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cachelab import _core
from cachelab.servers import PrivateMemcached
from records import header, markdown_table, memtier_argv, tool_version, write_record

KEYS, SIZE, CONNS = 1000, 100, 4
#: The most a run's memory may grow per interval, KB.
GOAL_KB = 20.0


def peak_mb(argv: list[str]) -> float:
    """Runs ``argv`` to its end; its peak resident memory, MB."""
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{argv[0]} exited {child.returncode}: "
                               f"{err.read().decode(errors='replace')[-400:]}")
    return usage.ru_maxrss / 1024


def cachelab(address: str, seconds: int, rate: int, interval: float, out: Path) -> float:
    return peak_mb([sys.executable, "-m", "cachelab", "load", "--server", address,
                    "--rate", str(rate), "--connections", str(CONNS), "--duration", str(seconds),
                    "--warmup", "0", "--interval", str(interval), "--key-space", str(KEYS),
                    "--value-size", str(SIZE), "--no-plots", "--out", str(out),
                    "--format", "json"])


def memtier(path: str, address: str, seconds: int, rate: int, out: Path) -> float:
    argv = memtier_argv(path, ["-P", "memcache_text"], address, conns=CONNS, pipeline=1,
                        keys=KEYS, seconds=seconds, size=SIZE, json_out=out / "m.json")
    return peak_mb([*argv, f"--rate-limiting={max(1, rate // CONNS)}"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--memtier", default="/work/peers/memtier_benchmark/memtier_benchmark")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    has_memtier = Path(args.memtier).is_file() and os.access(args.memtier, os.X_OK)
    if not has_memtier:
        print(f"memtier skipped: not found at {args.memtier}", file=sys.stderr)
    intervals = {1.0: args.seconds, 0.01: args.seconds * 100}
    peaks: dict[str, list[float]] = {"cachelab --interval 1": [], "cachelab --interval 0.01": [],
                                     "memtier": []}
    with PrivateMemcached(threads=1, memory_mb=64) as mc, tempfile.TemporaryDirectory() as d:
        with _core.Client(mc.address) as c:  # memtier's keys (cachelab prefills its own)
            for i in range(1, KEYS + 1):
                c.set(f"memtier-{i}", b"x" * SIZE)
        version = mc.version
        for run in range(args.runs):
            for interval in intervals:
                peaks[f"cachelab --interval {interval:g}"].append(
                    cachelab(mc.address, args.seconds, args.rate, interval,
                             Path(d) / f"{run}-{interval}"))
            if has_memtier:
                peaks["memtier"].append(memtier(args.memtier, mc.address, args.seconds,
                                                args.rate, Path(d)))
            print(f"run {run + 1}: " + ", ".join(f"{k} {v[-1]:.1f} MB"
                                                 for k, v in peaks.items() if v),
                  file=sys.stderr)
        with _core.Client(mc.address) as c:
            for i in range(1, KEYS + 1):
                c.delete(f"memtier-{i}")
    med = {k: statistics.median(v) for k, v in peaks.items() if v}
    few, many = med["cachelab --interval 1"], med["cachelab --interval 0.01"]
    per_interval_kb = (many - few) * 1024 / (intervals[0.01] - intervals[1.0])
    met = per_interval_kb <= GOAL_KB
    lines, _ = header("load: peak memory by intervals kept", "load_memory.py", sys.argv[1:], [
        f"memcached {version}, `-t 1`; each client a process, {CONNS} connections, "
        f"{args.rate} requests/s for {args.seconds} s, {args.runs} run(s), medians",
        "memtier_benchmark: "
        + (tool_version([args.memtier, "--version"]) if has_memtier else "skipped")])
    rows = [[k, str(intervals[1.0] if k.endswith(" 1") else intervals[0.01])
             if k.startswith("cachelab") else "—", f"{v:.1f}",
             ", ".join(f"{x:.1f}" for x in peaks[k])] for k, v in med.items()]
    lines += markdown_table(["client", "intervals", "peak MB (median)", "runs"], rows)
    lines += ["", f"Growth per interval: {per_interval_kb:.1f} KB (goal ≤ {GOAL_KB:g} KB): "
              f"an hour at 1 s intervals ~{per_interval_kb * 3600 / 1024:.0f} MB above a short run"
              f" — {'met' if met else 'NOT met'}."]
    if "memtier" in med:
        lines.append(f"Ratios: cachelab at {intervals[1.0]} intervals / memtier "
                     f"{few / med['memtier']:.2f}; at {intervals[0.01]} intervals / memtier "
                     f"{many / med['memtier']:.2f}.")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.record:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        md = write_record("load-memory", day, report, {"argv": sys.argv[1:], "peaks": peaks,
                                                        "per_interval_kb": per_interval_kb})
        print(f"recorded {md}", file=sys.stderr)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
