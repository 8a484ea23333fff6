"""``cachelab scale``: sweep the load N, measure steady-state throughput, fit the USL."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cachelab import scale as lib
from cachelab import usl as usl_lib
from cachelab.cli import EXIT_OK, EXIT_PROBLEMS, common
from cachelab.cli.usl import render as render_fit
from cachelab.errors import UsageError
from cachelab.load import parse_mix

DESCRIPTION = """\
Measure throughput at a series of loads N with the load generator (closed loop, one request
outstanding per connection) and fit the Universal Scalability Law to the results.

N is (--vary):
  connections     client connections (default)
  threads         client threads, --connections-per-thread each
  server-threads  memcached worker threads (-t N) of a private server restarted per point,
                  driven by --client-connections connections

Each run: a warm-up, then the steady state is detected and a fixed --window is measured from
its start. --repeats runs every point several times in interleaved order (all points, then all
again, alternately ascending and descending) so drift cancels.

On a small machine the client and a local server compete for the same cores; the report says
so and what it means for the fit.

Artifacts: scale.json (schema cachelab.scale v1), scale.csv (one row per run), scale-usl.png/svg
(throughput vs N with the fit), scale-latency.png/svg (each point's latency distribution).

Examples:
  cachelab scale --quick
  cachelab scale --points 1,2,4,8,16,32 --repeats 3
  cachelab scale --vary server-threads --points 1,2,3,4,6,8
"""


def _points(text: str) -> list[int]:
    try:
        pts = [int(p) for p in text.split(",")]
    except ValueError:
        raise UsageError(f"--points {text!r}: expected whole numbers, e.g. 1,2,4,8") from None
    if any(p < 1 for p in pts):
        raise UsageError(f"--points {text!r}: every N must be at least 1")
    return pts


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scale", help="sweep concurrency, measure steady-state throughput, fit the USL",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--vary", choices=lib.VARY, default="connections", help="what N is")
    p.add_argument("--points", type=common.arg_type(_points), metavar="N,...",
                   help="loads to measure (default 1,2,4,6,8,12,16,24,32; --quick 1,2,3,4,6,8)")
    p.add_argument("--repeats", type=int, metavar="R", help="runs per point (default 3; quick 2)")
    p.add_argument("--warmup", type=float, metavar="S", help="warm-up seconds per run")
    p.add_argument("--settle", type=float, metavar="S",
                   help="extra seconds in which the steady state may start")
    p.add_argument("--window", type=float, metavar="S",
                   help="seconds measured from the steady-state start (default 3)")
    p.add_argument("--interval", type=float, metavar="S", help="time-series interval")
    p.add_argument("--connections-per-thread", type=int, metavar="C",
                   help="with --vary threads (default 1)")
    p.add_argument("--client-connections", type=int, metavar="C",
                   help="with --vary server-threads (default 16; quick 8)")
    w = p.add_argument_group("workload (as for cachelab load)")
    w.add_argument("--mix", metavar="OP=SHARE,...", help="default get=90,set=10")
    w.add_argument("--key-space", type=int, metavar="N")
    w.add_argument("--value-size", metavar="DIST")
    w.add_argument("--pipeline", type=int, metavar="N")
    f = p.add_argument_group("fit")
    f.add_argument("--method", choices=list(usl_lib.METHODS), help="USL method (default bounded)")
    f.add_argument("--bootstrap", type=int, metavar="R", help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="workload and bootstrap seed (default 0)")
    p.add_argument("--quick", action="store_true", help="a small, fast sweep of the same shape")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG/SVG plots")
    common.add_output_options(p, "scale")
    common.add_server_options(p)
    p.set_defaults(func=run)


def spec_from(args: argparse.Namespace) -> lib.ScaleSpec:
    over = {}
    for name in ("vary", "points", "repeats", "warmup", "settle", "window", "interval",
                 "connections_per_thread", "client_connections", "method", "bootstrap", "seed"):
        v = getattr(args, name)
        if v is not None:
            over[name] = v
    spec = lib.ScaleSpec.quick(**over) if args.quick else lib.ScaleSpec(**over)
    workload = dict(spec.workload)
    if args.mix:
        workload["mix"] = parse_mix(args.mix)
    for name in ("key_space", "value_size", "pipeline"):
        if getattr(args, name) is not None:
            workload[name] = getattr(args, name)
    spec.workload = workload
    spec.check()
    spec.run_spec(max(spec.points))  # validates the workload
    return spec


def run(args: argparse.Namespace) -> int:
    fmt = common.stdout_format(args)
    spec = spec_from(args)
    address = common.server_address(args)
    out = common.output_dir(args, "scale")

    def progress(done: int, total: int, n: int, point: dict) -> None:
        print(f"scale: {done}/{total} N = {n}: {point['throughput']:,.0f}/s"
              + ("" if point["steady_reached"] else " (no steady state)"), file=sys.stderr)

    result = lib.scale(spec, server=address, server_options=common.private_server_options(args),
                       on_run=progress)
    write_artifacts(result, out, plots=not args.no_plots)
    if fmt == "json":
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(render(result))
    stream = sys.stderr if fmt == "json" else sys.stdout
    print(f"wrote {out}/scale.json, scale.csv" + ("" if args.no_plots else " and plots"),
          file=stream)
    return EXIT_PROBLEMS if any(r["errors"] or r["lost"] for r in result.runs) else EXIT_OK


def _us(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1000:.1f}"


def render(r: lib.ScaleResult) -> str:
    s = r.spec
    lines = [
        f"scale sweep: N = {s['vary']}, {len(r.runs)} run(s) "
        f"({s['repeats']} repeat(s), interleaved), window {s['window']:g} s from the steady state"
        f"; memcached {r.server.get('version', '?')} at {r.server.get('address')}",
        "",
        f"{'N':>6}{'X mean /s':>14}{'sd':>10}{'p50 µs':>10}{'p99 µs':>10}{'p99.9 µs':>10}",
    ]
    for row in r.summary:
        p = row["latency"]["percentiles_ns"]
        sd = row["throughput_sd"]
        lines.append(f"{row['n']:>6}{row['throughput_mean']:>14,.0f}"
                     f"{'—' if sd is None else f'{sd:,.0f}':>10}{_us(p.get('50')):>10}"
                     f"{_us(p.get('99')):>10}{_us(p.get('99.9')):>10}")
    fit = r.usl
    if fit is not None:
        lines += ["", render_fit(fit)]
    if r.limits:
        lines += ["", *[f"note: {m}" for m in r.limits]]
    return "\n".join(lines)


CSV_HEADER = ["order", "n", "repeat", "connections", "threads", "throughput", "replies",
              "window_s", "steady_reached", "window_short", "errors", "lost", "p50_ns", "p99_ns",
              "p99.9_ns", "max_ns", "server_run_queue_wait_per_wall", "client_cpu_us_per_op"]


def write_artifacts(r: lib.ScaleResult, out: Path, *, plots: bool = True) -> list[Path]:
    from cachelab.tables import write_csv

    out.mkdir(parents=True, exist_ok=True)
    written = [r.save(out / "scale.json")]
    rows = []
    for x in sorted(r.runs, key=lambda x: x["order"]):
        p = x["latency"]["percentiles_ns"]
        rows.append([x["order"], x["n"], x["repeat"], x["connections"], x["threads"],
                     f"{x['throughput']:.1f}", x["replies"], x["window_s"],
                     int(x["steady_reached"]), int(x["window_short"]), x["errors"], x["lost"],
                     p.get("50", ""), p.get("99", ""), p.get("99.9", ""), p.get("100", ""),
                     x["server_run_queue_wait_per_wall"] if x["server_run_queue_wait_per_wall"]
                     is not None else "", x["client_cpu_us_per_op"] or ""])
    write_csv(out / "scale.csv", CSV_HEADER, rows)
    written.append(out / "scale.csv")
    if plots:
        from cachelab.plots.usl import scale_latency_plot, usl_plot

        fit = r.usl
        if fit is not None:
            written += usl_plot(fit, out / "scale-usl", xlabel=f"N ({r.spec['vary']})",
                                ylabel="throughput (replies/s)",
                                title=f"memcached scalability: N = {r.spec['vary']}")
        written += scale_latency_plot(r.summary, out / "scale-latency", vary=r.spec["vary"])
    return written
