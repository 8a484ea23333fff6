"""Memory and speed of ``cachelab simulate`` on a big request trace read in parts.

1. ``cachelab trace synth`` writes a trace of ``--requests`` requests (Parquet) under
   ``--dir`` (never the repository); its wall time, CPU time and peak RSS are recorded.
   (Generation holds the whole trace in memory: about 0.55 GB per million requests.)
2. With ``--repeat K`` the synthetic requests are written K times end to end into a second
   trace, each copy shifted by the synthetic duration in time and by ``--requests`` in id,
   streamed row group by row group (same catalog): a K-times longer trace in time order.
   The key stream repeats, so hit ratios differ from one synthetic trace of that length; what
   is measured here is memory and speed.
3. A child process reads the big trace in parts without simulating
   (``cachelab.traces.stream``): the reading cost alone.
4. For each strategy, a child process runs ``cachelab simulate TRACE --strategies S --draws 1
   --threads 1 --no-plots`` (reading in parts, the default). Recorded: its CPU time (user +
   system, of a fresh wrapper's children) and peak RSS; **touches per CPU-second** end to end
   (every touch of the trace, training half included, over the child's whole CPU time,
   reading and start-up included) and for the simulation alone (the same touches over the CPU
   time the simulating thread spent in the Rust core, which ``simulate.json`` reports as
   ``trace.simulation_cpu_s``: from ``/proc/thread-self/schedstat``).
5. The same for the first strategy on the synthetic trace itself and, with ``--in-memory``,
   whole in memory (``simulate --in-memory``) on it: peak RSS by trace length.

Goal (issue 20): peak RSS that does not grow with the number of requests, and at least 20 M
item touches per CPU-second per strategy for the simulation. The machine is shared: the load
average is recorded; one round per run (a run of the long trace takes minutes).

``--record`` writes ``benches/runs/<date>-request-sim-N.md`` and the JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from records import header, markdown_table, write_record

ROOT = Path(__file__).resolve().parent.parent
GOAL = 20e6
READ_ONLY = (
    "import sys\nfrom cachelab.traces.stream import open_request_parts\n"
    "n = 0\nfor p in open_request_parts(sys.argv[1], 'parquet').parts():\n"
    "    n += len(p.touch_items)\n"
    "print(n)\n"
)


def measured(argv: list[str]) -> dict[str, Any]:
    """Runs ``argv`` under a fresh wrapper process, whose RUSAGE_CHILDREN then holds that run
    alone: wall and CPU seconds, peak RSS (MiB) and stdout."""
    wrapper = [sys.executable, "-c",
               "import os, resource, subprocess, sys, json\n"
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
               "sys.stderr.write(p.stderr)\n"
               "print(json.dumps({'rc': p.returncode, 'cpu_s': r.ru_utime + r.ru_stime,"
               " 'rss_mib': r.ru_maxrss / 1024, 'out': p.stdout}))\n", *argv]
    started = time.perf_counter()
    p = subprocess.run(wrapper, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    wall = time.perf_counter() - started
    if p.returncode:
        raise RuntimeError(f"wrapper failed: {p.stderr[-500:]}")
    r = json.loads(p.stdout)
    if r["rc"]:
        raise RuntimeError(f"{' '.join(argv)} failed ({r['rc']}): {p.stderr.strip()[-500:]}")
    return {"wall_s": wall, "cpu_s": r["cpu_s"], "rss_mib": r["rss_mib"], "out": r["out"]}


def tile(base: Path, target: Path, repeat: int) -> tuple[int, int]:
    """Writes ``repeat`` copies of ``base``'s requests end to end into ``target`` (same
    catalog); returns (requests, touches)."""
    target.mkdir(parents=True, exist_ok=True)
    (target / "catalog.parquet").write_bytes((base / "catalog.parquet").read_bytes())
    src = pq.ParquetFile(base / "requests.parquet")
    meta = src.schema_arrow.metadata or {}
    head = json.loads(meta[b"cachelab.request-trace"])
    duration = float(head["generator"]["params"]["duration_s"]) if head.get("generator") else 0
    n = src.metadata.num_rows
    requests = touches = 0
    with pq.ParquetWriter(target / "requests.parquet", src.schema_arrow) as w:
        for k in range(repeat):
            for batch in src.iter_batches(batch_size=1 << 16):
                t = pa.Table.from_batches([batch])
                t = t.set_column(0, "id", pc.add(t.column("id"), k * n))
                t = t.set_column(1, "time", pc.add(t.column("time"),
                                                           float(k) * (duration + 1.0)))
                w.write_table(t.replace_schema_metadata(meta), row_group_size=1 << 16)
                requests += t.num_rows
                touches += int(pc.sum(pc.list_value_length(
                    t.column("items"))).as_py() or 0)
    return requests, touches


def simulate(trace: Path, strategy: str, out: Path, extra: list[str]) -> dict[str, Any]:
    r = measured([sys.executable, "-m", "cachelab", "simulate", str(trace), "--strategies",
                  strategy, "--draws", "1", "--threads", "1", "--no-plots", "--format", "json",
                  "--out", str(out), *extra])
    d = json.loads(r["out"])
    s = d["strategies"][0]
    r.update(hit_ratio=s["hit_ratio"], p90=s["percentiles"][2]["median"],
             simulation_cpu_s=d["trace"].get("simulation_cpu_s", {}).get(s["strategy"]))
    del r["out"]
    return r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=10_000_000, help="requests synthesized")
    p.add_argument("--repeat", type=int, default=5, help="copies in the long trace")
    p.add_argument("--strategies", default="none,lru:2000,lru:64MB,fixed:2000,"
                   "fixed:2000+prefetch-children", help="strategies, one run each")
    p.add_argument("--dir", type=Path, default=Path("/tmp/cachelab-request-stream"),
                   help="where the traces go (not the repository)")
    p.add_argument("--in-memory", action="store_true",
                   help="also simulate the synthetic trace whole in memory")
    p.add_argument("--note", default="", help="a remark to keep with the record")
    p.add_argument("--record", action="store_true", help="write benches/runs/…-request-sim-N")
    a = p.parse_args()
    if ROOT in a.dir.resolve().parents:
        print("--dir must be outside the repository", file=sys.stderr)
        return 2
    a.dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    base, big = a.dir / "synth.parquet", a.dir / "long.parquet"
    result: dict[str, Any] = {"requests": a.requests, "repeat": a.repeat,
                              "load_1m_before": load_before}
    if not base.exists():
        result["synth"] = measured([sys.executable, "-m", "cachelab", "trace", "synth",
                                    str(base), "--requests", str(a.requests)])
        del result["synth"]["out"]
        print(f"synth: {result['synth']}", file=sys.stderr)
    counts = a.dir / f"long-{a.requests}x{a.repeat}.json"
    if counts.exists():  # tiled before, with these sizes
        result["tile"] = json.loads(counts.read_text())
    else:
        started = time.perf_counter()
        n, touches = tile(base, big, a.repeat)
        result["tile"] = {"wall_s": time.perf_counter() - started, "requests": n,
                          "touches": touches}
        counts.write_text(json.dumps(result["tile"]))
    n, touches = result["tile"]["requests"], result["tile"]["touches"]
    print(f"tile: {result['tile']}", file=sys.stderr)
    read = measured([sys.executable, "-c", READ_ONLY, str(big)])
    del read["out"]
    result["read"] = read
    print(f"read: {read}", file=sys.stderr)
    runs = []
    for s in a.strategies.split(","):
        r = simulate(big, s, a.dir / "out", [])
        r["strategy"] = s
        r["touches_per_cpu_s"] = touches / r["cpu_s"]
        r["sim_touches_per_cpu_s"] = touches / r["simulation_cpu_s"]
        runs.append(r)
        print(f"{s}: {r}", file=sys.stderr)
    result["runs"] = runs
    first = a.strategies.split(",")[0]
    small = {"parts": simulate(base, first, a.dir / "out", [])}
    if a.in_memory:
        small["in_memory"] = simulate(base, first, a.dir / "out", ["--in-memory"])
    result["synthetic_trace"] = small
    result["load_1m_after"] = os.getloadavg()[0]
    lines, commit = header("Request-level simulation of a long trace, read in parts",
                           "request_stream.py", sys.argv[1:], [
                               f"long trace: {n:,} requests, {touches:,} touches "
                               f"({a.repeat} copies of a {a.requests:,}-request `trace synth` "
                               f"trace); 1-minute load {load_before:.2f} before",
                               f"read-only pass: {read['cpu_s']:.1f} CPU-s, peak RSS "
                               f"{read['rss_mib']:.0f} MiB"])
    result["commit"] = commit
    rows = [[f"`{r['strategy']}`", f"{r['cpu_s']:.1f}", f"{r['wall_s']:.1f}",
             f"{r['rss_mib']:.0f}", f"{r['touches_per_cpu_s'] / 1e6:.1f} M",
             f"{r['sim_touches_per_cpu_s'] / 1e6:.1f} M",
             "PASS" if r["sim_touches_per_cpu_s"] >= GOAL else "FAIL",
             f"{r['hit_ratio']:.3f}", f"{r['p90']:.3f}"] for r in runs]
    lines += markdown_table(["strategy", "CPU s", "wall s", "peak RSS MiB",
                             "touches/CPU-s end to end", "touches/CPU-s simulation",
                             "goal 20 M", "hit", "p90"], rows)
    lines += ["", f"Peak RSS by trace length, `{first}`:", ""]
    rss_rows = [[f"{a.requests:,}", "in parts", f"{small['parts']['rss_mib']:.0f}"],
                [f"{n:,}", "in parts", f"{runs[0]['rss_mib']:.0f}"]]
    if a.in_memory:
        rss_rows.insert(1, [f"{a.requests:,}", "whole (--in-memory)",
                            f"{small['in_memory']['rss_mib']:.0f}"])
    lines += markdown_table(["requests", "read", "peak RSS MiB"], rss_rows)
    if "synth" in result:
        sy = result["synth"]
        lines += ["", f"`trace synth` of {a.requests:,} requests: {sy['wall_s']:.0f} s wall, "
                  f"{sy['cpu_s']:.0f} CPU-s, peak RSS {sy['rss_mib']:.0f} MiB."]
    lines += ["", f"Load (1-minute average) at the end: {result['load_1m_after']:.2f}."]
    if a.note:
        lines += ["", "## Notes", "", a.note]
    text = "\n".join(lines)
    print(text)
    if a.record:
        md = write_record("request-sim", time.strftime("%Y-%m-%d", time.gmtime()), text, result)
        print(f"wrote {md}", file=sys.stderr)
    return 0 if all(r["sim_touches_per_cpu_s"] >= GOAL for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
