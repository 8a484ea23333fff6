"""``cachelab tiers``: the store × memcached × codec × compression × process-memory benchmark."""

from __future__ import annotations

import argparse

import cachelab.tiers as lib
from cachelab.cli import common, output
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.tiers.spec import CODECS, LIMITS
from cachelab.units import flag_text

DESCRIPTION = """\
The benchmark of the seed post "caching tiers on App Engine" on this machine: read one ~60 KB
text record and a list of 1,000 small (~100 B) records from the store (SQLite; PostgreSQL with
--dsn), from memcached as raw bytes, decoded by a codec, decompressed too (zlib, zstd, lz4), and
from process memory — ready objects, or encoded bytes decoded on every read. Reported: wall and
CPU time per read and stored size, as a table, tiers.csv, tiers.json and a bar chart, and
whether each of the seed's findings reproduces here.

Cut short — Ctrl-C or SIGTERM (exit 130), or the server failing during the timed reads (exit
3, one line on stderr saying why) — it writes the rounds every method finished, marked
partial (tiers.json's run: cancelled, aborted), and the table's first line says PARTIAL with
the reads kept.
"""

EXAMPLES = """\
cachelab tiers --quick
cachelab tiers --server 127.0.0.1:11211 --reads 1000 --compressions zstd
cachelab tiers --dsn postgresql://localhost/bench --codec orjson --format json
"""


#: Each flag's default as --help states it: the spec's (``TiersSpec``'s field defaults), and
#: those of the small run (``--quick``).
_D = lib.TiersSpec()
_Q = lib.TiersSpec.quick()


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(sub, "tiers", help="store vs memcached (+codec, +compression) vs memory",
                           description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("--reads", type=common.limit_range(LIMITS["reads"]), metavar="N",
                   help=f"timed reads per method and shape (default {_D.reads}; {_Q.reads} with "
                   "--quick)")
    p.add_argument("--codec", default=_D.codec, choices=CODECS,
                   help=f"serialization (default {_D.codec})")
    p.add_argument("--compressions", default=flag_text(_D.compressions), metavar="LIST",
                   help=f"compressors to compare (default {flag_text(_D.compressions)}; the "
                   "first is also tried in process memory)")
    p.add_argument("--dsn", metavar="DSN",
                   help="a PostgreSQL DSN to use as the store instead of SQLite (needs psycopg)")
    common.add_seed(p, "seed of the generated data", default=_D.seed)
    common.finish_parser(p, "tiers", run, quick="a small run of the same shape",
                         plots="skip the PNG/SVG bar chart", server=True)


def spec_from(args: argparse.Namespace) -> lib.TiersSpec:
    base = lib.TiersSpec.quick() if args.quick else lib.TiersSpec()
    if args.reads is not None:
        base.reads = args.reads
    base.codec = args.codec
    comps = tuple(c.strip() for c in args.compressions.split(",") if c.strip())
    if not comps:
        raise UsageError("--compressions: give at least one of zlib, zstd, lz4")
    base.compressions = comps
    base.dsn = args.dsn
    base.seed = args.seed
    base.check()
    return base


def run(args: argparse.Namespace) -> int:
    spec = spec_from(args)
    target = target_from(args)
    # Interrupted: the rounds finished are kept, and the result says PARTIAL.
    out, result, interrupted = common.measure(
        args, "tiers", Progress(spec.reads, "tiers"),
        lambda bar: lib.run(spec, target, progress=bar))
    return output.finish(args, result, out, verb="tiers",
                         write={"plots": not args.no_plots and bool(result.rows)},
                         see="the table", interrupted=interrupted)


__all__ = ["add_parser", "run", "spec_from"]
