"""``cachelab profile``: latency of get by value size, multi-get by key count, and set."""

from __future__ import annotations

import argparse
from typing import Any

import cachelab.profile as lib
from cachelab.cli import common, output
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.intervals import parse_precision_percentile
from cachelab.profile.pool import ROUNDS, ROUNDS_LIMIT, PoolProfile
from cachelab.profile.spec import LIMITS as PROFILE_LIMITS
from cachelab.profile.spec import SHOWN_PERCENTILES
from cachelab.progress import Progress
from cachelab.resp import is_url, redact
from cachelab.units import flag_text, parse_int_list, parse_size, parse_size_list

DESCRIPTION = """\
Measure a memcached server's (or a Redis's or Valkey's) latency the way Khan Academy's
"Profiling App Engine Memcached" did, with care: each sample writes a fresh random value
under a unique per-run key, times the read, checks every byte, and deletes the key. Cells run
interleaved; warm-up samples are discarded; the smallest request (the loopback floor, mn) is
timed on the same connection in every round. Results: the percentile tables, profile.json
(the latency profile simulate uses), profile.csv, and inverted-percentile plots (PNG and SVG).

Through twemproxy (--proxy HOST:PORT, with the memcached servers behind it given by --server
repeated or --servers-file): every request goes to the proxy, text protocol only. The floor is
then a get of a key never written (get-miss: twemproxy closes the connection on mn), which
crosses the proxy to one server behind it; a multi-get is split by the proxy over the servers
and answered as one. Each server behind is checked for room for the whole run, watched for
evictions and read for its stats; profile.json gets a "behind" section (docs/pools.md).

A Redis or Valkey (--server redis://[user:password@]HOST:PORT[/db], rediss:// for TLS, or
--protocol resp; a private redis-server when no --server is given): SET, GET and MGET, the
floor PING, keys deleted with UNLINK; the server's maxmemory and policy checked before
anything is written, evicted_keys watched, and INFO's counters (commandstats too) read
before and after (docs/resp.md, "profile"). --server repeated is a pool of them (each member
profiled in rounds, its own commandstats against what it was sent); --proxy is twemproxy in
redis mode in front of them (the floor a GET of a key never written: the proxy answers PING
itself; each server behind read for its INFO); --cluster takes a Redis Cluster's seed and
profiles each master as a pool member, its keys under a hash tag of its own slots.

Sizes take K/M (powers of 1000) or Ki/Mi (powers of 1024): --sizes 1,100,1K,1M.
"""

EXAMPLES = """\
cachelab profile --server 10.0.0.1:11211 --sizes 100,10K --keys 1,10 --connections 4
cachelab profile --quick --precision 5% --fail-on precision   # exit 1 if a cell's p50 is not ±5 %
cachelab profile --proxy 127.0.0.1:22121 --servers-file pool.txt --quick
cachelab profile --server redis://127.0.0.1:6379 --quick   # a Redis (or --protocol resp)
"""


#: Each flag's default as --help states it: the spec's (``ProfileSpec``) and its small run's.
_D = lib.ProfileSpec()
_Q = lib.ProfileSpec.quick()
_QP = lib.ProfileSpec.quick(precision=0.05)
_SHOWN = [k for k in SHOWN_PERCENTILES if float(k) >= 50]


def _limit(name: str) -> Any:
    return common.limit_range(PROFILE_LIMITS[name])


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "profile", help="latency of get / multi-get / set by value size and key count",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument(
        "--sizes", type=common.arg_type(parse_size_list), metavar="LIST",
        help=f"value sizes for get and set (default {flag_text(_D.sizes, size=True)})",
    )
    p.add_argument(
        "--keys", type=common.arg_type(parse_int_list), metavar="LIST",
        help=f"key counts for multi-get (default {flag_text(_D.key_counts)})",
    )
    p.add_argument(
        "--multi-size", type=common.arg_type(parse_size), metavar="SIZE",
        help=f"value size in a multi-get (default {flag_text(_D.multi_value_size, size=True)})",
    )
    p.add_argument("--no-multiget", action="store_true", help="skip the multi-get cells")
    p.add_argument("--no-get", action="store_true", help="skip the get and set cells")
    p.add_argument(
        "--samples", type=_limit("samples"), metavar="N",
        help=f"samples kept per cell (default {_D.samples}; {_Q.samples} with --quick); with "
        f"--precision, the most per cell (--quick: {_QP.samples})",
    )
    p.add_argument(
        "--precision", type=common.precision_arg, metavar="P%",
        help="sample each cell until its targeted percentile's 95 %% interval (see "
        "--precision-percentile) is within ±P %% of it (above 0 and below 100, e.g. 5%%; "
        "below 1 the %% sign is required), in batches; --samples is then the cap per cell, "
        "and a cell that reaches it first says \"precision NOT reached\" (docs/load.md, "
        "\"Profile: run length by precision\")",
    )
    p.add_argument(
        "--precision-percentile", type=parse_precision_percentile, metavar="P",
        help=f"the percentile --precision targets: {', '.join(_SHOWN)} (default "
        f"{_D.precision_percentile}; {_Q.precision_percentile} with --quick, whose 500 samples "
        "put 5 beyond a p99: its interval's top is the second-largest latency)",
    )
    p.add_argument(
        "--warmup", type=_limit("warmup"), metavar="N",
        help=f"samples per cell run first and discarded (default {_D.warmup}; {_Q.warmup} "
        "with --quick)",
    )
    p.add_argument(
        "--connections", type=_limit("concurrency"), metavar="N",
        help=f"connections measuring in parallel, one thread each (default {_D.concurrency})",
    )
    common.deprecated(p, "--concurrency", "--connections", dest="connections",
                      type=_limit("concurrency"), metavar="N")
    p.add_argument(
        "--protocol", choices=common.PROTOCOL_CHOICES,
        help=f"text: set/get/delete; meta: ms/mg/md (default {_D.protocol}); resp: a Redis "
        "or Valkey, SET/GET/MGET/UNLINK (a --server redis://… speaks resp without it; no "
        "--server: a private redis-server)",
    )
    p.set_defaults(speaks_resp=True)  # (a redis:// server is a Redis to profile)
    p.add_argument(
        "--cluster", action="store_true", default=None,
        help="the --server (repeatable) is a seed node of a Redis Cluster: each master is "
        "profiled on its own, as a pool's members are (--rounds), its keys under a hash tag "
        "of its own slots so that an MGET is one command to one master (docs/resp.md, "
        "\"profile\")",
    )
    p.add_argument(
        "--timeout", type=_limit("timeout"), metavar="S",
        help=f"deadline per request in seconds (default {flag_text(_D.timeout)})",
    )
    common.add_seed(p, "seed for the random values", default=_D.seed)
    p.add_argument("--quick", action="store_true", help="a small run of the same shape")
    p.add_argument(
        "--show", metavar="NAME|FILE",
        help="print a saved profile (profile.json, or a directory holding one) or a built-in "
        "one (appengine-2017) instead of measuring; with --out, also write its plots",
    )
    p.add_argument(
        "--plain-port", type=_limit("plain_port"), metavar="PORT",
        help="with --tls: a plain (notls:) listener of the same server, for the TLS cost "
        "table: new-connection and small-get latency over TCP next to TLS",
    )
    p.add_argument(
        "--rounds", type=common.limit_range(ROUNDS_LIMIT), default=ROUNDS, metavar="N",
        help="a pool (--server repeated or --servers-file): profile every member in N rounds, "
        f"their order rotated, so drift falls on all alike (default {ROUNDS})",
    )
    common.finish_parser(p, "profile", run, plots="skip the PNG/SVG plots", server=True,
                         pool=True, tls=True, checks=("precision", "problems"),
                         server_note="with the memory and item size its values need: "
                         "-I raised for values above 1 MB")


def spec_from(args: argparse.Namespace) -> lib.ProfileSpec:
    base = (lib.ProfileSpec.quick(precision=args.precision) if args.quick
            else lib.ProfileSpec(precision=args.precision))
    if args.precision_percentile is not None:
        base.precision_percentile = args.precision_percentile
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
    urls = [s for s in (args.server or []) if is_url(s)]
    if urls and args.protocol in ("text", "meta"):
        raise UsageError(f"--protocol {args.protocol}, but --server {redact(urls[0])} is a "
                         "Redis URL: give HOST:PORT, or --protocol resp")
    if urls:
        args.protocol = "resp"
    for name, value in (("multi_value_size", args.multi_size), ("concurrency", args.connections),
                        ("protocol", args.protocol), ("timeout", args.timeout)):
        if value is not None:
            setattr(base, name, value)
    base.give_up_after = max(5.0, 5 * base.timeout)
    base.seed = args.seed
    base.tls = common.tls_options(args)
    if args.plain_port is not None and base.tls is None:
        raise UsageError("--plain-port needs --tls (it is the plain TCP listener to compare "
                         "TLS with)")
    base.plain_port = args.plain_port
    base.check()
    return base


def run(args: argparse.Namespace) -> int:
    if args.show:
        return _show(args)
    spec = spec_from(args)
    target = target_from(args)
    # Interrupted: what was measured is kept, and the result says PARTIAL.
    out, result, interrupted = common.measure(
        args, "profile", Progress(None, "profile"),
        lambda bar: lib.run(spec, target, progress=bar, rounds=args.rounds))
    if isinstance(result, PoolProfile):  # a pool: each member profiled in rounds
        return output.finish(
            args, result, out, verb="profile", write={"plots": not args.no_plots},
            see="the members' tables", interrupted=interrupted,
            wrote="profile-pool.json, profile-pool.csv and each member's profile under "
            "members/")
    return output.finish(
        args, result, out, verb="profile", write={"plots": not args.no_plots},
        see="the tables", interrupted=interrupted,
        wrote="profile.json, profile.csv" + ("" if args.no_plots else " and plots"))


def _show(args: argparse.Namespace) -> int:
    """``--show``: print a saved or built-in profile; with ``--out``, write its files again."""
    if args.out is not None:
        output.check_out_dir(args.out, files=("profile.json",))
    result = lib.load_profile(args.show)
    return output.finish(args, result, args.out, verb="profile",
                         write={"plots": not args.no_plots})
