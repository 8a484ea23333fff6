"""Does `cachelab scale --quick` tell the same story twice in a row on this machine?

Runs ``cachelab scale --quick`` ``--runs`` times back to back (each on its own private
memcached, in a subprocess, as a user would), then checks what issue 21 asks of them:

* every measured run (each N, each repeat) is VALID, or each use of it that its verdict
  forbids is refused with a reason the result names: a run INVALID for its throughput is left
  out of the fit and named in the notes; a run INVALID for its latencies only keeps its
  throughput in the fit, and its N's latencies are marked INVALID with the failed check, in
  the summary table and the headline of ``scale``'s output;
* the runs' Nmax intervals (the fit's seeded residual bootstrap, ``fit.bootstrap.n_max``)
  overlap — an Amdahl fit (β at 0, Nmax infinite) has the interval [lo, ∞);
* the report of each run shows the verdicts (``cachelab report`` on its directory: the page's
  table has the latency verdict column, with each N's verdict).

``--record`` writes ``benches/runs/<date>-scale-twice.md`` and the JSON. Exit 0 when all three
hold, else 1. Extra arguments after ``--`` go to ``cachelab scale``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

from cachelab.load.validity import SHORT, THROUGHPUT_CHECKS
from records import header, markdown_table, write_record


def one(out: Path, extra: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "cachelab", "scale", "--quick", "--out", str(out),
           "--format", "table", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    doc = json.loads((out / "scale.json").read_text())
    report = out / "report.html"
    subprocess.run([sys.executable, "-m", "cachelab", "report", str(out), "--out", str(report)],
                   capture_output=True, text=True, timeout=300, check=True)
    page = report.read_text()
    runs = doc["runs"]
    left_out = [line for line in doc.get("limits", []) if line.startswith("left out of the fit")]
    verdicts = [r.get("verdict") for r in runs]
    summary = {row["n"]: row["latency"].get("verdict") for row in doc["summary"]}
    # The lines before the sweep's own (the table's headline); an empty one when missing.
    head, sep, _ = proc.stdout.partition("scale sweep: ")
    headline = head if sep else ""

    def explained(r: dict[str, Any]) -> bool:
        """An INVALID run's throughput named as left out of the fit, or its latencies
        marked INVALID (their failed checks) at its N in the table and the headline."""
        if r.get("verdict") == "VALID":
            return True
        if r.get("throughput_reasons"):
            return any(f"N = {r['n']} (repeat {r['repeat'] + 1})" in line for line in left_out)
        failed = [SHORT[c] for c in r.get("failed_checks", []) if c not in THROUGHPUT_CHECKS]
        return bool(failed) and all(f in (summary.get(r["n"]) or "") and f in headline
                                    for f in failed)

    unexplained = [r for r in runs if not explained(r)]
    latency_only = [r for r in runs if r.get("verdict") == "INVALID"
                    and not r.get("throughput_reasons")]
    boot = (doc["fit"].get("bootstrap") or {}).get("n_max") or {}
    peak = doc["fit"].get("peak") or {}
    hi = boot.get("hi")
    if peak.get("n_max_infinite") or hi is None or not math.isfinite(hi):
        hi = math.inf
    return {"exit": proc.returncode, "runs": len(runs),
            "valid": sum(v == "VALID" for v in verdicts),
            "invalid": sum(v == "INVALID" for v in verdicts),
            "left_out": left_out, "unexplained": len(unexplained),
            "latency_invalid": {str(n): v for n, v in summary.items() if v != "VALID"},
            "latency_only": len(latency_only),
            "n_max": peak.get("n_max"), "n_max_interval": [boot.get("lo"), hi],
            "alpha": doc["fit"]["alpha"], "beta": doc["fit"]["beta"],
            "gamma": doc["fit"]["gamma"],
            # the page's table has the latency verdict column, with each N's verdict in it
            "report_shows_verdicts": "latency verdict" in page and all(
                v in page for v in summary.values() if v),
            "load_average": doc.get("environment", {}).get("load_average")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("extra", nargs="*", help="arguments for cachelab scale (after --)")
    args = ap.parse_args()
    if args.runs < 2:
        ap.error("--runs must be at least 2")
    results = []
    with tempfile.TemporaryDirectory(prefix="cachelab-scale-twice-") as tmp:
        for i in range(args.runs):
            results.append(one(Path(tmp) / f"run{i + 1}", args.extra))
            r = results[-1]
            print(f"run {i + 1}: {r['valid']}/{r['runs']} VALID, Nmax {r['n_max']} "
                  f"interval {r['n_max_interval']}", file=sys.stderr)
    los = [r["n_max_interval"][0] for r in results]
    his = [r["n_max_interval"][1] for r in results]
    overlap = None not in los and max(los) <= min(his)
    explained = all(r["unexplained"] == 0 for r in results)
    shown = all(r["report_shows_verdicts"] for r in results)
    ok = overlap and explained and shown

    def interval(r: dict[str, Any]) -> str:
        lo, hi = r["n_max_interval"]
        return ("—" if lo is None else f"[{lo:.2f}, {'∞' if math.isinf(hi) else f'{hi:.2f}'}]")

    rows = [[str(i + 1), str(r["exit"]), f"{r['valid']} / {r['runs']}", str(len(r["left_out"])),
             str(r["latency_only"]), str(r["unexplained"]),
             "∞" if r["n_max"] is None or not math.isfinite(r["n_max"]) else f"{r['n_max']:.2f}",
             interval(r), f"{r['alpha']:.3f}", f"{r['beta']:.4f}", f"{r['gamma']:,.0f}",
             "yes" if r["report_shows_verdicts"] else "NO"] for i, r in enumerate(results)]
    md, commit = header("scale --quick, twice in a row", "scale_twice.py", sys.argv[1:],
                        [f"each run: `cachelab scale --quick {' '.join(args.extra)}` in a "
                         "subprocess (its own private memcached)"])
    md += markdown_table(["run", "exit", "VALID runs", "left out of the fit (named)",
                          "latencies INVALID (marked)", "INVALID, not named",
                          "Nmax", "Nmax 95 % interval (bootstrap)", "α", "β", "γ",
                          "report shows verdicts"], rows)
    md += ["", f"Every run VALID, or left out of the fit / its latencies marked INVALID with a "
           f"reason: {'yes' if explained else 'NO'}; "
           f"Nmax intervals overlap: {'yes' if overlap else 'NO'}; report shows the verdicts: "
           f"{'yes' if shown else 'NO'} — **{'PASS' if ok else 'FAIL'}**.", ""]
    for i, r in enumerate(results):
        md += [f"Run {i + 1}: left out of the fit:", *(f"- {line}" for line in r["left_out"]),
               "latencies INVALID: " + ("; ".join(f"N = {n}: {v}" for n, v
                                                  in r["latency_invalid"].items()) or "none"),
               ""]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("scale-twice", date.today().isoformat(), text,
                            {"args": vars(args), "results": results, "commit": commit})
        print(f"recorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
