"""How fast is cachelab's USL fitter, next to scipy's curve_fit, in the same run?

Contenders, on the same data in one process:

* *cachelab* — ``cachelab._core.usl_fit(n, x, "bounded", bootstrap=0)``: the Rust fitter
  (several starting points, bounded Levenberg–Marquardt, standard errors, intervals, the result
  dict built for Python), timed from Python, so the binding's cost is included;
* *scipy bounded* — ``scipy.optimize.curve_fit(usl, n, x, p0, bounds=([0,0,0], [inf,1,1]),
  jac=analytic)`` (the trust-region reflective method), from R usl's starting point;
* *scipy lm* — the same unbounded (MINPACK Levenberg–Marquardt).

scipy is optional ("skipped" when it is not installed; it is not a cachelab dependency).
Datasets: the four reference CSVs in tests/data/usl/ and a seeded synthetic 100-point set.
Each fit is repeated until ``--min-time`` seconds have passed; the median per-call time is
reported. The bootstrap rows time 1,000 residual resamples (cachelab: ``bootstrap=1000``
minus the plain fit; scipy: a Python loop of bounded curve_fit calls from the estimate, the
usual way to do it with scipy). Goals from the issue: a fit of ≤ 100 points well under 1 ms,
a 1,000-resample bootstrap ≤ 100 ms.

``--record`` writes ``benches/runs/<date>-usl-fit.md`` (``-2``, … if taken) and the JSON
beside it. Exit status 0 when the goals are met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from cachelab import _core, environment
from records import write_record

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "usl"
GOAL_FIT_S = 1e-3
GOAL_BOOT_S = 0.1


def datasets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for path in sorted(DATA.glob("*.csv")):
        d = np.loadtxt(path, delimiter=",", skiprows=1)
        out[path.stem] = (d[:, 0].copy(), d[:, 1].copy())
    rng = np.random.default_rng(2026)
    n = np.linspace(1, 64, 100)
    x = 1000 * n / (1 + 0.03 * (n - 1) + 0.0005 * n * (n - 1))
    out["synthetic_100"] = (n, x * (1 + 0.02 * rng.standard_normal(n.size)))
    return out


def timeit(fn, min_time: float) -> tuple[float, int]:
    fn()  # warm
    samples = []
    deadline = time.perf_counter() + min_time
    while time.perf_counter() < deadline or len(samples) < 5:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), len(samples)


def usl(n, g, a, b):
    return g * n / (1 + a * (n - 1) + b * n * (n - 1))


def usl_jac(n, g, a, b):
    d = 1 + a * (n - 1) + b * n * (n - 1)
    return np.column_stack([n / d, -g * n * (n - 1) / d**2, -g * n * n * (n - 1) / d**2])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per measurement")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    try:
        import scipy
        from scipy.optimize import curve_fit
    except ImportError:
        scipy = None
        curve_fit = None

    rows: list[dict[str, Any]] = []
    for name, (n, x) in datasets().items():
        nl, xl = n.tolist(), x.tolist()
        ours_t, ours_k = timeit(lambda nl=nl, xl=xl: _core.usl_fit(nl, xl, "bounded"),
                                args.min_time)
        ours = _core.usl_fit(nl, xl, "bounded")
        p = ours["params"]
        row: dict[str, Any] = {"dataset": name, "points": len(nl), "cachelab_s": ours_t,
                               "cachelab_calls": ours_k,
                               "cachelab_params": [p["gamma"], p["alpha"], p["beta"]],
                               "cachelab_sse": ours["sse"]}
        if curve_fit is not None:
            p0 = [max(x / n), 0.01, 1e-4]
            bounds = ([0, 0, 0], [np.inf, 1, 1])

            def sb(n=n, x=x, p0=p0, bounds=bounds):
                return curve_fit(usl, n, x, p0=p0, bounds=bounds, jac=usl_jac)

            def sl(n=n, x=x, p0=p0):
                return curve_fit(usl, n, x, p0=p0, jac=usl_jac, maxfev=20000)

            row["scipy_bounded_s"], _ = timeit(sb, args.min_time)
            pb = sb()[0]
            row["scipy_bounded_params"] = pb.tolist()
            row["scipy_bounded_sse"] = float(((x - usl(n, *pb)) ** 2).sum())
            try:
                row["scipy_lm_s"], _ = timeit(sl, args.min_time)
                pl = sl()[0]
                row["scipy_lm_params"] = pl.tolist()
                row["scipy_lm_sse"] = float(((x - usl(n, *pl)) ** 2).sum())
            except RuntimeError as e:  # MINPACK gave up
                row["scipy_lm_s"] = None
                row["scipy_lm_error"] = str(e)
        rows.append(row)

    # Bootstrap, 1,000 resamples, on the largest real dataset and the synthetic one.
    boots = []
    for name in ("psa_cisco_mysql", "synthetic_100"):
        n, x = datasets()[name]
        nl, xl = n.tolist(), x.tolist()
        plain, _ = timeit(lambda nl=nl, xl=xl: _core.usl_fit(nl, xl, "bounded"), args.min_time)
        with_boot, k = timeit(
            lambda nl=nl, xl=xl: _core.usl_fit(nl, xl, "bounded", bootstrap=1000, seed=1),
            args.min_time)
        one_thread, _ = timeit(
            lambda nl=nl, xl=xl: _core.usl_fit(nl, xl, "bounded", bootstrap=1000, seed=1,
                                               threads=1), args.min_time)
        b = {"dataset": name, "points": len(nl), "cachelab_s": with_boot - plain,
             "cachelab_1thread_s": one_thread - plain, "calls": k}
        if curve_fit is not None:
            p0 = _core.usl_fit(nl, xl, "bounded")["params"]
            est = [p0["gamma"], p0["alpha"], p0["beta"]]
            fitted = usl(n, *est)
            res = x - fitted
            pool = (res - res.mean()) * math.sqrt(len(n) / (len(n) - 3))
            rng = np.random.default_rng(1)
            bounds = ([0, 0, 0], [np.inf, 1, 1])
            t0 = time.perf_counter()
            for _ in range(1000):
                y = fitted + rng.choice(pool, size=len(n))
                curve_fit(usl, n, y, p0=est, bounds=bounds, jac=usl_jac)
            b["scipy_bounded_s"] = time.perf_counter() - t0
        boots.append(b)

    env = environment.facts()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    result = {"date": date.today().isoformat(), "command": " ".join(sys.argv),
              "commit": commit, "environment": env,
              "scipy": getattr(scipy, "__version__", None) if scipy else None,
              "numpy": np.__version__, "fits": rows, "bootstrap": boots,
              "goals": {"fit_s": GOAL_FIT_S, "bootstrap_s": GOAL_BOOT_S}}
    worst_fit = max(r["cachelab_s"] for r in rows)
    worst_boot = max(b["cachelab_s"] for b in boots)
    result["met"] = worst_fit < GOAL_FIT_S and worst_boot <= GOAL_BOOT_S
    text = render(result)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.record:
        md = write_record("usl-fit", result["date"], text, result)
        print(f"recorded {md}", file=sys.stderr)
    return 0 if result["met"] else 1


def _us(s: float | None) -> str:
    return "skipped" if s is None else f"{s * 1e6:,.1f}"


def render(r: dict[str, Any]) -> str:
    env = r["environment"]
    lines = [
        f"# USL fit benchmark, {r['date']}",
        "",
        f"- command: `{r['command']}`",
        f"- commit: {r['commit']}; scipy {r['scipy'] or 'not installed (skipped)'}, "
        f"numpy {r['numpy']}",
        f"- machine: {env.get('cpu_model')}, {env.get('cpus')} CPUs "
        f"({env.get('cpus_usable')} usable), {env.get('os', '')} {env.get('kernel', '')}",
        "",
        "## One fit (median µs per call; cachelab includes the Python binding)",
        "",
        "| dataset | points | cachelab bounded | scipy bounded (trf) | scipy lm (unbounded) |"
        " ratio scipy-bounded / cachelab | SSE cachelab / scipy bounded |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in r["fits"]:
        sb = row.get("scipy_bounded_s")
        ratio = f"{sb / row['cachelab_s']:.1f}x" if sb else "—"
        sse = (f"{row['cachelab_sse'] / row['scipy_bounded_sse']:.6f}"
               if row.get("scipy_bounded_sse") else "—")
        lines.append(f"| {row['dataset']} | {row['points']} | {_us(row['cachelab_s'])} | "
                     f"{_us(sb)} | {_us(row.get('scipy_lm_s'))} | {ratio} | {sse} |")
    lines += ["", "## Bootstrap, 1,000 residual resamples (ms)", "",
              "| dataset | points | cachelab (default threads) | cachelab (1 thread) |"
              " scipy bounded loop | ratio |", "|---|---:|---:|---:|---:|---:|"]
    for b in r["bootstrap"]:
        sb = b.get("scipy_bounded_s")
        ratio = "—" if sb is None else f"{sb / b['cachelab_s']:.0f}x"
        lines.append(
            f"| {b['dataset']} | {b['points']} | {b['cachelab_s'] * 1e3:.1f} | "
            f"{b['cachelab_1thread_s'] * 1e3:.1f} | "
            f"{'skipped' if sb is None else f'{sb * 1e3:.0f}'} | "
            f"{ratio} |")
    lines += ["", f"Goals: one fit < {r['goals']['fit_s'] * 1e3:g} ms, bootstrap ≤ "
              f"{r['goals']['bootstrap_s'] * 1e3:g} ms: {'MET' if r['met'] else 'MISSED'}."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
