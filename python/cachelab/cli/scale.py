"""``cachelab scale``: sweep the load N, measure steady-state throughput, fit the USL."""

from __future__ import annotations

import argparse

import cachelab.scale as lib
import cachelab.usl as usl_lib
from cachelab.cli import cluster, common, output
from cachelab.cli.load import CHECKS, CONNECTIONS, KEY_SPACE, PIPELINE
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.intervals import parse_precision_percentile
from cachelab.load import LIMITS as LOAD_LIMITS
from cachelab.load import LoadSpec, parse_mix
from cachelab.load.precision import SHOWN
from cachelab.progress import Progress
from cachelab.units import flag_text

DESCRIPTION = """\
Measure throughput at a series of loads N with the load generator (closed loop, one request
outstanding per connection) and fit the Universal Scalability Law to the results.

N is (--vary):
  connections     client connections (default)
  threads         client threads, --connections-per-thread each
  server-threads  memcached worker threads (-t N) of a private server restarted per point,
                  driven by --connections connections; over RESP (--protocol resp), a
                  private redis-server restarted per point with --io-threads N
                  (--io-threads-do-reads yes), each run recording its io_threads
  agents          load agents on a Ray cluster (--ray), one per node, each with
                  --connections-per-agent connections (docs/scale-out.md)

Each run: a warm-up, then the steady state is detected and a fixed --window is measured from
its start. --repeats runs every point several times in interleaved order (all points, then all
again, alternately ascending and descending) so drift cancels.

On a small machine the client and a local server compete for the same cores. With 2 to 4
CPUs, a private memcached is pinned to the first CPUs (as many as its --server-threads, at
most half) and the load client to the rest, for the sweep only (--no-pin to share them; a
--server is never pinned): the first line says "server on CPU 0, client on CPU 1" and
scale.json records the sets (server.cpus). When the client saturates from the peak up, the
card and the first lines say scaling is NOT measurable on this machine (the curve is the
client's ceiling, not memcached's): measure with --ray, or run the client on another host.

Every run carries its load verdict. A run whose throughput is INVALID (rate not held, not
stationary) is left out of the fit and named; where only its latencies are INVALID (client
saturated, not independent, late sends), its throughput stays in the fit and the table's
"latencies" column and the headline name the failed check at its N.

Through twemproxy (--proxy HOST:PORT, with the memcached servers behind it given by --server
repeated or --servers-file): every point is a load run through the proxy, as load --proxy
does: the servers behind are checked for room, watched for evictions and read for their
stats, and each run in scale.json records their deltas (runs[].behind) beside its requests
(runs[].ops). Not with --vary server-threads.

A Redis or Valkey (--server redis://HOST:PORT, rediss:// for TLS, or --protocol resp; a
private redis-server, not pinned, when no --server is given): every point is a load run over
RESP (load --protocol resp: maxmemory checked, evicted_keys watched, INFO's deltas), and the
first line names the server's io-threads where CONFIG GET answers (docs/resp.md, "scale").
--server repeated is a pool of them, --proxy twemproxy in redis mode in front of them, and
--cluster a Redis Cluster from its seed (each key to its slot's master, as load --cluster):
the table then has a row per member or master (replies, errors, commands as its INFO counted
them, and a cluster's MOVED and ASK redirections). --ray --vary agents drives any of them
from Ray agents (each a load --ray over RESP); --vary server-threads restarts a private
redis-server with --io-threads N per point (no --server).

Artifacts: scale.json (schema cachelab.scale v1), scale.csv (one row per run), scale-usl.png/svg
(throughput vs N with the fit), scale-latency.png/svg (each point's latency distribution).

A sweep cut short keeps the runs it finished: on Ctrl-C or SIGTERM (exit 130), or when the
server fails or goes away (exit 3, one line on stderr saying why), they are written and
marked partial (scale.json's run: cancelled, aborted), and the table's first line says
PARTIAL, why, and how many of the runs asked it kept.
"""

EXAMPLES = """\
cachelab scale --quick          # on 2-4 CPUs: server on CPU 0, client on the rest
cachelab scale --vary server-threads --points 1,2,3,4 --no-pin   # memcached on every CPU
cachelab scale --proxy 127.0.0.1:22121 --servers-file pool.txt --quick
cachelab scale --cluster --server redis://127.0.0.1:7000 --points 1,2,4,8 --repeats 3
"""


#: Each flag's default as --help states it: the sweep's (``ScaleSpec``), its small run's
#: (``--quick``) and the workload's (``LoadSpec``).
_D = lib.ScaleSpec()
_Q = lib.ScaleSpec.quick()
_W = LoadSpec()


def _points(text: str) -> list[int]:
    try:
        pts = [int(p) for p in text.split(",")]
    except ValueError:
        raise UsageError(f"--points {text!r}: expected whole numbers, e.g. 1,2,4,8") from None
    if any(p < 1 for p in pts):
        raise UsageError(f"--points {text!r}: every N must be at least 1")
    return pts


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "scale", help="sweep concurrency, measure steady-state throughput, fit the USL",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument("--vary", choices=lib.VARY, default="connections", help="what N is")
    p.add_argument("--points", type=common.arg_type(_points), metavar="N,...",
                   help=f"loads to measure (default {flag_text(_D.points)}; --quick "
                   f"{flag_text(_Q.points)})")
    p.add_argument("--repeats", type=common.limit_range(lib.LIMITS["repeats"]), metavar="R",
                   help=f"runs per point (default {_D.repeats}; quick {_Q.repeats})")
    p.add_argument("--warmup", type=common.limit_range(LOAD_LIMITS["warmup"]), metavar="S",
                   help=f"warm-up seconds per run (default {flag_text(_D.warmup)}; quick "
                   f"{flag_text(_Q.warmup)})")
    p.add_argument("--settle", type=common.limit_range(lib.LIMITS["settle"]), metavar="S",
                   help="extra seconds in which the steady state may start (default "
                   f"{flag_text(_D.settle)}; quick {flag_text(_Q.settle)})")
    p.add_argument("--window", type=common.limit_range(lib.LIMITS["window"]), metavar="S",
                   help="seconds measured from the steady-state start (default "
                   f"{flag_text(_D.window)}; quick {flag_text(_Q.window)})")
    p.add_argument("--interval", type=common.limit_range(LOAD_LIMITS["interval"]), metavar="S",
                   help=f"time-series interval (default {flag_text(_D.interval)}; quick "
                   f"{flag_text(_Q.interval)})")
    p.add_argument("--connections-per-thread", type=CONNECTIONS, metavar="C",
                   help=f"with --vary threads (default {_D.connections_per_thread})")
    p.add_argument("--connections", type=CONNECTIONS, metavar="C", dest="client_connections",
                   help="with --vary server-threads: the client connections at every point "
                   f"(default {_D.client_connections}; quick {_Q.client_connections})")
    common.deprecated(p, "--client-connections", "--connections", dest="client_connections",
                      type=CONNECTIONS, metavar="C")
    p.add_argument("--connections-per-agent", type=CONNECTIONS, metavar="C",
                   help=f"with --vary agents (default {_D.connections_per_agent})")
    p.add_argument("--precision", type=common.precision_arg, metavar="P%",
                   help="each run stops once its p99's (or --precision-percentile's) 95 %% "
                   "interval is within ±P %% of it "
                   "(as load --precision; above 0 and below 100, e.g. 5%%; below 1 the %% "
                   "sign is required), at most --settle + --window seconds after the warm-up; "
                   "the point is measured from the steady state to the run's end, and the "
                   "table shows each point's precision")
    p.add_argument("--precision-percentile", type=parse_precision_percentile, metavar="P",
                   help="the percentile --precision targets: "
                   f"{', '.join(k for k in SHOWN if float(k) >= 50)} "
                   f"(default {_D.precision_percentile}; {_Q.precision_percentile} with --quick)")
    w = p.add_argument_group("workload (as for cachelab load)")
    w.add_argument("--mix", metavar="OP=SHARE,...", help=f"default {flag_text(_W.mix)}")
    w.add_argument("--key-space", type=KEY_SPACE, metavar="N",
                   help=f"default {_W.key_space}; quick {_Q.workload['key_space']}")
    w.add_argument("--value-size", metavar="DIST", help=f"default {_W.value_size}")
    w.add_argument("--pipeline", type=PIPELINE, metavar="N", help=f"default {_W.pipeline}")
    f = p.add_argument_group("fit")
    f.add_argument("--method", choices=list(usl_lib.METHODS),
                   help=f"USL method (default {_D.method})")
    f.add_argument("--keep-invalid", action="store_true", default=None,
                   help="fit the runs whose throughput is INVALID too (rate not held, not "
                        "stationary; by default they are left out of the fit and of each N's "
                        "mean throughput, each named with its reason)")
    f.add_argument("--bootstrap", type=common.limit_range(usl_lib.LIMITS["bootstrap"]), metavar="R",
                   help=f"bootstrap resamples (default {_D.bootstrap}; quick {_Q.bootstrap})")
    common.add_seed(p, "workload and bootstrap seed", default=_D.seed)
    common.add_protocol_option(p)
    p.add_argument("--cluster", action="store_true", default=None,
                   help="the --server (repeatable) is a seed node of a Redis Cluster: every "
                   "point is a load --cluster run, its masters read from the seed and driven "
                   "as a pool by hash slot, each master's replies, commands and redirections "
                   "in the point (docs/resp.md, \"scale\")")
    common.add_no_pin(p)
    cluster.add_flags(p)
    common.finish_parser(p, "scale", run, quick="a small, fast sweep of the same shape",
                         plots="skip the PNG/SVG plots", server=True, pool=True, tls=True,
                         checks=CHECKS, server_note="with more memory when the workload needs it; "
                         "restarted at every point with --vary server-threads")


def spec_from(args: argparse.Namespace) -> lib.ScaleSpec:
    over = {}
    for name in ("vary", "points", "repeats", "warmup", "settle", "window", "interval",
                 "connections_per_thread", "client_connections", "connections_per_agent",
                 "method", "keep_invalid", "bootstrap", "seed", "precision",
                 "precision_percentile", "pin"):
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
    protocol = common.protocol_of(args)
    if protocol is not None:
        workload["protocol"] = protocol
    spec.workload = workload
    spec.tls = common.tls_options(args)
    spec.check()
    spec.run_spec(max(spec.points))  # validates the workload
    return spec


def run(args: argparse.Namespace) -> int:
    spec = spec_from(args)
    target = target_from(args)
    # One line per point on stderr (no bar). Interrupted: the runs finished are kept, and
    # the result says PARTIAL.
    out, result, interrupted = common.measure(
        args, "scale", Progress(None, "scale", enabled=False),
        lambda lines: lib.run(spec, target, progress=lines))
    return output.finish(
        args, result, out, verb="scale", write={"plots": not args.no_plots},
        see="runs[].errors in scale.json", interrupted=interrupted,
        wrote="scale.json, scale.csv" + ("" if args.no_plots else " and plots"))
