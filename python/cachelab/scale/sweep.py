"""Running a sweep: :func:`scale` measures throughput at each load N of a
:class:`~cachelab.scale.spec.ScaleSpec` with the load engine (:func:`cachelab.load.load`),
takes a fixed window of each run from its steady state (:func:`measure_window`), and fits the
Universal Scalability Law to every run (:func:`cachelab.usl.fit_usl`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import cachelab._core as _core
import cachelab.environment as environment
from cachelab.artifacts import created_now
from cachelab.errors import Interrupted, ServerError, UsageError
from cachelab.load import LoadResult, load, load_on_ray, memory_mb
from cachelab.load.agents import measure_on_ray
from cachelab.load.engine import measure as measure_load
from cachelab.load.precision import basis, merged_p99_interval, point_precision
from cachelab.raycluster import RayOptions, connected
from cachelab.resp import RespLogin
from cachelab.scale.pinning import cpu_list, layout_text, pinned_client, plan
from cachelab.scale.result import ScaleResult, member_addresses
from cachelab.scale.spec import ScaleSpec
from cachelab.scale.verdicts import latency_verdict, scale_fix
from cachelab.servers import DEFAULT_THREADS, ServerOptions, on_this_machine
from cachelab.target import Live, Target
from cachelab.tls import TlsOptions, core_tls, describe_tls
from cachelab.units import pct_key
from cachelab.usl import MIN_POINTS, fit_usl

__all__ = ["PERCENTILES", "measure_window", "scale"]

#: Percentiles kept for each point's latency distribution.
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 100.0)


def scale(
    spec: ScaleSpec | None = None,
    *,
    server: str | Sequence[str] | None = None,
    server_options: ServerOptions | None = None,
    on_run: Callable[[int, int, int, dict[str, Any]], None] | None = None,
    ray: RayOptions | None = None,
    behind: Sequence[str] | None = None,
    resp: RespLogin | None = None,
    cluster: bool = False,
) -> ScaleResult:
    """Runs the sweep against ``server`` (``host:port``/``unix:/path``; a list of
    ``host:port[:weight]`` is a pool, hashed by the workload's ``distribution`` as ``load``
    does, docs/load.md "Pools"), or a private memcached started from ``server_options``
    (required for ``vary="server-threads"``, which restarts it with ``-t N`` for every
    point). ``on_run(done, total, n, point)`` is called after each run. ``vary="agents"``
    runs every point from N load agents on the Ray cluster of ``ray``
    (:func:`cachelab.load.load_on_ray`), ``connections_per_agent`` each.

    A sweep cut short keeps the runs it finished: on Ctrl-C (or SIGTERM) it raises
    :class:`~cachelab.errors.Interrupted` with the partial result as ``err.partial``
    (``run.cancelled``); when the server fails or goes away after the first run, the result
    is returned with ``run.aborted`` saying why (a run that gave up on the server, or a
    ServerError), as ``load`` does. A server that fails before any run raises.

    Through a proxy (twemproxy), ``server`` is the proxy and ``behind`` the memcached servers
    behind it (``host:port[:weight]``): every point is a :func:`cachelab.load.load` through
    the proxy, which checks those servers for room, watches them and reads their ``stats``;
    each run records their deltas (``runs[].behind``) beside its requests (``runs[].ops``).

    A Redis or Valkey (``resp``, the login; or a workload whose ``protocol`` is ``resp``):
    every point is a load over RESP against the one ``server`` (a private redis-server when
    None, not pinned; its ``io-threads``, ``CONFIG GET``, recorded where it answers), a pool
    of them, twemproxy in redis mode with the Redis servers ``behind`` it, or a Redis
    Cluster (``cluster``: ``server`` the seed node(s); its masters driven as a pool whose
    keys go by hash slot, each run's ``members`` with their redirections)."""
    spec = spec or ScaleSpec()
    if resp is None and (cluster or spec.workload.get("protocol") == "resp"):
        resp = RespLogin()
    if resp is not None:
        spec = dataclasses.replace(spec, workload={**spec.workload, "protocol": "resp"})
        if spec.vary == "server-threads" and (server is not None or cluster):
            raise UsageError("--vary server-threads over RESP restarts a private redis-server "
                             "with --io-threads N per point: give no --server")
    if cluster and (server is None or behind is not None):
        raise UsageError("--cluster needs a seed node of the cluster (--server "
                         "redis://HOST:PORT), not a proxy")
    spec.check()
    if behind is not None:
        if not isinstance(server, str):
            raise UsageError("a sweep through a proxy sends to the proxy alone: give one "
                             "server (the proxy) and the servers behind it")
        if spec.vary == "server-threads":
            raise UsageError("--vary server-threads restarts a private memcached per point; "
                             "through a proxy, vary connections or threads")
    if spec.vary == "agents" and ray is None:
        raise UsageError("--vary agents needs --ray: the agents are Ray actors "
                         "(docs/scale-out.md)")
    if ray is not None and spec.vary != "agents":
        raise UsageError("scale --ray measures --vary agents; other sweeps run here")
    if not isinstance(server, (str, type(None))):
        members = list(server)
        if spec.vary == "server-threads":
            raise UsageError("--vary server-threads needs a private memcached, not a pool")
        server = members[0] if len(members) == 1 and not cluster else members
    if cluster and isinstance(server, str):
        server = [server]  # the seeds: driven as a pool of the masters read from them
    with connected(ray) if ray is not None else contextlib.nullcontext():
        return _sweep(spec, server, server_options, on_run, ray,
                      None if behind is None else list(behind), resp, cluster)


def _sweep(spec: ScaleSpec, server: str | list[str] | None,
           server_options: ServerOptions | None,
           on_run: Callable[[int, int, int, dict[str, Any]], None] | None,
           ray: RayOptions | None, behind: list[str] | None = None,
           resp: RespLogin | None = None, cluster: bool = False) -> ScaleResult:
    if spec.vary == "server-threads" and server is not None:
        raise UsageError("--vary server-threads needs a private memcached (no --server): "
                         "cachelab restarts it with -t N for every point")
    order = spec.order()
    runs: list[dict[str, Any]] = []
    started = time.monotonic()
    #: The point being measured (for the reason a sweep stopped).
    current: list[int] = []
    server_facts: dict[str, Any] = {"address": server, "private": server is None}
    if isinstance(server, list) and cluster:  # the masters are read by each run
        server_facts.update(address=", ".join(server), cluster={"seeds": server})
    elif isinstance(server, list):
        server_facts["address"] = ", ".join(server)
        server_facts["pool"] = {"members": server,
                                "distribution": spec.run_spec(spec.points[0]).distribution}
    if resp is not None and (isinstance(server, list) or behind is not None):
        server_facts["protocol"] = "resp"
    if behind is not None:
        # keyed by host:port, as each run's servers behind are (a weight is no part of it)
        server_facts.update(proxy=True, behind=member_addresses(behind))
    # A private server and this process (the load client) on separate CPUs of a small box.
    # (a private redis-server is not pinned: it runs where the kernel puts it)
    layout = plan(pin=spec.pin, private=server is None and resp is None, ray=ray is not None,
                  server_threads=max(spec.points) if spec.vary == "server-threads" else
                  (server_options or ServerOptions()).threads or DEFAULT_THREADS)
    if resp is not None and server is None:
        layout = {**layout, "reason": "a private redis-server is not pinned"}
    server_facts["cpus"] = layout
    pin = cpu_list(layout["server"]) if layout["pinned"] else None

    def measure(rep: int, n: int, target: Live | None) -> None:
        current[:] = [n]
        run_spec = spec.run_spec(n)
        if ray is not None and resp is not None:  # agents over RESP, with the login
            run_spec = dataclasses.replace(run_spec, protocol="resp", tls=run_spec.tls or (
                TlsOptions() if resp.tls else None))
            if target is not None:  # one server (or the private redis-server)
                on = Target(servers=(target.address,), resp=resp)
            else:  # a pool, a proxy or a cluster
                on = Target(servers=tuple(behind if behind is not None else server or ()),
                            proxy=server if behind is not None else None, resp=resp,
                            cluster=cluster)
            result = measure_on_ray(run_spec, on, dataclasses.replace(ray, agents=n),
                                    server_facts=None if target is None else target.facts)
        elif ray is not None:
            agents = dataclasses.replace(ray, agents=n)
            result = (load_on_ray(run_spec, agents, server=target.address,
                                  server_facts=target.facts) if target is not None
                      else load_on_ray(run_spec, agents, server=server, behind=behind))
        elif resp is not None and target is None:  # a pool, a proxy or a cluster over RESP
            run_spec = dataclasses.replace(run_spec, protocol="resp", tls=run_spec.tls or (
                TlsOptions() if resp.tls else None))
            members = tuple(behind if behind is not None else server or ())
            result = measure_load(run_spec, Target(
                servers=members, proxy=server if behind is not None else None, resp=resp,
                cluster=cluster))
        elif behind is not None:  # the proxy spreads the keys over the servers behind it
            result = load(run_spec, server=server, behind=behind)
        elif target is None:  # a pool: load hashes keys over its members
            result = load(run_spec, server=server)
        elif resp is not None:  # a Redis or Valkey, with its login (TLS for rediss://)
            run_spec = dataclasses.replace(run_spec, protocol="resp", tls=run_spec.tls or (
                TlsOptions() if resp.tls else None))
            result = measure_load(run_spec, Target(servers=(target.address,), resp=resp),
                                  server_pid=target.pid, server_facts=target.facts)
        else:
            result = load(run_spec, server=target.address, server_pid=target.pid,
                          server_facts=target.facts)
        if result.run.get("aborted"):  # gave up on the server, or it started evicting
            raise _Stopped(f"the run at N = {n} stopped: {result.run['aborted']}")
        server_facts.setdefault("version", result.server.get("version"))
        point = {"n": n, "repeat": rep, "order": len(runs),
                 "connections": run_spec.connections, "threads": run_spec.threads,
                 **measure_window(result, spec.window if spec.precision is None else None)}
        if spec.precision is not None:
            point["precision"] = result.precision
        sched = result.server.get("schedstat")
        point["server_run_queue_wait_per_wall"] = sched["wait_per_wall"] if sched else None
        if spec.vary == "server-threads" and resp is not None and target is not None:
            # the io-threads the restarted redis-server runs with, as CONFIG GET says
            point["io_threads"] = resp_settings(target, resp).get("io_threads")
        point["client_cpu_us_per_op"] = result.client.get("cpu_us_per_op")
        v = result.validity or {}
        point["verdict"] = v.get("verdict", "not checked")
        hist = point["latency"]["histogram"]
        point["latency"]["samples"] = basis(
            int(_core.hist_summary(hist)["count"]) if hist else 0,
            (v.get("checks") or {}).get("independent"),
            # the block bootstrap's factors, when the latencies are not independent
            ((result.latency().get("intervals") or {}).get("basis") or {}).get("factors"))
        point["invalid_reasons"] = list(v.get("reasons") or [])
        point["failed_checks"] = list(v.get("failed") or [])
        point["fixes"] = {c: (v["checks"].get(c) or {}).get("fix") for c in point["failed_checks"]}
        point["throughput_reasons"] = list(v.get("throughput_reasons") or [])
        if result.members:
            point["members"] = [member_point(m) for m in result.members]
            if cluster:  # the seed that answered and the masters it named
                server_facts["cluster"].update((result.server or {}).get("cluster") or {})
                server_facts["cluster"]["members"] = [m["address"] for m in result.members]
        if result.behind:
            point["ops"] = result.all["ops"]
            point["behind"] = [{"address": b["address"], "deltas": b["server"]["deltas"],
                                **({"stopped": b["stopped"]} if b.get("stopped") else {})}
                               for b in result.behind]
        runs.append(point)
        if on_run:
            on_run(len(runs), len(order), n, point)

    def sweep() -> None:
        if spec.vary == "server-threads" and resp is not None:
            # a private redis-server restarted per point with N I/O threads (reads too)
            base = server_options or ServerOptions()
            for rep, n in order:
                options = dataclasses.replace(base, extra_args=(
                    *base.extra_args, "--io-threads", str(n), "--io-threads-do-reads", "yes"))
                with Target(options=options, resp=resp).open(
                        memory_mb=memory_mb(spec.run_spec(n))) as target:
                    server_facts.update(protocol="resp", argv=target.facts.get("argv"))
                    measure(rep, n, target)
                server_facts.update(address="private (restarted per point)")
        elif spec.vary == "server-threads":
            for rep, n in order:
                with Target(options=server_options or ServerOptions()).open(
                        memory_mb=memory_mb(spec.run_spec(n)), threads=n, cpus=pin) as target:
                    measure(rep, n, target)
                server_facts.update(address="private (restarted per point)")
        elif isinstance(server, list) or behind is not None:  # (a cluster: its seeds)
            for rep, n in order:
                measure(rep, n, None)
        else:
            need = memory_mb(spec.run_spec(max(spec.points)))
            with Target.of(server, options=server_options, resp=resp).open(
                    memory_mb=need, cpus=pin) as target:
                if target.private is not None:
                    server_facts.update(address=target.address, argv=target.private.argv,
                                        threads=target.private.threads)
                if resp is not None:
                    server_facts.update(protocol="resp", **resp_settings(target, resp))
                for rep, n in order:
                    measure(rep, n, target)

    stop: dict[str, Any] = {"cancelled": False, "aborted": None}
    try:
        with pinned_client(layout):  # each thread's affinity restored after, whatever happens
            sweep()
    except (KeyboardInterrupt, Interrupted):
        # The point under way is cut short and left out; the runs finished are kept.
        stop["cancelled"] = True
    except (_Stopped, ServerError) as e:
        if not runs:
            if isinstance(e, _Stopped):
                raise ServerError(str(e)) from None
            raise
        at = f" at N = {current[0]}" if current and not isinstance(e, _Stopped) else ""
        stop["aborted"] = str(e) if isinstance(e, _Stopped) else f"the server failed{at}: {e}"
    try:
        result = _result(spec, runs, server_facts)
    except KeyboardInterrupt:  # in the fit's bootstrap: the runs are kept, fitted without it
        stop["cancelled"] = True
        result = _result(dataclasses.replace(spec, bootstrap=0), runs, server_facts)
    result.run = {"elapsed_s": round(time.monotonic() - started, 3), **stop}
    if stop["cancelled"]:
        raise Interrupted("stopped by a signal; partial results kept", partial=result)
    return result


def resp_settings(target: Live, login: RespLogin) -> dict[str, Any]:
    """A Redis or Valkey's facts for the sweep's record: its address (a private one's
    command line) and ``io-threads`` (``CONFIG GET``; left out where it does not answer)."""
    out: dict[str, Any] = {"address": target.address}
    if target.facts.get("private"):
        out["argv"] = target.facts.get("argv")
    try:
        with login.client(target.address,
                          tls=core_tls(TlsOptions()) if login.tls else None) as c:
            found = dict(c.config_get("io-threads"))
    except ServerError:
        found = {}
    if str(found.get("io-threads", "")).isdigit():
        out["io_threads"] = int(found["io-threads"])
    return out


def member_point(m: Mapping[str, Any]) -> dict[str, Any]:
    """A pool member's (or a cluster master's) part of a run, as a point records it: its
    replies, errors and time down; a Redis's commands as its ``INFO`` counted them; a
    cluster master's ``MOVED``/``ASK`` redirections."""
    out: dict[str, Any] = {"address": m["address"], "replies": m["replies"],
                           "errors": sum(m["errors"].values()), "down_s": m["down_s"]}
    deltas = ((m.get("server") or {}).get("deltas") or {})
    if "total_commands_processed" in deltas:
        out["commands"] = deltas["total_commands_processed"]
    if m.get("redirects") is not None:
        out["redirects"] = dict(m["redirects"])
    return out


class _Stopped(Exception):
    """A run of the sweep gave up on the server (or stopped it evicting): the sweep stops."""


def _result(spec: ScaleSpec, runs: list[dict[str, Any]],
            server_facts: dict[str, Any]) -> ScaleResult:
    """The sweep's result: the runs, a summary per N, the USL fit when there are enough
    points, and notes on what limits it."""
    summary = _summary(runs, spec)
    notes = _cpu_limits(spec, server_facts)
    usable = [r for r in runs if in_fit(r, spec)]
    invalid = [r for r in runs if r["throughput"] > 0 and r.get("throughput_reasons")]
    latency_only = [r for r in runs if r["throughput"] > 0 and r.get("verdict") == "INVALID"
                    and r not in invalid]
    if invalid and not spec.keep_invalid:
        notes += [f"left out of the fit, INVALID: N = {r['n']} (repeat {r['repeat'] + 1}): "
                  f"{r['throughput_reasons'][0]} → {scale_fix(r, spec.window)}" for r in invalid]
    elif invalid:
        notes.append(f"{len(invalid)} INVALID run(s) kept in the fit (--keep-invalid): N = "
                     + ", ".join(str(r["n"]) for r in invalid))
    if latency_only:
        notes.append(f"{len(latency_only)} run(s) INVALID for their latencies only, kept in the "
                     "throughput fit: " + "; ".join(
                         f"N = {r['n']}: {r['invalid_reasons'][0]}" for r in latency_only[:3])
                     + f" → {scale_fix(latency_only[-1], spec.window)}"
                     + (" …" if len(latency_only) > 3 else ""))
    fit = None
    if len(usable) >= MIN_POINTS and len({r["n"] for r in usable}) >= 3:
        f = fit_usl([r["n"] for r in usable], [r["throughput"] for r in usable], spec.method,
                    bootstrap=spec.bootstrap, seed=spec.seed,
                    source={"sweep": spec.vary, "n": spec.vary, "x": "replies/s"})
        fit = f.to_dict()
    else:
        notes.append(f"only {len(usable)} usable measurement(s) at {len({r['n'] for r in usable})}"
                     f" load(s): the USL needs at least {MIN_POINTS} at 3 or more loads; no fit")
    if any(not r["steady_reached"] for r in runs):
        bad = sorted({r["n"] for r in runs if not r["steady_reached"]})
        notes.append(f"no steady state was detected at N = {', '.join(map(str, bad))}; those "
                     "points were measured from the end of the warm-up (use a longer --settle)")
    noisy = [row["n"] for row in summary if row["throughput_sd"]
             and row["throughput_sd"] > 0.1 * row["throughput_mean"]]
    if noisy:
        notes.append(f"repeats differ by more than 10 % (coefficient of variation) at N = "
                     f"{', '.join(map(str, noisy))}: the machine is not quiet (other load, "
                     "frequency scaling); the fit's intervals widen accordingly")
    if any(r["errors"] or r["lost"] for r in runs):
        notes.append("some runs had errors or lost requests (see runs[].errors)")
    tls = describe_tls(spec.tls)
    return ScaleResult(created=created_now(), spec={**asdict(spec), "tls": tls}, runs=runs,
                       summary=summary,
                       fit=fit, limits=notes, server=server_facts,
                       environment=environment.facts())


def in_fit(run: Mapping[str, Any], spec: ScaleSpec) -> bool:
    """Whether a run is one of the USL fit's points (and so of its N's mean throughput): it
    measured a throughput, and that throughput is trustworthy (its verdict's rate and
    stationarity checks passed) unless ``--keep-invalid``. A run INVALID for its latencies
    only (not independent, late sends, arrivals) still measured its throughput and is in."""
    return run["throughput"] > 0 and (spec.keep_invalid or not run.get("throughput_reasons"))


def measure_window(result: LoadResult, window: float | None) -> dict[str, Any]:
    """Throughput and latency over the first ``window`` seconds of whole intervals from the
    steady-state start (fewer when the run ends first: ``window_short``); None: to the run's
    end (a run whose length was set by its precision)."""
    ivs = result.intervals
    start = result.steady["start_index"]
    chosen, span = [], 0.0
    for iv in ivs[start:]:
        if window is not None and span >= window - 1e-9:
            break
        chosen.append(iv)
        span += iv["duration_s"]
    which = "corrected" if result.mode == "open" else "uncorrected"
    replies = sum(iv["replies"] for iv in chosen)
    hists = [iv[which]["histogram"] for iv in chosen if iv[which]["count"]]
    merged = _core.hist_merge(hists) if hists else None
    pct = _percentiles(merged)
    errors = sum(sum(iv["errors"].values()) for iv in chosen)
    return {
        "throughput": replies / span if span > 0 else 0.0,
        "replies": replies,
        "window_s": round(span, 6),
        "intervals": len(chosen),
        "window_short": window is not None and span < window - 1e-9,
        "steady_reached": bool(result.steady["reached"]),
        "errors": errors,
        "lost": sum(iv["lost"] for iv in chosen),
        "latency": {"which": which, "histogram": merged, "percentiles_ns": pct},
    }


def _cpu_limits(spec: ScaleSpec, server: Mapping[str, Any]) -> list[str]:
    """What sharing this machine's CPUs does to the fit, when it does something."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1
    local = server.get("private") or on_this_machine(str(server.get("address", "")))
    layout = server.get("cpus") or {}
    out = []
    if spec.vary == "server-threads" and server.get("protocol") == "resp":
        top = max(spec.points)
        if top >= cpus:
            out.append(f"redis-server gets up to {top} I/O threads (its main thread one of "
                       f"them) and this machine has {cpus} CPU(s), shared with the client: "
                       "Redis's I/O threads spin while they wait for work, so beyond "
                       f"N = {max(1, cpus - 1)} they take CPU from the main thread and the "
                       "client, and the curve measures that contention, not what io-threads "
                       "give a server with cores to spare.")
    elif spec.vary == "server-threads":
        top = max(spec.points)
        own = len(layout["server"]) if layout.get("pinned") else cpus
        where = f"is pinned to {own}" if layout.get("pinned") else f"this machine has {cpus}"
        if top > own:
            out.append(f"memcached gets up to {top} worker threads but {where} "
                       f"CPU(s): beyond N = {own} the threads time-share cores, so the fitted "
                       "β measures CPU oversubscription, not memcached's locks.")
    client_threads = max(spec.points) if spec.vary == "threads" else 1
    server_threads = (max(spec.points) if spec.vary == "server-threads"
                      else server.get("threads") or "?")
    if layout.get("pinned"):
        words = layout_text(layout)
        out.append(
            f"{words} for the sweep (this machine has {layout['usable']} usable CPUs; "
            f"--no-pin to share them): memcached's {server_threads} worker thread(s) run on "
            f"its {len(layout['server'])} CPU(s) and the client's {client_threads} load "
            f"thread(s) on its {len(layout['client'])}, so neither takes the other's cores; "
            "once the client saturates its CPUs the curve is the client's ceiling, not "
            "memcached's. Measure from another machine (`--ray`) for more client."
        )
    elif local:
        client = f"client ({client_threads} load thread(s))"
        sharing, taken = f"{client} and server ({server_threads} worker thread(s))", "memcached"
        alone = "memcached"
        resp = server.get("protocol") == "resp"
        if resp and (server.get("pool") or server.get("cluster")):  # several redis-servers
            sharing = f"{client} and the redis-servers"
            taken, alone = "the redis-servers", "the servers"
        elif resp:  # Redis: one main thread, io-threads beside it
            io = ("N" if spec.vary == "server-threads"
                  else server.get("io_threads") or "?")
            sharing = f"{client} and redis-server (io-threads {io})"
            taken, alone = "redis-server", "the server"
        if server.get("proxy"):
            here = [b for b in server.get("behind", []) if on_this_machine(b)]
            sharing = (f"{client}, the proxy and {len(here)} server(s) behind it" if here
                       else f"{client} and the proxy")
            taken = "the proxy" + ((" and redis-server" if resp else " and memcached")
                                   if here else "")
        out.append(
            f"{sharing} share this machine's {cpus} CPU(s): every core the client uses is "
            f"taken from {taken}, so α and β describe client + server on this box, not "
            f"{alone} alone; the curve flattens once both together saturate the CPUs. "
            "Measure from another machine to separate them."
        )
    return out


def _summary(runs: Sequence[Mapping[str, Any]], spec: ScaleSpec) -> list[dict[str, Any]]:
    """Per N measured: the mean throughput of the runs in the fit (:func:`in_fit`; their count is
    ``throughput_runs``, None for the mean when there is none) and its standard deviation,
    and every run's latency histograms merged, with the latencies' verdict in a word
    (:func:`~cachelab.scale.result.latency_verdict`)."""
    out = []
    for n in sorted(spec.points):
        rs = [r for r in runs if r["n"] == n]
        if not rs:  # a sweep cut short before it reached this point
            continue
        xs = [r["throughput"] for r in rs if in_fit(r, spec)]
        mean = sum(xs) / len(xs) if xs else None
        sd = (math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
              if mean is not None and len(xs) > 1 else None)
        hists = [r["latency"]["histogram"] for r in rs if r["latency"]["histogram"]]
        merged = _core.hist_merge(hists) if hists else None
        pct = _percentiles(merged)
        # A run recorded before intervals existed has no "samples": its p99 gets none.
        bases = [r["latency"].get("samples") or {"withheld": "recorded without samples"}
                 for r in rs if r["latency"]["histogram"]]
        row = {"n": n, "runs": len(rs), "throughput_runs": len(xs),
               "throughput_mean": mean, "throughput_sd": sd,
               "latency": {"histogram": merged, "percentiles_ns": pct,
                           "p99_interval": merged_p99_interval(merged, bases),
                           "verdict": latency_verdict(list(rs), n)}}
        if spec.precision is not None:
            pct = spec.precision_percentile
            row["precision"] = point_precision(
                spec.precision, row["latency"], [r.get("precision") for r in rs], pct,
                None if pct == "99" else merged_p99_interval(merged, bases, float(pct)))
        out.append(row)
    return out


def _percentiles(histogram: str | None) -> dict[str, int]:
    """:data:`PERCENTILES` of a merged histogram, keyed by :func:`~cachelab.units.pct_key`
    (empty without one)."""
    if not histogram:
        return {}
    values = _core.hist_percentiles(histogram, list(PERCENTILES))
    return dict(zip([pct_key(p) for p in PERCENTILES], values))
