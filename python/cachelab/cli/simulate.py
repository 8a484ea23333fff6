"""``cachelab simulate``: predict how much slower requests get under each caching strategy
(request traces), or miss ratios of eviction policies (flat key traces)."""

from __future__ import annotations

import argparse
from pathlib import Path

import cachelab.simulate as lib
import cachelab.traces as traces
from cachelab.cli import cluster, common, output
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.profile import ProfileSpec
from cachelab.progress import Progress
from cachelab.simulate.drill import DEFAULT_DISTRIBUTIONS, predict_drill
from cachelab.simulate.flat_run import FLAT_LIMITS, FlatSimulateSpec, parse_sizes, split_policies
from cachelab.simulate.request import LIMITS
from cachelab.simulate.streamed import CELLS_FROM
from cachelab.simulate.verb import SYNTHETIC, SYNTHETIC_LIMIT, SYNTHETIC_QUICK
from cachelab.units import flag_text

#: Each flag's default as --help states it: the specs' (``SimulateSpec``'s and
#: ``FlatSimulateSpec``'s field defaults), and those of the small run (``--quick``).
_D = lib.SimulateSpec()
_Q = lib.SimulateSpec.quick()
_F = FlatSimulateSpec()
#: The distributions a drill is predicted for besides the run's own, unless asked.
_DRILL = flag_text(DEFAULT_DISTRIBUTIONS)

DESCRIPTION = f"""\
Two modes, chosen by the trace:

REQUEST TRACES (.jsonl, .parquet; none given = a synthetic content site, `cachelab trace synth`)
replay which items each web request touched against caching strategies, charge each memcached
get or multi-get a latency drawn from a latency model (a `cachelab profile` result, or the
built-in appengine-2017), and report the fractional latency increase per request
(added memcached time / base latency): percentiles, the share of requests slowed by at least
10/25/50 %, hit ratios, round trips and bytes per request, and the routes that hurt most.

Strategies (comma-separated; combine parts with +):
  none                 every first touch in a request is a memcached get
  lru:N | lru:SIZE     an in-process LRU per app instance, N items or SIZE bytes (64MB, 1GiB)
  fixed:N | fixed:SIZE the N most touched items of the training window, always in process
  prefetch-children    on first touching a topic, one multi-get of it and its missing children
  prefetch:depth=D     ... of its missing descendants down to depth D
  e.g. none,lru:1000,fixed:1000,fixed:1000+prefetch:depth=2
Default: none, lru:N, fixed:N, fixed:N+prefetch-children, fixed:N+prefetch:depth=2 with N = 5 %
of the catalog.

Requests are split by time: the first --train fraction chooses the fixed set and warms the LRUs;
every strategy is reported on the rest. --draws repeats the latency draws (common random numbers
across strategies) and reports the median with a min-max band.

FLAT KEY TRACES (.csv time,key,size[,op]; libCacheSim .oracleGeneral/.bin; .txt one key per
line; the gets of a `trace capture`, .capture.parquet) run the classic miss-ratio
simulation: --policies over --sizes (objects, or bytes with --unit bytes; NN% means that
share of the trace's unique objects or bytes), and --mrc for the exact LRU miss-ratio curve
(--shards R to sample huge traces).

FAILURE DRILLS (--drill LOAD.json, a `cachelab load` run with --add or --remove): the hit-ratio
dip the membership change should cause, predicted for the run's distribution and for
--drill-distributions (default {_DRILL}), from the run's own key stream placed by the
same route tables the load engine uses, beside the dip the run measured (docs/pools.md,
"Failure drills").
"""

EXAMPLES = """\
cachelab simulate --quick                           # a synthetic content site
cachelab simulate trace.jsonl --strategies none,lru:1000 --server 127.0.0.1:11211
cachelab simulate trace.csv --policies lru,s3fifo,redis-lru --sizes 1%,10%   # redis-*: Redis's
cachelab load --private-pool 3 --rate 20000 --mix get=100 --on-miss set --remove 2@5 \\
    --out drill && cachelab simulate --drill drill/load.json
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "simulate", help="predict added request latency per caching strategy; miss ratios",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument(
        "trace", nargs="?", metavar="TRACE",
        help="a request trace (.jsonl, .parquet) or a flat key trace (.csv, .bin, .txt); "
        "default: a synthetic request trace",
    )
    p.add_argument(
        "--from", dest="trace_format", metavar="FMT",
        help="the trace's format when its name doesn't tell (jsonl, parquet, csv, oracle, "
        "lines)",
    )
    common.deprecated(p, "--trace-format", "--from", dest="trace_format", metavar="FMT")
    g = p.add_argument_group("request traces")
    g.add_argument("--strategies", metavar="LIST", help="strategies to compare (see above)")
    g.add_argument(
        "--model", metavar="NAME|FILE",
        help="latency model: a profile.json (or a directory holding one) from `cachelab "
        f"profile`, or a built-in profile (default {_D.model})",
    )
    g.add_argument(
        "--server", metavar="HOST:PORT",
        help="a live memcached to measure the model on: it is profiled at the multi-get key "
        f"counts and value sizes the strategies issue on this trace (its first {CELLS_FROM:,} "
        "requests; besides profile's default cells; "
        f"{ProfileSpec.quick().samples} samples a cell with --quick), and the "
        "simulation uses that profile instead "
        "of --model; the profile is written under profile/ (docs/simulation.md)",
    )
    g.add_argument(
        "--train", type=common.limit_range(LIMITS["train"]), default=_D.train, metavar="F",
        help="share of requests (by time) that trains fixed sets and warms LRUs "
        f"(default {flag_text(_D.train)})",
    )
    g.add_argument(
        "--draws", type=common.limit_range(LIMITS["draws"]), metavar="N",
        help=f"repeated latency draws for the confidence band (default {_D.draws}; {_Q.draws} "
        "with --quick)",
    )
    g.add_argument(
        "--requests", type=common.limit_range(SYNTHETIC_LIMIT), metavar="N",
        help=f"requests in the synthetic trace when no TRACE is given (default {SYNTHETIC}; "
        f"{SYNTHETIC_QUICK} with --quick)",
    )
    g.add_argument(
        "--in-memory", action="store_true",
        help="load the whole request trace into memory instead of reading it in parts (the "
        "default for a file, in memory that does not grow with the trace, for a trace in time "
        "order); a trace out of time order is simulated whole, with a warning, up to "
        f"{lib.IN_MEMORY_FALLBACK:,} requests, and refused beyond (docs/simulation.md)",
    )
    f = p.add_argument_group("flat traces")
    f.add_argument(
        "--policies", metavar="LIST",
        help=f"eviction policies (default {flag_text(_F.policies)}; also belady, the "
        "optimal bound, and Redis's redis-lru, redis-lfu, redis-random, clocked by the "
        "trace's timestamps)",
    )
    f.add_argument(
        "--sizes", metavar="LIST",
        help="cache sizes in --unit: objects (1000, 10K), bytes with --unit bytes (64MB, "
        "1MiB), or shares of the trace's objects or bytes (0.1%%,1%%,10%%; the default)",
    )
    f.add_argument(
        "--unit", choices=("objects", "bytes"), default=_F.unit,
        help=f"capacity in objects (every object counts 1) or in bytes (default {_F.unit})",
    )
    f.add_argument("--mrc", action="store_true", help="also the exact LRU miss-ratio curve")
    f.add_argument(
        "--shards", type=common.limit_range(FLAT_LIMITS["shards"]), metavar="R",
        help="with --mrc: SHARDS spatial sampling at rate R (e.g. 0.01) for huge traces",
    )
    d = p.add_argument_group("failure drills")
    d.add_argument("--drill", type=Path, metavar="LOAD.json",
                   help="predict the hit-ratio dip of a load run's --add/--remove (its load.json "
                   "or directory) per distribution, beside the measured one")
    d.add_argument("--drill-distributions", metavar="LIST",
                   help="with --drill: distributions to predict besides the run's own "
                   f"(default {_DRILL})")
    common.add_seed(p, "seed of the latency draws", default=_D.seed)
    p.add_argument(
        "--threads", type=common.limit_range(LIMITS["threads"]), default=_D.threads, metavar="N",
        help=f"worker threads (default {_D.threads}: one per core)",
    )
    cluster.add_flags(p, shared_trace=True)
    common.finish_parser(p, "simulate", run, quick="a small run of the same shape",
                         plots="skip the PNG/SVG plots")


def run(args: argparse.Namespace) -> int:
    target = target_from(args)
    if args.ray_shared_trace and target.ray is None:
        raise UsageError("--ray-shared-trace needs --ray")
    out = output.prepare_out(args, "simulate")
    if args.drill is not None or args.drill_distributions is not None:
        return _drill(args, out)
    flat = args.trace is not None and not traces.is_request_format(
        traces.detect_format(args.trace, args.trace_format))
    spec = flat_spec_from(args) if flat else spec_from(args)
    with Progress(None, "simulate") as bar:
        result = lib.run(spec, target, progress=bar, trace=args.trace,
                         trace_format=args.trace_format, requests=args.requests,
                         in_memory=args.in_memory, quick=args.quick,
                         shared_trace=args.ray_shared_trace)
    return output.finish(args, result, out, verb="simulate", write={"plots": not args.no_plots})


def _drill(args: argparse.Namespace, out: Path) -> int:
    """``--drill LOAD.json``: the prediction of a failure drill beside its measurement."""
    if args.drill is None:
        raise UsageError("--drill-distributions goes with --drill LOAD.json")
    if args.trace is not None or args.ray is not None:
        raise UsageError("--drill reads a load run's load.json: give no TRACE and no --ray")
    dists = None
    if args.drill_distributions:
        dists = [d.strip() for d in args.drill_distributions.split(",") if d.strip()]
    result = predict_drill(args.drill, dists)
    return output.finish(args, result, out, verb="simulate", write={"plots": False})


def spec_from(args: argparse.Namespace) -> lib.SimulateSpec:
    """Flags -> the checked spec of a request-level simulation."""
    _reject_flat_options(args)
    if args.server is not None and args.model is not None:
        raise UsageError("--model and --server: --server measures the model; give one")
    spec = lib.SimulateSpec(
        strategies=_strategies(args.strategies),
        model=args.model or lib.DEFAULT_MODEL,
        train=args.train,
        draws=args.draws if args.draws is not None else (_Q if args.quick else _D).draws,
        seed=args.seed,
        threads=args.threads,
    )
    spec.check()
    return spec


def flat_spec_from(args: argparse.Namespace) -> FlatSimulateSpec:
    """Flags -> the checked spec of a flat-trace simulation."""
    if args.strategies is not None:
        raise UsageError("--strategies: only for request traces; flat traces take --policies")
    if args.server is not None:
        raise UsageError("--server: only for request traces (it measures their latency model)")
    if args.shards is not None and not args.mrc:
        raise UsageError("--shards: only with --mrc")
    spec = FlatSimulateSpec(unit=args.unit, mrc=args.mrc, shards=args.shards,
                            threads=args.threads, format=args.trace_format)
    if args.policies is not None:
        spec.policies = split_policies(args.policies)
    spec.check()
    if args.sizes:
        spec.sizes = tuple(parse_sizes(args.sizes, args.unit))
    return spec


def _reject_flat_options(args: argparse.Namespace) -> None:
    given = [
        flag for flag, value in (
            ("--policies", args.policies), ("--sizes", args.sizes), ("--mrc", args.mrc),
            ("--shards", args.shards),
        ) if value
    ]
    if given or args.unit != _F.unit:
        given = given or ["--unit"]
        raise UsageError(
            f"{', '.join(given)}: only for flat key traces (.csv, .bin, .txt, .capture.parquet); "
            "request traces take --strategies"
        )


def _strategies(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    parts = tuple(s.strip() for s in text.split(",") if s.strip())
    if not parts:
        raise UsageError("--strategies: give at least one strategy, e.g. none,lru:1000")
    return parts


__all__ = ["add_parser", "flat_spec_from", "run", "spec_from"]
