"""``cachelab load``: run a workload against memcached, closed or open loop."""

from __future__ import annotations

import argparse
from pathlib import Path

from cachelab import load as lib
from cachelab.cli import common
from cachelab.errors import Interrupted, UsageError
from cachelab.progress import Progress

DESCRIPTION = """\
Drive memcached with a workload and report throughput and latency per interval.

Closed loop (default): every connection keeps --pipeline requests outstanding.
Open loop (--rate R): requests are due at R per second over all connections (Poisson or
evenly spaced arrivals per connection); latency is counted from the time a request was due
(corrected) and from the time it was sent (uncorrected), so queueing is never hidden.

Every key is <prefix>:<unique run id>:<index>; the keys written (prefill and sets) are deleted
at the end. Artifacts: load.json, load.csv (time series), load.hlog (HdrHistogram interval
log), load-latency.png/svg. Flags override settings from --spec FILE.toml.

Examples:
  cachelab load --duration 30 --connections 8 --pipeline 4 --mix get=90,set=10
  cachelab load --rate 50000 --key-dist zipf:0.99 --value-size lognormal:1K:0.5
"""

#: Flag name -> LoadSpec field, for flags that set a spec field directly.
_FIELDS = ("connections", "threads", "pipeline", "max_outstanding", "rate", "arrivals", "mix",
           "multiget_keys", "key_space", "key_dist", "value_size", "prefix", "ttl", "duration",
           "requests", "warmup", "prefill", "interval", "timeout", "seed",
           "busy_poll_us", "send_batch")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "load", help="load generator: closed or open loop, latency from the intended send time",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--spec", type=Path, metavar="FILE.toml", help="workload settings file")
    w = p.add_argument_group("workload")
    w.add_argument("--connections", type=int, metavar="N", help="connections (default 4)")
    w.add_argument("--threads", type=int, metavar="N", help="client threads (default 1)")
    w.add_argument("--pipeline", type=int, metavar="N",
                   help="closed loop: requests outstanding per connection (default 1)")
    w.add_argument("--max-outstanding", type=int, metavar="N",
                   help="open loop: most requests in flight per connection (default 100)")
    w.add_argument("--rate", type=float, metavar="R",
                   help="open loop at R requests/s over all connections")
    w.add_argument("--arrivals", choices=("poisson", "uniform"),
                   help="open-loop arrivals (default poisson)")
    w.add_argument("--mix", metavar="OP=SHARE,...",
                   help="op mix of get, multiget, set, delete (default get=90,set=10)")
    w.add_argument("--multiget-keys", type=int, metavar="K", help="keys per multi-get (default 10)")
    w.add_argument("--key-space", type=int, metavar="N", help="distinct keys (default 10000)")
    w.add_argument("--key-dist", metavar="DIST",
                   help="uniform, zipf:S, gaussian[:SD], sequential, hotset:X%%:Y%% "
                   "(default uniform)")
    w.add_argument("--value-size", metavar="DIST",
                   help="SIZE, uniform:MIN:MAX, lognormal:MEDIAN:SIGMA, histogram:S=W,... or "
                   "histogram:FILE (default 100)")
    w.add_argument("--prefix", metavar="TEXT",
                   help="key prefix; a unique run id is always appended (default cachelab)")
    w.add_argument("--ttl", type=int, metavar="S", help="expiry of values set (default 0: none)")
    w.add_argument("--duration", type=float, metavar="S",
                   help="seconds measured after the warm-up (default 10; 3 with --quick)")
    w.add_argument("--requests", type=int, metavar="N",
                   help="send N requests in all instead of running for a duration")
    w.add_argument("--warmup", type=float, metavar="S", help="warm-up seconds (default 1)")
    w.add_argument("--prefill", action=argparse.BooleanOptionalAction, default=None,
                   help="set every key before the run (default: when the mix reads)")
    w.add_argument("--interval", type=float, metavar="S", help="time-series interval (default 1)")
    w.add_argument("--timeout", type=float, metavar="S", help="deadline per request (default 1)")
    w.add_argument("--seed", type=int, help="seed for keys, sizes and arrivals (default: random)")
    w.add_argument("--busy-poll", type=int, metavar="US", dest="busy_poll_us",
                   help="with replies outstanding, poll the sockets for up to US µs before "
                   "sleeping (0-1000; default 0): a thread woken from sleep adds its wake-up to "
                   "the latency it measures, polling spends CPU instead")
    w.add_argument("--send-batch", type=int, metavar="N",
                   help="closed loop: send new requests only once N of a connection's pipeline "
                   "slots are free (1 to --pipeline; default 1: after every reply); fewer, "
                   "larger writes cost client and server less CPU per request")
    p.add_argument("--quick", action="store_true", help="a small run of the same shape")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG/SVG plot")
    common.add_output_options(p, "load")
    common.add_server_options(p)
    p.set_defaults(func=run)


def spec_from(args: argparse.Namespace) -> lib.LoadSpec:
    overrides = {}
    for name in _FIELDS:
        value = getattr(args, name)
        if value is not None:
            overrides[name] = value
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
    spec.check()
    return spec


def run(args: argparse.Namespace) -> int:
    fmt = common.stdout_format(args)
    spec = spec_from(args)
    address = common.server_address(args)
    out = common.output_dir(args, "load")
    interrupted = False
    with Progress(0, "load") as bar:

        def on_progress(p) -> None:
            bar.total = p.total
            if p.last_rate:
                from cachelab.units import format_duration_ns

                bar.label = (f"load {p.last_rate / 1000:.1f}k/s "
                             f"p99 {format_duration_ns(p.last_p99_ns, 'µs')}µs"
                             + (f" errors {p.errors}" if p.errors else ""))
            bar.update(p.done)

        try:
            if address is None:
                result = _private(spec, args, on_progress)
            else:
                result = lib.load(spec, server=address, on_progress=on_progress)
        except Interrupted as e:
            result = e.partial  # type: ignore[attr-defined]
            interrupted = True

    write_artifacts(result, out, plots=not args.no_plots)
    return common.finish_run(
        result, out, fmt=fmt, render=render, see="the summary", interrupted=interrupted,
        wrote="load.json, load.csv, load.hlog" + ("" if args.no_plots else " and plots"),
    )


def _private(spec: lib.LoadSpec, args: argparse.Namespace, on_progress) -> lib.LoadResult:
    from cachelab.servers import PrivateMemcached

    options = common.private_server_options(args)
    options["memory_mb"] = max(int(options["memory_mb"]), lib._memory_mb(spec))
    with PrivateMemcached(**options) as mc:
        facts = {"private": True, "argv": mc.argv}
        return lib.load(spec, server=mc.address, server_pid=mc.pid, server_facts=facts,
                        on_progress=on_progress)


def _us(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1000:.1f}"


def render(r: lib.LoadResult) -> str:
    """The human summary."""
    s = r.spec
    srv = r.server
    lines = [
        f"memcached {srv.get('version', '?')} at {srv.get('address')}"
        + (" (private)" if srv.get("private") else ""),
        f"{r.mode} loop, {s['connections']} connection(s) on {s['threads']} thread(s), "
        + (f"target {s['rate']:.0f}/s ({s['arrivals']})" if r.mode == "open"
           else f"pipeline {s['pipeline']}")
        + f"; keys {s['key_space']} {s['key_dist']}, values {s['value_size']}",
    ]
    t = r.totals
    st = r.steady
    ivs = r.intervals
    start = ivs[st["start_index"]]["start_s"] if st["start_index"] < len(ivs) else 0.0
    lines.append(
        f"steady state {'from' if st['reached'] else 'NOT reached; using all after warm-up from'}"
        f" {start:g} s: {t['intervals']} interval(s), {t['duration_s']:.2f} s"
    )
    lines += ["", f"{'':14}{'total':>12}{'per s':>12}"]
    lines.append(f"{'replies':14}{t['replies']:>12}{t['throughput']:>12.0f}")
    for op, n in t["ops"].items():
        if n:
            lines.append(f"  {op:12}{n:>12}{n / t['duration_s'] if t['duration_s'] else 0:>12.0f}")
    lines.append(f"{'hits':14}{t['hits']:>12}")
    lines.append(f"{'misses':14}{t['misses']:>12}")
    lines.append(f"{'errors':14}{sum(t['errors'].values()):>12}")
    lines += ["", "latency (µs)      p50       p90       p99     p99.9       max"]
    for name in ("corrected", "uncorrected"):
        h = t.get(name)
        if not h:
            continue
        p = h["percentiles"]
        label = name if r.mode == "open" else "latency"
        lines.append(f"{label:14}" + "".join(f"{_us(p[k]):>10}"
                                             for k in ("50", "90", "99", "99.9", "max")))
    if r.schedule:
        sc = r.schedule
        held = "held" if sc.get("held") else "NOT held"
        lines.append(
            f"\ntarget rate {sc['target_rate']:.0f}/s {held}: achieved {sc['achieved_rate']:.0f}/s"
            f", {sc['backlog_at_end']} due but unsent at the end"
            + (f", {sc['skipped_disconnected']} skipped while disconnected"
               if sc["skipped_disconnected"] else "")
        )
    errors = r.all["errors"]
    if errors or r.all["lost"]:
        lines.append(
            "\nerrors by kind (whole run): "
            + (", ".join(f"{k} {n}" for k, n in sorted(errors.items())) or "none")
            + f"; requests lost in flight: {r.all['lost']}"
            + f"; error rate {sum(errors.values()) / max(1, r.all['sent']):.2%} of requests sent"
        )
    d = srv.get("deltas") or {}
    conns = d.get("curr_connections", {})
    if d:
        lines.append(
            f"\nserver: get_hits +{d.get('get_hits', 0)}, get_misses +{d.get('get_misses', 0)}, "
            f"evictions +{d.get('evictions', 0)}, connections "
            f"{conns.get('before')}→{conns.get('after')}"
            f", CPU {d.get('rusage_user_s', 0) + d.get('rusage_system_s', 0):.2f} s"
        )
    sch = srv.get("schedstat")
    if sch:
        lines.append(
            f"server run-queue wait: {sch['run_queue_wait_s']:.3f} s over {sch['threads']} "
            f"threads ({sch['wait_per_wall']:.1%} of wall time)"
        )
    c = r.client
    if c.get("cpu_us_per_op") is not None:
        whole = c.get("process_cpu_us_per_op")
        lines.append(f"client CPU: {c['cpu_us_per_op']:.2f} µs per reply in the load threads"
                     + (f", {whole:.2f} in the whole process" if whole is not None else ""))
    if c.get("run_queue_wait_us_per_op") is not None:
        lines.append(f"client threads waited for a CPU: {c['run_queue_wait_us_per_op']:.2f} µs "
                     f"per reply (slept {c['sleeps']}, preempted {c['preempted']} times)")
    if c.get("requests_per_write"):
        lines.append(f"writes: {c['writes']}, {c['requests_per_write']:.2f} requests per write"
                     + (f" (send batch {r.spec['send_batch']})"
                        if r.spec.get("send_batch", 1) > 1 else ""))
    if c.get("busy_polls"):
        lines.append(f"busy polling: {c['busy_polls']} polls before sleeping, "
                     f"{c['busy_caught']} ended by a reply or the timer")
    run = r.run
    lines.append(
        f"keys: {run['prefilled_keys']} prefilled, {run['deleted_keys']} deleted at the end"
        + (f", {run['leftover_keys']} COULD NOT be deleted" if run["leftover_keys"] else "")
    )
    return "\n".join(lines)


CSV_HEADER = ["index", "start_s", "duration_s", "warmup", "steady", "replies", "throughput",
              "get", "multiget", "set", "delete", "hits", "misses", "errors", "lost",
              "p50_ns", "p99_ns", "p99.9_ns", "max_ns",
              "uncorrected_p50_ns", "uncorrected_p99_ns", "uncorrected_p99.9_ns"]


def csv_rows(r: lib.LoadResult) -> list[list[object]]:
    rows = []
    first = r.steady["start_index"]
    for pos, iv in enumerate(r.intervals):
        best = iv.get("corrected") or iv["uncorrected"]
        unc = iv["uncorrected"]["percentiles"]
        bp = best["percentiles"]
        rows.append([
            iv["index"], f"{iv['start_s']:.3f}", f"{iv['duration_s']:.3f}", int(iv["warmup"]),
            int(pos >= first), iv["replies"], f"{iv['throughput']:.1f}",
            *(iv["ops"][op] for op in lib.OPS), iv["hits"], iv["misses"],
            sum(iv["errors"].values()), iv["lost"],
            bp["50"], bp["99"], bp["99.9"], bp["max"], unc["50"], unc["99"], unc["99.9"],
        ])
    return rows


def write_artifacts(r: lib.LoadResult, out: Path, *, plots: bool = True) -> list[Path]:
    """load.json, load.csv, load.hlog and, unless told not to, the latency-over-time plot."""
    from cachelab.tables import write_csv

    out.mkdir(parents=True, exist_ok=True)
    written = [r.save(out / "load.json")]
    write_csv(out / "load.csv", CSV_HEADER, csv_rows(r))
    (out / "load.hlog").write_text(lib.hlog_text(r))
    written += [out / "load.csv", out / "load.hlog"]
    if plots and r.intervals:
        from cachelab.plots.load import latency_over_time

        written += latency_over_time(r, out / "load-latency")
    return written
