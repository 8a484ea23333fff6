"""Are values read over and over cheaper than an application's? Multi-gets through the tier,
one set of keys read every time ("hot") against sets taken in turn from a pool ("pool").

One private memcached (``-t 1``). ``--keys`` keys of ``--value`` bytes make a set; the pool
holds ``--pool-mb`` MiB of sets. Calls alternate hot and pool, each after spinning
``--think-us`` of CPU time (as replay's samples do), ``--calls`` of each per run, ``--runs``
runs; each run reports p50/p90/p99 of both and their ratio (pool / hot). What replay's
multi-get profile cells did before they rotated over a pool (``cachelab.profile.tier``,
``COLD_BYTES``) is the hot side; an application reading items over a catalog far larger than
the CPU's caches is the pool side.

``--record`` writes ``benches/runs/<date>-cold-values.md`` and the JSON.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=64)
    ap.add_argument("--value", type=int, default=8000)
    ap.add_argument("--pool-mb", type=int, default=16)
    ap.add_argument("--think-us", type=int, default=50)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    if min(args.keys, args.value, args.pool_mb, args.calls, args.runs) < 1:
        ap.error("--keys, --value, --pool-mb, --calls and --runs must be at least 1")
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
