"""How long does the whole study take? Wall-clock of ``cachelab run --quick`` and ``cachelab run``.

    python benches/run_time.py                 # 2 rounds of each, quick and default alternating
    python benches/run_time.py --rounds 3 --record

Each round runs, in a subprocess and exactly as a user would, ``cachelab run [--quick] --out
TMPDIR`` — its own private memcached, every step, the report — and takes the wall-clock from
start to exit, plus the run's own per-step times from ``run.json``. The quick and default runs
alternate so that both see the same moments of a shared machine. Goals, from the issue:
**``--quick`` under 1 minute and the default under 5 minutes** on this machine (median over
rounds; the slowest round is shown too). The 1-minute load average before each run is recorded.

``--record`` writes ``benches/runs/<date>-run-time.md`` (``-2`` … if taken) and the JSON beside
it. Exit status 0 when both goals are met and every run succeeded, 1 otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from records import markdown_table, tool_version, write_record

ROOT = Path(__file__).resolve().parent.parent
GOALS_S = {"quick": 60.0, "default": 300.0}


def _cachelab() -> list[str]:
    exe = Path(sys.executable).parent / "cachelab"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cachelab"]


def _load() -> float:
    return os.getloadavg()[0]


def one_run(mode: str, timeout: float) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix=f"cachelab-run-time-{mode}-"))
    argv = [*_cachelab(), "run", *(["--quick"] if mode == "quick" else []), "--out", str(out),
            "--format", "json"]
    load = _load()
    started = time.perf_counter()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        code, err = p.returncode, p.stderr.strip().splitlines()[-1:] if p.stderr else []
    except subprocess.TimeoutExpired:
        code, err = -1, [f"timed out after {timeout:.0f} s"]
    wall = time.perf_counter() - started
    steps: dict[str, float] = {}
    statuses: dict[str, str] = {}
    try:
        run = json.loads((out / "run.json").read_text())
        for s in run["steps"]:
            steps[s["name"]] = float(s["elapsed_s"])
            statuses[s["name"]] = s["status"]
        report = (out / "report.html").is_file()
    except (OSError, ValueError, KeyError):
        report = False
    shutil.rmtree(out, ignore_errors=True)
    return {"mode": mode, "wall_s": round(wall, 2), "exit": code, "load_before": round(load, 2),
            "steps_s": steps, "statuses": statuses, "report": report, "stderr_tail": err}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each mode (default 2)")
    ap.add_argument("--modes", default="quick,default",
                    help="comma-separated, of quick and default (default both)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run (900)")
    ap.add_argument("--record", action="store_true", help="write benches/runs/<date>-run-time")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.rounds < 1 or not modes or any(m not in GOALS_S for m in modes):
        print("run_time.py: --rounds must be >= 1 and --modes a list of quick, default",
              file=sys.stderr)
        return 2
    runs: list[dict[str, Any]] = []
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    for r in range(args.rounds):
        order = modes if r % 2 == 0 else modes[::-1]
        for mode in order:
            print(f"round {r + 1}/{args.rounds}: cachelab run ({mode}) ...", flush=True)
            res = one_run(mode, args.timeout)
            res["round"] = r + 1
            runs.append(res)
            print(f"  {res['wall_s']:.1f} s, exit {res['exit']}, load before "
                  f"{res['load_before']:.2f}", flush=True)

    lines = [f"# `cachelab run` wall-clock — {started}", "",
             f"* command: `python benches/run_time.py {' '.join(argv or sys.argv[1:])}`",
             "* each run: `cachelab run [--quick] --out TMPDIR --format json` in a subprocess "
             "(private memcached, every step, report), unpinned, as a user runs it",
             "* commit: "
             f"{tool_version(['git', '-C', str(ROOT), 'describe', '--always', '--dirty'])}",
             f"* machine: {platform.machine()}, {os.cpu_count()} CPUs, "
             f"{platform.system()} {platform.release()}; Python {platform.python_version()}; "
             f"{tool_version(['memcached', '-V'])}", ""]
    ok = True
    goal_rows = []
    for mode in modes:
        mine = [x for x in runs if x["mode"] == mode]
        walls = [x["wall_s"] for x in mine]
        med = statistics.median(walls)
        good = all(x["exit"] == 0 and x["report"] for x in mine)
        passed = good and med < GOALS_S[mode]
        ok = ok and passed
        goal_rows.append([f"`run{' --quick' if mode == 'quick' else ''}` median wall-clock",
                          f"{med:.1f} s (max {max(walls):.1f})", f"< {GOALS_S[mode]:.0f} s",
                          "PASS" if passed else ("FAIL" if good else "FAIL (a run failed)")])
    lines += markdown_table(["goal", "measured", "limit", "result"], goal_rows)
    step_names = sorted({s for x in runs for s in x["steps_s"]},
                        key=lambda s: ["profile", "scale", "simulate", "tiers", "replay"].index(s)
                        if s in ("profile", "scale", "simulate", "tiers", "replay") else 99)
    lines += ["", "Every run (seconds; the steps are the run's own timings from `run.json`):", ""]
    lines += markdown_table(
        ["round", "mode", "load before", "wall", *step_names, "exit", "report"],
        [[str(x["round"]), x["mode"], f"{x['load_before']:.2f}", f"{x['wall_s']:.1f}",
          *[f"{x['steps_s'][s]:.1f}" if s in x["steps_s"] else "—" for s in step_names],
          str(x["exit"]), "yes" if x["report"] else "no"] for x in runs])
    failed = [x for x in runs if x["exit"] != 0]
    for x in failed:
        lines.append(f"\nround {x['round']} ({x['mode']}) exit {x['exit']}: "
                     f"{' '.join(x['stderr_tail'])}")
    text = "\n".join(lines)
    print("\n" + text)
    if args.record:
        path = write_record("run-time", time.strftime("%Y-%m-%d"), text,
                            {"started": started, "runs": runs, "goals_s": GOALS_S})
        print(f"\nrecorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
