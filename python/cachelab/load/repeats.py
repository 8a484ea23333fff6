"""Hysteresis: ``load --repeats N`` runs the same workload N times and asks whether the runs
agree as closely as each run's own intervals say they should.

Against the private memcached cachelab starts (:meth:`cachelab.target.Target.open`) every repeat
gets a fresh server process, so what one run leaves behind (the slab classes it carved, the
items and hash table it grew, a warmed CPU cache) is not carried into the next; a user's
server is not restarted, and the result says so.

Each repeat's figure *y_i* (throughput; p50 and p99 on the log scale, as ratios) comes with its
within-run standard error *s_i*: from its percentile's 95 % interval (:mod:`cachelab.intervals`,
the block bootstrap's when the latencies are dependent), or from the spread of its measured
intervals' throughput. Cochran's Q = Σ w_i (y_i − ȳ_w)², w_i = 1 / s_i², is χ² with N − 1
degrees of freedom when the runs differ by no more than their within-run errors allow (Cochran
1954, "The combination of estimates from different experiments", Biometrics 10(1)); the runs
DISAGREE when its p-value is below :data:`ALPHA`. I² = (Q − (N − 1)) / Q is the share of the
spread that lies between runs (Higgins & Thompson 2002), and τ the between-run standard
deviation (DerSimonian & Laird 1986), on the same scale as *y*.

The headline is the worst repeat (the highest p99), and the verdict covers every repeat: any
INVALID repeat, or runs that disagree, make the whole INVALID with the reason first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from cachelab.load.validity import full_intervals
from cachelab.units import num, p_value, us

__all__ = ["ALPHA", "METRICS", "Z95", "combined_validity", "comparison_lines", "repeat_lines",
           "repeat_summary", "spread", "worst"]

#: A metric's runs disagree when Cochran's Q has a p-value below this.
ALPHA = 0.01
#: 97.5 % point of the normal: a 95 % interval's half-width over the standard error.
Z95 = 1.959964
#: The metrics compared between repeats: key -> (label, on the log scale).
METRICS = {"throughput": ("throughput", False), "p50": ("p50", True), "p99": ("p99", True)}


def repeat_summary(result: Mapping[str, Any], index: int, *, restarted: bool) -> dict[str, Any]:
    """One repeat's line in ``load.json`` ``repeats.runs``: its server's pid, its throughput,
    p50 and p99 with their 95 % intervals and within-run standard errors, its verdict, and
    its whole result (``result``: a ``load.json`` record)."""
    totals = result["totals"]
    entry = totals.get("corrected") or totals["uncorrected"]
    ranges = (entry.get("intervals") or {}).get("ranges") or {}
    method = ((entry.get("intervals") or {}).get("basis") or {}).get("method")
    server = result.get("server") or {}
    metrics: dict[str, Any] = {"throughput": _throughput(result)}
    for key in ("50", "99"):
        value, rng = entry["percentiles"].get(key), ranges.get(key)
        metrics["p" + key] = {
            "value": value, "interval": rng, "method": method,
            # the interval on the log scale (a ratio's): half its width over 1.96
            "log_se": ((math.log(rng[1]) - math.log(rng[0])) / (2 * Z95)
                       if rng and rng[0] > 0 else None)}
    v = result.get("validity") or {}
    return {"repeat": index + 1, "server_pid": _pid(server), "restarted": restarted,
            "metrics": metrics, "verdict": v.get("verdict", "not checked"),
            "reasons": list(v.get("reasons") or []), "result": dict(result)}


def _pid(server: Mapping[str, Any]) -> int | None:
    pid = (server.get("stats_before") or {}).get("pid") or server.get("pid")
    return int(pid) if pid else None


def _throughput(result: Mapping[str, Any]) -> dict[str, Any]:
    """The measured run's throughput, with the standard error of the mean of its full
    measured intervals' throughputs (their spread over √k) and the 95 % interval from it."""
    interval_s = float(result["spec"].get("interval") or 1.0)
    xs = [iv["throughput"] for iv in full_intervals(result["intervals"], interval_s)]
    value = float(result["totals"]["throughput"])
    if len(xs) < 2:
        return {"value": value, "interval": None, "se": None, "intervals": len(xs)}
    mean = sum(xs) / len(xs)
    se = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) / len(xs))
    return {"value": value, "interval": [value - Z95 * se, value + Z95 * se],
            "se": se, "intervals": len(xs)}


def spread(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Between-run against within-run spread of each of :data:`METRICS` over ``runs``
    (:func:`repeat_summary` lines): ``{metric: {"status": "agree" | "disagree" | "not
    compared", "q", "df", "p", "i2", "tau", "low", "high", "why"}}`` and ``disagree``, the
    metrics whose runs disagree."""
    # deferred: scipy.stats takes ~0.3 s to import; only the comparison of repeats needs it
    from scipy.stats import chi2

    out: dict[str, Any] = {}
    for key, (label, log) in METRICS.items():
        ys, ses, values = [], [], []
        for r in runs:
            m = r["metrics"][key]
            value, se = m.get("value"), m.get("log_se") if log else m.get("se")
            values.append(value)
            if value and se:
                ys.append(math.log(value) if log else float(value))
                ses.append(float(se))
        shown = [v for v in values if v]
        low, high = (min(shown), max(shown)) if shown else (None, None)
        if len(runs) < 2 or len(ys) < len(runs):
            missing = [r["repeat"] for r in runs if not (r["metrics"][key].get("log_se" if log
                                                                               else "se"))]
            out[key] = {"status": "not compared", "low": low, "high": high,
                        "why": f"no within-run interval in repeat(s) "
                               f"{', '.join(map(str, missing))}" if missing
                        else "a single run"}
            continue
        w = [1.0 / s ** 2 if s > 0 else 1e30 for s in ses]
        mean = sum(wi * y for wi, y in zip(w, ys)) / sum(w)
        q = sum(wi * (y - mean) ** 2 for wi, y in zip(w, ys))
        df = len(ys) - 1
        p = float(chi2.sf(q, df))
        # DerSimonian–Laird: the between-run variance beyond what the within-run errors allow
        c = sum(w) - sum(wi ** 2 for wi in w) / sum(w)
        tau = math.sqrt(max(0.0, (q - df) / c)) if c > 0 else 0.0
        i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
        status = "disagree" if p < ALPHA else "agree"
        out[key] = {"status": status, "q": round(q, 3), "df": df, "p": p, "i2": round(i2, 3),
                    "tau": round(tau, 5), "log_scale": log, "low": low, "high": high,
                    "why": _why(label, status, q, df, p, i2, low, high, log)}
    out["disagree"] = [k for k in METRICS if out[k]["status"] == "disagree"]
    return out


def _why(label: str, status: str, q: float, df: int, p: float, i2: float, low: float,
         high: float, log: bool) -> str:
    span = (f"{us(low)}–{us(high)} µs" if log else f"{low:,.0f}–{high:,.0f}/s")
    stat = f"Cochran's Q {num(q)} on {df} df, {p_value(p)}; {i2:.0%} of the spread between runs"
    if status == "disagree":
        return (f"RUNS DISAGREE: {label} differs between repeats more than their within-run "
                f"intervals allow ({span}; {stat})")
    return f"{label} agrees between repeats within their intervals ({span}; {stat})"


def worst(runs: Sequence[Mapping[str, Any]]) -> int:
    """The index of the repeat the headline shows: the highest p99 (the worst latency)."""
    def p99(i: int) -> float:
        return float(runs[i]["metrics"]["p99"].get("value") or 0)

    return max(range(len(runs)), key=p99)


def combined_validity(shown: Mapping[str, Any] | None, runs: Sequence[Mapping[str, Any]],
                      comparison: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verdict over every repeat: the shown repeat's checks, with every repeat's reasons
    (each named by its repeat) and the runs' disagreement first; INVALID when any repeat is
    or when the runs disagree (``checks.repeats`` holds the comparison)."""
    if shown is None:
        return None
    reasons = [comparison[k]["why"] for k in comparison.get("disagree", [])]
    fixes = [f"run again on a quiet machine, or more repeats (`--repeats {2 * len(runs)}`): "
             "the server's state or the machine changed between them"] * len(reasons)
    throughput = [comparison["throughput"]["why"]] if "throughput" in comparison.get(
        "disagree", []) else []
    for r in runs:
        res = r["result"].get("validity") or {}
        why = res.get("reasons") or []
        reasons += [f"repeat {r['repeat']}: {w}" for w in why]
        fixes += (list(res.get("fixes") or []) + [""] * len(why))[:len(why)]
        throughput += [f"repeat {r['repeat']}: {why}"
                       for why in res.get("throughput_reasons") or []]
    return {**shown, "verdict": "INVALID" if reasons else "VALID", "reasons": reasons,
            "fixes": fixes, "throughput_reasons": throughput,
            "checks": {**shown.get("checks", {}), "repeats": {
                "status": "fail" if comparison.get("disagree") else "pass",
                "why": "; ".join(comparison[k]["why"] for k in METRICS)}}}


def repeat_lines(repeats: Mapping[str, Any] | None) -> list[str]:
    """The table's repeats: how the server was treated, each repeat's pid, throughput, p50
    and p99 with their intervals and verdict, and the comparison of each metric."""
    if not repeats:
        return []
    runs = repeats["runs"]
    lines = [f"repeats: {len(runs)}, repeat {repeats['shown'] + 1} shown above (the highest "
             f"p99); {repeats['server']}"]
    lines.append(f"  {'#':>2}  {'pid':>8}  {'throughput/s':>22}  {'p50 µs (95 %)':>22}  "
                 f"{'p99 µs (95 %)':>22}  verdict")
    for r in runs:
        m = r["metrics"]
        t = m["throughput"]
        tp = f"{t['value']:,.0f}" + (f" ±{Z95 * t['se']:,.0f}" if t.get("se") else "")
        cells = []
        for key in ("p50", "p99"):
            x, rng = m[key].get("value"), m[key].get("interval")
            cells.append("—" if not x else us(x) + (f" [{us(rng[0])}–{us(rng[1])}]" if rng
                                                    else " [n/a]"))
        lines.append(f"  {r['repeat']:>2}  {r['server_pid'] or '-':>8}  {tp:>22}  "
                     f"{cells[0]:>22}  {cells[1]:>22}  {r['verdict']}")
    return lines + ["  " + line for line in comparison_lines(repeats["comparison"])]


def comparison_lines(comparison: Mapping[str, Any]) -> list[str]:
    """One line per compared metric: agree, RUNS DISAGREE, or why it was not compared."""
    return [c["why"] if c["status"] != "not compared" else f"{key}: not compared ({c['why']})"
            for key, c in ((k, comparison[k]) for k in METRICS)]
