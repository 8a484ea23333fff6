"""Reading a request trace in parts without simulating, this tree against an earlier commit,
side by side on one Parquet file.

What ``simulate TRACE`` pays before the Rust core sees a touch: reading the Parquet trace
part by part (``cachelab.traces.stream``), checking every part and interning its item names
into catalog ids. The trace is ``cachelab trace synth --requests N`` under ``--dir`` (made
once and reused, as ``request_stream.py`` makes and reuses it). The earlier commit's Python
package (``--baseline``, a git revision) is extracted under ``--dir`` with ``git archive``
and given this tree's compiled core (the read path is Python and pyarrow), so the two differ
only in their Python.

Each round runs one read-only pass per version in a fresh process (the versions alternate,
the baseline first), measured as ``request_stream.py`` measures its read-only pass: CPU
seconds (user + system) and peak RSS of the child, and wall time. Round 0 warms the page
cache and prints a SHA-256 of every part's columns (ids, times, instances, route codes and
names, base_ms, touch offsets and items): the two versions must agree exactly; it is left out
of the medians. Reported: the median of the other rounds, touches per CPU-second and the
ratio. With ``--simulate S`` each round also runs ``cachelab simulate TRACE --strategies S
--draws 1 --threads 1 --no-plots`` per version (end to end: start-up, reading and the core;
its results must be the same); with ``--whole N``, loading a ``trace synth`` trace of N
requests whole in memory (``load_request_trace``, as ``simulate --in-memory`` does; the
same trace from both, by SHA-256 of every column). The machine is shared: the load average
is recorded.

``--record`` writes ``benches/runs/<date>-request-read.md`` and the JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from records import header, markdown_table, write_record
from request_stream import ROOT, _load, measured, synth

READ = (
    "import hashlib, json, sys\n"
    "from cachelab.traces.stream import open_request_parts\n"
    "parts = open_request_parts(sys.argv[1], 'parquet')\n"
    "digest = hashlib.sha256() if sys.argv[2] == 'digest' else None\n"
    "n = 0\n"
    "for p in parts.parts():\n"
    "    n += len(p.touch_items)\n"
    "    if digest is not None:\n"
    "        for name in ('request_ids', 'time', 'instance', 'route', 'base_ms',\n"
    "                     'touch_offsets', 'touch_items'):\n"
    "            a = getattr(p, name)\n"
    "            digest.update(f'{name} {a.dtype} {p.first}'.encode())\n"
    "            digest.update(a.tobytes())\n"
    "if digest is not None:\n"
    "    digest.update(repr(parts.route_names).encode())\n"
    "print(json.dumps({'touches': n, 'sha256': digest.hexdigest() if digest else None}))\n"
)
WHOLE = (
    "import hashlib, json, sys\n"
    "from cachelab.traces import load_request_trace\n"
    "t = load_request_trace(sys.argv[1])\n"
    "digest = hashlib.sha256()\n"
    "if sys.argv[2] == 'digest':\n"
    "    for name in ('request_ids', 'time', 'instance', 'route', 'base_ms', 'touch_offsets',\n"
    "                 'touch_items', 'item_sizes', 'item_kinds', 'child_offsets',\n"
    "                 'child_items'):\n"
    "        a = getattr(t, name)\n"
    "        digest.update(f'{name} {a.dtype}'.encode())\n"
    "        digest.update(a.tobytes())\n"
    "    digest.update(repr((t.route_names, t.kind_names, t.item_keys)).encode())\n"
    "print(json.dumps({'touches': t.n_touches, 'sha256': digest.hexdigest()}))\n"
)


def baseline_package(rev: str, where: Path) -> tuple[Path, str]:
    """``rev``'s ``python/cachelab`` extracted under ``where`` with this tree's compiled
    core; (the directory for PYTHONPATH, the full commit)."""
    commit = subprocess.run(["git", "rev-parse", rev], capture_output=True, text=True,
                            cwd=ROOT, check=True).stdout.strip()
    target = where / f"baseline-{commit[:12]}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "python/cachelab"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    for core in (ROOT / "python" / "cachelab").glob("_core*.so"):
        shutil.copy2(core, target / "python" / "cachelab" / core.name)
    return target / "python", commit


def synthesized(where: Path, requests: int) -> tuple[Path, dict[str, Any]]:
    """A ``trace synth`` trace of ``requests`` requests under ``where`` (made once, then
    reused) and its counts."""
    trace = where / f"synth-{requests}.parquet"
    counts = where / f"synth-{requests}.json"
    if trace.exists() and counts.exists():  # synthesized before, with this size
        made = {**json.loads(counts.read_text()), "reused": True}
    else:
        made = synth(trace, requests, None)
        counts.write_text(json.dumps(made))
    print(f"synth: {made}", file=sys.stderr)
    return trace, made


def simulated(trace: Path, strategy: str, out: Path, python: Path) -> dict[str, Any]:
    """``simulate TRACE`` with ``python``'s package, measured; with its strategies' results."""
    r = measured([sys.executable, "-m", "cachelab", "simulate", str(trace), "--strategies",
                  strategy, "--draws", "1", "--threads", "1", "--no-plots", "--format", "json",
                  "--out", str(out)], python=python)
    d = json.loads(r.pop("out"))
    r.update(strategies=d["strategies"],
             simulation_cpu_s=sum(d["trace"].get("simulation_cpu_s", {}).values()))
    return r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=50_000_000, help="requests synthesized")
    p.add_argument("--baseline", default="main",
                   help="git revision whose Python package is measured beside this tree's")
    p.add_argument("--rounds", type=int, default=3,
                   help="measured rounds after the warm-up round (the median is reported)")
    p.add_argument("--dir", type=Path, default=Path("/tmp/cachelab-request-stream"),
                   help="where the trace and the baseline package go (not the repository)")
    p.add_argument("--simulate", metavar="STRATEGY", default="",
                   help="also time `simulate TRACE --strategies STRATEGY` end to end per version")
    p.add_argument("--whole", metavar="N", type=int, default=0,
                   help="also time loading a `trace synth` trace of N requests whole in memory "
                   "(load_request_trace, as simulate --in-memory does) per version")
    p.add_argument("--note", default="", help="a remark to keep with the record")
    p.add_argument("--record", action="store_true", help="write benches/runs/…-request-read")
    a = p.parse_args()
    if ROOT in a.dir.resolve().parents or a.rounds < 1:
        print("--dir must be outside the repository; --rounds must be >= 1", file=sys.stderr)
        return 2
    a.dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    trace, made = synthesized(a.dir, a.requests)
    whole_trace, whole_made = synthesized(a.dir, a.whole) if a.whole else (trace, made)
    base_path, base_commit = baseline_package(a.baseline, a.dir)
    versions = {"baseline": base_path, "this tree": ROOT / "python"}
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in versions}
    digests: dict[str, str] = {}
    sims: dict[str, list[dict[str, Any]]] = {v: [] for v in versions}
    wholes: dict[str, list[dict[str, Any]]] = {v: [] for v in versions}
    for r in range(a.rounds + 1):
        for label, path in versions.items():
            for program, src, want, kept in ((READ, trace, made, runs), (WHOLE, whole_trace,
                                             whole_made, wholes if a.whole else None)):
                if kept is None:
                    continue
                m = measured([sys.executable, "-c", program, str(src),
                              "digest" if r == 0 else "time"], python=path)
                out = json.loads(m.pop("out"))
                if out["touches"] != want["touches"]:
                    raise RuntimeError(f"{label} read {out['touches']} touches, the synth "
                                       f"wrote {want['touches']}")
                if r == 0:
                    digests[f"{label} {'parts' if kept is runs else 'whole'}"] = out["sha256"]
                else:
                    kept[label].append(m)
                print(f"round {r} {label} {'parts' if kept is runs else 'whole'}: {m}",
                      file=sys.stderr)
            if a.simulate and r > 0:
                sims[label].append(simulated(trace, a.simulate, a.dir / "out", path))
                shown = {k: v for k, v in sims[label][-1].items() if k != "strategies"}
                print(f"round {r} {label} simulate: {shown}", file=sys.stderr)
    same_parts = len({d for k, d in digests.items() if k.endswith("parts")}) == 1
    same = same_parts and len({d for k, d in digests.items() if k.endswith("whole")}) <= 1
    touches = made["touches"]
    med = {v: {k: statistics.median(x[k] for x in rs) for k in ("cpu_s", "wall_s", "rss_mib")}
           for v, rs in runs.items()}
    load_after = os.getloadavg()
    result: dict[str, Any] = {"requests": made["requests"], "touches": touches, "synth": made,
                              "baseline": base_commit, "rounds": runs, "median": med,
                              "sha256": digests, "identical": same,
                              "load_before": load_before, "load_after": load_after}
    lines, commit = header("Reading a request trace in parts: this tree vs a baseline",
                           "request_read.py", sys.argv[1:], [
                               f"trace: {made['requests']:,} requests, {touches:,} touches "
                               f"(`trace synth`, Parquet); baseline {a.baseline} = "
                               f"{base_commit[:12]} (its Python, this tree's compiled core)",
                               f"identical parts (SHA-256 of every part's columns): "
                               f"{'yes' if same_parts else 'NO'}",
                               f"load average before {_load(load_before)}"])
    result["commit"] = commit
    base_cpu = med["baseline"]["cpu_s"]
    rows = [[v, f"{m['cpu_s']:.1f}",
             " ".join(f"{x['cpu_s']:.1f}" for x in runs[v]), f"{m['wall_s']:.1f}",
             f"{m['rss_mib']:.0f}", f"{touches / m['cpu_s'] / 1e6:.1f} M",
             f"{base_cpu / m['cpu_s']:.2f}x"] for v, m in med.items()]
    lines += markdown_table(["version", "CPU s (median)", "CPU s per round", "wall s",
                             "peak RSS MiB", "touches/CPU-s", "speed vs baseline"], rows)
    if a.whole:
        whole_med = {v: {k: statistics.median(x[k] for x in rs) for k in (
            "cpu_s", "wall_s", "rss_mib")} for v, rs in wholes.items()}
        result.update(whole=whole_made, whole_rounds=wholes, whole_median=whole_med)
        base_whole = whole_med["baseline"]["cpu_s"]
        lines += ["", f"`load_request_trace` of a {whole_made['requests']:,}-request trace "
                  f"({whole_made['touches']:,} touches) whole in memory (start-up included; "
                  f"identical: {'yes' if same else 'NO'}):", ""]
        lines += markdown_table(["version", "CPU s (median)", "CPU s per round", "wall s",
                                 "peak RSS MiB", "speed vs baseline"], [
            [v, f"{m['cpu_s']:.1f}", " ".join(f"{x['cpu_s']:.1f}" for x in wholes[v]),
             f"{m['wall_s']:.1f}", f"{m['rss_mib']:.0f}", f"{base_whole / m['cpu_s']:.2f}x"]
            for v, m in whole_med.items()])
    if a.simulate:
        same_sim = len({json.dumps(x.pop("strategies"), sort_keys=True)
                        for rs in sims.values() for x in rs}) == 1
        same = same and same_sim
        result.update(simulate=a.simulate, simulate_rounds=sims, simulate_identical=same_sim)
        sim_med = {v: {k: statistics.median(x[k] for x in rs) for k in (
            "cpu_s", "wall_s", "rss_mib", "simulation_cpu_s")} for v, rs in sims.items()}
        result["simulate_median"] = sim_med
        base_sim = sim_med["baseline"]["cpu_s"]
        lines += ["", f"`simulate TRACE --strategies {a.simulate} --draws 1 --threads 1` end to "
                  f"end (results identical: {'yes' if same_sim else 'NO'}):", ""]
        lines += markdown_table(["version", "CPU s (median)", "CPU s per round", "wall s",
                                 "peak RSS MiB", "core CPU s", "touches/CPU-s end to end",
                                 "speed vs baseline"], [
            [v, f"{m['cpu_s']:.1f}", " ".join(f"{x['cpu_s']:.1f}" for x in sims[v]),
             f"{m['wall_s']:.1f}", f"{m['rss_mib']:.0f}", f"{m['simulation_cpu_s']:.1f}",
             f"{touches / m['cpu_s'] / 1e6:.1f} M", f"{base_sim / m['cpu_s']:.2f}x"]
            for v, m in sim_med.items()])
    lines += ["", f"Load average (1, 5, 15 min) before {_load(load_before)}, at the end "
              f"{_load(load_after)}."]
    if a.note:
        lines += ["", "## Notes", "", a.note]
    text = "\n".join(lines)
    print(text)
    if a.record:
        md = write_record("request-read", time.strftime("%Y-%m-%d", time.gmtime()), text,
                          result)
        print(f"wrote {md}", file=sys.stderr)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
