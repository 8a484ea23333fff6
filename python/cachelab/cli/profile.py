"""``cachelab profile``: latency of get by value size, multi-get by key count, and set."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cachelab import profiles as lib
from cachelab.cli import EXIT_OK, common
from cachelab.errors import Interrupted
from cachelab.progress import Progress
from cachelab.units import format_size, parse_int_list, parse_size, parse_size_list

DESCRIPTION = """\
Measure a memcached server's latency the way Khan Academy's "Profiling App Engine Memcached"
did, with care: each sample writes a fresh random value under a unique per-run key, times the
read, checks every byte, and deletes the key. Cells run interleaved; warm-up samples are
discarded; a raw-socket round trip (the loopback floor) is measured alongside. Results: the
percentile tables, profile.json (the latency profile simulate uses), profile.csv, and
inverted-percentile plots (PNG and SVG).

Sizes take K/M (powers of 1000) or Ki/Mi (powers of 1024): --sizes 1,100,1K,1M.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile", help="latency of get / multi-get / set by value size and key count",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--sizes", type=common.arg_type(parse_size_list), metavar="LIST",
        help="value sizes for get and set (default 1,10,100,1K,10K,100K,1M)",
    )
    p.add_argument(
        "--keys", type=common.arg_type(parse_int_list), metavar="LIST",
        help="key counts for multi-get (default 1,3,5,10,100)",
    )
    p.add_argument(
        "--multi-size", type=common.arg_type(parse_size), metavar="SIZE",
        default=lib.DEFAULT_MULTI_VALUE_SIZE,
        help="value size in a multi-get (default 1K)",
    )
    p.add_argument("--no-multiget", action="store_true", help="skip the multi-get cells")
    p.add_argument("--no-get", action="store_true", help="skip the get and set cells")
    p.add_argument(
        "--samples", type=int, metavar="N",
        help="samples kept per cell (default 10000; 500 with --quick)",
    )
    p.add_argument(
        "--warmup", type=int, metavar="N",
        help="samples per cell run first and discarded (default 200; 20 with --quick)",
    )
    p.add_argument(
        "--concurrency", type=int, default=1, metavar="N",
        help="connections measuring in parallel, one thread each (default 1)",
    )
    p.add_argument(
        "--protocol", choices=("text", "meta"), default="text",
        help="text: set/get/delete; meta: ms/mg/md (default text)",
    )
    p.add_argument(
        "--timeout", type=float, default=1.0, metavar="S",
        help="deadline per request in seconds (default 1)",
    )
    p.add_argument("--seed", type=int, help="seed for the random values (default: random)")
    p.add_argument("--quick", action="store_true", help="a small run of the same shape")
    p.add_argument(
        "--show", metavar="NAME|FILE",
        help="print a saved profile (profile.json, or a directory holding one) or a built-in "
        "one (appengine-2017) instead of measuring; with --out, also write its plots",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG/SVG plots")
    common.add_output_options(p, "profile")
    common.add_server_options(p)
    p.set_defaults(func=run)


def spec_from(args: argparse.Namespace) -> lib.ProfileSpec:
    base = lib.ProfileSpec.quick() if args.quick else lib.ProfileSpec()
    if args.samples is not None:
        base.samples = args.samples
    if args.warmup is not None:
        base.warmup = args.warmup
    if args.sizes is not None:
        base.sizes = tuple(args.sizes)
    if args.keys is not None:
        base.key_counts = tuple(args.keys)
    if args.no_get:
        base.sizes = ()
    if args.no_multiget:
        base.key_counts = ()
    base.multi_value_size = args.multi_size
    base.concurrency = args.concurrency
    base.protocol = args.protocol
    base.timeout = args.timeout
    base.give_up_after = max(5.0, 5 * args.timeout)
    base.seed = args.seed
    base.check()
    return base


def run(args: argparse.Namespace) -> int:
    fmt = common.stdout_format(args)
    if args.show:
        result = lib.load_profile(args.show)
        if fmt == "json":
            print(json.dumps(result.to_dict(), indent=1))
        else:
            print(render(result))
        if args.out is not None:
            write_artifacts(result, args.out, plots=not args.no_plots)
            print(f"wrote {args.out}", file=sys.stderr)
        return EXIT_OK

    spec = spec_from(args)
    address = common.server_address(args)
    out = common.output_dir(args, "profile")
    interrupted = False
    with Progress(None, "profile") as bar:
        try:
            if address is None:
                result = _private(spec, args, bar.track)
            else:
                result = lib.profile(spec, server=address, on_progress=bar.track)
        except Interrupted as e:
            result = e.partial  # type: ignore[attr-defined]
            interrupted = True

    write_artifacts(result, out, plots=not args.no_plots)
    return common.finish_run(
        result, out, fmt=fmt, render=render, see="the tables", interrupted=interrupted,
        wrote="profile.json, profile.csv" + ("" if args.no_plots else " and plots"),
    )


def _private(spec: lib.ProfileSpec, args: argparse.Namespace, on_progress) -> lib.LatencyProfile:
    from cachelab.servers import PrivateMemcached

    options = common.private_server_options(args)
    options["memory_mb"] = lib.memory_for(spec, int(options["memory_mb"]))
    mc = PrivateMemcached(**options, item_size_max=lib.item_size_for(spec))
    with mc:
        facts = {"private": True, "argv": mc.argv}
        return lib.profile(spec, server=mc.address, server_facts=facts, on_progress=on_progress)


def render(p: lib.LatencyProfile) -> str:
    """The human report: a header, the floor, and one table per operation."""
    from cachelab.tables import percentile_table
    from cachelab.units import format_duration_ns, pick_unit

    srv = p.server
    where = srv.get("address") or "—"
    settings = srv.get("settings") or {}
    facts = [f"{settings['num_threads']} threads"] if "num_threads" in settings else []
    if "maxbytes" in settings:
        facts.append(f"{int(settings['maxbytes']) // 2**20} MB")
    if srv.get("private"):
        facts.insert(0, "private")
    if facts:
        where += f" ({', '.join(facts)})"
    lines = []
    if p.source == "published":
        lines.append(f"{p.name}: {p.published.get('source', '') if p.published else ''}")
    else:
        c = p.client
        lines.append(
            f"memcached {srv.get('version', '?')} at {where}; {c.get('protocol')} protocol, "
            f"{c.get('concurrency')} connection(s), {c.get('samples')} samples per cell "
            f"after {c.get('warmup')} warm-up"
        )
    floor = p.floor
    floor_p50 = floor.percentiles.get("50") if floor and floor.samples else None
    if floor_p50:
        unit = pick_unit([floor_p50])
        fl = floor.percentiles
        lines.append(
            f"loopback floor ({p.client.get('floor_command')} on a raw socket): "
            f"p50 {format_duration_ns(fl['50'], unit)} {unit}, "
            f"p99 {format_duration_ns(fl['99'], unit)} {unit}, "
            f"max {format_duration_ns(fl['max'], unit)} {unit}"
        )
    titles = {
        "get": "Get latency by value size",
        "set": "Set latency by value size",
        "multiget": "Multi-get latency by key count"
        + (f", {format_size(p.cells_of('multiget')[0].value_size)} values"
           if p.cells_of("multiget") else ""),
    }
    for op in lib.OPS:
        cells = p.cells_of(op)
        if not cells:
            continue
        footer = [("samples", [str(c.samples) for c in cells])]
        if floor_p50:
            footer.append(("p50/floor", [
                f"{c.percentiles['50'] / floor_p50:.2f}x" if c.samples else "—" for c in cells
            ]))
        if any(c.errors for c in cells):
            footer.append(("errors", [str(sum(c.errors.values())) for c in cells]))
        if any(c.mismatches or c.misses for c in cells):
            footer.append(("mismatches", [str(c.mismatches) for c in cells]))
            footer.append(("misses", [str(c.misses) for c in cells]))
        columns = list(lib.iter_table_columns(p, op))
        lines += ["", percentile_table(titles[op], columns, footer=footer)]
    errors: dict[str, int] = {}
    for c in p.cells:
        for k, n in c.errors.items():
            errors[k] = errors.get(k, 0) + n
    if errors:
        lines += ["", "errors by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(errors.items()))]
    if p.run.get("leftover_keys"):
        lines.append(f"keys that could not be deleted: {p.run['leftover_keys']}")
    return "\n".join(lines)


CSV_HEADER = ["op", "value_size", "keys", "samples", "errors", "mismatches", "misses",
              *(f"p{k}_ns" for k in lib.TABLE_ROWS[:-1]), "max_ns"]


def write_artifacts(p: lib.LatencyProfile, out: Path, *, plots: bool = True) -> list[Path]:
    """profile.json, profile.csv and, unless told not to, the plots."""
    from cachelab.tables import write_csv

    out.mkdir(parents=True, exist_ok=True)
    written = [p.save(out / "profile.json")]
    rows = [
        [c.op, c.value_size, c.keys, c.samples, sum(c.errors.values()), c.mismatches, c.misses,
         *(c.percentiles.get(k, "") for k in lib.TABLE_ROWS)]
        for c in p.cells
    ]
    write_csv(out / "profile.csv", CSV_HEADER, rows)
    written.append(out / "profile.csv")
    if plots:
        written += write_plots(p, out)
    return written


def write_plots(p: lib.LatencyProfile, out: Path) -> list[Path]:
    from cachelab.plots.latency import inverted_percentile_plot, inverted_percentile_points

    points = inverted_percentile_points()
    floor = p.floor
    floor_ns = floor.percentiles.get("50") if floor and floor.samples else None
    written: list[Path] = []
    names = {"get": "get-by-size", "set": "set-by-size", "multiget": "multiget-by-keys"}
    titles = {
        "get": "get latency by value size",
        "set": "set latency by value size",
        "multiget": "multi-get latency by key count",
    }
    for op in lib.OPS:
        cells = [c for c in p.cells_of(op) if c.samples]
        if not cells:
            continue
        series = [(c.label, list(zip(points, c.at(points)))) for c in cells]
        title = f"{titles[op]} — {p.name}"
        written += inverted_percentile_plot(
            series, title=title, out_base=out / names[op], floor_ns=floor_ns
        )
    return written

