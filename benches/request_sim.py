"""How fast is cachelab's request-level strategy simulator, per strategy?

Runs the Rust example ``crates/sim/examples/request_bench.rs`` (built with
``cargo build --release -p cachelab-sim --example request_bench``; the build is not timed) in
a child process, ``--rounds`` times, and reads its table. The example builds a seeded
synthetic trace in memory (default 1 M requests, about 30 M item touches, 200 k items with
log-uniform sizes from 100 B to 100 KB, 10 k topics in an 8-ary tree with about 19 leaves each,
half the requests topic pages, the rest Zipf(0.9)-popular items, 50 instances), then simulates
each strategy once (one draw, one thread, train = 0.5) through ``cachelab_sim::request::simulate``
and prints **item touches per CPU-second**: every touch of the trace (the training half is
simulated too, without latency draws) over the process CPU time (user + system, from
``/proc/self/stat``) that the ``simulate`` call took — planning, the run and the summary
included, building the trace not.

The headline per strategy is the median over rounds; the table also gives the range. Goal, from
the issue: **at least 20 M item touches per CPU-second per strategy**; each strategy gets PASS
or FAIL. The example also prints a digest of everything the result reports (counts, every
percentile band, the curve, the routes, bit for bit); it must be the same in every round, or
the run fails.

``--compare PATH`` runs another build of the same example (say, one built from an older commit
into another target directory) in the same rounds, interleaved with this one, so both see the
same machine; the table then shows its numbers, the ratio of the medians, and whether the
digests agree (the same trace, so equal digests mean equal results). To build the committed
code without touching the working tree::

    mkdir -p /tmp/head && git archive HEAD | tar -x -C /tmp/head
    (cd /tmp/head && cargo build --release -p cachelab-sim --example request_bench)
    # then: --compare /tmp/head/target/release/examples/request_bench

The machine is usually shared: the 1-minute load average before and after is recorded, and CPU
time (not wall time) is what counts.

``--record`` writes ``benches/runs/<date>-request-sim.md`` (``-2``, ``-3`` … if taken) and the
JSON beside it; ``--json PATH`` saves the raw numbers anywhere. Exit status 0 when every
strategy meets the goal, 1 when one misses it or the digests disagree, 2 for bad usage or a
failed build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cachelab import environment
from records import markdown_table, tool_version, write_record

ROOT = Path(__file__).resolve().parent.parent
GOAL_TOUCHES_PER_CPU_S = 20e6
BUILD = ["cargo", "build", "--release", "-p", "cachelab-sim", "--example", "request_bench"]
ROW = re.compile(
    r"^(?P<spec>\S+)\s+(?P<cpu>[\d.]+)\s+(?P<wall>[\d.]+)\s+(?P<rate>[\d.]+)M\s+"
    r"(?P<hit>[\d.]+)\s+(?P<rt>[\d.]+)\s+(?P<p90>[\d.]+)\s+(?P<digest>[0-9a-f]+)$"
)
TRACE = re.compile(r"^trace: (\d+) requests, (\d+) items, (\d+) touches, (\d+) instances")


def build() -> Path:
    """Builds the example (output to stderr) and returns the path of its executable."""
    out = subprocess.run(
        [*BUILD, "--message-format=json-render-diagnostics"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(BUILD)} failed (exit {out.returncode})")
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if (
            msg.get("reason") == "compiler-artifact"
            and msg.get("executable")
            and msg["target"]["name"] == "request_bench"
        ):
            return Path(msg["executable"])
    raise RuntimeError("cargo built no request_bench executable")


def run_once(binary: Path, requests: int, specs: list[str]) -> dict[str, Any]:
    """One child process: its parsed table, peak RSS and CPU time (from wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(binary), str(requests), *specs], stdout=subprocess.PIPE, text=True)
    stdout = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} exited with {proc.returncode}")
    trace: dict[str, int] = {}
    rows = []
    for line in stdout.splitlines():
        if m := TRACE.match(line):
            trace = dict(zip(["requests", "items", "touches", "instances"], map(int, m.groups())))
        elif m := ROW.match(line.strip()):
            rows.append(
                {
                    "spec": m["spec"],
                    "cpu_s": float(m["cpu"]),
                    "wall_s": float(m["wall"]),
                    "touches_per_cpu_s": float(m["rate"]) * 1e6,
                    "hit_ratio": float(m["hit"]),
                    "round_trips_per_request": float(m["rt"]),
                    "p90_increase": float(m["p90"]),
                    "digest": m["digest"],
                }
            )
    if not trace or not rows:
        raise RuntimeError(f"could not read the output of {binary}:\n{stdout}")
    return {
        "trace": trace,
        "rows": rows,
        "max_rss_mib": usage.ru_maxrss / 1024,
        "process_cpu_s": usage.ru_utime + usage.ru_stime,
        "process_wall_s": time.perf_counter() - t0,
        "stdout": stdout,
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per strategy: the rates of every round, their median and range, the digests."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        for row in run["rows"]:
            s = out.setdefault(row["spec"], {"rates": [], "cpu_s": [], "digests": []})
            s["rates"].append(row["touches_per_cpu_s"])
            s["cpu_s"].append(row["cpu_s"])
            s["digests"].append(row["digest"])
            s["last"] = row
    for s in out.values():
        s["median"] = statistics.median(s["rates"])
        s["min"], s["max"] = min(s["rates"]), max(s["rates"])
        s["deterministic"] = len(set(s["digests"])) == 1
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=1_000_000, help="requests in the trace")
    p.add_argument("--rounds", type=int, default=3, help="runs of each binary (median)")
    p.add_argument(
        "--strategy",
        action="append",
        dest="specs",
        metavar="SPEC",
        help="a strategy spec (repeatable); default: the example's seven",
    )
    p.add_argument("--compare", type=Path, help="another build of request_bench, run alongside")
    p.add_argument("--compare-label", default="", help="what the compared build is, for the record")
    p.add_argument("--note", default="", help="a remark to keep with the record")
    p.add_argument("--record", action="store_true", help="write benches/runs/<date>-request-sim.md")
    p.add_argument("--json", help="also save the raw numbers to this path")
    a = p.parse_args(argv)
    if a.requests < 2 or a.rounds < 1:
        p.error("--requests must be at least 2 and --rounds at least 1")
    if a.compare and not a.compare.is_file():
        p.error(f"--compare {a.compare}: no such file")
    specs = a.specs or []

    try:
        binary = build()
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    load_before = os.getloadavg()
    uptime_before = tool_version(["uptime"])
    runs: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    for k in range(a.rounds):
        print(f"round {k + 1}/{a.rounds}: {binary.name}", file=sys.stderr)
        runs.append(run_once(binary, a.requests, specs))
        if a.compare:
            print(f"round {k + 1}/{a.rounds}: {a.compare}", file=sys.stderr)
            other.append(run_once(a.compare, a.requests, specs))
    load_after = os.getloadavg()

    mine = summarize(runs)
    theirs = summarize(other) if other else {}
    strategies = []
    for spec, s in mine.items():
        entry: dict[str, Any] = {
            "spec": spec,
            "touches_per_cpu_s": {"median": s["median"], "min": s["min"], "max": s["max"]},
            "rounds": s["rates"],
            "cpu_s": s["cpu_s"],
            "digest": s["digests"][0],
            "deterministic": s["deterministic"],
            "hit_ratio": s["last"]["hit_ratio"],
            "round_trips_per_request": s["last"]["round_trips_per_request"],
            "p90_increase": s["last"]["p90_increase"],
            "goal_met": s["median"] >= GOAL_TOUCHES_PER_CPU_S,
        }
        if spec in theirs:
            t = theirs[spec]
            entry["compare"] = {
                "touches_per_cpu_s": {"median": t["median"], "min": t["min"], "max": t["max"]},
                "rounds": t["rates"],
                "digest": t["digests"][0],
                "same_results": t["deterministic"] and t["digests"][0] == s["digests"][0],
                "speedup": s["median"] / t["median"],
            }
        strategies.append(entry)
    ok = all(e["deterministic"] for e in strategies) and all(
        e["compare"]["same_results"] for e in strategies if "compare" in e
    )
    goal = all(e["goal_met"] for e in strategies)
    result = {
        "benchmark": "request-sim",
        "started": started,
        "command": shlex.join(
            [python_path(), "benches/request_sim.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "build": " ".join(BUILD),
        "binary": str(binary.relative_to(ROOT)) if binary.is_relative_to(ROOT) else str(binary),
        "compare_binary": str(a.compare) if a.compare else None,
        "compare_label": a.compare_label,
        "note": a.note,
        "rounds": a.rounds,
        "trace": runs[0]["trace"],
        "max_rss_mib": max(r["max_rss_mib"] for r in runs),
        "compare_max_rss_mib": max(r["max_rss_mib"] for r in other) if other else None,
        "strategies": strategies,
        "goal": {"touches_per_cpu_s_min": GOAL_TOUCHES_PER_CPU_S, "met": goal},
        "results_consistent": ok,
        "environment": {
            **environment.facts(),
            "rustc": tool_version(["rustc", "--version"]),
            "cargo": tool_version(["cargo", "--version"]),
        },
        "load_average_1m": {"before": load_before[0], "after": load_after[0]},
        "uptime_before": uptime_before,
        "raw_stdout": [r["stdout"] for r in runs],
        "compare_raw_stdout": [r["stdout"] for r in other],
    }
    print(render(result))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2) + "\n")
    if a.record:
        md = write_record("request-sim", started[:10], render(result, full=True), result)
        print(f"recorded {md}", file=sys.stderr)
    return 0 if (goal and ok) else 1


def python_path() -> str:
    exe = Path(sys.executable)
    return str(exe.relative_to(ROOT)) if exe.is_relative_to(ROOT) else str(exe)





def mega(x: float) -> str:
    return f"{x / 1e6:.1f} M"


def render(r: dict[str, Any], full: bool = False) -> str:
    t = r["trace"]
    compare = r["compare_binary"] is not None
    header = ["strategy", "touches/CPU-s (median)", "range", "goal 20 M"]
    if compare:
        header += ["compared build", "speedup", "same results"]
    header += ["hit", "rt/req", "p90"]
    rows = []
    for e in r["strategies"]:
        m = e["touches_per_cpu_s"]
        row = [
            f"`{e['spec']}`",
            mega(m["median"]),
            f"{m['min'] / 1e6:.1f}–{m['max'] / 1e6:.1f}",
            "PASS" if e["goal_met"] else "FAIL",
        ]
        if compare:
            c = e.get("compare")
            row += (
                [
                    mega(c["touches_per_cpu_s"]["median"]),
                    f"{c['speedup']:.2f}×",
                    "yes" if c["same_results"] else "NO",
                ]
                if c
                else ["–", "–", "–"]
            )
        row += [
            f"{e['hit_ratio']:.3f}",
            f"{e['round_trips_per_request']:.2f}",
            f"{e['p90_increase']:.3f}",
        ]
        rows.append(row)
    env = r["environment"]
    lines = []
    if full:
        lines += [
            f"# Request-level simulation speed — {r['started'][:10]}",
            "",
            "Made by `benches/request_sim.py` (its docstring says what is measured and how).",
            "",
            f"* command: `{r['command']}`",
            f"* build: `{r['build']}` → `{r['binary']}`",
        ]
        if compare:
            label = f" — {r['compare_label']}" if r["compare_label"] else ""
            lines.append(
                f"* compared with: `{r['compare_binary']}` (interleaved, same rounds){label}"
            )
        lines += [
            f"* started: {r['started']}; commit {env.get('commit')}",
            f"* machine: {env.get('cpu_model')}, {env.get('cpus')} CPUs"
            f" ({env.get('cpus_usable')} usable), {env.get('os')}, {env.get('kernel')}",
            f"* versions: {env.get('rustc')}; {env.get('cargo')}; Python {env.get('python')};"
            f" cachelab {env.get('cachelab_version')}",
            f"* load (1-minute average): {r['load_average_1m']['before']:.2f} before,"
            f" {r['load_average_1m']['after']:.2f} after (`{r['uptime_before']}`)",
            "",
        ]
    lines += [
        f"trace: {t['requests']:,} requests, {t['touches']:,} touches, {t['items']:,} items,"
        f" {t['instances']} instances; {r['rounds']} rounds; peak RSS {r['max_rss_mib']:.0f} MiB"
        + (f" (compared build {r['compare_max_rss_mib']:.0f} MiB)" if compare else ""),
        "",
        *markdown_table(header, rows),
        "",
        f"goal (≥ {GOAL_TOUCHES_PER_CPU_S / 1e6:.0f} M item touches per CPU-second,"
        f" every strategy): {'met' if r['goal']['met'] else 'NOT met'};"
        " results identical across rounds"
        + (" and builds" if compare else "")
        + f": {'yes' if r['results_consistent'] else 'NO'}",
    ]
    if full and r.get("note"):
        lines += ["", "## Notes", "", r["note"]]
    if full:
        lines += ["", "## Raw numbers (touches per CPU-second, each round)", ""]
        raw_rows = []
        for e in r["strategies"]:
            raw_rows.append(
                [f"`{e['spec']}`", "this", ", ".join(mega(x) for x in e["rounds"]), e["digest"]]
            )
            if "compare" in e:
                c = e["compare"]
                raw_rows.append(
                    ["", "compared", ", ".join(mega(x) for x in c["rounds"]), c["digest"]]
                )
        lines += markdown_table(["strategy", "build", "rounds", "result digest"], raw_rows)
        lines += ["", "## Output of each round", ""]
        for k, out in enumerate(r["raw_stdout"]):
            lines += [f"this build, round {k + 1}:", "```", out.rstrip(), "```", ""]
        for k, out in enumerate(r["compare_raw_stdout"]):
            lines += [f"compared build, round {k + 1}:", "```", out.rstrip(), "```", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
