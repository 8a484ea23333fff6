"""``cachelab load``: run a workload against memcached, closed or open loop."""

from __future__ import annotations

import argparse
from pathlib import Path

import cachelab.load as lib
from cachelab.cli import cluster, common, output
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.progress import Progress

DESCRIPTION = """\
Drive memcached with a workload and report throughput and latency per interval.

Closed loop (default): every connection keeps --pipeline requests outstanding.
Open loop (--rate R): requests are due at R per second over all connections (Poisson or
evenly spaced arrivals per connection); latency is counted from the time a request was due
(corrected) and from the time it was sent (uncorrected), so queueing is never hidden.

A pool (--server repeated, or --servers-file): every connection has a socket to each member,
each key goes to the member the --distribution picks, a multi-get is split into one get per
member; a member that fails --member-failure-limit times in a row is marked down for
--member-retry seconds, and its requests fail at once (member_down, not remapped). The
table adds a row per member; load.json a "members" section.

Through --proxy HOST:PORT (twemproxy), with the servers behind it given by --server repeated
or --servers-file: every request goes to the proxy; the table adds a row per server behind it
(by host:port, a weight given dropped), and one that stops answering during the run is named
in the first lines with the time it stopped, its counts kept up to then (a problem:
--fail-on problems makes it exit 1; see docs/pools.md).

With --ray [ADDRESS] --agents N the same run comes from N Ray agents, one per node, each with
its share of the connections and rate, on one server, a pool (every agent drives every member)
or through --proxy; the merged result adds an "agents" section (docs/scale-out.md).

Every key is <prefix>:<unique run id>:<index>; the keys written (prefill and sets) are deleted
at the end (from the member that holds each). Artifacts: load.json, load.csv (time series),
load.hlog (HdrHistogram interval log), load-latency.png/svg. Flags override settings from
--spec FILE.toml.

More: cachelab load --rate 50000 --probe-rate 200 (a low-rate probe connection beside the
load: client bias); --ray HEAD:6379 --agents 4 (docs/scale-out.md); failure drills on a
private pool: --private-pool 3 --remove 2@5, --fail 2@5:stop:2 --on-member-down remap
(docs/pools.md, "Failure drills").
"""

EXAMPLES = """\
cachelab load --duration 30 --connections 8 --pipeline 4 --mix get=90,set=10
cachelab load --rate 50000 --key-dist zipf:0.99 --value-size lognormal:1K:0.5
cachelab load --server 10.0.0.1:11211 --server 10.0.0.2:11211:2 --mix get=80,multiget=20
# a private pool of 3, member 2 removed at 5 s; exit 1 if the run is INVALID or had errors
cachelab load --private-pool 3 --rate 20000 --remove 2@5 --fail-on invalid,problems
"""

#: Flag name -> LoadSpec field, for flags that set a spec field directly.
_FIELDS = ("connections", "threads", "pipeline", "max_outstanding", "rate", "arrivals", "mix",
           "multiget_keys", "key_space", "key_dist", "value_size", "prefix", "ttl", "duration",
           "requests", "warmup", "prefill", "interval", "timeout", "seed",
            "busy_poll_us", "send_batch", "give_up_after", "stall_ms", "precision", "repeats",
            "probe_rate", "on_member_down", "on_miss", "private_pool", "add", "remove", "fail",
            "private_proxy")

#: Each numeric flag's range: the load engine's (``lib.LIMITS``, from crates/load/src/spec.rs),
#: so a flag out of range is refused before anything starts, with the range (``scale`` uses
#: them too).
CONNECTIONS = common.limit_range(lib.LIMITS["connections"])
PIPELINE = common.limit_range(lib.LIMITS["pipeline"])
KEY_SPACE = common.limit_range(lib.LIMITS["key_space"])
SECONDS = common.limit_range(lib.LIMITS["timeout"])


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "load",
        help="load generator: closed or open loop, latency from the intended send time",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument("--spec", type=Path, metavar="FILE.toml", help="workload settings file")
    w = p.add_argument_group("workload")
    w.add_argument("--connections", type=CONNECTIONS, metavar="N",
                   help="connections (default 4)")
    w.add_argument("--threads", type=common.limit_range(lib.LIMITS["threads"]), metavar="N",
                   help="client threads (default 1)")
    w.add_argument("--pipeline", type=PIPELINE, metavar="N",
                   help="closed loop: requests outstanding per connection (default 1)")
    w.add_argument("--max-outstanding", type=PIPELINE, metavar="N",
                   help="open loop: most requests in flight per connection (default 100)")
    w.add_argument("--rate", type=common.limit_range(lib.LIMITS["rate"]), metavar="R",
                   help="open loop at R requests/s over all connections")
    w.add_argument("--arrivals", choices=("poisson", "uniform"),
                   help="open-loop arrivals (default poisson)")
    w.add_argument("--mix", metavar="OP=SHARE,...",
                   help="op mix of get, multiget, set, delete (default get=90,set=10)")
    w.add_argument("--multiget-keys", type=common.limit_range(lib.LIMITS["multiget_keys"]),
                   metavar="K",
                   help="keys per multi-get (default 10)")
    w.add_argument("--key-space", type=KEY_SPACE, metavar="N", help="distinct keys (default 10000)")
    w.add_argument("--key-dist", metavar="DIST",
                   help="uniform, zipf:S, gaussian[:SD], sequential, hotset:X%%:Y%% "
                   "(default uniform)")
    w.add_argument("--value-size", metavar="DIST",
                   help="SIZE, uniform:MIN:MAX, lognormal:MEDIAN:SIGMA, histogram:S=W,... or "
                   "histogram:FILE (default 100)")
    w.add_argument("--prefix", metavar="TEXT",
                   help="key prefix; a unique run id is always appended (default cachelab)")
    w.add_argument("--ttl", type=common.limit_range(lib.LIMITS["ttl"]), metavar="S",
                   help="expiry of values set (default 0: none; memcached reads it as a signed "
                   "32-bit number, and above 30 days as a Unix time)")
    w.add_argument("--duration", type=common.limit_range(lib.LIMITS["duration"]),
                   metavar="S",
                   help="seconds measured after the warm-up (default 10; 3 with --quick)")
    w.add_argument("--requests", type=common.limit_range(lib.LIMITS["requests"]), metavar="N",
                   help="send N requests in all instead of running for a duration")
    w.add_argument("--warmup", type=common.limit_range(lib.LIMITS["warmup"]), metavar="S",
                   help="warm-up seconds (default 1)")
    w.add_argument("--prefill", action=argparse.BooleanOptionalAction, default=None,
                   help="set every key before the run (default: when the mix reads)")
    w.add_argument("--interval", type=common.limit_range(lib.LIMITS["interval"]), metavar="S",
                   help="time-series interval (default 1)")
    w.add_argument("--timeout", type=SECONDS, metavar="S", help="deadline per request (default 1)")
    w.add_argument("--give-up", type=SECONDS, metavar="S", dest="give_up_after",
                   help="the reconnect budget: end the run (exit 3, results kept) when no "
                   "request has succeeded for S seconds (default 5)")
    w.add_argument("--stall-ms", type=common.limit_range(lib.LIMITS["stall_ms"]), metavar="MS",
                   help="list as a stall every stretch in which a reply took MS ms or more "
                   "(from its intended time in open loop), a request timed out, or a connection "
                   "was down that long (default 100)")
    w.add_argument("--precision", type=common.precision_arg, metavar="P%",
                   help="stop once the measured p99's 95 %% interval is within ±P %% of it "
                   "(above 0 and below 100, e.g. 5%%; below 1 the %% sign is required), "
                   "checked at each interval end; "
                   "--duration is the time cap (docs/load.md, \"Percentile intervals and "
                   "precision\")")
    w.add_argument("--repeats", type=common.int_range(1, 100), metavar="N",
                   help="run the measurement N times with one seed (default 1), restarting the "
                   "private memcached before each (a user's server is not restarted, and the "
                   "result says so); every repeat is kept, the table shows the one with the "
                   "highest p99 and flags RUNS DISAGREE when the repeats differ more than their "
                   "95 %% intervals allow (docs/load.md, \"Repeats\")")
    w.add_argument("--seed", type=common.int_range(0, common.MAX_SEED),
                   help="seed for keys, sizes and arrivals (default: random)")
    w.add_argument("--busy-poll", type=common.limit_range(lib.LIMITS["busy_poll_us"]), metavar="US",
                   dest="busy_poll_us",
                   help="with replies outstanding, poll the sockets for up to US µs before "
                   "sleeping (0-1000; default 0): a thread woken from sleep adds its wake-up to "
                   "the latency it measures, polling spends CPU instead")
    w.add_argument("--send-batch", type=PIPELINE, metavar="N",
                   help="closed loop: send new requests only once N of a connection's pipeline "
                   "slots are free (1 to --pipeline; default 1: after every reply); fewer, "
                   "larger writes cost client and server less CPU per request")
    w.add_argument("--probe-rate", type=common.limit_range(lib.LIMITS["probe_rate"]),
                   metavar="R",
                   help="latency probe: one more connection on its own thread sends the same "
                   "mix at R requests/s (open loop, Poisson; above 0 and at most 10000) beside "
                   "the load connections; its latencies are reported apart (the \"probe\" row), "
                   "so a busy load client cannot bias them (docs/load.md, \"Latency probe and "
                   "client saturation\")")
    d = p.add_argument_group(
        "failure drills",
        "A membership change mid-run and the client's failure policy (docs/pools.md, "
        "\"Failure drills\"). MEMBER is a 1-based position in the pool or HOST:PORT; T is "
        "seconds from the start of sending (warm-up included).")
    d.add_argument("--member-timeout",
                   type=common.float_range(0, lib.LIMITS["member_timeout"]["hi"] * 1000,
                                           above=True),
                   metavar="MS",
                   help="pool member-health deadline: a member with requests waiting that has "
                   "answered nothing for MS ms has failed, whatever --timeout is; it is marked "
                   "down after --member-failure-limit such failures in a row, so within "
                   "limit × MS plus 20 ms of back-off per failure (default 300: 0.62 s)")
    d.add_argument("--on-member-down", choices=("keep", "remap"),
                   help="keep: a member marked down fails its keys at once, not remapped "
                   "(libmemcached's default; the default); remap: it leaves the distribution "
                   "while down, its keys going to the others (libmemcached's "
                   "remove_failed_servers with --member-retry as its retry time, pymemcache's "
                   "dead timeout)")
    d.add_argument("--on-miss", choices=("none", "set"),
                   help="set: read-through (cache-aside) — a get that misses is followed by a "
                   "set of its key, refilling the cache as an application does (default none; "
                   "not with multiget in the mix)")
    d.add_argument("--add", action="append", metavar="MEMBER@T",
                   help="add HOST:PORT[:WEIGHT] (a server not in the pool; or 'new': one more "
                   "private server, with --private-pool) to the client's member list at T "
                   "(repeatable)")
    d.add_argument("--remove", action="append", metavar="MEMBER@T",
                   help="remove MEMBER from the client's member list at T: its keys go where "
                   "the distribution over the others puts them (repeatable)")
    d.add_argument("--fail", action="append", metavar="MEMBER@T[:ACTION[:S]]",
                   help="fail a member of the private pool at T: stop (SIGSTOP, SIGCONT after "
                   "S s or at the end; the default), kill (SIGKILL) or restart (SIGKILL, then "
                   "a new memcached on its port after S s, empty); only with --private-pool "
                   "(repeatable)")
    d.add_argument("--private-pool", type=common.int_range(2, 64), metavar="N",
                   help="start a private pool of N memcached servers for the run (loopback, "
                   "stopped at the end): the only servers --fail may touch")
    d.add_argument("--private-proxy", action="store_true", default=None,
                   help="with --private-pool: send through a private twemproxy in front of it, "
                   "whose auto_eject_hosts follows --on-member-down (remap: on), "
                   "server_failure_limit --member-failure-limit, server_retry_timeout "
                   "--member-retry and timeout --member-timeout; --distribution ketama or "
                   "twemproxy-*")
    cluster.add_flags(p, agents=True)
    common.finish_parser(p, "load", run, quick="a small run of the same shape",
                         plots="skip the PNG/SVG plot", server=True, pool=True, tls=True,
                         checks=("invalid", "precision", "problems"),
                         server_note="with more memory when --key-space and --value-size "
                         "need it; none under --private-pool, which starts its own")


def spec_from(args: argparse.Namespace) -> lib.LoadSpec:
    overrides = {}
    for name in _FIELDS:
        value = getattr(args, name)
        if value is not None:
            overrides[name] = value
    if args.member_timeout is not None:
        overrides["member_timeout"] = args.member_timeout / 1000
    if "mix" in overrides:
        overrides["mix"] = lib.parse_mix(overrides["mix"])
    if args.requests is not None:
        overrides.setdefault("duration", None)
        if args.duration is not None:
            raise UsageError("give --duration or --requests, not both")
    if args.spec is not None:
        spec = lib.LoadSpec.from_toml(args.spec)
        for k, v in overrides.items():
            setattr(spec, k, v)
        if args.requests is not None:
            spec.duration = None
        if args.duration is not None:
            spec.requests = None
    else:
        base = lib.LoadSpec.quick() if args.quick else lib.LoadSpec()
        for k, v in overrides.items():
            setattr(base, k, v)
        spec = base
    spec.tls = common.tls_options(args)
    for k, v in common.pool_settings(args).items():
        setattr(spec, k, v)
    spec.check()
    return spec


def run(args: argparse.Namespace) -> int:
    spec = spec_from(args)
    target = target_from(args)
    out = output.prepare_out(args, "load")
    with Progress(0, "load") as bar:
        result, interrupted = output.measured(lambda: lib.run(spec, target, progress=bar))

    return output.finish(
        args, result, out, verb="load", write={"plots": not args.no_plots},
        see="the summary", interrupted=interrupted,
        wrote="load.json, load.csv, load.hlog" + ("" if args.no_plots else " and plots"))
