"""``cachelab load``: run a workload against memcached, closed or open loop."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import cachelab.load as lib
from cachelab.cli import cluster, common, output
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.intervals import parse_precision_percentile
from cachelab.load.precision import SHOWN
from cachelab.progress import Progress
from cachelab.units import flag_text

DESCRIPTION = """\
Drive memcached, or a Redis or Valkey (--server redis://HOST:PORT, or --protocol resp), with a
workload and report throughput and latency per interval.

Closed loop (default): every connection keeps --pipeline requests outstanding.
Open loop (--rate R): requests are due at R per second over all connections (Poisson or
evenly spaced arrivals per connection); latency is counted from the time a request was due
(corrected) and from the time it was sent (uncorrected), so queueing is never hidden.

A Redis Cluster (--cluster --server redis://SEED:PORT): its masters, read from the seed, are
the pool; each key goes to its hash slot's master, a multi-get is split by slot.

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
or through --proxy, memcached or over RESP, and on a Redis --cluster (every agent routes by
slot and follows MOVED/ASK itself); the merged result adds an "agents" section
(docs/scale-out.md).

Every key is <prefix>:<unique run id>:<index>; the keys written (prefill and sets) are deleted
at the end (from the member that holds each). Artifacts: load.json, load.csv (time series),
load.hlog (HdrHistogram interval log), load-latency.png/svg. Flags override settings from
--spec FILE.toml.

More: cachelab load --rate 50000 --probe-rate 200 (a low-rate probe connection beside the
load: client bias); --ray HEAD:6379 --agents 4 (docs/scale-out.md); failure drills on a
private pool: --private-pool 3 --remove 2@5, --fail 2@5:stop:2 --on-member-down remap
(docs/pools.md, "Failure drills"; --protocol resp: a private pool of redis-servers).
"""

EXAMPLES = """\
cachelab load --duration 30 --connections 8 --pipeline 4 --mix get=90,set=10
cachelab load --server 10.0.0.1:11211 --server 10.0.0.2:11211:2 --mix get=80,multiget=20
# a Redis or Valkey (RESP; the password is never printed or written)
cachelab load --server redis://:PASSWORD@127.0.0.1:6379/0 --rate 50000 --key-dist zipf:0.99
# a private pool of 3, member 2 removed at 5 s; exit 1 if the run is INVALID or had errors
cachelab load --private-pool 3 --rate 20000 --remove 2@5 --fail-on invalid,problems
"""

#: Flag name -> LoadSpec field, for flags that set a spec field directly (the pool's and the
#: private pool's flags make the Target, which ``lib.run`` puts in the spec).
_FIELDS = ("connections", "threads", "pipeline", "max_outstanding", "rate", "arrivals", "mix",
           "multiget_keys", "key_space", "key_dist", "value_size", "prefix", "ttl", "duration",
           "requests", "warmup", "prefill", "interval", "timeout", "seed",
            "busy_poll_us", "spin_us", "send_batch", "give_up_after", "stall_ms", "precision",
            "precision_percentile", "repeats", "probe_rate", "on_member_down", "on_miss", "add",
            "remove", "fail")

#: What ``--fail-on`` checks in a load run's result (and in a scale sweep's, whose points
#: are load runs): its verdict INVALID, a precision not reached, problems.
CHECKS = ("invalid", "precision", "problems")

#: Each numeric flag's range: the load engine's (``lib.LIMITS``, from crates/load/src/spec.rs),
#: so a flag out of range is refused before anything starts, with the range (``scale`` uses
#: them too).
CONNECTIONS = common.limit_range(lib.LIMITS["connections"])
PIPELINE = common.limit_range(lib.LIMITS["pipeline"])
KEY_SPACE = common.limit_range(lib.LIMITS["key_space"])
SECONDS = common.limit_range(lib.LIMITS["timeout"])

#: Each flag's default as --help states it: the spec's (``LoadSpec``'s field defaults, the
#: pool's from the engine), and those of the small run (``--quick``).
_D = lib.LoadSpec()
_Q = lib.LoadSpec.quick()


def _limit(name: str) -> Any:
    return common.limit_range(lib.LIMITS[name])


def _range(limit: dict[str, Any]) -> str:
    """A range as the help states it: ``0-1000``, ``above 0 and at most 10000``."""
    if limit["above"]:
        return f"above {flag_text(limit['lo'])} and at most {flag_text(limit['hi'])}"
    return f"{flag_text(limit['lo'])}-{flag_text(limit['hi'])}"


def _member_down_s() -> float:
    """Seconds until a silent member is marked down by default: the failure limit's
    deadlines, with a 20 ms back-off between them."""
    n = _D.member_failure_limit
    return round(n * _D.member_timeout + 0.02 * (n - 1), 3)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "load",
        help="load generator: closed or open loop, latency from the intended send time",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument("--spec", type=Path, metavar="FILE.toml", help="workload settings file")
    w = p.add_argument_group("workload")
    w.add_argument("--connections", type=CONNECTIONS, metavar="N",
                   help=f"connections (default {_D.connections})")
    w.add_argument("--threads", type=_limit("threads"), metavar="N",
                   help=f"client threads (default {_D.threads})")
    w.add_argument("--pipeline", type=PIPELINE, metavar="N",
                   help=f"closed loop: requests outstanding per connection (default {_D.pipeline})")
    w.add_argument("--max-outstanding", type=PIPELINE, metavar="N",
                   help="open loop: most requests in flight per connection "
                   f"(default {_D.max_outstanding})")
    w.add_argument("--rate", type=_limit("rate"), metavar="R",
                   help="open loop at R requests/s over all connections")
    w.add_argument("--arrivals", choices=("poisson", "uniform"),
                   help=f"open-loop arrivals (default {_D.arrivals})")
    w.add_argument("--mix", metavar="OP=SHARE,...",
                   help=f"op mix of get, multiget, set, delete (default {flag_text(_D.mix)})")
    w.add_argument("--multiget-keys", type=_limit("multiget_keys"), metavar="K",
                   help=f"keys per multi-get (default {_D.multiget_keys})")
    w.add_argument("--key-space", type=KEY_SPACE, metavar="N",
                   help=f"distinct keys (default {_D.key_space}; {_Q.key_space} with --quick)")
    w.add_argument("--key-dist", metavar="DIST",
                   help="uniform, zipf:S, gaussian[:SD], sequential, hotset:X%%:Y%% "
                   f"(default {_D.key_dist})")
    w.add_argument("--value-size", metavar="DIST",
                   help="SIZE, uniform:MIN:MAX, lognormal:MEDIAN:SIGMA, histogram:S=W,... or "
                   f"histogram:FILE (default {_D.value_size})")
    w.add_argument("--prefix", metavar="TEXT",
                   help=f"key prefix; a unique run id is always appended (default {_D.prefix})")
    w.add_argument("--ttl", type=_limit("ttl"), metavar="S",
                   help=f"expiry of values set (default {_D.ttl}: none; memcached reads it as a "
                   "signed 32-bit number, and above 30 days as a Unix time)")
    w.add_argument("--duration", type=_limit("duration"), metavar="S",
                   help=f"seconds measured after the warm-up (default {flag_text(_D.duration)}; "
                   f"{flag_text(_Q.duration)} with --quick)")
    w.add_argument("--requests", type=_limit("requests"), metavar="N",
                   help="send N requests in all instead of running for a duration")
    w.add_argument("--warmup", type=_limit("warmup"), metavar="S",
                   help=f"warm-up seconds (default {flag_text(_D.warmup)})")
    w.add_argument("--prefill", action=argparse.BooleanOptionalAction, default=None,
                   help="set every key before the run (default: when the mix reads)")
    w.add_argument("--interval", type=_limit("interval"), metavar="S",
                   help=f"time-series interval (default {flag_text(_D.interval)})")
    w.add_argument("--timeout", type=SECONDS, metavar="S",
                   help=f"deadline per request (default {flag_text(_D.timeout)})")
    w.add_argument("--give-up", type=_limit("give_up_after"), metavar="S", dest="give_up_after",
                   help="the reconnect budget: end the run (exit 3, results kept) when no "
                   f"request has succeeded for S seconds (default {flag_text(_D.give_up_after)})")
    w.add_argument("--stall-ms", type=_limit("stall_ms"), metavar="MS",
                   help="list as a stall every stretch in which a reply took MS ms or more "
                   "(from its intended time in open loop), a request timed out, or a connection "
                   f"was down that long (default {flag_text(_D.stall_ms)})")
    w.add_argument("--precision", type=common.precision_arg, metavar="P%",
                   help="stop once the measured percentile's 95 %% interval (the p99's, or "
                   "--precision-percentile's) is within ±P %% of it (above 0 and below 100, "
                   "e.g. 5%%; below 1 the %% sign is required), checked at each interval end; "
                   "--duration is the time cap (docs/load.md, \"Percentile intervals and "
                   "precision\")")
    w.add_argument("--precision-percentile", type=parse_precision_percentile, metavar="P",
                   help="the percentile --precision targets: "
                   f"{', '.join(k for k in SHOWN if float(k) >= 50)} "
                   f"(default {_D.precision_percentile})")
    w.add_argument("--repeats", type=_limit("repeats"), metavar="N",
                   help=f"run the measurement N times with one seed (default {_D.repeats}), "
                   "restarting the "
                   "private memcached before each (a user's server is not restarted, and the "
                   "result says so); every repeat is kept, the table shows the one with the "
                   "highest p99 and flags RUNS DISAGREE when the repeats differ more than their "
                   "95 %% intervals allow (docs/load.md, \"Repeats\")")
    common.add_seed(w, "seed for keys, sizes and arrivals", default=_D.seed)
    w.add_argument("--busy-poll", type=_limit("busy_poll_us"), metavar="US",
                   dest="busy_poll_us",
                   help="with replies outstanding, poll the sockets for up to US µs before "
                   f"sleeping ({_range(lib.LIMITS['busy_poll_us'])}; default {_D.busy_poll_us}): "
                   "a thread woken from sleep adds its wake-up to "
                   "the latency it measures, polling spends CPU instead")
    w.add_argument("--spin-us", type=_limit("spin_us"), metavar="US", dest="spin_us",
                   help="open loop: a thread whose next send is due within US µs waits for it "
                   "awake and writes it itself at its time, one write per request, rather than "
                   "when its timer's signal reaches it "
                   f"({_range(lib.LIMITS['spin_us'])}; default {_D.spin_us}); the time is "
                   "reported as pacing, apart from the client's work; for a client with a core "
                   "of its own (on a shared core it can make sends later)")
    w.add_argument("--send-batch", type=PIPELINE, metavar="N",
                   help="closed loop: send new requests only once N of a connection's pipeline "
                   f"slots are free (1 to --pipeline; default {_D.send_batch}: after every reply); "
                   "fewer, "
                   "larger writes cost client and server less CPU per request")
    w.add_argument("--probe-rate", type=_limit("probe_rate"), metavar="R",
                   help="latency probe: one more connection on its own thread sends the same "
                   "mix at R requests/s (open loop, Poisson; "
                   f"{_range(lib.LIMITS['probe_rate'])}) beside "
                   "the load connections; its latencies are reported apart (the \"probe\" row), "
                   "so a busy load client cannot bias them (docs/load.md, \"Latency probe and "
                   "client saturation\")")
    d = p.add_argument_group(
        "failure drills",
        "A membership change mid-run and the client's failure policy (docs/pools.md, "
        "\"Failure drills\"). MEMBER is a 1-based position in the pool or HOST:PORT; T is "
        "seconds from the start of sending (warm-up included).")
    d.add_argument("--member-timeout",
                   type=common.limit_range(lib.LIMITS["member_timeout"], scale=1000),
                   metavar="MS",
                   help="pool member-health deadline: a member with requests waiting that has "
                   "answered nothing for MS ms has failed, whatever --timeout is; it is marked "
                   "down after --member-failure-limit such failures in a row, so within "
                   "limit × MS plus 20 ms of back-off per failure "
                   f"(default {flag_text(_D.member_timeout * 1000)}: "
                   f"{flag_text(_member_down_s())} s)")
    d.add_argument("--on-member-down", choices=("keep", "remap"),
                   help="keep: a member marked down fails its keys at once, not remapped "
                   "(libmemcached's default); remap: it leaves the distribution "
                   "while down, its keys going to the others (libmemcached's "
                   "remove_failed_servers with --member-retry as its retry time, pymemcache's "
                   f"dead timeout; default {_D.on_member_down})")
    d.add_argument("--on-miss", choices=("none", "set"),
                   help="set: read-through (cache-aside) — a get that misses is followed by a "
                   "set of its key, refilling the cache as an application does "
                   f"(default {_D.on_miss}; "
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
                   "a new server on its port after S s, empty); only with --private-pool "
                   "(repeatable)")
    d.add_argument("--private-pool", type=_limit("private_pool"), metavar="N",
                   help="start a private pool of N memcached servers for the run "
                   f"({_range(lib.LIMITS['private_pool'])}; loopback, "
                   "stopped at the end; redis-servers with --protocol resp, without "
                   "persistence): the only servers --fail may touch")
    d.add_argument("--private-proxy", action="store_true", default=None,
                   help="with --private-pool: send through a private twemproxy in front of it "
                   "(in redis mode with --protocol resp), "
                   "whose auto_eject_hosts follows --on-member-down (remap: on), "
                   "server_failure_limit --member-failure-limit, server_retry_timeout "
                   "--member-retry and timeout --member-timeout; --distribution ketama or "
                   "twemproxy-*")
    common.add_protocol_option(p)
    p.add_argument("--cluster", action="store_true", default=None,
                   help="the --server (repeatable) is a seed node of a Redis Cluster "
                   "(redis://HOST:PORT, or HOST:PORT): its masters are read from it and "
                   "driven as a pool, each key sent to its hash slot's master, MOVED and ASK "
                   "followed and counted per master (not with --proxy, --distribution or a "
                   "database other than 0; docs/resp.md, \"Redis Cluster\")")
    cluster.add_flags(p, agents=True)
    common.finish_parser(p, "load", run, quick="a small run of the same shape",
                         plots="skip the PNG/SVG plot", server=True, pool=True, tls=True,
                         checks=CHECKS, server_note="with more memory when --key-space and "
                         "--value-size need it; none under --private-pool, which starts its own")


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
    protocol = common.protocol_of(args)
    if protocol is not None:
        spec.protocol = protocol
    # Checked as the run's first step (lib.run: with the target's pool settings and private
    # pool, before anything starts), since what may go with what depends on them.
    return spec


def run(args: argparse.Namespace) -> int:
    spec = spec_from(args)
    target = target_from(args)
    out, result, interrupted = common.measure(
        args, "load", Progress(0, "load"), lambda bar: lib.run(spec, target, progress=bar))

    return output.finish(
        args, result, out, verb="load", write={"plots": not args.no_plots},
        see="the summary", interrupted=interrupted,
        wrote="load.json, load.csv, load.hlog" + ("" if args.no_plots else " and plots"))
