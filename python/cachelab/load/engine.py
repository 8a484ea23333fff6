"""Running a workload on this machine: :func:`measure` opens its
:class:`~cachelab.target.Target` (the server given, a pool, a proxy, or a private memcached,
pool or proxy), runs the Rust engine (``_core.load_run``, no GIL held) and turns its outcome
into a :class:`~cachelab.load.result.LoadResult` in :func:`result_from_outcome`. :func:`load`
is the older call: its ``server``/``behind`` arguments become the same Target.

Closed loop: ``pipeline`` requests outstanding per connection. Open loop: a target ``rate``
with Poisson or evenly spaced arrivals per connection; latency is counted from the intended
send time (the *corrected* histogram) and from the actual send (*uncorrected*).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import cachelab._core as _core
import cachelab.environment as environment
from cachelab.artifacts import created_now
from cachelab.capacity import PoolWatch, evicted_message, guard_pool, guard_resp
from cachelab.errors import CachelabError, Interrupted, UsageError
from cachelab.load.drill import FailPlan, drill_summary
from cachelab.load.fixes import RunShape, with_fixes
from cachelab.load.footprint import load_writes
from cachelab.load.lives import DELTA_STATS, merged_reads, server_side
from cachelab.load.precision import Watch, precision_verdict, with_intervals
from cachelab.load.probe import client_busy, probe_result
from cachelab.load.repeats import combined_validity, repeat_summary, spread, worst
from cachelab.load.result import LoadResult
from cachelab.load.snapshots import Poller
from cachelab.load.spec import LoadSpec, memory_mb, pool_members, twemproxy_settings
from cachelab.load.timeline import RATE_BACKLOG, liveness, schedule_verdict
from cachelab.load.validity import validity
from cachelab.pool import Distribution, distribution
from cachelab.progress import run_cancellable
from cachelab.resp import RespLogin
from cachelab.servers import ServerOptions
from cachelab.target import Target
from cachelab.tls import describe_tls, transport_of

__all__ = ["DELTA_STATS", "RATE_BACKLOG", "down_seconds", "guard_run", "key_owners", "load",
           "measure", "result_from_outcome", "server_deltas", "server_view", "target_of"]

#: How keys are assumed to be placed behind a proxy when no twemproxy distribution is given:
#: twemproxy's own default (ketama points, fnv1a_64 keys).
PROXY_DISTRIBUTION = "twemproxy-ketama-fnv1a_64"


def load(
    spec: LoadSpec | Mapping[str, Any] | str | Path | None = None,
    *,
    server: str | Sequence[str] | None = None,
    server_options: ServerOptions | None = None,
    server_pid: int | None = None,
    server_facts: Mapping[str, Any] | None = None,
    on_progress: Callable[[Any], None] | None = None,
    behind: Sequence[str] | None = None,
) -> LoadResult:
    """Runs a workload against ``server`` (``host:port`` or ``unix:/path``), against a pool
    (a list of ``host:port[:weight]`` members, or ``spec.servers``; see docs/load.md,
    "Pools"), or against a private memcached started for the run from ``server_options``
    when neither is given (with at least the memory the key space needs).

    ``spec`` is a :class:`LoadSpec`, a dict of its fields, or the path of a TOML file. For a
    server the caller started itself, ``server_pid`` (so its run-queue wait can be read) and
    ``server_facts`` (recorded in ``server``) may be given. The run holds no GIL. Ctrl-C stops
    sending, waits for replies in flight, deletes the keys written and raises
    :class:`~cachelab.errors.Interrupted` with the partial result as ``err.partial``. A server
    that cannot be reached at the start raises a ServerError subclass; failures later are
    counted in the result.

    On a server cachelab did not start (``server_facts`` without ``private``), the run is
    first checked against the server's free memory and item size limit
    (:mod:`cachelab.capacity`: :class:`~cachelab.capacity.WontFit` before anything is
    written), and stopped if the server starts evicting (``run.aborted`` says so;
    ``run.user_items_lost`` counts the evictions).

    Through a proxy (twemproxy), ``server`` is the proxy and ``behind`` the memcached servers
    behind it (``host:port[:weight]``): every request goes to the proxy, which spreads the
    keys; the servers behind it are checked for room (each with its share of the keys by
    ``spec.distribution``), watched for evictions, and their ``stats`` read for the run's
    deltas (``behind`` in the result; ``server`` is the proxy as one).
    """
    spec = _as_spec(spec)
    return measure(spec, target_of(spec, server, behind, server_options),
                   server_pid=server_pid, server_facts=server_facts, on_progress=on_progress)


def target_of(spec: LoadSpec, server: str | Sequence[str] | None,
              behind: Sequence[str] | None, options: ServerOptions | None = None) -> Target:
    """The :class:`~cachelab.target.Target` of :func:`load`'s older arguments: ``server``
    (else ``spec.servers``), the servers ``behind`` a proxy, the spec's private pool."""
    given = server if server else (spec.servers or None)
    return Target.of(given, behind=behind, options=options, private_pool=spec.private_pool,
                     private_proxy=spec.private_proxy)


def measure(spec: LoadSpec, target: Target, *, server_pid: int | None = None,
            server_facts: Mapping[str, Any] | None = None,
            on_progress: Callable[[Any], None] | None = None) -> LoadResult:
    """Runs ``spec`` on this machine against ``target`` (:meth:`Target.open` starts a
    private server, pool or proxy and stops it at the end): :func:`load`'s work, with the
    target already decided."""
    spec.check()
    if spec.repeats > 1:
        return _repeated(spec, target, server_pid=server_pid, server_facts=server_facts,
                         on_progress=on_progress)
    events = spec.events()
    proxy = None
    if target.private_proxy:
        kind, hash_ = twemproxy_settings(spec.distribution)
        proxy = {"distribution": kind, "hash": hash_,
                 "auto_eject": spec.on_member_down == "remap",
                 "server_failure_limit": spec.member_failure_limit,
                 "server_retry_timeout": spec.member_retry, "timeout": spec.member_timeout}
    with contextlib.ExitStack() as stack:
        live = stack.enter_context(target.open(memory_mb=memory_mb(spec), spares=spec.spares(),
                                               proxy=proxy))
        given, owned = live.given, live.owned
        hidden = pool_members(live.behind) if live.behind else None
        facts = {**live.facts, **dict(server_facts or {})}
        if owned:
            facts.update(private=True, argv=owned[0].argv)
        members = pool_members(given) if given else [(live.address, 1)]
        run_id = secrets.token_hex(6)
        core = spec.to_core(given or live.address, run_id, spares=live.spares)
        if live.slots:
            core["cluster_slots"] = live.slots
        login = target.resp or (RespLogin() if spec.protocol == "resp" else None)
        if login is not None:
            # (the password goes to the engine alone: never into the spec or the result)
            core["protocol"] = login.to_core()
        plan = FailPlan(events, owned, hidden or core["servers"]) if owned else None
        stack.callback(lambda: plan and plan.finish())
        if hidden:
            core["behind"] = [a for a, _ in hidden]
        watch = guard_run(spec, members, hidden, core["prefix"],
                          private=bool(facts.get("private")), resp=login, slots=live.slots)
        evicting: list[int] = []
        precise = (Watch(spec.precision, float(spec.interval),
                         float(spec.warmup) + float(spec.precision_after),
                         spec.precision_percentile)
                   if spec.precision is not None else None)

        def watched(progress: Any) -> None:
            if plan is not None and progress.total:
                if progress.done >= progress.total or progress.cancelled:
                    plan.sending_ended(progress.done / 1000)
                else:
                    plan.poll(progress.done / 1000)
            if on_progress is not None:
                on_progress(progress)
            if watch is not None and not evicting and watch.poll():
                evicting.append(watch.evicted)
                progress.cancel()
            if precise is not None and precise.reached_at_s is None and precise.poll(progress):
                progress.cancel()

        core["server_pid"] = live.pid if server_pid is None else server_pid
        if spec.seed is None:
            core["seed"] = secrets.randbits(63)
        started = time.time()
        outcome, polled = _run_watching_behind(core, watched,
                                               keep_histograms=precise is not None)
        # The last eviction count, read again unless the run gave up on the server (a read
        # would only wait out its timeout; the count read during the run stands).
        lost = (None if watch is None else watch.evicted if outcome.get("aborted")
                else watch.poll(force=True))
        address = live.address
    result = result_from_outcome(outcome, spec, core, address=address, server_facts=facts,
                                 started=started, samples=merged_reads(
                                     polled, {} if watch is None else watch.lives()))
    if lost is not None:
        result.run["user_items_lost"] = lost
    if events:
        result.drill = drill_summary(events, plan.done if plan else [], result.intervals)
        # What `simulate --drill` needs to place every key as this run did.
        result.drill["route"] = {k: core[k] for k in ("servers", "changes", "prefix", "seed",
                                                      "prefill", "distribution")}
    stopped = precise is not None and precise.reached_at_s is not None
    if precise is not None:
        result.precision = precision_verdict(
            float(spec.precision), result.latency("best"), cap_s=float(spec.duration or 0),
            stopped_at_s=round(result.totals["duration_s"], 3)
            if precise.reached_at_s is not None else None, live_half_width=precise.half_width,
            percentile=spec.precision_percentile)
    if stopped and not evicting:  # stopped by the precision reached: a complete run
        result.run["cancelled"] = False
        result.run["stopped_by"] = "precision"
    if evicting:  # stopped by us, not by a signal: a partial result that says why
        result.run.update(cancelled=False, aborted=evicted_message(lost or evicting[0]))
    elif outcome["cancelled"] and not stopped:
        raise Interrupted("stopped by a signal; partial results kept", partial=result)
    return result


def _repeated(spec: LoadSpec, target: Target, **how: Any) -> LoadResult:
    """``spec.repeats`` runs of ``spec`` (one seed for all), each against a fresh private
    memcached when no server is given (:func:`load` starts one per run), else against the
    same server; the result is the repeat with the highest p99, holding every repeat and
    their comparison (:mod:`cachelab.load.repeats`). Ctrl-C keeps the repeats done and the
    interrupted one (shown, so the result says PARTIAL)."""
    restarted = target.private
    one = dataclasses.replace(spec, repeats=1,
                              seed=spec.seed if spec.seed is not None else secrets.randbits(63))
    runs: list[dict[str, Any]] = []
    results: list[LoadResult] = []
    interrupted = None
    failed: str | None = None
    for i in range(spec.repeats):
        try:
            results.append(measure(one, target, **how))
        except Interrupted as e:
            interrupted = e
            results.append(e.partial)
        except CachelabError as e:
            if not results:
                raise
            # A later repeat could not run (its server did not start, or no longer fits):
            # the repeats done are kept, and the result says it is partial and why.
            failed = f"repeat {i + 1} of {spec.repeats} could not run: {e}"
            break
        runs.append(repeat_summary(results[-1].to_dict(), i, restarted=restarted))
        if interrupted is not None:
            break
    comparison = spread(runs)
    shown = len(results) - 1 if interrupted is not None else worst(runs)
    out = dataclasses.replace(results[shown])
    pids = [str(r["server_pid"]) for r in runs if r["server_pid"]]
    out.repeats = {
        "count": spec.repeats, "done": len(runs), "shown": shown, "restarted": restarted,
        "server": ("the private memcached was restarted before each repeat (a fresh process"
                   + (f": pids {', '.join(pids)})" if pids else ")") if restarted else
                   "the server was NOT restarted between repeats (not cachelab's own: what "
                   "one repeat leaves in it is carried into the next)"),
        "comparison": comparison, "runs": runs}
    out.spec = {**out.spec, "repeats": spec.repeats}
    out.validity = combined_validity(out.validity, runs, comparison)
    if failed is not None:
        out.run = {**out.run, "aborted": failed}
    if interrupted is not None:
        interrupted.partial = out
        raise interrupted
    return out


def key_owners(core: Mapping[str, Any], keys: Sequence[str]) -> list[int]:
    """The index in ``core["servers"]`` of the member that holds each of ``keys``, by the
    run's distribution, as the engine routes them (all 0 for one server or a proxy)."""
    if len(core["servers"]) == 1:
        return [0] * len(keys)
    return list(_distribution(core["distribution"], core["servers"]).servers_for(list(keys)))


def _distribution(kind: str, members: Sequence[Sequence[Any]]) -> Distribution:
    return distribution(kind, [address if int(weight) == 1 else f"{address}:{weight}"
                               for address, weight in members])


def guard_run(spec: LoadSpec, members: list[tuple[str, int]],
              hidden: list[tuple[str, int]] | None, prefix: str, *,
              private: bool, resp: RespLogin | None = None,
              slots: Sequence[tuple[int, int, int]] | None = None) -> PoolWatch | None:
    """On servers cachelab did not start: refuses a run that does not fit
    (:class:`~cachelab.capacity.WontFit`), each member of a pool — or each server ``hidden``
    behind a proxy — checked for its share of the keys ``<prefix>:<index>``; returns the
    watch that stops the run when one evicts (None for a private server). Redis or Valkey
    servers (``resp``, their login) are checked against their ``maxmemory`` and watched for
    ``evicted_keys`` (:func:`~cachelab.capacity.guard_resp`). A Redis Cluster's masters
    (``slots``: the slot ranges each serves) are checked for their share by hash slot."""
    writes = load_writes(spec)
    checked = hidden or members
    shares = [c / spec.key_space for c in _core.load_cluster_key_counts(
        list(slots), len(members), prefix, spec.key_space)] if slots else _key_shares(
        # Behind a proxy, keys are placed by the proxy: twemproxy's default placement
        # unless a twemproxy distribution is given (docs/pools.md).
        spec if not hidden or spec.distribution.startswith("twemproxy-")
        else dataclasses.replace(spec, distribution=PROXY_DISTRIBUTION),
        checked, prefix)
    parts = [(a, writes.part(share)) for (a, _), share in zip(checked, shares)]
    if resp is not None:
        return guard_resp(parts, resp, private=private, timeout=spec.connect_timeout,
                          tls=spec.tls)
    return guard_pool(parts, private=private, timeout=spec.connect_timeout, tls=spec.tls)


def _key_shares(spec: LoadSpec, members: list[tuple[str, int]], prefix: str) -> list[float]:
    """Each member's share of the run's keys (``<prefix>:<index>``), as the engine routes
    them; ``[1.0]`` for a single server."""
    if len(members) == 1:
        return [1.0]
    counts = _distribution(spec.distribution, members).key_counts(prefix, spec.key_space)
    return [c / spec.key_space for c in counts]


def _as_spec(spec: LoadSpec | Mapping[str, Any] | str | Path | None) -> LoadSpec:
    if spec is None:
        return LoadSpec()
    if isinstance(spec, (str, Path)):
        return LoadSpec.from_toml(spec)
    if isinstance(spec, Mapping):
        try:
            return LoadSpec(**spec)
        except TypeError as e:
            raise UsageError(f"load spec: {e}") from None
    return spec


def _run_with_progress(
    core: dict[str, Any], on_progress: Callable[[Any], None] | None, *,
    keep_histograms: bool = False,
) -> dict[str, Any]:
    """Runs the Rust load in a thread; polls progress; Ctrl-C stops it and keeps the results.
    ``keep_histograms``: the engine keeps each interval's histogram for the poll to read."""
    progress = _core.LoadProgress(keep_histograms=keep_histograms)
    return run_cancellable(
        lambda: _core.load_run(core, progress), progress.cancel, name="cachelab-load",
        poll=(lambda: on_progress(progress)) if on_progress else None,
    )


def _run_watching_behind(core: dict[str, Any], on_progress: Callable[[Any], None], *,
                         keep_histograms: bool
                         ) -> tuple[dict[str, Any], dict[str, list[dict[str, str]]]]:
    """:func:`_run_with_progress`; through a proxy, with the servers behind it polled during
    the run (:class:`~cachelab.load.snapshots.Poller`), so that one that stops answering
    keeps its counts up to then and says when (``behind[i]["stopped"]``). Returns the
    outcome and the polled reads by address (the last of each server process: samples for
    the counters per life)."""
    if not core.get("behind"):
        return _run_with_progress(core, on_progress, keep_histograms=keep_histograms), {}
    with Poller(core["behind"], core) as poller:
        began = time.monotonic()
        outcome = _run_with_progress(core, on_progress, keep_histograms=keep_histograms)
    # The engine's clock starts with the sending phase, after its prefill.
    poller.amend(outcome["behind"], origin=began + float(outcome["prefill_s"]),
                 end_s=float(outcome["elapsed_s"]))
    return outcome, poller.lives()


def result_from_outcome(
    outcome: Mapping[str, Any],
    spec: LoadSpec,
    core: Mapping[str, Any],
    *,
    address: str,
    server_facts: Mapping[str, Any],
    started: float,
    samples: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
) -> LoadResult:
    """THE conversion from the engine's outcome to the ``load.json`` schema (docs/load.md):
    the one place that knows both. Nothing else reads ``_core.load_run``'s result.

    ``outcome`` is what ``_core.load_run`` returns: ``intervals``, ``steady``, ``all``,
    ``measured`` and ``window`` (totals over every interval, over those after the warm-up and
    over the steady window, each with ``corrected`` and ``uncorrected`` histograms),
    ``stalls`` (and ``stalls_dropped``), ``schedule`` (open loop; None closed), ``server``
    (``version``, ``stats`` ``before``/``after``, ``pid``, ``schedstat_before``/``_after``),
    the client's CPU, run-queue wait, context switches, busy polls and writes
    (``client_*``), ``process_cpu_s``, ``elapsed_s``, and the run's ``prefilled_keys``,
    ``prefill_s``, ``deleted_keys``, ``leftover_keys``, ``cancelled`` and ``aborted``.

    ``core`` is the dict the engine ran (:meth:`LoadSpec.to_core`, with the seed and key
    prefix used); ``address`` and ``server_facts`` (``private``, the private server's
    ``argv``) are recorded in ``server``; ``started`` is the Unix time the run began;
    ``samples``, the ``stats`` read during the run by address (the eviction watch's
    :attr:`~cachelab.capacity.EvictionWatch.lives`), give the counters of a server that
    restarted up to its last read (:mod:`cachelab.load.lives`).

    Added here and nowhere else: whether an open loop held its rate in every interval
    (``schedule.held``, ``intervals_behind``, ``achieved_rate``), the dead intervals and the
    live part's throughput (``run.liveness``), whether the steady window is short, the
    server's counter deltas and run-queue wait, the client's per-reply figures and its
    queueing (``client.queueing``: sends' lateness, open loop) and how busy its threads were
    (``client.busy``), the run's validity verdict (``validity``, :mod:`cachelab.load.validity`,
    from the engine's ``samples``, which are not kept in load.json; a merged outcome has none:
    those checks are "not checked"), and the latency probe's section (``probe``,
    :mod:`cachelab.load.probe`; None without ``--probe-rate``). The
    JSON's ``totals`` is the engine's ``measured`` (the headline: the whole run after the
    warm-up); the steady window's totals are ``steady.window``.
    """
    window, measured, everything = outcome["window"], outcome["measured"], outcome["all"]
    schedule = outcome["schedule"]
    if schedule is not None:
        schedule = schedule_verdict(
            schedule, outcome["intervals"], rate=float(spec.rate or 0),
            connections=spec.connections, interval_s=float(spec.interval),
            sent=everything["sent"], achieved=measured["throughput"])
    steady = {**outcome["steady"], "window": window,
              "short": window["duration_s"] < measured["duration_s"] / 2}
    seen = outcome["server"]
    read = samples or {}
    server = {
        "address": address,
        "transport": transport_of(address, spec.tls),
        "protocol": spec.protocol,
        "private": False,
        **dict(server_facts),
        **server_view(seen, outcome["elapsed_s"], read.get(address, ())),
    }
    members = pool = behind = None
    if outcome.get("members"):
        members = [_member(m, outcome["elapsed_s"], read.get(m["address"], ()))
                   for m in outcome["members"]]
        pool = _pool(members, spec)
        if core.get("cluster_slots"):
            pool["distribution"] = "cluster"
            pool["redirects"] = {k: sum(m["redirects"][k] for m in members)
                                 for k in ("moved", "ask")}
        server = _pool_server(server, members)
    if outcome.get("behind"):
        behind = [{"address": a, "server": server_view(v, outcome["elapsed_s"],
                                                       read.get(a, ())),
                   **({"stopped": v["stopped"]} if v.get("stopped") else {})}
                  for a, v in zip(core["behind"], outcome["behind"])]
        server = {**_pool_server(server, behind), "address": address, "proxy": True,
                  "behind": [b["address"] for b in behind]}
    # The threads' work: their CPU time but the pacing (waiting awake for sends, --spin-us),
    # which a thread would otherwise have slept through.
    busy = None if outcome.get("samples") is None else client_busy(
        max(0.0, outcome["client_cpu_user_s"] + outcome["client_cpu_system_s"]
            - outcome.get("client_spun_s", 0.0)),
        outcome["client_wait_s"], outcome["elapsed_s"], spec.threads)
    late_threshold_ns = int(outcome.get("late_threshold_ns") or 0)
    # The verdict's own cost, this process's CPU (its statistics libraries' import the most:
    # statsmodels and scipy.stats, ~2.5 s on this machine's first run), reported apart.
    verdict_from = time.process_time()  # (`started`, the run's Unix start, is kept for run)
    verdict = validity(
        mode="open" if spec.rate is not None else "closed", arrivals=spec.arrivals,
        rate=spec.rate, interval_s=float(spec.interval), intervals=outcome["intervals"],
        samples=outcome.get("samples"), lateness=outcome.get("send_lateness"),
        late_sends=int(outcome.get("late_sends") or 0), late_threshold_ns=late_threshold_ns,
        stalls=outcome["stalls"], warmup_s=float(spec.warmup), client=busy,
        busy_poll_us=spec.busy_poll_us)
    verdict = with_fixes(verdict, RunShape.of(spec, busy, server))
    with_intervals(measured, verdict["checks"]["independent"], outcome.get("samples"))
    client = _client(outcome)
    client["busy"] = busy
    client["verdict_cpu_s"] = round(time.process_time() - verdict_from, 6)
    return LoadResult(
        created=created_now(),
        spec={**asdict(spec), "tls": describe_tls(spec.tls),
              "seed": core["seed"], "prefix_used": core["prefix"],
              "prefill": core["prefill"], "key_dist_parsed": core["key_dist"],
              "value_size_parsed": core["value_size"]},
        mode="open" if spec.rate is not None else "closed",
        intervals=outcome["intervals"],
        steady=steady,
        totals=measured,
        all=everything,
        stalls=outcome["stalls"],
        server=server,
        client=client,
        schedule=schedule,
        validity=verdict,
        probe=probe_result(outcome.get("probe"), interval_s=float(spec.interval),
                           warmup_s=float(spec.warmup), late_threshold_ns=late_threshold_ns),
        run={
            "started_unix": round(started, 3),
            "elapsed_s": round(outcome["elapsed_s"], 3),
            "prefilled_keys": outcome["prefilled_keys"],
            "prefill_s": round(outcome["prefill_s"], 3),
            "deleted_keys": outcome["deleted_keys"],
            "leftover_keys": outcome["leftover_keys"],
            "cancelled": outcome["cancelled"],
            "aborted": outcome["aborted"],
            "stalls_dropped": outcome["stalls_dropped"],
            "liveness": liveness(outcome["intervals"]),
        },
        environment=environment.facts(),
        pool=pool,
        members=members,
        behind=behind,
    )


def _member(m: Mapping[str, Any], elapsed: float,
            samples: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """One pool member in load.json: its parts' counts and latency over the whole sending
    phase, its down episodes, and its own server's deltas."""
    view = m["server"]
    return {
        "address": m["address"],
        "weight": m["weight"],
        "keys": m["keys"],
        "sent": m["sent"],
        "replies": m["replies"],
        "hits": m["hits"],
        "misses": m["misses"],
        "errors": m["errors"],
        "lost": m["lost"],
        "latency": m["latency"],
        "down": m["down"],
        "down_s": round(down_seconds(m["down"]), 3),
        "server": server_view(view, elapsed, samples),
        # A Redis Cluster's master: the redirections it answered.
        **({"redirects": {"moved": m["moved"], "ask": m["ask"]}} if "moved" in m else {}),
    }


def down_seconds(episodes: Sequence[Mapping[str, Any]]) -> float:
    """How long a member was down: the union of its episodes (one run's episodes do not
    overlap; several agents' do, each marking the member down on its own)."""
    total, reached = 0.0, -math.inf
    for e in sorted(episodes, key=lambda e: e["start_s"]):
        if e["end_s"] > reached:
            total += e["end_s"] - max(e["start_s"], reached)
            reached = e["end_s"]
    return total


def server_view(view: Mapping[str, Any], elapsed: float,
                samples: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """One server's side of a run (the server, a pool member, or a server behind a proxy):
    its version, counter deltas, run-queue wait and raw ``stats``, from ``view``'s
    ``version``, ``before`` and ``after`` (``stats``) and optional
    ``schedstat_before``/``_after`` (and ``pid``). A server that restarted during the run
    (``restart``, :func:`cachelab.load.lives.server_side`, with the ``stats`` read during it,
    ``samples``) has its counters per life and no run-queue wait (its old process is gone)."""
    deltas, restart = server_side(view["before"], view["after"], samples)
    return {
        "version": view["version"],
        "deltas": deltas,
        "restart": restart,
        "schedstat": None if restart else _sched(view, elapsed),
        "stats_before": view["before"],
        "stats_after": view["after"],
    }


def _pool(members: list[dict[str, Any]], spec: LoadSpec) -> dict[str, Any]:
    """The pool's settings and its key-distribution skew: the member whose share of the
    requests is furthest above its fair (weight) share."""
    sent = sum(m["sent"] for m in members)
    weight = sum(m["weight"] for m in members)
    skew = None
    if sent:
        def ratio(m: Mapping[str, Any]) -> float:
            return (m["sent"] / sent) / (m["weight"] / weight)

        hot = max(members, key=ratio)
        skew = {"hottest": hot["address"], "share": round(hot["sent"] / sent, 4),
                "fair_share": round(hot["weight"] / weight, 4), "ratio": round(ratio(hot), 3)}
    return {"distribution": spec.distribution, "members": len(members),
            "member_failure_limit": spec.member_failure_limit,
            "member_retry_s": float(spec.member_retry), "skew": skew,
            "down_episodes": sum(len(m["down"]) for m in members)}


def _pool_server(server: dict[str, Any], members: list[dict[str, Any]]) -> dict[str, Any]:
    """A pool's ``server`` section: the pool as one — its members' addresses, versions,
    and counter deltas summed (each member's own are in ``members``; through a proxy, the
    servers behind it, in ``behind``)."""
    deltas: dict[str, Any] = {}
    for m in members:
        for k, v in m["server"]["deltas"].items():
            if isinstance(v, dict):
                into = deltas.setdefault(k, {"before": 0, "after": 0})
                into["before"] += v["before"]
                into["after"] += v["after"]
            else:
                deltas[k] = round(deltas.get(k, 0) + v, 6)
    versions = sorted({m["server"]["version"] for m in members})
    return {**server, "address": ", ".join(m["address"] for m in members),
            "version": ", ".join(versions), "deltas": deltas, "restart": None,
            "schedstat": None, "stats_before": {}, "stats_after": {}}


def _client(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The load threads' CPU, run-queue wait, sleeps and writes, also per reply."""
    replies = outcome["all"]["replies"]
    cpu = outcome["client_cpu_user_s"] + outcome["client_cpu_system_s"]
    writes = outcome["client_writes"]

    def per_reply(seconds: float) -> float | None:
        return round(seconds * 1e6 / replies, 4) if replies else None

    return {
        "cpu_user_s": round(outcome["client_cpu_user_s"], 6),
        "cpu_system_s": round(outcome["client_cpu_system_s"], 6),
        "cpu_us_per_op": per_reply(cpu),
        # The whole process over the same phase: client threads plus everything else it ran
        # meanwhile (Python, the progress display), without start-up, prefill or clean-up.
        "process_cpu_s": round(outcome["process_cpu_s"], 6),
        "process_cpu_us_per_op": per_reply(outcome["process_cpu_s"]),
        "run_queue_wait_s": round(outcome["client_wait_s"], 6),
        "run_queue_wait_us_per_op": per_reply(outcome["client_wait_s"]),
        "sleeps": outcome["client_sleeps"],
        "preempted": outcome["client_preempted"],
        "busy_polls": outcome["client_busy_polls"],
        "busy_caught": outcome["client_busy_caught"],
        # Open loop: waiting awake for sends due (--spin-us), part of the threads' CPU.
        "spins": outcome.get("client_spins", 0),
        "pacing_s": round(outcome.get("client_spun_s", 0.0), 6),
        "spin_sends": outcome.get("client_spin_sends", 0),
        "spin_fallbacks": outcome.get("client_spin_fallbacks", 0),
        "writes": writes,
        "requests_per_write": round(outcome["all"]["sent"] / writes, 3) if writes else None,
        "queueing": _queueing(outcome),
    }


def _queueing(outcome: Mapping[str, Any]) -> dict[str, Any] | None:
    """Open loop, after the warm-up: the client's own queueing, each send's lateness (its
    actual send minus its intended time): p50, p99, max, and the sends late by the engine's
    threshold or more. None in closed loop (or for a run merged from agents)."""
    h = outcome.get("send_lateness")
    if not h:
        return None
    p = h["percentiles"]
    return {"sends": h["count"], "p50_ns": p["50"], "p99_ns": p["99"], "max_ns": p["max"],
            "late_sends": int(outcome.get("late_sends") or 0),
            "late_threshold_ns": int(outcome.get("late_threshold_ns") or 0),
            "histogram": h["histogram"]}


def server_deltas(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, Any]:
    """Counters' changes, CPU seconds used (rusage), and connections before and after; over
    the lives whose counters are known when the server restarted in between (never a
    difference of two processes' counters: :func:`cachelab.load.lives.server_side`)."""
    return server_side(before, after)[0]


def _sched(server: Mapping[str, Any], elapsed: float) -> dict[str, Any] | None:
    b, a = server.get("schedstat_before"), server.get("schedstat_after")
    if not b or not a or elapsed <= 0:
        return None
    wait = a["wait_ns"] - b["wait_ns"]
    cpu = a["on_cpu_ns"] - b["on_cpu_ns"]
    return {
        "pid": server.get("pid"),
        "threads": a["threads"],
        "run_queue_wait_s": wait / 1e9,
        "on_cpu_s": cpu / 1e9,
        "timeslices": a["slices"] - b["slices"],
        "wait_per_wall": wait / 1e9 / elapsed,
        "wait_per_cpu": wait / cpu if cpu else None,
    }
