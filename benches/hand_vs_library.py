"""Hand-written code against the well-kept crates that could replace it, side by side on the
hot paths (issue 30): a baseline commit with the hand-written code against this tree (or a
commit, ``--tree``).

Each side is built from the same small Rust examples (this tree's copies, which use only
public APIs both sides have), so the two differ only in the code under them:

* ``route_bench`` — ``Distribution::server_for`` per key (``load``'s keys, a pool of 3):
  ketama hashes the key with MD5 (hand-written, then the ``md-5`` crate), rendezvous with
  MurmurHash3 (hand-written on both sides; see ``murmur_bench``);
* ``capture_bench`` — ``State::line`` per memcached ``watch`` line, keyed BLAKE2b pseudonym
  included (hand-written, then the ``blake2`` crate);
* ``csv_bench`` — ``FlatTrace::parse`` per row of a 5 M-row CSV trace in memory (the reader
  stays hand-written: commit 650b8c0 read it with the ``csv`` crate, and ``--tree 650b8c0``
  measures that);
* ``t_bench`` — Student's t quantile and CDF (hand-written incomplete beta, then ``statrs``'s);
* ``murmur_bench`` (this tree only) — MurmurHash3 x86_32 per rendezvous text: our own beside
  the ``murmur3`` and ``mur3`` crates, in one process.

The baseline (``--baseline``, a git revision) is extracted with ``git archive`` under
``--dir``, and so is the other side when ``--tree REV`` names one (else it is this working
tree); both sides build in this tree's ``target/``, one after the other, their binaries
copied out. Every run is pinned with ``taskset -c CPU`` (``--cpu``) and times the thread's
CPU (``/proc/thread-self/schedstat``) after an untimed warm-up pass. Rounds alternate the
sides (the baseline first on even rounds); each run prints a checksum of its results, which
must be the same on both sides (for the t distribution, results rounded to 1e-6). Reported:
the median ns per item over the rounds and the ratio after / before (below 1: after is
faster).

``--record`` writes ``benches/runs/<date>-hand-vs-library.md`` and the JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from records import header, markdown_table, write_record

ROOT = Path(__file__).resolve().parent.parent

#: (example, package, items argument, what it measures): run on both sides.
SIDE_BY_SIDE = (
    ("route_bench", "cachelab-client", "1000000", "pool routing, per key"),
    ("capture_bench", "cachelab-capture", "500000", "capture, per watch line"),
    ("csv_bench", "cachelab-sim", "5000000", "flat CSV reader, per row"),
    ("t_bench", "cachelab-usl", "20000", "Student's t, per call"),
)
#: Run on this tree only: three MurmurHash3 implementations in one process.
MURMUR = ("murmur_bench", "cachelab-client", "1000000")


def build(tree: Path, examples: list[tuple[str, str]], into: Path) -> None:
    """Builds ``examples`` ((name, package)) of ``tree`` in release mode in this tree's
    target/, and copies the binaries into ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CARGO_TARGET_DIR": str(ROOT / "target")}
    for name, package in examples:
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", package, "--example",
                        name], cwd=tree, env=env, check=True)
        shutil.copy2(ROOT / "target" / "release" / "examples" / name, into / name)


def extracted(rev: str, where: Path) -> tuple[Path, str]:
    """``rev``'s Rust workspace extracted under ``where``, with this tree's bench examples
    copied in; returns its path and the full commit."""
    commit = subprocess.run(["git", "rev-parse", rev], capture_output=True, text=True,
                            cwd=ROOT, check=True).stdout.strip()
    tree = where / f"rev-{commit[:12]}"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "Cargo.toml", "Cargo.lock", "crates"],
                             cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    for name, package, _, _ in SIDE_BY_SIDE:
        crate = package.removeprefix("cachelab-")
        dst = tree / "crates" / crate / "examples"
        dst.mkdir(exist_ok=True)
        shutil.copy2(ROOT / "crates" / crate / "examples" / f"{name}.rs", dst / f"{name}.rs")
    return tree, commit


def run(binary: Path, items: str, cpu: int) -> list[dict[str, Any]]:
    """One pinned run of a bench example: its JSON lines."""
    out = subprocess.run(["taskset", "-c", str(cpu), str(binary), items, "1"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", default="8212b3d",
                   help="git revision with the hand-written code, measured beside this tree "
                   "(default: the last with our own MD5, BLAKE2b and t distribution)")
    p.add_argument("--tree", metavar="REV", default="",
                   help="measure this git revision as the other side instead of the working "
                   "tree (it needs murmur_bench's dev-dependencies)")
    p.add_argument("--rounds", type=int, default=7, help="rounds; the median is reported")
    p.add_argument("--cpu", type=int, default=1, help="the core every run is pinned to")
    p.add_argument("--dir", type=Path, default=Path("/tmp/cachelab-hand-vs-library"),
                   help="where the baseline is extracted and the binaries kept")
    p.add_argument("--note", default="", help="a remark to keep with the record")
    p.add_argument("--record", action="store_true",
                   help="write benches/runs/<date>-hand-vs-library.md and .json")
    a = p.parse_args()
    if ROOT in a.dir.resolve().parents or a.rounds < 1:
        print("--dir must be outside the repository; --rounds must be >= 1", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    base_tree, base_commit = extracted(a.baseline, a.dir)
    tree, tree_commit = extracted(a.tree, a.dir) if a.tree else (ROOT, "")
    if a.tree:
        shutil.copy2(ROOT / "crates/client/examples/murmur_bench.rs",
                     tree / "crates/client/examples/murmur_bench.rs")
    examples = [(name, package) for name, package, _, _ in SIDE_BY_SIDE]
    build(base_tree, examples, a.dir / "bin-baseline")
    build(tree, [*examples, MURMUR[:2]], a.dir / "bin-tree")
    sides = {"hand-written": a.dir / "bin-baseline", "library": a.dir / "bin-tree"}
    ns: dict[str, dict[str, list[float]]] = {}
    checks: dict[str, dict[str, set[int]]] = {}
    murmur: dict[str, list[float]] = {}
    for r in range(a.rounds):
        order = list(sides.items()) if r % 2 == 0 else list(sides.items())[::-1]
        for name, _, items, _ in SIDE_BY_SIDE:
            for side, bins in order:
                for row in run(bins / name, items, a.cpu):
                    ns.setdefault(row["name"], {}).setdefault(side, []).append(
                        row["ns_per_item"])
                    checks.setdefault(row["name"], {}).setdefault(side, set()).add(row["check"])
        for row in run(sides["library"] / MURMUR[0], MURMUR[2], a.cpu):
            murmur.setdefault(row["name"], []).append(row["ns_per_item"])
        print(f"round {r}: " + ", ".join(
            f"{k} {v['hand-written'][-1]:.0f}/{v['library'][-1]:.0f}" for k, v in ns.items()),
            file=sys.stderr)
    same = {k: len(v["hand-written"] | v["library"]) == 1 for k, v in checks.items()}
    med = {k: {s: statistics.median(x) for s, x in v.items()} for k, v in ns.items()}
    murmur_med = {k: statistics.median(v) for k, v in murmur.items()}
    load_after = os.getloadavg()
    result: dict[str, Any] = {
        "baseline": base_commit, "tree": tree_commit or "working tree", "rounds": a.rounds,
        "cpu": a.cpu, "ns_per_item": ns,
        "median": med, "same_results": same, "murmur_ns_per_text": murmur,
        "murmur_median": murmur_med, "load_before": load_before, "load_after": load_after,
        "note": a.note,
    }
    lines, commit = header(
        "Hand-written code vs the crates that could replace it", "hand_vs_library.py",
        sys.argv[1:], [
            f"before: {a.baseline} = {base_commit[:12]} (hand-written); after: "
            + (f"{a.tree} = {tree_commit[:12]}" if a.tree else "this working tree")
            + "; the same example programs on both sides",
            f"{a.rounds} rounds, sides alternating, each run pinned with `taskset -c {a.cpu}`, "
            "CPU time of the measuring thread after an untimed warm-up pass",
            "same results on both sides (checksums): " + ", ".join(
                f"{k} {'yes' if v else 'NO'}" for k, v in same.items()),
            f"load average before {', '.join(f'{x:.2f}' for x in load_before)}",
            *([a.note] if a.note else [])])
    result["commit"] = commit
    rows = []
    for name, m in med.items():
        rows.append([name, f"{m['hand-written']:.1f}", f"{m['library']:.1f}",
                     f"{m['library'] / m['hand-written']:.2f}",
                     " ".join(f"{x:.0f}" for x in ns[name]["hand-written"]),
                     " ".join(f"{x:.0f}" for x in ns[name]["library"])])
    lines += markdown_table(["bench", "before ns (median)", "after ns (median)",
                             "after / before", "before, per round", "after, per round"], rows)
    ours = murmur_med.get("murmur3-ours")
    if ours:
        lines += ["", "MurmurHash3 x86_32 per rendezvous text (`host:port-key`, ~40 bytes), "
                  "three implementations in one process:", ""]
        lines += markdown_table(
            ["implementation", "ns (median)", "/ ours", "per round"],
            [[k, f"{v:.1f}", f"{v / ours:.2f}", " ".join(f"{x:.1f}" for x in murmur[k])]
             for k, v in murmur_med.items()])
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    text = "\n".join(lines)
    print(text)
    if a.record:
        print(f"recorded: {write_record('hand-vs-library', day, text, result)}",
              file=sys.stderr)
    return 0 if all(same.get(k, True) for k in ("ketama-md5", "rendezvous-murmur3",
                                                "capture-blake2b", "flat-csv")) else 1


if __name__ == "__main__":
    sys.exit(main())
