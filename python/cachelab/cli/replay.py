"""``cachelab replay``: drive the real tiered cache with a request trace; compare with simulate."""

from __future__ import annotations

import argparse

import cachelab.replay as lib
from cachelab.cli import common, output
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.units import flag_text

DESCRIPTION = """\
Check simulate's prediction by building the strategy for real. The catalog's items are loaded
into memcached at their sizes (under a per-run prefix, deleted at the end); then every strategy
runs through cachelab.tiered — one L1 per app instance, request scopes, prefetch_tree at the
first topic — over the trace's evaluation window, timing each request. The prediction is
simulate's memcached time, with a model measured for each strategy during the run through the
tiered cache's own memcached read on its connection (after think time drawn from the CPU time
between its reads; a request's calls take consecutive samples of it, in the order they were
taken, so slow stretches stay together), plus the library's per-touch costs (request, scope
hit, L1 hit, get, prefetch) measured by calibration requests in the same process (in the
default interleaved mode, one or two after each request, so they run in the same conditions;
a request's first L1 hit and first get are costed apart from the next ones). Printed:
measured vs predicted p50/p90/p99 of the added time (ms and as a share of the base latency)
with the error and the measured percentile's 95 % bootstrap interval, the part inside
memcached calls and the library's part, each cost term per strategy, and checks that hit
ratios and round trips agree exactly.

Strategies: none, lru:N|SIZE, fixed:N|SIZE, each optionally +prefetch-children or
+prefetch:depth=D (default: none, lru:N, fixed:N, fixed:N+prefetch-children, N = 5 % of the
catalog). When a predicted p50, p90 or p99 of added ms misses the measured one by more than
15 %, stderr says for which strategy and percentile, with both numbers (a busy machine makes
misses likely: the line says so); the exit code is 1 then only with --fail-on replay.

Cut short — Ctrl-C or SIGTERM (exit 130), or the server failing or evicting after the first
slice (exit 3, one line on stderr saying why) — it compares the slices every strategy
finished with the prediction for the same requests, writes that marked partial (replay.json's
run: cancelled, aborted, slices done), and the table's first line says PARTIAL with the
requests and slices kept.
"""

EXAMPLES = """\
cachelab replay --quick
cachelab replay trace.parquet --strategies none,lru:500 --server 127.0.0.1:11211
cachelab replay --quick --fail-on replay   # exit 1 when the prediction misses by > 15 %
"""


#: Each flag's default as --help states it: the spec's (``ReplaySpec``'s field defaults), and
#: those of the small run (``--quick``).
_D = lib.ReplaySpec()
_Q = lib.ReplaySpec.quick()
_LIMITS = lib.LIMITS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "replay", help="run a trace through the real tiered cache; vs simulate",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument("trace", nargs="?", metavar="TRACE",
                   help="a request trace (.jsonl, .parquet); default: a synthetic one of the "
                   "heavy-pages shape (`trace synth --preset heavy-pages`: pages of ~21 items, "
                   "so that requests under a cache still call memcached)")
    p.add_argument("--from", dest="trace_format", metavar="FMT",
                   help="the trace's format, jsonl or parquet, when its name doesn't tell")
    common.deprecated(p, "--trace-format", "--from", dest="trace_format", metavar="FMT")
    p.add_argument("--strategies", metavar="LIST",
                   help="comma-separated strategies (see above)")
    common.deprecated(p, "--strategy", "--strategies", dest="strategies", metavar="LIST")
    p.add_argument("--requests", type=common.limit_range(lib.SYNTHETIC_LIMIT), metavar="N",
                   help=f"requests in the synthetic trace (default {lib.SYNTHETIC}; "
                   f"{lib.SYNTHETIC_QUICK} with --quick)")
    p.add_argument("--train", type=common.limit_range(_LIMITS["train"]),
                   default=_D.train, metavar="F",
                   help="share of requests (by time) that warms LRUs and picks fixed sets")
    p.add_argument("--draws", type=common.limit_range(_LIMITS["draws"]), metavar="N",
                   help=f"simulate's latency draws (default {_D.draws}; {_Q.draws} with --quick)")
    p.add_argument("--profile-samples", type=common.limit_range(_LIMITS["profile_samples"]),
                   metavar="N",
                   help="samples per cell of each strategy's profile, taken during the run "
                   f"(default {_D.profile_samples}; {_Q.profile_samples} with --quick)")
    p.add_argument("--calibration-reps", type=common.limit_range(_LIMITS["calibration_reps"]),
                   metavar="N",
                   help="crafted requests per library cost term and slice (default "
                   f"{_D.calibration_reps}; {_Q.calibration_reps} with --quick)")
    p.add_argument("--profile-mode", choices=("interleaved", "slices"), default=_D.profile_mode,
                   help="when each strategy's profile samples are taken: a few after each of "
                   "its requests (default), or a slice's worth after each slice")
    p.add_argument("--slices", type=common.limit_range(_LIMITS["slices"]), default=_D.slices,
                   metavar="N",
                   help="the evaluation is cut into N slices, each followed by the profile "
                   "samples due and the calibration of the library's costs (in slices mode) "
                   f"(default {_D.slices})")
    p.add_argument("--timeout", type=common.limit_range(_LIMITS["timeout"]), default=_D.timeout,
                   metavar="S",
                   help=f"memcached request deadline in seconds (default {flag_text(_D.timeout)})")
    common.add_seed(p, "seed of simulate's draws", default=_D.seed)
    p.add_argument("--independent-draws", action="store_true",
                   help="draw each memcached call of a request independently, instead of "
                   "following the profile's samples in the order taken (the default, which "
                   "keeps how one call's latency predicts the next's); the other prediction "
                   "is reported either way")
    common.finish_parser(p, "replay", run, quick="a small run of the same shape", server=True,
                         checks=("replay",), server_threads=str(lib.SERVER_THREADS),
                         server_note="with the memory its catalog needs, and -I 2m for items "
                         "above 1 MB")


def spec_from(args: argparse.Namespace) -> lib.ReplaySpec:
    base = lib.ReplaySpec.quick() if args.quick else lib.ReplaySpec()
    if args.strategies is not None:
        parts = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
        if not parts:
            raise UsageError("--strategies: give at least one strategy, e.g. none,lru:500")
        base.strategies = parts
    base.train = args.train
    if args.draws is not None:
        base.draws = args.draws
    if args.profile_samples is not None:
        base.profile_samples = args.profile_samples
    if args.calibration_reps is not None:
        base.calibration_reps = args.calibration_reps
    base.timeout = args.timeout
    base.slices = args.slices
    base.profile_mode = args.profile_mode
    base.seed = args.seed
    base.sequence = not args.independent_draws
    base.check()
    return base


def run(args: argparse.Namespace) -> int:
    spec = spec_from(args)
    target = target_from(args)
    # Interrupted: the slices finished are kept, and the result says PARTIAL.
    out, result, interrupted = common.measure(
        args, "replay", Progress(None, "replay"),
        lambda bar: lib.run(spec, target, progress=bar, trace=args.trace,
                            trace_format=args.trace_format, requests=args.requests,
                            quick=args.quick))
    return output.finish(args, result, out, verb="replay", interrupted=interrupted)


__all__ = ["add_parser", "run", "spec_from"]
