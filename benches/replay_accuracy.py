"""How close is ``simulate``'s prediction to the tiered cache? ``cachelab replay``, run N times.

    python benches/replay_accuracy.py                     # 3 default runs
    python benches/replay_accuracy.py --runs 5 --record
    python benches/replay_accuracy.py --runs 3 -- --quick --profile-mode slices
    python benches/replay_accuracy.py --runs 5 --hog      # another process burning a core

Each run is ``cachelab replay --out TMPDIR --format json`` in a subprocess, exactly as a user
runs it (its own private memcached, the synthetic trace, the default strategies ``none``,
``lru``, ``fixed`` and ``fixed+prefetch-children``); arguments after ``--`` go to every run.
A run prints, per strategy and percentile (p50, p90, p99 of added ms per request), the error
``(predicted − measured) / measured``. The goal, from the issue: **every strategy's predicted
p50, p90 and p99 within 10 % of the measured ones (median over runs), and every single run within
15 %**. The machine is a noisy 2-core VM and one run's p99 rests on a few dozen requests; the
record also shows how many single runs had all three within 15 %, the same runs' prediction
with independent draws (replay reports both), and each measured percentile's own bootstrap
interval. The 1-minute load average before each run is recorded; ``--quiet-below L`` waits
(up to ``--max-wait`` s) for it to drop below L first. ``--hog`` runs a process burning the
last core during each run (someone else's job): the goal is then medians within 15 %, or every
run flagged busy by replay itself.

``--record`` writes ``benches/runs/<date>-replay-accuracy.md`` (``-2`` … if taken) and the raw
numbers beside it. Exit status 0 when the goal is met and every run succeeded, 1 otherwise, 2 for
bad usage.
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
#: The goal (issue 19): the median error over runs within 10 %, every single run within 15 %;
#: with a CPU hog beside the runs, medians within 15 % or every run flagged busy.
MEDIAN_GOAL = 0.10
SINGLE_GOAL = 0.15
HOG_GOAL = 0.15
PCTS = ("50", "90", "99")

HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"


def _cachelab() -> list[str]:
    exe = Path(sys.executable).parent / "cachelab"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cachelab"]


def _wait_quiet(below: float | None, max_wait: float) -> float:
    load = os.getloadavg()[0]
    deadline = time.monotonic() + max_wait
    while below is not None and load >= below and time.monotonic() < deadline:
        time.sleep(5)
        load = os.getloadavg()[0]
    return load


def _hog(seconds: float) -> subprocess.Popen[bytes]:
    """A process burning one core (the last one) for ``seconds``: someone else's job."""
    cpus = sorted(os.sched_getaffinity(0))
    return subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)],
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpus[-1]}))


def one_run(extra: list[str], timeout: float, hog: bool = False) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="cachelab-replay-accuracy-"))
    argv = [*_cachelab(), "replay", *extra, "--out", str(out), "--format", "json"]
    burner = _hog(timeout) if hog else None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        code, err = p.returncode, p.stderr.strip().splitlines()[-1:] if p.stderr else []
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except subprocess.TimeoutExpired:
        code, err, doc = -1, [f"timed out after {timeout:.0f} s"], None
    except ValueError:
        code, err, doc = -2, ["replay printed no JSON"], None
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
        shutil.rmtree(out, ignore_errors=True)
    res: dict[str, Any] = {"exit": code, "stderr_tail": err, "strategies": {}}
    if doc is None:
        return res
    res["evaluated"] = doc["trace"]["evaluated"]
    res["load_average"] = doc.get("load_average")
    res["elapsed_s"] = doc.get("elapsed_s")
    res["machine"] = doc.get("machine")
    for s in doc["strategies"]:
        alt = s.get("alternative") or {}
        res["strategies"][s["strategy"]] = {
            "draws": (s.get("draws") or {}).get("used"),
            "lag1": (s.get("draws") or {}).get("lag1"),
            "error": {k: s["added_ms"][k]["error"] for k in PCTS},
            "measured_ms": {k: s["added_ms"][k]["measured"] for k in PCTS},
            "ci95_ms": {k: s["added_ms"][k].get("measured_ci95") for k in PCTS},
            "increase_error": {k: s["increase"][k]["error"] for k in PCTS},
            "other_draws_error": {k: alt[k]["added_error"] for k in PCTS} if alt else None,
        }
    return res


def _others(run: dict[str, Any]) -> str:
    m = run.get("machine") or {}
    if "others_cores" not in m:
        return "—"
    return f"{m['others_cores']:.2f}" + (" (busy)" if m.get("busy") else "")


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.0f} %"


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in raw:
        extra = raw[raw.index("--") + 1:]
        raw = raw[:raw.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="replay runs (default 3)")
    ap.add_argument("--quiet-below", type=float, metavar="L",
                    help="before each run, wait for the 1-minute load average to drop below L")
    ap.add_argument("--max-wait", type=float, default=300.0, help="seconds to wait for quiet")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run (900)")
    ap.add_argument("--hog", action="store_true",
                    help="burn the last core with another process during each run")
    ap.add_argument("--record", action="store_true",
                    help="write benches/runs/<date>-replay-accuracy")
    args = ap.parse_args(raw)
    if args.runs < 1:
        print("replay_accuracy.py: --runs must be at least 1", file=sys.stderr)
        return 2
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    runs = []
    for r in range(args.runs):
        load = _wait_quiet(args.quiet_below, args.max_wait)
        print(f"run {r + 1}/{args.runs}: cachelab replay {' '.join(extra)} (load {load:.2f})",
              flush=True)
        res = one_run(extra, args.timeout, hog=args.hog)
        res["load_before"] = round(load, 2)
        runs.append(res)
        print(f"  exit {res['exit']}; " + "; ".join(
            f"{name} {'/'.join(_pct(v['error'][k]) for k in PCTS)}"
            for name, v in res["strategies"].items()), flush=True)

    good = [x for x in runs if x["strategies"]]
    names = list(good[0]["strategies"]) if good else []
    rows, ok = [], bool(good) and len(good) == len(runs)

    def med(name: str, field: str, k: str) -> float | None:
        vals = [x["strategies"][name][field][k] for x in good
                if x["strategies"].get(name, {}).get(field)]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    all_busy = bool(good) and all((x.get("machine") or {}).get("busy") for x in good)
    for name in names:
        errs = [med(name, "error", k) for k in PCTS]
        singles = sum(all(abs(x["strategies"][name]["error"][k]) <= SINGLE_GOAL for k in PCTS)
                      for x in good if name in x["strategies"])
        ran = sum(name in x["strategies"] for x in good)
        if args.hog:
            passed = all_busy or all(e is not None and abs(e) <= HOG_GOAL for e in errs)
        else:
            passed = (all(e is not None and abs(e) <= MEDIAN_GOAL for e in errs)
                      and singles == ran)
        ok = ok and passed
        widths = []
        for k in PCTS:
            w = [(ci[1] - ci[0]) / 2 / m for x in good
                 for ci, m in [(x["strategies"][name]["ci95_ms"][k],
                                x["strategies"][name]["measured_ms"][k])] if ci and m > 0]
            widths.append(f"±{100 * statistics.median(w):.0f} %" if w else "—")
        rows.append([f"`{name}`", *[_pct(e) for e in errs],
                     " / ".join(_pct(med(name, "other_draws_error", k)) for k in PCTS),
                     " / ".join(_pct(med(name, "increase_error", k)) for k in PCTS),
                     " / ".join(widths), f"{singles} of {len(good)}",
                     "PASS" if passed else "FAIL"])
    command = " ".join(raw + (["--", *extra] if extra else []))
    lines = [f"# Replay accuracy — {started}", "",
             f"* command: `python benches/replay_accuracy.py {command}`",
             f"* each run: `cachelab replay {' '.join(extra)} --out TMPDIR --format json` in a "
             "subprocess (private memcached, synthetic trace, default strategies)",
             "* commit: "
             f"{tool_version(['git', '-C', str(ROOT), 'describe', '--always', '--dirty'])}",
             f"* machine: {platform.machine()}, {os.cpu_count()} CPUs, "
             f"{platform.system()} {platform.release()}; Python {platform.python_version()}; "
             f"{tool_version(['memcached', '-V'])}",
             f"* evaluated requests per run: {good[0]['evaluated'] if good else '—'}; "
             f"load before each run: {', '.join(str(x['load_before']) for x in runs)}",
             "* other processes' CPU during each run (cores, from replay.json's `machine`): "
             + ", ".join(_others(x) for x in runs)
             + ("; a CPU hog burned the last core during every run" if args.hog else ""), "",
             "Error of the predicted added ms, (predicted − measured) / measured, median over "
             "runs; goal: " + (f"medians within ±{100 * HOG_GOAL:.0f} %, or every run flagged "
                               "busy" if args.hog else
                               f"medians within ±{100 * MEDIAN_GOAL:.0f} % and every run within "
                               f"±{100 * SINGLE_GOAL:.0f} %") + " at p50, p90 and p99.", ""]
    lines += markdown_table(
        ["strategy", "p50", "p90", "p99", "independent draws p50 / p90 / p99",
         "as increase p50 / p90 / p99", "measured 95 % CI half-width", "runs all within 15 %",
         "result"], rows)
    lines += ["", "Every run (error of predicted added ms, p50 / p90 / p99):", ""]
    lines += markdown_table(
        ["run", "load before", "exit", *[f"`{n}`" for n in names]],
        [[str(i + 1), f"{x['load_before']:.2f}", str(x["exit"]),
          *[" / ".join(_pct(x["strategies"][n]["error"][k]) for k in PCTS)
            if n in x["strategies"] else "—" for n in names]] for i, x in enumerate(runs)])
    for i, x in enumerate(runs):
        if not x["strategies"]:
            lines.append(f"\nrun {i + 1} exit {x['exit']}: {' '.join(x['stderr_tail'])}")
    text = "\n".join(lines)
    print("\n" + text)
    if args.record:
        path = write_record("replay-accuracy", time.strftime("%Y-%m-%d"), text,
                            {"started": started, "extra_args": extra, "runs": runs,
                             "median_goal": MEDIAN_GOAL, "single_goal": SINGLE_GOAL,
                             "hog": args.hog, "hog_goal": HOG_GOAL})
        print(f"\nrecorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
