"""A failure drill's measured hit-ratio dip vs ``simulate --drill``'s prediction, for ketama and
modula, over several rounds (issue 29: within 2 points).

Each round runs ``load`` on a private pool of three (``--private-pool 3``), open loop, gets only
with read-through (``--on-miss set``), member 2 removed from the client's list mid-run, once per
distribution (the order alternating between rounds), and predicts the same run with
:func:`cachelab.simulate.drill.predict_drill`. The record gives each run's measured and
predicted dip and their difference.

    python benches/drill_dip.py [--rounds 3] [--rate 8000] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import date
from typing import Any

from cachelab.load import LoadSpec, load
from cachelab.simulate.drill import predict_drill
from records import header, markdown_table, write_record

DISTRIBUTIONS = ("ketama", "modula")


def one(distribution: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    spec = LoadSpec(private_pool=3, distribution=distribution, rate=args.rate, mix={"get": 1},
                    on_miss="set", key_space=args.keys, duration=args.duration, warmup=0.5,
                    interval=args.interval, seed=seed, remove=[f"2@{args.at:g}"])
    result = load(spec)
    [d] = predict_drill(result).dips
    return {"distribution": distribution, "seed": seed, "measured": d["measured"],
            "predicted": d["predicted"][distribution], "difference": d["difference"],
            "other": d["predicted"]["modula" if distribution == "ketama" else "ketama"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=8000.0)
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--at", type=float, default=3.0, help="seconds: when member 2 is removed")
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for name in DISTRIBUTIONS if r % 2 == 0 else DISTRIBUTIONS[::-1]:
            row = one(name, args, seed=100 + r)
            rows.append(row)
            print(f"round {r + 1} {name:7} measured {row['measured']:5.1f} predicted "
                  f"{row['predicted']:5.1f} ({row['difference']:+.1f}); the other "
                  f"distribution {row['other']:5.1f}", flush=True)
    worst = max(abs(x["difference"]) for x in rows)
    table = [[x["distribution"], str(x["seed"]), f"{x['measured']:.1f}", f"{x['predicted']:.1f}",
              f"{x['difference']:+.1f}", f"{x['other']:.1f}"] for x in rows]
    md, commit = header(
        "failure drill: measured hit-ratio dip vs simulate --drill", "drill_dip.py",
        sys.argv[1:],
        [f"private pool of 3 memcached (`-t 1`), open loop {args.rate:.0f} gets/s Poisson, "
         f"{args.keys} uniform keys prefilled, read-through (--on-miss set), member 2 removed "
         f"at {args.at:g} s, {args.interval:g} s intervals, {args.duration:g} s after a 0.5 s "
         f"warm-up; {args.rounds} rounds, distributions interleaved"])
    md += ["Dip = hit ratio of the last interval before the removal minus the lowest of the "
           "three from it, in points:", "",
           *markdown_table(["distribution", "seed", "measured", "predicted", "difference",
                            "other distribution predicted"], table), "",
           f"Largest |difference|: {worst:.2f} points (median "
           f"{statistics.median(abs(x['difference']) for x in rows):.2f}); within 2 points: "
           f"{'yes' if worst <= 2 else 'NO'}."]
    text = "\n".join(md)
    print(text)
    if args.record:
        path = write_record("drill-dip", date.today().isoformat(), text,
                            {"args": vars(args), "rows": rows, "commit": commit})
        print(f"recorded {path}")
    return 0 if worst <= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
