"""Does cachelab's byte-LRU curve match libCacheSim's, size by size, on a trace with sizes?

On one oracleGeneral trace whose requests carry object sizes (default: libCacheSim's own
CloudPhysics block trace, ``/work/shared/reference/traces/cloudPhysicsIO.oracleGeneral.bin``,
113,872 requests over 48,974 ids, 512 B to hundreds of KiB each), at ``--points`` byte
capacities log-spaced from 0.1 % of the working set (the sum of each id's first size) up to
all of it, plus ``--sizes`` if given:

* *libCacheSim* — ``cachesim TRACE oracleGeneral lru C1,C2,…`` (sizes honoured: no
  ``--ignore-obj-size``), only with ``--libcachesim PATH`` ("skipped" otherwise): its request
  and byte miss ratio at each capacity, as it prints them (4 decimals);
* *cachelab, simulated* — ``simulate_flat(TRACE, ["lru"], caps, unit="bytes")``: LRU run at
  each capacity;
* *cachelab, curve* — ``miss_ratio_curve(TRACE, unit="bytes", sizes=caps)``: the exact curve
  from one pass of byte stack distances, what ``cachelab size`` answers from.

Every capacity's request and byte miss ratio must agree to the 4 decimals libCacheSim prints,
for both of cachelab's ways, or the run fails (exit 1); cachelab's exact miss counts are kept
too. ``--record`` writes ``benches/runs/<date>-byte-lru.md`` and the JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cachelab import environment
from cachelab.simulate.flat import load_trace, miss_ratio_curve, simulate_flat
from records import markdown_table, tool_version, write_record

DEFAULT_TRACE = "/work/shared/reference/traces/cloudPhysicsIO.oracleGeneral.bin"


def capacities(wss: int, points: int, extra: list[int]) -> list[int]:
    """``points`` log-spaced byte capacities from 0.1 % of ``wss`` to all of it, and
    ``extra``; sorted, distinct."""
    lo, hi = math.log(wss * 0.001), math.log(wss)
    caps = {min(wss, round(math.exp(lo + (hi - lo) * i / (points - 1)))) for i in range(points)}
    return sorted(caps | set(extra))


def libcachesim(binary: str, trace: str, caps: list[int]) -> tuple[list[dict[str, Any]], str]:
    """cachesim's request and byte miss ratio per capacity (its lines come in the order given);
    also the command."""
    argv = [binary, trace, "oracleGeneral", "lru", ",".join(map(str, caps))]
    # cachesim appends its result to a file in its working directory: keep that out of the
    # checkout.
    with tempfile.TemporaryDirectory(prefix="cachelab-cachesim-") as scratch:
        p = subprocess.run(argv, capture_output=True, text=True, cwd=scratch, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"byte_lru: cachesim failed ({p.returncode}):\n{p.stderr[-2000:]}")
    rows = []
    for line in p.stdout.splitlines():
        if "byte miss ratio" not in line:
            continue
        parts = line.replace(",", " ").split()
        rows.append({
            "requests": int(parts[parts.index("req") - 1]),
            "miss_ratio": float(parts[parts.index("ratio") + 1]),
            "byte_miss_ratio": float(parts[len(parts) - 1]),
            "shown_size": parts[parts.index("size") + 1],
            "line": line.strip(),
        })
    if len(rows) != len(caps):
        raise SystemExit(f"byte_lru: cachesim printed {len(rows)} results for {len(caps)} "
                         f"sizes:\n{p.stdout[-2000:]}")
    for c, r in zip(caps, rows):
        if r["shown_size"] not in (f"{c // 1024}KiB", f"{c // 2**20}MiB", f"{c // 2**30}GiB"):
            raise SystemExit(f"byte_lru: cachesim's result {r['line']!r} is not for {c} B")
    return rows, " ".join(argv)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default=DEFAULT_TRACE, help="oracleGeneral trace with sizes")
    ap.add_argument("--points", type=int, default=12,
                    help="log-spaced capacities from 0.1 %% of the working set to all (12)")
    ap.add_argument("--sizes", type=int, nargs="*", default=[], metavar="BYTES",
                    help="more capacities, in bytes")
    ap.add_argument("--libcachesim", metavar="PATH", help="libCacheSim's cachesim binary")
    ap.add_argument("--libcachesim-build", metavar="TEXT", default="",
                    help="how that binary was built (commit, compiler), for the record")
    ap.add_argument("--record", action="store_true", help="write a dated record to benches/runs/")
    ap.add_argument("--json", metavar="PATH", help="also save the raw numbers here")
    a = ap.parse_args(argv)
    if not Path(a.trace).is_file():
        ap.error(f"--trace {a.trace}: no such file")
    if a.points < 2:
        ap.error("--points must be at least 2")
    if any(s <= 0 for s in a.sizes):
        ap.error("--sizes must be positive byte counts")
    if a.libcachesim and not shutil.which(a.libcachesim):
        ap.error(f"--libcachesim {a.libcachesim}: not an executable")

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = os.getloadavg()
    info = load_trace(a.trace).inspect()
    wss = int(info["working_set_bytes"])
    caps = capacities(wss, a.points, a.sizes)
    sim = simulate_flat(a.trace, policies=["lru"], sizes=caps, unit="bytes")
    curve = miss_ratio_curve(a.trace, unit="bytes", sizes=caps)
    lcs_rows: list[dict[str, Any]] | None = None
    command = None
    if a.libcachesim:
        lcs_rows, command = libcachesim(shutil.which(a.libcachesim) or a.libcachesim,
                                        a.trace, caps)

    rows: list[dict[str, Any]] = []
    for i, (c, r) in enumerate(zip(caps, sim.results)):
        row = {
            "capacity": c,
            "fraction_of_working_set": c / wss,
            "requests": r.requests,
            "misses": r.misses,
            "miss_bytes": r.miss_bytes,
            "sim_miss_ratio": r.miss_ratio,
            "sim_byte_miss_ratio": r.byte_miss_ratio,
            "curve_miss_ratio": curve.miss_ratios[i],
            "curve_byte_miss_ratio": curve.byte_miss_ratios[i],
        }
        if lcs_rows is not None:
            x = lcs_rows[i]
            row.update(libcachesim_miss_ratio=x["miss_ratio"],
                       libcachesim_byte_miss_ratio=x["byte_miss_ratio"],
                       libcachesim_requests=x["requests"])
            row["match"] = x["requests"] == r.requests and all(
                f"{row[k]:.4f}" == f"{x[m]:.4f}"
                for k, m in (("sim_miss_ratio", "miss_ratio"),
                             ("sim_byte_miss_ratio", "byte_miss_ratio"),
                             ("curve_miss_ratio", "miss_ratio"),
                             ("curve_byte_miss_ratio", "byte_miss_ratio")))
        rows.append(row)
    matched = None if lcs_rows is None else sum(r["match"] for r in rows)
    result = {
        "benchmark": "byte-lru",
        "started": started,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "trace": {"path": a.trace, "requests": info.get("requests"),
                  "unique_keys": info.get("unique_keys"), "working_set_bytes": wss},
        "curve_exact": curve.exact,
        "rows": rows,
        "matched": matched,
        "environment": {**environment.facts(), "cc": tool_version(["cc", "--version"])},
        "load_average_1m": {"before": load_before[0], "after": os.getloadavg()[0]},
        "libcachesim": a.libcachesim,
        "libcachesim_build": a.libcachesim_build,
        "libcachesim_command": command,
    }
    print(render(result))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
    if a.record:
        md = write_record("byte-lru", started[:10], render(result, full=True), result)
        print(f"recorded {md}", file=sys.stderr)
    return 0 if matched in (None, len(rows)) else 1


def render(r: dict[str, Any], full: bool = False) -> str:
    t = r["trace"]
    have = r["libcachesim"] is not None
    table = []
    for x in r["rows"]:
        lcs = ((f"{x['libcachesim_miss_ratio']:.4f}", f"{x['libcachesim_byte_miss_ratio']:.4f}")
               if have else ("skipped", "skipped"))
        table.append([
            f"{x['capacity']:,}", f"{100 * x['fraction_of_working_set']:.3g} %",
            lcs[0], f"{x['sim_miss_ratio']:.4f}", f"{x['curve_miss_ratio']:.4f}",
            lcs[1], f"{x['sim_byte_miss_ratio']:.4f}", f"{x['curve_byte_miss_ratio']:.4f}",
            f"{x['misses']:,}", ("yes" if x["match"] else "NO") if have else "",
        ])
    n = len(r["rows"])
    verdict = ("skipped (no --libcachesim)" if r["matched"] is None
               else f"**{'PASS' if r['matched'] == n else 'FAIL'}**: {r['matched']} of {n} "
               "capacities agree")
    lines = [f"# Byte-LRU curve against libCacheSim, {r['started']}", ""] if full else []
    lines += [
        f"Trace: `{Path(t['path']).name}`, {t['requests']:,} requests over "
        f"{t['unique_keys']:,} ids, working set {t['working_set_bytes']:,} B; LRU with object "
        "sizes honoured, capacity in bytes.",
        "",
        *markdown_table(["capacity B", "of WSS", "miss: libCacheSim", "cachelab sim",
                         "cachelab curve", "byte miss: libCacheSim", "cachelab sim",
                         "cachelab curve", "cachelab misses", "agree"], table),
        "",
        f"Request and byte miss ratios agree to libCacheSim's 4 decimals: {verdict}. "
        f"cachelab's curve is exact: {'yes' if r['curve_exact'] else 'NO'}.",
    ]
    if full:
        lines += ["", "```", r["command"], "```", ""]
        if have:
            lines += [f"libCacheSim: `{r['libcachesim_command']}`", ""]
            if r["libcachesim_build"]:
                lines += [f"Built: {r['libcachesim_build']}", ""]
        lines += [
            f"1-minute load average: {r['load_average_1m']['before']:.2f} before, "
            f"{r['load_average_1m']['after']:.2f} after (the numbers here do not depend on it).",
            "",
            "## Environment",
            "",
            *markdown_table(["fact", "value"],
                            [[str(k), str(v)] for k, v in r["environment"].items()]),
            "",
            "Raw numbers: the JSON file beside this one.",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
