"""How fast does cachelab simulate a flat trace, next to libCacheSim and a naive Python LRU?

Side by side in one run, on one file, end to end (read the file, then simulate):

* *cachelab* — ``cachelab.simulate.flat.simulate_flat(path, policies=["lru"], sizes=[C],
  unit="objects", threads=1)`` in a fresh Python process: the Rust reader streaming the file
  and numbering keys densely as it goes (8 bytes kept per request), then the LRU run, plus the
  interpreter's start-up and import;
* *libCacheSim* — its ``cachesim PATH oracleGeneral lru C --ignore-obj-size 1`` (only with
  ``--libcachesim PATH``; "skipped" otherwise), the C simulator this project checks its numbers
  against;
* *naive Python* — an ``OrderedDict`` LRU fed by ``struct.iter_unpack`` over the same file, on
  a prefix of ``--naive-requests`` requests (the whole trace would take minutes), in a fresh
  process.

Each contender runs in its own child process; CPU time (user + system) and peak RSS come from
``os.wait4`` on that child, so one contender's memory never shows up in another's. The headline
is **requests per CPU-second** and its ratios. The goal, from the issue: cachelab at least 4x
libCacheSim. Both simulators' miss ratios are printed too; they must agree exactly (LRU is
golden-tested against libCacheSim), or the run fails.

Two traces, both written to ``/tmp`` (never the repository) and reused when they exist:

* *block* (``--block-trace FILE``): a real oracleGeneral trace tiled ``--block-times`` times
  (default 112), each copy's times shifted past the previous copy's and its next-access
  fields renumbered, so the file stays a plausible trace. The issue's case is libCacheSim's
  CloudPhysics block trace (``cloudPhysicsIO.oracleGeneral.bin``, 113,872 requests over
  48,974 block ids) x 112 = 12,753,664 requests, LRU at 1 % of the objects (489): a small
  cache over ids in the tens of millions, where start-up and per-request overhead show;
* *Zipf* (the default): a seeded Zipf file, ``--requests`` requests over ``--objects``
  objects with popularity exponent ``--alpha``, ids a seeded permutation of ranks, one fixed
  size per object (log-uniform 64 B to 64 KiB), time = request index / 1000,
  next_access_vtime -1.

The cache holds ``--capacity-fraction`` of the objects (default 0.1 for Zipf, 0.01 for block).

Memory goal: peak RSS near the trace (24 B per request, the file's size) plus about 64 B per
distinct object; the record shows the budget and the measured peak.

``--repeat N`` runs cachelab and libCacheSim N times each, alternating, and reports each one's
run with the median CPU time (every run's CPU seconds are kept in the JSON and listed in the
record); the machine is shared, so one run can be far off.

``--record`` writes ``benches/runs/<date>-flat-sim.md`` (``flat-sim-block`` for the block trace;
``-2``, ``-3`` … if taken) and the JSON
beside it; ``--json PATH`` saves the raw numbers anywhere. Exit status 0 when the goal is met,
1 when it is missed or the miss ratios disagree, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cachelab import environment
from records import markdown_table, tool_version, write_record

RECORD = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
GOAL_VS_LIBCACHESIM = 4.0

CACHELAB_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from cachelab.simulate.flat import simulate_flat
t1 = time.perf_counter()
sim = simulate_flat(sys.argv[1], policies=["lru"], sizes=[int(sys.argv[2])], threads=1)
t2 = time.perf_counter()
r = sim.results[0]
print(json.dumps({"requests": r.requests, "misses": r.misses, "miss_ratio": r.miss_ratio,
                  "import_s": t1 - t0, "read_and_simulate_s": t2 - t1}))
"""

NAIVE_CHILD = r"""
import json, struct, sys, time
from collections import OrderedDict
path, capacity, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
with open(path, "rb") as f:
    data = f.read(24 * limit)
cache = OrderedDict()
requests = misses = 0
for _t, key, _size, _next in struct.iter_unpack("<IQIq", data):
    requests += 1
    if key in cache:
        cache.move_to_end(key)
    else:
        misses += 1
        if len(cache) >= capacity:
            cache.popitem(last=False)
        cache[key] = True
print(json.dumps({"requests": requests, "misses": misses, "miss_ratio": misses / requests,
                  "wall_inside_s": time.perf_counter() - t0}))
"""


def trace_path(a: argparse.Namespace) -> Path:
    if a.trace:
        return Path(a.trace)
    if a.block_trace:
        stem = Path(a.block_trace).name.split(".")[0]
        return Path("/tmp") / f"cachelab-bench-block-{stem}-x{a.block_times}.oracleGeneral.bin"
    name = f"cachelab-bench-zipf-{a.requests}-{a.objects}-{a.alpha:g}-{a.seed}.oracleGeneral.bin"
    return Path("/tmp") / name


def generate(path: Path, requests: int, objects: int, alpha: float, seed: int) -> float:
    """Writes the seeded Zipf trace (atomically); returns the seconds it took."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, objects + 1, dtype=np.float64) ** alpha
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    ids = rng.permutation(objects).astype(np.uint64) + 1
    sizes = np.exp(rng.uniform(np.log(64), np.log(65536), objects)).astype(np.uint32)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    chunk = 5_000_000
    with tmp.open("wb") as f:
        for start in range(0, requests, chunk):
            n = min(chunk, requests - start)
            ranks = np.searchsorted(cdf, rng.random(n), side="right")
            ranks = np.minimum(ranks, objects - 1)
            rec = np.empty(n, dtype=RECORD)
            rec["time"] = (np.arange(start, start + n) // 1000).astype(np.uint32)
            rec["id"] = ids[ranks]
            rec["size"] = sizes[ranks]
            rec["next"] = -1
            rec.tofile(f)
    tmp.rename(path)
    return time.perf_counter() - t0


def tile(source: Path, path: Path, times: int) -> tuple[float, int]:
    """Writes ``source`` ``times`` times over (atomically): copy k's times shifted by k spans
    of the source, its next-access fields by k lengths, and the last access of each id in a
    copy pointing at that id's first access in the next copy (-1 in the last copy). Returns
    the seconds it took and the number of distinct ids."""
    t0 = time.perf_counter()
    d = np.fromfile(source, dtype=RECORD)
    n = len(d)
    if n == 0:
        raise SystemExit(f"flat_sim: {source}: no records")
    ids, first, where = np.unique(d["id"], return_index=True, return_inverse=True)
    span = int(d["time"].max()) - int(d["time"].min()) + 1
    last = d["next"] < 0
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with tmp.open("wb") as f:
        for k in range(times):
            c = d.copy()
            c["time"] = d["time"] + k * span
            # next_access_vtime is 1-based: the next copy's first access of the id
            onward = first[where] + 1 + (k + 1) * n if k + 1 < times else -1
            c["next"] = np.where(last, onward, d["next"] + k * n)
            c.tofile(f)
    tmp.rename(path)
    return time.perf_counter() - t0, len(ids)


def distinct_ids(path: Path) -> int:
    return len(np.unique(np.fromfile(path, dtype=RECORD)["id"]))


def run_child(argv: list[str], cwd: str | None = None) -> dict[str, Any]:
    """Runs a child to completion; its stdout, CPU seconds and peak RSS from wait4."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    assert p.stdout is not None and p.stderr is not None
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"flat_sim: {argv[0]} failed ({p.returncode}):\n{err[-2000:]}")
    return {
        "stdout": out,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "wall_s": wall,
        "max_rss_mib": ru.ru_maxrss / 1024.0,
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median CPU time (the lower middle one for an even count)."""
    ordered = sorted(runs, key=lambda r: r["cpu_s"])
    return ordered[(len(ordered) - 1) // 2]


def parse_cachesim(stdout: str) -> dict[str, Any]:
    for line in stdout.splitlines():
        if "miss ratio" in line:
            parts = line.replace(",", " ").split()
            i = parts.index("ratio")
            req = int(parts[parts.index("req") - 1])
            ratio = float(parts[i + 1])
            return {"requests": req, "miss_ratio": ratio, "line": line.strip()}
    raise SystemExit(f"flat_sim: no miss ratio in cachesim output:\n{stdout[-2000:]}")


def summarize(name: str, run: dict[str, Any], requests: int, **extra: Any) -> dict[str, Any]:
    run = {k: v for k, v in run.items() if k != "stdout"}
    return {
        "name": name,
        "requests": requests,
        **run,
        "req_per_cpu_s": requests / run["cpu_s"] if run["cpu_s"] > 0 else float("inf"),
        **extra,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=50_000_000, help="trace length (50M)")
    ap.add_argument("--objects", type=int, default=1_000_000, help="distinct objects (1M)")
    ap.add_argument("--alpha", type=float, default=1.0, help="Zipf exponent (1.0)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trace", help="use this oracleGeneral file instead of generating one")
    ap.add_argument(
        "--block-trace",
        metavar="FILE",
        help="tile this oracleGeneral trace --block-times times instead of a Zipf trace (the "
        "issue's case: /work/shared/reference/traces/cloudPhysicsIO.oracleGeneral.bin)",
    )
    ap.add_argument(
        "--block-times", type=int, default=112, help="copies of --block-trace (112)"
    )
    ap.add_argument(
        "--capacity-fraction",
        type=float,
        default=None,
        help="cache size as a fraction of the objects (0.1 for Zipf, 0.01 for --block-trace)",
    )
    ap.add_argument(
        "--naive-requests",
        type=int,
        default=2_000_000,
        help="prefix the naive Python LRU runs on (2M)",
    )
    ap.add_argument("--libcachesim", metavar="PATH", help="libCacheSim's cachesim binary")
    ap.add_argument(
        "--libcachesim-build",
        metavar="TEXT",
        default="",
        help="how that binary was built (commit, compiler), for the record",
    )
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs per simulator; medians are reported (1)"
    )
    ap.add_argument("--record", action="store_true", help="write a dated record to benches/runs/")
    ap.add_argument("--json", metavar="PATH", help="also save the raw numbers here")
    a = ap.parse_args(argv)
    if a.capacity_fraction is None:
        a.capacity_fraction = 0.01 if a.block_trace else 0.1
    if a.trace and a.block_trace:
        ap.error("--trace and --block-trace exclude each other")
    if a.block_trace and not Path(a.block_trace).is_file():
        ap.error(f"--block-trace {a.block_trace}: no such file")
    if a.block_times < 1:
        ap.error("--block-times must be at least 1")
    if a.requests <= 0 or a.objects <= 0 or not 0 < a.capacity_fraction <= 1:
        ap.error("requests and objects must be positive, capacity-fraction in (0, 1]")
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if a.libcachesim and not shutil.which(a.libcachesim):
        ap.error(f"--libcachesim {a.libcachesim}: not an executable")

    path = trace_path(a)
    gen_s = None
    if not path.exists():
        if a.trace:
            ap.error(f"--trace {path}: no such file")
        print(f"generating {path} ...", file=sys.stderr)
        if a.block_trace:
            gen_s, _ = tile(Path(a.block_trace), path, a.block_times)
        else:
            gen_s = generate(path, a.requests, a.objects, a.alpha, a.seed)
    if a.block_trace:
        a.objects = distinct_ids(Path(a.block_trace))
    n_req = path.stat().st_size // 24
    capacity = int(a.objects * a.capacity_fraction)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = os.getloadavg()
    print(f"trace {path}: {n_req:,} requests, cache {capacity:,} objects", file=sys.stderr)

    contenders: list[dict[str, Any]] = []
    argv_l: list[str] = []
    if a.libcachesim:
        argv_l = [
            shutil.which(a.libcachesim) or a.libcachesim,
            str(path),
            "oracleGeneral",
            "lru",
            str(capacity),
            "--ignore-obj-size",
            "1",
        ]
    cl_runs: list[dict[str, Any]] = []
    lcs_runs: list[dict[str, Any]] = []
    for i in range(a.repeat):
        r = run_child([sys.executable, "-c", CACHELAB_CHILD, str(path), str(capacity)])
        cl_runs.append(r)
        print(f"cachelab run {i + 1}: {r['cpu_s']:.2f} CPU-s", file=sys.stderr)
        if argv_l:
            # cachesim appends its result to a file in its working directory: keep that out
            # of the checkout.
            with tempfile.TemporaryDirectory(prefix="cachelab-cachesim-") as scratch:
                r = run_child(argv_l, cwd=scratch)
            lcs_runs.append(r)
            print(f"libCacheSim run {i + 1}: {r['cpu_s']:.2f} CPU-s", file=sys.stderr)

    r = median_run(cl_runs)
    c = json.loads(r["stdout"])
    contenders.append(
        summarize(
            "cachelab",
            r,
            c["requests"],
            miss_ratio=c["miss_ratio"],
            misses=c["misses"],
            inside=c,
            runs_cpu_s=[x["cpu_s"] for x in cl_runs],
        )
    )

    lcs: dict[str, Any] | None = None
    if argv_l:
        r = median_run(lcs_runs)
        p = parse_cachesim(r["stdout"])
        lcs = summarize(
            "libCacheSim",
            r,
            p["requests"],
            miss_ratio=p["miss_ratio"],
            output=p["line"],
            command=" ".join(argv_l),
            runs_cpu_s=[x["cpu_s"] for x in lcs_runs],
        )
        contenders.append(lcs)

    naive_n = min(a.naive_requests, n_req)
    r = run_child([sys.executable, "-c", NAIVE_CHILD, str(path), str(capacity), str(naive_n)])
    nv = json.loads(r["stdout"])
    contenders.append(
        summarize(
            "naive Python (prefix)",
            r,
            nv["requests"],
            miss_ratio=nv["miss_ratio"],
            misses=nv["misses"],
        )
    )
    print(f"naive done: {r['cpu_s']:.2f} CPU-s", file=sys.stderr)

    cl = contenders[0]
    ratios = {"cachelab / naive Python": cl["req_per_cpu_s"] / contenders[-1]["req_per_cpu_s"]}
    agree = True
    goal = None
    if lcs is not None:
        ratios["cachelab / libCacheSim"] = cl["req_per_cpu_s"] / lcs["req_per_cpu_s"]
        agree = f"{cl['miss_ratio']:.4f}" == f"{lcs['miss_ratio']:.4f}" and (
            cl["requests"] == lcs["requests"]
        )
        goal = ratios["cachelab / libCacheSim"] >= GOAL_VS_LIBCACHESIM
    budget_mib = (24 * n_req + 64 * a.objects) / 2**20
    result = {
        "benchmark": "flat-sim-block" if a.block_trace else "flat-sim",
        "started": started,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "trace": {
            "path": str(path),
            "requests": n_req,
            "objects": a.objects,
            "alpha": a.alpha,
            "seed": a.seed,
            "block_trace": a.block_trace,
            "block_times": a.block_times if a.block_trace else None,
            "generate_s": gen_s,
            "file_mib": path.stat().st_size / 2**20,
        },
        "capacity_objects": capacity,
        "repeat": a.repeat,
        "contenders": contenders,
        "ratios": ratios,
        "memory": {
            "budget_mib": budget_mib,
            "cachelab_peak_mib": cl["max_rss_mib"],
            "cachelab_peak_over_budget": cl["max_rss_mib"] / budget_mib,
        },
        "miss_ratios_agree": agree,
        "goal": {"cachelab_vs_libcachesim_min": GOAL_VS_LIBCACHESIM, "met": goal},
        "environment": {
            **environment.facts(),
            "rustc": tool_version(["rustc", "--version"]),
            "cc": tool_version(["cc", "--version"]),
        },
        "load_average_1m": {"before": load_before[0], "after": os.getloadavg()[0]},
        "libcachesim": a.libcachesim,
        "libcachesim_build": a.libcachesim_build,
    }
    print(render(result))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
    if a.record:
        md = write_record(result["benchmark"], started[:10], render(result, full=True), result)
        print(f"recorded {md}", file=sys.stderr)
    return 0 if (goal in (True, None) and agree) else 1





def render(r: dict[str, Any], full: bool = False) -> str:
    t = r["trace"]
    rows = [
        [
            c["name"],
            f"{c['requests']:,}",
            f"{c['cpu_s']:.2f}",
            f"{c['wall_s']:.2f}",
            f"{c['req_per_cpu_s'] / 1e6:.2f}",
            f"{c['max_rss_mib']:.0f}",
            f"{c['miss_ratio']:.4f}",
        ]
        for c in r["contenders"]
    ]
    if r["libcachesim"] is None:
        rows.insert(1, ["libCacheSim", "skipped", "", "", "", "", ""])
    goal = r["goal"]["met"]
    verdict = "skipped (no --libcachesim)" if goal is None else ("PASS" if goal else "FAIL")
    lines = []
    if full:
        lines += [f"# Flat-trace simulation speed, {r['started']}", ""]
    if t.get("block_trace"):
        what = (f"`{Path(t['block_trace']).name}` x {t['block_times']}, times shifted per copy")
    else:
        what = f"Zipf alpha {t['alpha']:g}, seed {t['seed']}"
    lines += [
        f"Trace: {t['requests']:,} requests over {t['objects']:,} objects ({what}), "
        f"{t['file_mib']:.0f} MiB oracleGeneral; "
        f"LRU, capacity {r['capacity_objects']:,} objects.",
        "",
        *markdown_table(
            [
                "contender",
                "requests",
                "CPU s",
                "wall s",
                "M req/CPU-s",
                "peak RSS MiB",
                "miss ratio",
            ],
            rows,
        ),
        "",
        *markdown_table(
            ["ratio (requests per CPU-second)", "value"],
            [[k, f"{v:.2f}x"] for k, v in r["ratios"].items()],
        ),
        "",
        f"Goal cachelab >= {r['goal']['cachelab_vs_libcachesim_min']:g}x libCacheSim: "
        f"**{verdict}**; miss ratios agree: {'yes' if r['miss_ratios_agree'] else 'NO'}.",
        f"Memory: cachelab peak {r['memory']['cachelab_peak_mib']:.0f} MiB against a budget of "
        f"{r['memory']['budget_mib']:.0f} MiB (24 B/request + 64 B/object) = "
        f"{r['memory']['cachelab_peak_over_budget']:.2f}x.",
        *(
            [
                f"Each simulator ran {r['repeat']} times, alternating; the table shows each "
                "one's median-CPU run. CPU seconds of every run: "
                + "; ".join(
                    f"{c['name']} " + ", ".join(f"{x:.2f}" for x in c["runs_cpu_s"])
                    for c in r["contenders"]
                    if "runs_cpu_s" in c
                )
                + "."
            ]
            if r.get("repeat", 1) > 1
            else []
        ),
        f"1-minute load average: {r['load_average_1m']['before']:.2f} before, "
        f"{r['load_average_1m']['after']:.2f} after (2 CPUs).",
    ]
    if full:
        env = r["environment"]
        inside = r["contenders"][0]["inside"]
        lines += [
            "",
            "```",
            r["command"],
            "```",
            "",
            "cachelab inside its process (wall): "
            f"import {inside['import_s']:.2f} s, read and simulate "
            f"{inside['read_and_simulate_s']:.2f} s.",
            "",
            "## Environment",
            "",
            *markdown_table(["fact", "value"], [[str(k), str(v)] for k, v in env.items()]),
        ]
        if r["libcachesim"]:
            lcs = next(c for c in r["contenders"] if c["name"] == "libCacheSim")
            lines += ["", f"libCacheSim: `{lcs['command']}`", ""]
            if r["libcachesim_build"]:
                lines += [f"Built: {r['libcachesim_build']}", ""]
            lines += [f"    {lcs['output']}"]
        lines += ["", "Raw numbers: the JSON file beside this one."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
