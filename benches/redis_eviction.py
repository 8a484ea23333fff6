"""Does the simulator's Redis eviction predict a real redis-server's hit ratio? A Zipf trace
replayed into private servers as a look-aside cache, its keyspace hit ratio next to the
simulated one on the same requests and the same clock (issue 34 item 6: within 1 point for
LRU and LFU at 3 sizes).

For each round (a seed), one private ``redis-server`` per policy (``allkeys-lru``,
``allkeys-lfu``, ``allkeys-random``) and size (``--sizes``, in keys), all fed the same
``--requests`` requests at once at ``--rate`` a second (tests/redisreplay.py: one ``EVALSHA``
a request doing GET and, on a miss, SET of a ``--value``-byte value, pipelined in chunks; each
chunk's Unix second recorded as the requests' time). Each server's ``maxmemory`` is its
baseline ``used_memory`` plus what the memory model
(:mod:`cachelab.simulate.redis_memory`) says the keys take, so the size in keys is a
prediction too: the keys the server held at the end are reported beside it.

Then ``redis-lru`` / ``redis-lfu`` / ``redis-random`` simulate the same requests with the
recorded times: at the model's capacity (what ``size`` would use for that ``maxmemory``) and
at the keys the server actually held (the eviction alone, without the memory model's error).
The default 60 s a round crosses a minute boundary, so the LFU counters decay once.

``--record`` writes ``benches/runs/<date>-redis-eviction.md`` and the JSON. Exit 0 when every
LRU and LFU difference at the model's capacity is within ``--goal`` points, else 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from cachelab import _core  # noqa: E402
from cachelab.simulate.flat import simulate_flat  # noqa: E402
from records import header, markdown_table, tool_version, write_record  # noqa: E402
from redisreplay import Target, replay, zipf_ids  # noqa: E402

POLICIES = {"allkeys-lru": "redis-lru", "allkeys-lfu": "redis-lfu",
            "allkeys-random": "redis-random"}


def one_round(args: argparse.Namespace, seed: int) -> list[dict[str, Any]]:
    ids = zipf_ids(args.requests, args.keys, args.alpha, seed)
    targets = [Target(p, k) for p in args.policies for k in args.sizes]
    run = replay(targets, ids, key_len=args.key_len, value_len=args.value, rate=args.rate)
    trace = _core.FlatTrace.from_arrays(ids.tolist(), [1] * len(ids), run.times.tolist())
    caps = sorted({t.keys for t in targets} | {t.held for t in targets})
    sim = simulate_flat(trace, [POLICIES[p] for p in args.policies], caps, "objects")
    hit = {(r.policy, r.capacity): 1 - r.miss_ratio for r in sim.results}
    exact = simulate_flat(trace, ["lru"], list(args.sizes), "objects")
    lru = {r.capacity: 1 - r.miss_ratio for r in exact.results}
    rows = []
    for t in targets:
        name = POLICIES[t.policy]
        rows.append({
            "seed": seed, "policy": t.policy, "keys": t.keys, "held": t.held,
            "maxmemory": t.maxmemory, "baseline": t.baseline, "evicted": t.evicted,
            "server": t.hit_ratio, "simulated": hit[(name, t.keys)],
            "simulated_at_held": hit[(name, t.held)], "exact_lru": lru[t.keys],
            "seconds": run.seconds, "straddled": run.straddled, "chunks": run.chunks,
            "minutes": int(run.times[-1] // 60 - run.times[0] // 60),
        })
        r = rows[-1]
        print(f"seed {seed} {t.policy} {t.keys} keys (held {t.held}): server "
              f"{r['server']:.4f}, simulated {r['simulated']:.4f} "
              f"({(r['simulated'] - r['server']) * 100:+.2f} pt), at held "
              f"{r['simulated_at_held']:.4f}", file=sys.stderr)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=60_000)
    ap.add_argument("--rate", type=float, default=1_000.0, help="requests a second")
    ap.add_argument("--keys", type=int, default=10_000, help="keys in the trace")
    ap.add_argument("--alpha", type=float, default=0.9)
    ap.add_argument("--sizes", default="500,1500,4000", help="capacities in keys")
    ap.add_argument("--value", type=int, default=1000, help="value bytes")
    ap.add_argument("--key-len", type=int, default=8)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--goal", type=float, default=1.0, help="points")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.policies = [p.strip() for p in args.policies.split(",")]
    if any(p not in POLICIES for p in args.policies):
        ap.error(f"--policies: choose from {', '.join(POLICIES)}")
    if min(args.requests, args.keys, args.rounds, *args.sizes) < 1 or args.rate <= 0:
        ap.error("--requests, --keys, --rounds, --sizes and --rate must be positive")
    rows = [r for seed in range(1, args.rounds + 1) for r in one_round(args, seed)]

    def pct(x: float) -> str:
        return f"{x * 100:.2f} %"

    table = [[str(r["seed"]), r["policy"], f"{r['keys']:,}", f"{r['held']:,}",
              f"{r['maxmemory']:,}", f"{r['evicted']:,}", pct(r["server"]),
              pct(r["simulated"]), f"{(r['simulated'] - r['server']) * 100:+.2f}",
              pct(r["simulated_at_held"]),
              f"{(r['simulated_at_held'] - r['server']) * 100:+.2f}", pct(r["exact_lru"])]
             for r in rows]
    goal_rows = [r for r in rows if r["policy"] != "allkeys-random"]
    worst = max(abs(r["simulated"] - r["server"]) * 100 for r in goal_rows) if goal_rows else 0
    ok = worst <= args.goal
    md, commit = header(
        "Redis eviction: simulated vs a real redis-server's hit ratio", "redis_eviction.py",
        sys.argv[1:],
        [f"server: {tool_version(['redis-server', '--version'])}; one private server per "
         "policy and size, `--save '' --appendonly no --hz 100`, maxmemory from the memory "
         "model above the server's baseline",
         f"workload: look-aside (GET; SET on a miss, one EVALSHA a request, pipelined 50 at a "
         f"time), Zipf {args.alpha} over {args.keys:,} keys, {args.key_len}-character keys, "
         f"{args.value} B values, {args.requests:,} requests a round at {args.rate:g}/s; "
         f"simulated: `redis-lru` / `redis-lfu` / `redis-random` (maxmemory-samples 5, "
         f"lfu-log-factor 10, lfu-decay-time 1) on the same requests and recorded seconds",
         "rounds: " + "; ".join(
             f"seed {s}: {rs[0]['seconds']:.1f} s, {rs[0]['minutes']} minute boundaries, "
             f"{rs[0]['straddled']} of {rs[0]['chunks']} chunks straddled a second"
             for s in sorted({r['seed'] for r in rows})
             for rs in [[r for r in rows if r['seed'] == s]])])
    md += markdown_table(
        ["seed", "policy", "keys (model)", "keys held", "maxmemory", "evicted",
         "server hit ratio", "simulated", "diff (pt)", "simulated at held", "diff (pt)",
         "exact LRU"], table)
    by = {}
    for r in goal_rows:
        by.setdefault(r["policy"], []).append(abs(r["simulated"] - r["server"]) * 100)
    # Servers that filled up (evicted), whose keys held are the memory model's error.
    held = [r["held"] - r["keys"] for r in rows if r["evicted"]] or [0]
    md += ["", *(f"- {p}: |simulated − server| median {statistics.median(v):.2f}, largest "
                 f"{max(v):.2f} points" for p, v in by.items()),
           "- memory model (servers that evicted): keys held − keys predicted, median "
           f"{statistics.median(held):+g} (range {min(held):+d} … {max(held):+d})",
           "", f"Goal: LRU and LFU within {args.goal:g} point at every size (at the model's "
           f"capacity): largest {worst:.2f} — **{'PASS' if ok else 'FAIL'}**."]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("redis-eviction", date.today().isoformat(), text,
                            {"args": vars(args), "rows": rows, "commit": commit})
        print(f"recorded {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
