"""Memory and speed of ``cachelab simulate`` on a big request trace read in parts.

1. ``cachelab trace synth`` writes a trace of ``--requests`` requests (Parquet) under
   ``--dir`` (never the repository); its wall time, CPU time and peak RSS are recorded.
   It makes and writes the requests in parts (``--part``), so its memory does not grow with
   the number of requests either: with ``--repeat 1`` (the default) that trace is the long
   trace itself, 50 M requests generated as one.
2. With ``--repeat K`` > 1 the synthetic requests are written K times end to end into a
   second trace, each copy shifted by the synthetic duration in time and by ``--requests``
   in id, streamed row group by row group (same catalog): a K-times longer trace in time
   order (how runs before streaming synth made long traces). The key stream repeats, so hit
   ratios differ from one synthetic trace of that length; what is measured is memory and
   speed.
3. A child process reads the long trace in parts without simulating
   (``cachelab.traces.stream``): the reading cost alone.
4. For each strategy, a child process runs ``cachelab simulate TRACE --strategies S --draws 1
   --threads 1 --no-plots`` (reading in parts, the default). Recorded: its CPU time (user +
   system, of a fresh wrapper's children) and peak RSS; **touches per CPU-second** end to end
   (every touch of the trace, training half included, over the child's whole CPU time,
   reading and start-up included) and for the simulation alone (the same touches over the CPU
   time the simulating thread spent in the Rust core, which ``simulate.json`` reports as
   ``trace.simulation_cpu_s``: from ``/proc/thread-self/schedstat``).
5. The same for the first strategy on a shorter synthetic trace (``--small N`` requests, its
   synth measured too; with ``--repeat`` > 1 the tiled trace's base) and, with
   ``--in-memory``, whole in memory (``simulate --in-memory``) on it: peak RSS by trace
   length.

Goal (issue 20): peak RSS that does not grow with the number of requests, and at least 20 M
item touches per CPU-second per strategy for the simulation. The machine is shared: the load
average is recorded; one round per run (a run of the long trace takes minutes).

``--record`` writes ``benches/runs/<date>-request-stream-N.md`` and the JSON beside it.
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


def measured(argv: list[str], python: Path = ROOT / "python") -> dict[str, Any]:
    """Runs ``argv`` under a fresh wrapper process, whose RUSAGE_CHILDREN then holds that run
    alone: wall and CPU seconds, peak RSS (MiB) and stdout; ``python``: the PYTHONPATH (the
    package measured)."""
    wrapper = [sys.executable, "-c",
               "import os, resource, subprocess, sys, json\n"
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
               "sys.stderr.write(p.stderr)\n"
               "print(json.dumps({'rc': p.returncode, 'cpu_s': r.ru_utime + r.ru_stime,"
               " 'rss_mib': r.ru_maxrss / 1024, 'out': p.stdout}))\n", *argv]
    started = time.perf_counter()
    p = subprocess.run(wrapper, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(python)})
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


def synth(path: Path, requests: int, part: int | None) -> dict[str, Any]:
    """``trace synth`` of ``requests`` requests to ``path``, measured: wall, CPU, peak RSS,
    and its summary's counts."""
    extra = ["--part", str(part)] if part else []
    r = measured([sys.executable, "-m", "cachelab", "trace", "synth", str(path), "--requests",
                  str(requests), "--format", "json", *extra])
    summary = json.loads(r.pop("out"))
    r.update(requests=summary["requests"], touches=summary["touches"])
    return r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=50_000_000, help="requests synthesized")
    p.add_argument("--repeat", type=int, default=1,
                   help="copies in the long trace (1: the synthetic trace is the long trace)")
    p.add_argument("--part", type=int, default=None,
                   help="trace synth --part (default: synth's own, 65,536)")
    p.add_argument("--small", type=int, default=0,
                   help="also synthesize a trace of this many requests and simulate the first "
                   "strategy on it (peak RSS by trace length; with --repeat > 1, the base)")
    p.add_argument("--strategies", default="none,lru:2000,lru:64MB,fixed:2000,"
                   "fixed:2000+prefetch-children", help="strategies, one run each")
    p.add_argument("--dir", type=Path, default=Path("/tmp/cachelab-request-stream"),
                   help="where the traces go (not the repository)")
    p.add_argument("--in-memory", action="store_true",
                   help="also simulate the shorter synthetic trace whole in memory")
    p.add_argument("--note", default="", help="a remark to keep with the record")
    p.add_argument("--record", action="store_true", help="write benches/runs/…-request-stream-N")
    a = p.parse_args()
    if ROOT in a.dir.resolve().parents:
        print("--dir must be outside the repository", file=sys.stderr)
        return 2
    if a.repeat < 1 or (a.repeat > 1 and a.small):
        print("--repeat must be >= 1; --small goes with --repeat 1 (with --repeat K the base "
              "is the short trace)", file=sys.stderr)
        return 2
    a.dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    base = a.dir / f"synth-{a.requests}.parquet"
    result: dict[str, Any] = {"requests": a.requests, "repeat": a.repeat,
                              "load_before": load_before}
    counts = a.dir / f"synth-{a.requests}.json"
    if base.exists() and counts.exists():  # synthesized before, with this size
        result["synth"] = {**json.loads(counts.read_text()), "reused": True}
    else:
        result["synth"] = synth(base, a.requests, a.part)
        counts.write_text(json.dumps(result["synth"]))
    print(f"synth: {result['synth']}", file=sys.stderr)
    if a.repeat == 1:
        big, short = base, None
        n, touches = result["synth"]["requests"], result["synth"]["touches"]
    else:
        big, short = a.dir / f"long-{a.requests}x{a.repeat}.parquet", base
        tiled = a.dir / f"long-{a.requests}x{a.repeat}.json"
        if big.exists() and tiled.exists():  # tiled before, with these sizes
            result["tile"] = json.loads(tiled.read_text())
        else:
            started = time.perf_counter()
            n, touches = tile(base, big, a.repeat)
            result["tile"] = {"wall_s": time.perf_counter() - started, "requests": n,
                              "touches": touches}
            tiled.write_text(json.dumps(result["tile"]))
        n, touches = result["tile"]["requests"], result["tile"]["touches"]
        print(f"tile: {result['tile']}", file=sys.stderr)
    if a.small:
        short = a.dir / f"synth-{a.small}.parquet"
        result["synth_small"] = synth(short, a.small, a.part)
        print(f"synth small: {result['synth_small']}", file=sys.stderr)
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
    small: dict[str, Any] = {}
    if short is not None:
        small["parts"] = simulate(short, first, a.dir / "out", [])
        if a.in_memory:
            small["in_memory"] = simulate(short, first, a.dir / "out", ["--in-memory"])
        result["synthetic_trace"] = small
    result["load_after"] = os.getloadavg()
    made = (f"one `trace synth` trace of {a.requests:,} requests" if a.repeat == 1 else
            f"{a.repeat} copies of a {a.requests:,}-request `trace synth` trace")
    lines, commit = header("Request-level simulation of a long trace, read in parts",
                           "request_stream.py", sys.argv[1:], [
                               f"long trace: {n:,} requests, {touches:,} touches ({made}); "
                               f"load average before {_load(load_before)}",
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
    synths = [(result["synth"], "long" if a.repeat == 1 else "base")]
    if "synth_small" in result:
        synths.insert(0, (result["synth_small"], "short"))
    lines += ["", "`trace synth` (writing Parquet in parts):", ""]
    lines += markdown_table(["requests", "touches", "wall s", "CPU s", "peak RSS MiB",
                             "requests/CPU-s"], [
        [f"{sy['requests']:,}", f"{sy['touches']:,}", _num(sy, "wall_s"), _num(sy, "cpu_s"),
         _num(sy, "rss_mib", 0),
         f"{sy['requests'] / sy['cpu_s'] / 1e6:.2f} M" if "cpu_s" in sy else "-"]
        for sy, _ in synths])
    if result["synth"].get("reused"):
        lines += ["", "(The long trace's synth was measured by an earlier run and reused.)"]
    if short is not None:
        m = result.get("synth_small", result["synth"])["requests"]
        lines += ["", f"Peak RSS of `simulate` by trace length, `{first}`:", ""]
        rss_rows = [[f"{m:,}", "in parts", f"{small['parts']['rss_mib']:.0f}"],
                    [f"{n:,}", "in parts", f"{runs[0]['rss_mib']:.0f}"]]
        if a.in_memory:
            rss_rows.insert(1, [f"{m:,}", "whole (--in-memory)",
                                f"{small['in_memory']['rss_mib']:.0f}"])
        lines += markdown_table(["requests", "read", "peak RSS MiB"], rss_rows)
    lines += ["", f"Load average (1, 5, 15 min) before {_load(load_before)}, at the end "
              f"{_load(result['load_after'])}."]
    if a.note:
        lines += ["", "## Notes", "", a.note]
    text = "\n".join(lines)
    print(text)
    if a.record:
        md = write_record("request-stream", time.strftime("%Y-%m-%d", time.gmtime()), text, result)
        print(f"wrote {md}", file=sys.stderr)
    return 0 if all(r["sim_touches_per_cpu_s"] >= GOAL for r in runs) else 1


def _load(avg: tuple[float, ...] | list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in avg)


def _num(d: dict[str, Any], key: str, digits: int = 1) -> str:
    return f"{d[key]:.{digits}f}" if key in d else "-"


if __name__ == "__main__":
    sys.exit(main())
