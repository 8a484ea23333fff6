"""``cachelab simulate``: predict how much slower requests get under each caching strategy."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cachelab import simulation as lib
from cachelab.cli import EXIT_OK, common
from cachelab.errors import UsageError
from cachelab.tables import text_table

DESCRIPTION = """\
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
line) run the classic miss-ratio simulation: --policies over --sizes (objects, or bytes with
--unit bytes; NN% means that share of the trace's unique objects or bytes), and --mrc for the
exact LRU miss-ratio curve (--shards R to sample huge traces).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate", help="predict added request latency per caching strategy; miss ratios",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "trace", nargs="?", metavar="TRACE",
        help="a request trace (.jsonl, .parquet) or a flat key trace (.csv, .bin, .txt); "
        "default: a synthetic request trace",
    )
    p.add_argument(
        "--trace-format", metavar="FMT",
        help="the trace's format when the extension doesn't tell (jsonl, parquet, csv, "
        "oracle, lines)",
    )
    g = p.add_argument_group("request traces")
    g.add_argument("--strategies", metavar="LIST", help="strategies to compare (see above)")
    g.add_argument(
        "--model", default=lib.DEFAULT_MODEL, metavar="NAME|FILE",
        help="latency model: a profile.json (or a directory holding one) from `cachelab "
        f"profile`, or a built-in profile (default {lib.DEFAULT_MODEL})",
    )
    g.add_argument(
        "--train", type=float, default=0.5, metavar="F",
        help="share of requests (by time) that trains fixed sets and warms LRUs (default 0.5)",
    )
    g.add_argument(
        "--draws", type=int, metavar="N",
        help="repeated latency draws for the confidence band (default 5; 3 with --quick)",
    )
    g.add_argument(
        "--requests", type=int, metavar="N",
        help="requests in the synthetic trace when no TRACE is given (default 100000; "
        "20000 with --quick)",
    )
    f = p.add_argument_group("flat traces")
    f.add_argument(
        "--policies", metavar="LIST",
        help="eviction policies (default lru,fifo,lfu,arc,s3fifo,sieve; also belady, the "
        "optimal bound)",
    )
    f.add_argument(
        "--sizes", metavar="LIST",
        help="cache sizes: counts, sizes (1MiB) or shares of the trace (0.1%%,1%%,10%%; the "
        "default)",
    )
    f.add_argument(
        "--unit", choices=("objects", "bytes"), default="objects",
        help="capacity in objects (every object counts 1) or in bytes (default objects)",
    )
    f.add_argument("--mrc", action="store_true", help="also the exact LRU miss-ratio curve")
    f.add_argument(
        "--shards", type=float, metavar="R",
        help="with --mrc: SHARDS spatial sampling at rate R (e.g. 0.01) for huge traces",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the latency draws (default 0)")
    p.add_argument(
        "--threads", type=int, default=0, metavar="N",
        help="worker threads (default 0: one per core)",
    )
    p.add_argument("--quick", action="store_true", help="a small run of the same shape")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG/SVG plots")
    common.add_output_options(p, "simulate")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cachelab import traces

    fmt = common.stdout_format(args)
    out = common.output_dir(args, "simulate")
    if args.trace is not None and not traces.is_request_format(
        traces.detect_format(args.trace, args.trace_format)
    ):
        from cachelab.cli import simulate_flat

        return simulate_flat.run(args, fmt, out)
    _reject_flat_options(args)
    spec = lib.SimulateSpec(
        strategies=_strategies(args.strategies),
        model=args.model,
        train=args.train,
        draws=args.draws if args.draws is not None else (3 if args.quick else 5),
        seed=args.seed,
        threads=args.threads,
    )
    spec.check()
    trace, info = _request_trace(args)
    result = lib.simulate(trace, spec, trace_info=info)
    write_artifacts(result, out, plots=not args.no_plots)
    if fmt == "json":
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(render(result))
    print(f"wrote {out}", file=sys.stderr)
    return EXIT_OK


def _reject_flat_options(args: argparse.Namespace) -> None:
    given = [
        flag for flag, value in (
            ("--policies", args.policies), ("--sizes", args.sizes), ("--mrc", args.mrc),
            ("--shards", args.shards),
        ) if value
    ]
    if given or args.unit != "objects":
        given = given or ["--unit"]
        raise UsageError(
            f"{', '.join(given)}: only for flat key traces (.csv, .bin, .txt); "
            "request traces take --strategies"
        )


def _strategies(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    parts = tuple(s.strip() for s in text.split(",") if s.strip())
    if not parts:
        raise UsageError("--strategies: give at least one strategy, e.g. none,lru:1000")
    return parts


def _request_trace(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    from cachelab import traces

    if args.trace is not None:
        trace = traces.load_request_trace(args.trace, args.trace_format)
        return trace, {"source": str(args.trace)}
    if args.requests is not None and args.requests < 1:
        raise UsageError(f"--requests must be at least 1, got {args.requests}")
    n = args.requests or (20_000 if args.quick else 100_000)
    params = traces.SynthParams(requests=n)
    trace = traces.synthesize(params)
    return trace, {"source": "synthetic", "generator": trace.generator}


# -- output -------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    if x is None:
        return "\u2014"
    if x >= 10:
        return f"{100 * x:.0f}%"
    if x >= 0.1:
        return f"{100 * x:.1f}%"
    return f"{100 * x:.2f}%"


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    return "\n".join(text_table(header, rows, left=left))


def _key(x: float) -> str:
    return format(round(float(x), 6), "g")


def _bands(s: dict[str, Any], field: str, name: str) -> dict[str, dict[str, float]]:
    """A strategy's list of {name, median, low, high} as a mapping by the name's short text."""
    return {_key(b[name]): b for b in s[field]}


def _percentiles(s: dict[str, Any]) -> dict[str, dict[str, float]]:
    return _bands(s, "percentiles", "percentile")


def _slowed(s: dict[str, Any]) -> dict[str, dict[str, float]]:
    return _bands(s, "slowed", "threshold")


def render(result: lib.SimulationResult) -> str:
    d = result.to_dict()
    strategies = d["strategies"]
    first = strategies[0] if strategies else {"counts": {}}
    title = (
        f"Added latency per request, as a share of its base latency "
        f"(model {d['model']['name']}"
        + ("; a request's calls follow the profile's sample order"
           if d["model"].get("draws") == "sequence" else "")
        + f"; median of {d['spec']['draws']} draws; "
        f"{first['counts'].get('requests', 0):,} requests evaluated)"
    )
    header = ["strategy", *(f"p{p}" for p in lib.PERCENTILES), "\u226510%", "\u226525%",
              "\u226550%", "hit", "RT/req", "KB/req"]
    rows = []
    for s in strategies:
        pct = _percentiles(s)
        slowed = _slowed(s)
        rows.append([
            s["strategy"],
            *(_pct(pct[p]["median"]) for p in lib.PERCENTILES),
            *(_pct(slowed[t]["median"]) for t in lib.SLOWED),
            _pct(s["hit_ratio"]),
            f"{s['round_trips_per_request']:.2f}",
            f"{s['bytes_per_request'] / 1000:.1f}",
        ])
    parts = [title, _table(header, rows)]
    best = min(strategies, key=lambda s: _percentiles(s)["90"]["median"], default=None)
    if best is not None and best.get("routes"):
        routes = sorted(best["routes"], key=lambda r: -r["total_added_ms"])[:8]
        total = sum(r["total_added_ms"] for r in best["routes"]) or 1.0
        parts.append(
            f"Which requests hurt most under {best['strategy']} (the lowest p90), by added time"
        )
        parts.append(_table(
            ["route", "requests", "mean added ms", "mean increase", "share of added time"],
            [[str(r["route"]), f"{r['requests']:,}", f"{r['mean_added_ms']:.2f}",
              _pct(r["mean_increase"]), _pct(r["total_added_ms"] / total)] for r in routes],
        ))
    parts.append(
        "Percentages are added memcached time / base request latency; hit = share of first "
        "touches served in process (prefetched items not counted); RT = memcached round trips. "
        "Bands over the draws are in simulate.json and simulate.csv."
    )
    return "\n\n".join(parts)


def write_artifacts(result: lib.SimulationResult, out: Path, *, plots: bool = True) -> list[Path]:
    from cachelab.tables import write_csv

    out.mkdir(parents=True, exist_ok=True)
    written = [result.save(out / "simulate.json")]
    d = result.to_dict()
    header = ["strategy"]
    for p in lib.PERCENTILES:
        header += [f"p{p}", f"p{p}_low", f"p{p}_high"]
    for t in lib.SLOWED:
        header += [f"slowed_{t}", f"slowed_{t}_low", f"slowed_{t}_high"]
    header += ["hit_ratio", "round_trips_per_request", "bytes_per_request", "requests"]
    rows = []
    for s in d["strategies"]:
        row: list[Any] = [s["strategy"]]
        pct, slowed = _percentiles(s), _slowed(s)
        for p in lib.PERCENTILES:
            row += [pct[p]["median"], pct[p]["low"], pct[p]["high"]]
        for t in lib.SLOWED:
            row += [slowed[t]["median"], slowed[t]["low"], slowed[t]["high"]]
        row += [s["hit_ratio"], s["round_trips_per_request"], s["bytes_per_request"],
                s["counts"]["requests"]]
        rows.append(row)
    write_csv(out / "simulate.csv", header, rows)
    written.append(out / "simulate.csv")
    route_rows = [
        [s["strategy"], r["route"], r["requests"], r["mean_added_ms"], r["mean_increase"],
         r["total_added_ms"]]
        for s in d["strategies"] for r in s.get("routes", [])
    ]
    write_csv(
        out / "simulate-routes.csv",
        ["strategy", "route", "requests", "mean_added_ms", "mean_increase", "total_added_ms"],
        route_rows,
    )
    written.append(out / "simulate-routes.csv")
    if plots:
        from cachelab.plots.simulate import fractional_increase_plot

        written += fractional_increase_plot(result, out / "simulate")
    return written


__all__ = ["add_parser", "render", "run", "write_artifacts"]
