"""``cachelab size``: how much memory a hit ratio takes, from a trace or a capture."""

from __future__ import annotations

import argparse
from pathlib import Path

import cachelab.size as lib
from cachelab.cli import common, output
from cachelab.errors import UsageError
from cachelab.size import SizeSpec
from cachelab.size.sizing import ACCOUNTINGS, LIMITS
from cachelab.units import parse_size

#: Each flag's default as --help states it: the spec's (``SizeSpec``'s field defaults; the
#: trace has none).
_D = SizeSpec(trace="")

DESCRIPTION = """\
Size a cache from a flat key trace or a `trace capture`: the exact LRU miss-ratio curve by
bytes (stack distances in one pass; --shards R samples huge traces), and the answers:

  - the memory each --hit-ratios target needs, or that it is out of reach (each key's first
    access misses at any size, which caps the hit ratio at 1 - keys/requests);
  - the hit ratio at 1/2x, 1x, 2x and 4x the server's memory (--memory, or what the capture
    recorded);
  - for a capture, the check: the hit ratio predicted at the server's own memory, cold and
    warm (keys that were already cached when the capture began), next to the one the server
    had.

A capture's sizes count what memcached spends per item by default (its slab chunk: header,
key, value), so capacities compare with memcached -m; --accounting value counts value bytes.
Hit ratios are per get, as memcached's get_hits / cmd_get.

For Redis: --policy redis-lru (allkeys-lru, and volatile-lru when every key has a TTL),
redis-lfu (allkeys-lfu) or redis-random (allkeys-random) simulates Redis's own sampled
eviction at each size, on the trace's timestamps as its clock, and --accounting redis counts
what Redis spends per key (dict entry, key and value strings in jemalloc's size classes, the
hash table) plus an empty server's baseline, so memory compares with maxmemory; keys are
taken as --key-length bytes. Any other flat policy works too (docs/simulation.md).

Artifacts: size.json (schema cachelab.size v1), size.csv (the curve), size.png/svg.
"""

EXAMPLES = """\
cachelab trace capture --server 10.0.0.5:11211 --duration 600 --out day
cachelab size day/trace.capture.parquet
cachelab size trace.bin --memory 4GB --hit-ratios 95,99 --format csv > curve.csv
cachelab size trace.csv --policy redis-lfu --accounting redis --memory 256MB   # a Redis
"""


def _ratios(text: str) -> tuple[float, ...]:
    """``90,95,99.5`` or ``95%`` (percentages), or ``0.95`` (a fraction below 1)."""
    out = []
    for raw in (p.strip() for p in text.split(",")):
        part = raw.rstrip("%")
        try:
            v = float(part)
        except ValueError:
            raise UsageError(f"--hit-ratios {text!r}: {raw!r} is not a number") from None
        v = v / 100 if raw.endswith("%") or v >= 1 else v
        if not 0 < v < 1:
            raise UsageError(f"--hit-ratios {text!r}: each must be above 0 % and below 100 %")
        out.append(v)
    return tuple(out)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "size", help="the memory a hit ratio takes, from a trace or a capture",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument("trace", type=Path, metavar="TRACE",
                   help="a flat key trace (.csv, .bin, .txt) or a capture (.capture.parquet)")
    p.add_argument("--from", dest="from_format", metavar="FMT",
                   help="the trace's format (default: from its name)")
    p.add_argument("--memory", type=common.arg_type(parse_size), metavar="SIZE",
                   help="the server's memory, e.g. 64MB (default: what a capture recorded)")
    p.add_argument("--hit-ratios", type=common.arg_type(_ratios), default=_D.hit_ratios,
                   metavar="LIST", help="target hit ratios in %% (default "
                   f"{','.join(f'{100 * h:g}' for h in _D.hit_ratios)})")
    p.add_argument("--accounting", choices=ACCOUNTINGS,
                   help="count value bytes, memcached's memory per item, or Redis's per key "
                   "with its baseline (default: memcached for a capture, value otherwise)")
    p.add_argument("--policy", default=_D.policy, metavar="NAME",
                   help="eviction policy: lru (the exact curve, default) or a flat policy "
                   "simulated at each size: redis-lru, redis-lfu, redis-random, s3fifo, ...")
    p.add_argument("--key-length", type=common.limit_range(LIMITS["key_length"]),
                   default=_D.key_length, metavar="N",
                   help=f"with --accounting redis: key length in bytes (default "
                   f"{_D.key_length})")
    p.add_argument("--shards", type=common.limit_range(LIMITS["shards"]), metavar="R",
                   help="sample keys at rate R, below 1 (SHARDS), for very large traces "
                   "(default: exact)")
    common.finish_parser(p, "size", run, plots="skip the PNG/SVG plot")


def run(args: argparse.Namespace) -> int:
    out = output.prepare_out(args, "size")
    spec = SizeSpec(trace=str(args.trace), format=args.from_format, memory=args.memory,
                    hit_ratios=args.hit_ratios, accounting=args.accounting, shards=args.shards,
                    policy=args.policy.strip().lower(), key_length=args.key_length)
    result = lib.run(spec)
    return output.finish(args, result, out, verb="size", write={"plots": not args.no_plots},
                         wrote="size.json, size.csv" + ("" if args.no_plots else " and plots"))
