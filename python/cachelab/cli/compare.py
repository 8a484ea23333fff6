"""``cachelab compare``: A/B of two or more saved results of the same kind."""

from __future__ import annotations

import argparse
from pathlib import Path

import cachelab.compare as lib
from cachelab.cli import common, output
from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.units import flag_text

DESCRIPTION = """\
Compare saved results of one kind — latency profiles, load results, scale sweeps,
simulations (request-level or flat miss-ratio) or tiers results — the first being the
baseline A. For each item (a profile cell, a strategy, a load N, a policy at a capacity, a
shape read by a method) and metric (p50 … p99.9, throughput, hit or miss ratio) it prints
both values, the change relative to A, an interval, and a verdict only when the interval
excludes zero.

Intervals: latency percentiles by bootstrap over the HdrHistograms (exact for the recorded
histogram); throughput by Welch's t over intervals or repeats; request-level simulations from
their bands over latency draws. Flat miss ratios and stored bytes are deterministic: their
difference is exact ("same" when equal); a SHARDS-sampled curve gets no verdict.
Percentiles with fewer than 10 samples beyond them get "too few samples".

Results of different kinds are refused; so are results measured with settings that change
what is measured (protocol, concurrency, load mode or workload, a simulation's trace) unless
--allow-different. Writes compare.json, compare.csv and compare.png/svg (a forest plot).

Live A/B of servers: with --server-cmd (two or more, the first is A) instead of results,
compare starts each command on a private loopback port (adding -p PORT -l 127.0.0.1 -U 0),
runs --repeats interleaved rounds (A B B A …) of a short closed-loop load against each, and
compares throughput, p50/p90/p99 and the server's run-queue wait read from
/proc/PID/task/*/schedstat, with Welch's t intervals over the rounds. Each command must end in
a memcached invocation; wrappers that exec it come first (see the examples).

A Redis or Valkey A/B: commands that end in redis-server (or valkey-server) and its own
--flag value arguments (e.g. --io-threads 4) are each started as a private redis-server
(adding --port PORT --bind 127.0.0.1 --save '' --appendonly no, maxmemory 64 MB unless the
command sets --maxmemory), and every round is a load over RESP; compare.json records each
server's io-threads (docs/resp.md, "compare"). The commands of one A/B are all memcached or
all redis-server. With --tls each redis-server command gives its --tls-cert-file and
--tls-key-file, and listens over TLS alone (the A/B adds --port 0 --tls-port PORT
--tls-auth-clients no).

Over TLS: with --tls (and --cacert, --cert/--key, --tls-skip-verify, --sni as for load),
every command must listen over TLS itself (-Z and its certificate, valid for 127.0.0.1 unless
--sni names it); each server is checked ready over TLS with those options and every round's
load and stats go over TLS. A command without -Z fails at its start (exit 3); one with -Z
needs --tls (exit 2). --tls is for --server-cmd only: saved results record their transport.
A server command that does not start (e.g. chrt without the privilege to set real-time
scheduling, or one without -Z under --tls), or a server that fails, is exit 3.
"""

EXAMPLES = """\
cachelab compare before/profile.json after/profile.json
cachelab compare --server-cmd 'memcached -t 2' --server-cmd 'chrt -f 50 memcached -t 2'
cachelab compare --tls --cacert ca.pem \\
  --server-cmd 'memcached -t 2 -Z -o ssl_chain_cert=server.pem,ssl_key=server.key' \\
  --server-cmd 'memcached -t 4 -Z -o ssl_chain_cert=server.pem,ssl_key=server.key'
cachelab compare --server-cmd redis-server --server-cmd 'redis-server --io-threads 4'
"""


#: Each flag's default as --help states it: the spec's (``CompareSpec``'s field defaults), and
#: those of the short live A/B (``--quick``).
_D = lib.CompareSpec()
_Q = lib.CompareSpec.quick()
_LIMITS = lib.LIMITS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(sub, "compare", help="A/B of two or more results of the same kind",
                           description=DESCRIPTION, examples=EXAMPLES)
    p.add_argument("paths", nargs="*", type=Path, metavar="RESULT",
                   help="result files (or directories holding one result); the first is A")
    p.add_argument("--server-cmd", action="append", metavar="CMD", default=[],
                   help="a memcached (or redis-server) command line to start and measure "
                   "(give two or more; instead of RESULTs)")
    p.add_argument("--repeats", type=common.limit_range(_LIMITS["repeats"]), default=None,
                   metavar="N",
                   help="with --server-cmd: interleaved rounds per server (default "
                   f"{_D.repeats}; {_Q.repeats} with --quick)")
    p.add_argument("--duration", type=common.limit_range(_LIMITS["duration"]), default=None,
                   metavar="S",
                   help="with --server-cmd: seconds of load per round (default "
                   f"{flag_text(_D.duration)}; {flag_text(_Q.duration)} with --quick)")
    p.add_argument("--resamples", type=common.limit_range(_LIMITS["resamples"]),
                   default=_D.resamples, metavar="R",
                   help=f"bootstrap resamples (default {_D.resamples})")
    p.add_argument("--level", type=common.limit_range(_LIMITS["level"]), default=_D.level,
                   metavar="L",
                   help=f"interval confidence level (default {flag_text(_D.level)})")
    common.add_seed(p, "bootstrap seed", default=_D.seed)
    p.add_argument("--allow-different", action="store_true",
                   help="compare results whose settings differ (the difference is noted)")
    common.finish_parser(p, "compare", run, plots="skip the PNG/SVG plot",
                         quick="with --server-cmd: a short A/B of the same shape "
                         f"({_Q.repeats} rounds of {flag_text(_Q.duration)} s per server)")
    # After the output options, where finish_parser puts them for the other verbs.
    common.add_tls_options(p, needs="--server-cmd commands that listen with -Z",
                           sni_default="127.0.0.1, the servers' private address")


def run(args: argparse.Namespace) -> int:
    if args.server_cmd and args.paths:
        raise UsageError("give saved results or --server-cmd, not both")
    if args.tls and not args.server_cmd:
        raise UsageError("--tls is for the live A/B (--server-cmd): saved results already "
                         "record their transport")
    tls = common.tls_options(args)
    if not args.server_cmd and len(args.paths) < 2:
        raise UsageError("compare needs at least two results (or two --server-cmd)")
    out = output.prepare_out(args, "compare")
    base = _Q if args.quick else _D
    spec = lib.CompareSpec(paths=tuple(args.paths), server_cmds=tuple(args.server_cmd or ()),
                           resamples=args.resamples, level=args.level, seed=args.seed,
                           allow_different=args.allow_different,
                           repeats=args.repeats or base.repeats,
                           duration=args.duration or base.duration,
                           tls=tls, out=out)
    # A bar over the live A/B's rounds, on a terminal (saved results show none).
    with Progress(None, "compare", enabled=None if spec.server_cmds else False) as bar:
        result = lib.run(spec, progress=bar)
    return output.finish(args, result, out, verb="compare", write={"plots": not args.no_plots},
                         wrote="compare.json, compare.csv"
                         + ("" if args.no_plots else " and plots"))


__all__ = ["add_parser", "run"]
