"""Are values read over and over cheaper than an application's? Multi-gets through the tier,
one set of keys read every time ("hot") against sets taken in turn from a pool ("pool"); with
``--gets``, single gets instead.

One private memcached (``-t 1``). ``--keys`` keys of ``--value`` bytes make a set; the pool
holds ``--pool-mb`` MiB of sets. Calls alternate hot and pool, each after spinning
``--think-us`` of CPU time (as replay's samples do), ``--calls`` of each per run, ``--runs``
runs; each run reports p50/p90/p99 of both and their ratio (pool / hot). What replay's
multi-get profile cells did before they rotated over a pool (``cachelab.profile.tier``,
``COLD_BYTES``) is the hot side; an application reading items over a catalog far larger than
the CPU's caches is the pool side.

``--gets 100,1000,8000``: single gets of each size through the tier (one key, as the tiered
cache reads its L2), 4 keys read in turn ("hot", what the get cells of a tier profile read)
against as many keys of the size as hold the pool, at most :data:`MAX_GET_KEYS` (what the
get cells would read if they rotated over a pool as the multi-get cells do; issue 33 measured
no difference, 2026-11-29-cold-gets, so they do not); sizes and sides interleaved, ``--calls``
of each size and side a run.

``--record`` writes ``benches/runs/<date>-cold-values.md`` (``-cold-gets`` with ``--gets``) and
the JSON.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import date
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab import servers
from cachelab.profile import spin
from cachelab.servers import ServerOptions
from cachelab.tiered import MemcachedTier
from records import header, markdown_table, write_record

PCTS = (50, 90, 99)


def one_run(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    sets = max(2, (args.pool_mb << 20) // (args.keys * args.value))
    memory = args.pool_mb + 64
    rng = np.random.default_rng(seed)
    with servers.serve(None, ServerOptions(threads=1, memory_mb=memory),
                       memory_mb=memory) as target:
        keys = [[f"cold:{s}:{k}" for k in range(args.keys)] for s in range(sets)]
        with _core.Client(target.address, timeout=5, connect_timeout=5) as c:
            for ks in keys:
                for k in ks:
                    c.set(k, rng.bytes(args.value))
        tier = MemcachedTier(target.address, timeout=5, connect_timeout=5)
        out: dict[str, list[int]] = {"hot": [], "pool": []}
        think = args.think_us * 1000
        for i in range(args.calls):
            for side in ("hot", "pool") if i % 2 else ("pool", "hot"):
                ks = keys[0] if side == "hot" else keys[1 + i % (sets - 1)]
                spin(think, cpu=True)
                t0 = time.perf_counter_ns()
                found = tier.get_list(ks)[1]
                out[side].append(time.perf_counter_ns() - t0)
                if found != args.keys:
                    raise SystemExit(f"{side}: {found} of {args.keys} keys found")
    pct = {side: [float(np.percentile(v, p)) / 1000 for p in PCTS] for side, v in out.items()}
    return {"sets": sets, "us": pct,
            "ratio": [pct["pool"][j] / pct["hot"][j] for j in range(len(PCTS))]}


#: The most keys a get size's pool holds.
MAX_GET_KEYS = 4096


def get_keys(size: int, pool_bytes: int) -> int:
    """How many keys of ``size`` bytes hold ``pool_bytes`` (at least 4, at most
    :data:`MAX_GET_KEYS`)."""
    return max(4, min(MAX_GET_KEYS, -(-pool_bytes // size)))


def gets_run(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """One run of single gets: per size, 4 hot keys against the pool's."""
    pool = args.pool_mb << 20
    counts = {s: get_keys(s, pool) for s in args.gets}
    memory = sum(n * (s + 128) for s, n in counts.items()) // (1 << 20) + 64
    rng = np.random.default_rng(seed)
    with servers.serve(None, ServerOptions(threads=1, memory_mb=memory),
                       memory_mb=memory) as target:
        keys = {s: [f"cold:{s}:{k}" for k in range(n)] for s, n in counts.items()}
        with _core.Client(target.address, timeout=5, connect_timeout=5) as c:
            for s, ks in keys.items():
                for k in ks:
                    c.set(k, rng.bytes(s))
        tier = MemcachedTier(target.address, timeout=5, connect_timeout=5)
        out: dict[int, dict[str, list[int]]] = {s: {"hot": [], "pool": []} for s in args.gets}
        think = args.think_us * 1000
        order = [(s, side) for s in args.gets for side in ("hot", "pool")]
        for i in range(args.calls):
            rng.shuffle(order)  # type: ignore[arg-type]
            for s, side in order:
                ks = keys[s]
                # hot: the first 4 keys in turn; pool: the others in turn (never the hot 4)
                k = ks[i % 4] if side == "hot" else ks[4 + i % max(1, len(ks) - 4)]
                spin(think, cpu=True)
                t0 = time.perf_counter_ns()
                found = tier.get_list([k])[1]
                out[s][side].append(time.perf_counter_ns() - t0)
                if found != 1:
                    raise SystemExit(f"get {s} {side}: {k} not found")
    res: dict[str, Any] = {"keys": {str(s): n for s, n in counts.items()}, "sizes": {}}
    for s in args.gets:
        pct = {side: [float(np.percentile(v, p)) / 1000 for p in PCTS]
               for side, v in out[s].items()}
        res["sizes"][str(s)] = {"us": pct, "ratio": [pct["pool"][j] / pct["hot"][j]
                                                     for j in range(len(PCTS))]}
    return res


def gets_main(args: argparse.Namespace) -> int:
    runs = []
    for r in range(args.runs):
        runs.append(gets_run(args, r))
        print(f"run {r + 1}: pool/hot p50 " + ", ".join(
            f"{s}: {x['ratio'][0]:.2f}" for s, x in runs[-1]["sizes"].items()), file=sys.stderr)
    rows = [[str(i + 1), f"{s:,}", f"{x['keys'][str(s)]:,}",
             *(f"{h:.0f} / {p:.0f}" for h, p in zip(y["us"]["hot"], y["us"]["pool"])),
             *(f"{v:.2f}" for v in y["ratio"])]
            for i, x in enumerate(runs) for s in args.gets for y in [x["sizes"][str(s)]]]
    md, commit = header("Hot or cold values: single gets through the tier", "cold_values.py",
                        sys.argv[1:], [f"gets of {', '.join(f'{s:,}' for s in args.gets)} "
                                       f"bytes; hot: 4 keys in turn, pool: as many keys as hold "
                                       f"{args.pool_mb} MiB (at most 4,096); {args.calls} calls "
                                       "of each size and side a run, shuffled, "
                                       f"{args.think_us} µs of CPU spun before each; private "
                                       "memcached -t 1"])
    md += markdown_table(["run", "bytes", "pool keys", *(f"p{p} µs hot / pool" for p in PCTS),
                          *(f"p{p} pool / hot" for p in PCTS)], rows)
    md += ["", "Median ratio (pool / hot) over runs, by size:", ""]
    for s in args.gets:
        med = [statistics.median(x["sizes"][str(s)]["ratio"][j] for x in runs)
               for j in range(len(PCTS))]
        md.append(f"- {s:,} bytes: " + ", ".join(f"p{p} {m:.2f}" for p, m in zip(PCTS, med)))
    md.append("")
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("cold-gets", date.today().isoformat(), text,
                            {"args": vars(args), "runs": runs, "commit": commit})
        print(f"recorded {path}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=64)
    ap.add_argument("--value", type=int, default=8000)
    ap.add_argument("--pool-mb", type=int, default=16)
    ap.add_argument("--think-us", type=int, default=50)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gets", type=lambda v: [int(x) for x in v.split(",")], metavar="SIZES",
                    help="single gets of these sizes (comma-separated bytes) instead of "
                    "multi-gets")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    if min(args.keys, args.value, args.pool_mb, args.calls, args.runs) < 1:
        ap.error("--keys, --value, --pool-mb, --calls and --runs must be at least 1")
    if args.gets is not None:
        if not args.gets or min(args.gets) < 1 or max(args.gets) > 1 << 20:
            ap.error("--gets: sizes between 1 and 1,048,576 bytes")
        return gets_main(args)
    runs = []
    for r in range(args.runs):
        runs.append(one_run(args, r))
        print(f"run {r + 1}: pool/hot p50 {runs[-1]['ratio'][0]:.2f}", file=sys.stderr)
    rows = [[str(i + 1), *(f"{h:.0f} / {p:.0f}" for h, p in zip(x["us"]["hot"], x["us"]["pool"])),
             *(f"{v:.2f}" for v in x["ratio"])] for i, x in enumerate(runs)]
    med = [statistics.median(x["ratio"][j] for x in runs) for j in range(len(PCTS))]
    md, commit = header("Hot or cold values: multi-gets through the tier", "cold_values.py",
                        sys.argv[1:], [f"{args.keys} keys of {args.value:,} bytes a multi-get; "
                                       f"pool {args.pool_mb} MiB ({runs[0]['sets']} sets); "
                                       f"{args.calls} calls of each side a run, alternating, "
                                       f"{args.think_us} µs of CPU spun before each; private "
                                       "memcached -t 1"])
    md += markdown_table(["run", *(f"p{p} µs hot / pool" for p in PCTS),
                          *(f"p{p} pool / hot" for p in PCTS)], rows)
    md += ["", "Median ratio (pool / hot) over runs: " + ", ".join(
        f"p{p} {m:.2f}" for p, m in zip(PCTS, med)), ""]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("cold-values", date.today().isoformat(), text,
                            {"args": vars(args), "runs": runs, "commit": commit})
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
