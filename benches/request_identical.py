"""Are the request-level simulator's results bit for bit the same as another build's?

A check for refactors of ``crates/sim/src/request/`` that must not change a result. It runs
every strategy the parser accepts, in every form (``none``; ``lru:`` and ``fixed:`` with item
and byte capacities, from one item or byte to the whole catalog; ``prefetch-children`` and
``prefetch:depth=D`` up to the largest depth; every combination of the three kinds), through
every entry of ``cachelab._core`` that runs the engine:

* ``simulate_requests`` (the summaries: every band, the curve, the routes, the counts) with
  training shares 0.5, 0.9 and 0 (cold caches; not for ``fixed:``), three draws;
* ``request_costs`` (every per-request record) for two draws;
* ``RequestStream`` (the trace fed in parts of 4,096 requests, the training pass first for
  ``fixed:``): every part's ``part_costs`` and the ``finish`` summaries, with the default
  exact limit and one small enough that percentiles come from histograms;

on the traces the request-simulation tests and benches use: ``trace synth``'s default
(100,000 requests), the tests' ``SynthParams(requests=3000, seed=5)``, ``(2000, seed=3)``,
``(2000, seed=9, instances=1)``, the streamed tests' ``(3 × 4096 + 700, seed=3)``, the
``heavy-pages`` preset, and a 300-request trace of a whole catalog (most topics walked rather
than listed); with the ``appengine-2017`` latency model, with and without a rank sequence.

Every float is kept exactly (JSON's ``repr``). ``--out PATH`` writes the outputs of the
``cachelab._core`` on ``PYTHONPATH`` (say, the build before a change), one JSON line per case
(about 1.4 GB; about 11 minutes on a loaded 2-CPU machine); ``--against PATH`` computes them
again with this build and compares case by case as it goes, naming the first difference;
with ``--record`` it writes ``benches/runs/<date>-request-identical.md`` (and the JSON beside
it: each case's SHA-256 in both builds). Exit status 0 when every case is identical, 1 when
one differs, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from cachelab import _core
from cachelab.traces import SynthParams, synthesize
from records import header, markdown_table, write_record

PART = 4096


def strategies(n_items: int) -> list[str]:
    """Every form the parser accepts, alone and combined (`fixed:` ones last)."""
    whole = str(n_items)
    plain = [
        "none", "lru:1", "lru:50", "lru:300", f"lru:{whole}", "lru:1B", "lru:4KiB", "lru:1.5K",
        "lru:200KB", "lru:64MB", "prefetch-children", "prefetch:depth=1", "prefetch:depth=2",
        "prefetch:depth=3", "prefetch:depth=64", "lru:1+prefetch-children",
        "lru:300+prefetch-children", "lru:200+prefetch:depth=2", "lru:1B+prefetch:depth=2",
        "lru:50KB+prefetch:depth=2", f"lru:{whole}+prefetch:depth=64",
        "prefetch:depth=3 + LRU:64m",
    ]
    fixed = [
        "fixed:1", "fixed:300", f"fixed:{whole}", "fixed:1500B", "fixed:200KB",
        "fixed:300+lru:100", "fixed:200KB+lru:64KB", "fixed:1+lru:1", f"fixed:{whole}+lru:10",
        "fixed:300+prefetch-children", "fixed:100KB+prefetch:depth=3",
        f"fixed:{whole}+prefetch-children", "fixed:2000+prefetch:depth=2",
        "fixed:100+lru:100+prefetch:depth=2", "fixed:50KB+lru:20KB+prefetch-children",
        "prefetch:depth=64+lru:5+fixed:5",
    ]
    return plain + fixed


def traces() -> list[tuple[str, Any]]:
    cases = [
        ("synth default", SynthParams()),
        ("requests=3000 seed=5", SynthParams(requests=3000, seed=5)),
        ("requests=2000 seed=3", SynthParams(requests=2000, seed=3)),
        ("requests=2000 seed=9 instances=1", SynthParams(requests=2000, seed=9, instances=1)),
        ("requests=12988 seed=3", SynthParams(requests=3 * PART + 700, seed=3)),
        ("heavy-pages requests=2000 seed=5",
         SynthParams.preset("heavy-pages", requests=2000, seed=5)),
        ("requests=300 seed=2", SynthParams(requests=300, seed=2)),
    ]
    return [(name, synthesize(p)) for name, p in cases]


def models() -> list[tuple[str, Any]]:
    from cachelab.simulation.model import latency_model

    try:
        from cachelab.profile import load_profile
    except ImportError:  # the package's name before issue 30
        from cachelab.profiles import load_profile
    profile = load_profile("appengine-2017")
    out = [("appengine-2017", latency_model(profile).to_core())]
    # The rank sequence of tests/simulation's test: fast then slow stretches.
    rng = np.random.default_rng(3)
    ranks = [*rng.uniform(0, 0.5, 500).round(5).tolist(), *rng.uniform(0.5, 1, 500).round(5)]
    profile.sequence = {"ranks": ranks, "segments": [500, 500], "lag1": None}
    out.append(("appengine-2017 + rank sequence", latency_model(profile).to_core()))
    return out


def plain(x: Any) -> Any:
    """`x` with numpy values and tuples turned into JSON's types (floats stay exact)."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, bytes):
        return np.frombuffer(x, "<f8").tolist()
    return x


def streamed(trace: Any, model: Any, specs: list[str], exact_limit: int) -> dict:
    """`RequestStream` over `trace` in parts: every part's costs, and the results."""
    n = len(trace.time)
    catalog = {
        "item_sizes": trace.item_sizes.astype("<u8").tobytes(),
        "child_offsets": trace.child_offsets.astype("<u4").tobytes(),
        "child_items": trace.child_items.astype("<u4").tobytes(),
    }

    def parts() -> list[dict]:
        out = []
        for a in range(0, n, PART):
            b = min(n, a + PART)
            offs = trace.touch_offsets[a:b + 1].astype(np.int64)
            out.append({
                "time": trace.time[a:b].astype("<f8").tobytes(),
                "instance": trace.instance[a:b].astype("<u4").tobytes(),
                "route": trace.route[a:b].astype("<u4").tobytes(),
                "base_ms": trace.base_ms[a:b].astype("<f8").tobytes(),
                "touch_offsets": (offs - offs[0]).astype("<u8").tobytes(),
                "touch_items": trace.touch_items[offs[0]:offs[-1]].astype("<u4").tobytes(),
            })
        return out

    stream = _core.RequestStream(**catalog, model=model, strategies=specs, requests=n,
                                 train=0.5, draws=3, seed=4, threads=1, exact_limit=exact_limit,
                                 costs=True)
    if stream.needs_training:
        for p in parts():
            if not stream.train(**p):
                break
    costs = []
    for p in parts():
        stream.feed(**p)
        costs.append([plain(stream.part_costs(k)) for k in range(len(specs))])
    return {"part_costs": costs, "results": plain(stream.finish())}


def outputs() -> Iterator[tuple[str, Any]]:
    """Every case's name and output, one at a time."""
    for tname, trace in traces():
        core = trace.to_core()
        specs = strategies(trace.n_items)
        unfixed = [s for s in specs if "fixed" not in s.lower()]
        for mname, model in models():
            at = f"{tname} | {mname}"
            for train in (0.5, 0.9):
                yield f"{at} | simulate train={train}", plain(_core.simulate_requests(
                    core, model, specs, train=train, draws=3, seed=7, threads=1))
            yield f"{at} | simulate train=0", plain(_core.simulate_requests(
                core, model, unfixed, train=0.0, draws=3, seed=7, threads=1))
            for s in specs:
                for draw in (0, 1):
                    yield f"{at} | costs {s} draw={draw}", plain(_core.request_costs(
                        core, model, s, train=0.5, seed=11, draw=draw))
            if len(trace.time) > PART and np.all(np.diff(trace.time) >= 0):
                for limit in (1 << 22, 5000):
                    yield f"{at} | stream exact_limit={limit}", streamed(
                        trace, model, specs, limit)


def digest(x: Any) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True).encode()).hexdigest()


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where `a` and `b` first differ, as a path and the two values."""
    if type(a) is not type(b):
        return f"{path or '.'}: {a!r:.80} vs {b!r:.80}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'new' if k not in a else 'old'}"
            if a[k] != b[k]:
                return first_difference(a[k], b[k], f"{path}.{k}")
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} entries vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path or '.'}: {a!r:.80} vs {b!r:.80}"


def open_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """The cases saved by ``--out`` at `path`, in order."""
    with path.open() as f:
        for line in f:
            d = json.loads(line)
            yield d["case"], d["output"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="write this build's outputs here (JSON lines)")
    p.add_argument("--against", type=Path, help="compare this build with outputs saved by --out")
    p.add_argument("--label", default="", help="what the saved outputs' build is, for the record")
    p.add_argument("--note", default="", help="a remark to keep with the record")
    p.add_argument("--record", action="store_true",
                   help="write benches/runs/<date>-request-identical.md (with --against)")
    args = p.parse_args(argv)
    if not (args.out or args.against) or (args.record and not args.against):
        p.print_usage(sys.stderr)
        print("request_identical.py: give --out, or --against (with --record)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    saved = open_lines(args.against) if args.against else iter(())
    out = args.out.open("w") if args.out else None
    data, bad = [], 0
    for case, b in outputs():
        if out:
            out.write(json.dumps({"case": case, "output": b}) + "\n")
        if not args.against:
            continue
        old_case, a = next(saved, (None, None))
        same = old_case == case and a == b
        why = ("" if same else f"the saved outputs have {old_case!r} here" if old_case != case
               else first_difference(a, b))
        bad += not same
        data.append({"case": case, "old": digest(a) if a is not None else None,
                     "new": digest(b), "same": same, "difference": why})
        if not same:
            print(f"DIFFERS {case}: {why}", file=sys.stderr)
    extra = sum(1 for _ in saved)
    if extra:
        bad += extra
        print(f"DIFFERS: the saved outputs have {extra} more cases", file=sys.stderr)
    if out:
        out.close()
    print(f"done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if not args.against:
        return 0
    kinds: dict[str, list[int]] = {}
    for d in data:
        kind = d["case"].split(" | ")[2].split(" ")[0]
        k = kinds.setdefault(kind, [0, 0])
        k[0] += 1
        k[1] += d["same"]
    rows = [[kind, f"{n:,}", f"{same:,}"] for kind, (n, same) in sorted(kinds.items())]
    verdict = "identical" if bad == 0 else f"{bad} of {len(data) + extra} cases differ"
    print(f"{len(data)} cases: {verdict}")
    if args.record:
        argv_shown = sys.argv[1:] if argv is None else argv
        lines, commit = header("Request-level results before and after a change",
                               "request_identical.py", [shlex.join(argv_shown)],
                               [f"saved outputs: `{args.against}` — {args.label or 'unlabelled'}",
                                f"cases: {len(data):,} (traces × latency models × entry × "
                                f"strategy / training share / draw / exact limit)"])
        lines += markdown_table(["entry", "cases", "identical"], rows)
        lines += ["", f"Verdict: **{verdict}**.", ""]
        if args.note:
            lines += ["## Notes", "", args.note, ""]
        lines += ["The JSON beside this record lists every case with the SHA-256 of its output "
                  "(sorted-key JSON, floats exact) in both builds.", ""]
        day = time.strftime("%Y-%m-%d", time.gmtime())
        md = write_record("request-identical", day, "\n".join(lines),
                          {"commit": commit, "verdict": verdict, "cases": data})
        print(f"wrote {md}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
