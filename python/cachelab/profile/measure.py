"""Measuring a latency profile (:func:`profile`): the Rust engine against a memcached, given
or private, or a Redis or Valkey (RESP, given or a private redis-server; the server's side
from ``INFO``: :mod:`cachelab.profile.resp`)."""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cachelab._core as _core
import cachelab.environment as environment
import cachelab.servers as servers
from cachelab.artifacts import created_now
from cachelab.capacity import (
    EvictionWatch,
    PoolWatch,
    evicted_message,
    guard,
    guard_pool,
    guard_resp,
)
from cachelab.errors import Interrupted, UsageError
from cachelab.load import server_view
from cachelab.pool import parse_server
from cachelab.profile.cell import Cell, with_percentiles
from cachelab.profile.model import LatencyProfile
from cachelab.profile.precise import cell_precision, run_until_precise
from cachelab.profile.resp import memory_mb_for, resp_server, resp_version, snapshot
from cachelab.profile.spec import (
    ProfileSpec,
    item_size_for,
    memory_for,
    profile_writes,
)
from cachelab.profile.tlscost import measure_tls_cost
from cachelab.progress import run_cancellable
from cachelab.resp import RespLogin
from cachelab.servers import ServerOptions
from cachelab.target import Target
from cachelab.tls import TlsOptions, core_tls, describe_tls


def profile(
    spec: ProfileSpec | None = None,
    *,
    server: str | None = None,
    server_options: ServerOptions | None = None,
    server_facts: Mapping[str, Any] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    behind: Sequence[str] | None = None,
    resp: RespLogin | None = None,
) -> LatencyProfile:
    """Measures a latency profile of the memcached at ``server`` (``host:port`` or
    ``unix:/path``), or of a private memcached started for the run (from ``server_options``,
    with room for the spec's largest value) when ``server`` is None. ``server_facts`` are
    recorded with the server's (e.g. that a caller started it).

    The measuring runs in Rust with the GIL released. Ctrl-C stops it early: the partial
    profile is attached to the :class:`~cachelab.errors.Interrupted` raised
    (``err.partial``), and a private server is stopped. Server-side failures raise
    :class:`~cachelab.errors.ServerError` subclasses; failures during the run are counted in
    the cells instead.

    On a server cachelab did not start, the run is first checked against the server's free
    memory and item size limit (:mod:`cachelab.capacity`; :class:`~cachelab.capacity.WontFit`
    before anything is written), and stopped if the server starts evicting: the partial
    profile then says so in ``run.aborted``, and ``run.user_items_lost`` counts the evictions.

    Through a proxy (twemproxy), ``server`` is the proxy and ``behind`` the memcached servers
    behind it (``host:port[:weight]``, as for :func:`cachelab.load.load`). Every request goes
    to the proxy, text protocol only; the floor is a get of a key never written
    (``floor_command`` ``get-miss``: the proxy closes the connection on ``mn``), which crosses
    the proxy to the one server its key maps to. Each server behind is checked for room for
    the run's whole footprint (any key may land on any of them), watched for evictions, and
    its ``stats`` read before and after (``behind`` in the result, as in ``load.json``).

    A Redis or Valkey (``spec.protocol`` ``resp``, or ``resp``: the login each connection
    sends; ``server`` None starts a private redis-server) is profiled with ``SET``, ``GET``,
    ``MGET`` and ``UNLINK``, the floor ``PING``; checked first against its ``maxmemory``,
    watched for ``evicted_keys``, and read for ``INFO`` before and after
    (:mod:`cachelab.profile.resp`). With ``behind`` too, ``server`` is twemproxy in redis
    mode: no ``INFO`` of it (it refuses), the floor a ``GET`` of a key never written (it
    answers ``PING`` itself), and each Redis behind it checked for room, watched and read
    for ``INFO`` and ``commandstats`` (``behind``; ``server.calls`` their sum).
    """
    spec = spec or ProfileSpec()
    if resp is not None or spec.protocol == "resp":
        return _profile_resp(spec, server, server_options, server_facts, on_progress, behind,
                             resp or RespLogin())
    spec.check()
    hidden = _behind(spec, server, behind)
    with Target.of(server, options=server_options).open(memory_mb=memory_for(spec, 0),
                       item_size_max=item_size_for(spec)) as target:
        facts = {**target.facts, **dict(server_facts or {})}
        # A server we did not start: refuse a run that does not fit, watch for evictions.
        watch: EvictionWatch | PoolWatch | None
        if hidden is None:
            watch = guard(target.address, profile_writes(spec),
                          private=bool(facts.get("private")), timeout=spec.connect_timeout,
                          tls=spec.tls)
        else:
            writes = profile_writes(spec)
            watch = guard_pool([(a, writes) for a in hidden], private=False,
                               timeout=spec.connect_timeout)
            facts.update(proxy=True, behind=hidden)
        result = _measure(spec, target.address, facts, on_progress, watch, hidden)
        if spec.tls is not None and not result.run.get("aborted"):
            result.tls_cost = measure_tls_cost(spec, target.address)
        return result


def _profile_resp(spec: ProfileSpec, server: str | None, server_options: ServerOptions | None,
                  server_facts: Mapping[str, Any] | None,
                  on_progress: Callable[[int, int], None] | None,
                  behind: Sequence[str] | None, login: RespLogin) -> LatencyProfile:
    """:func:`profile` of a Redis or Valkey (or of twemproxy in redis mode, ``behind``)."""
    if spec.plain_port is not None:
        raise UsageError("--plain-port: the TLS cost table is memcached's, not for a profile "
                         "over RESP")
    spec = dataclasses.replace(spec, protocol="resp", tls=spec.tls or (
        TlsOptions() if login.tls else None))
    spec.check()
    writes = profile_writes(spec)
    if behind is not None:
        if not isinstance(server, str) or not behind:
            raise UsageError("a profile through a proxy needs the proxy's HOST:PORT as its "
                             "server and the servers behind it")
        if spec.tls is not None:
            raise UsageError("TLS through a proxy: twemproxy does not speak TLS; profile the "
                             "proxy over plain TCP")
        if login.db not in (None, 0):
            raise UsageError("a RESP profile through a proxy cannot choose a database: "
                             "twemproxy closes the connection on SELECT (set redis_db in its "
                             "pool's configuration instead)")
        hidden = [parse_server(b).address for b in behind]
        # Any key may land on any server behind: each must hold the whole profile.
        watch = guard_resp([(a, writes) for a in hidden], login, private=False,
                           timeout=spec.connect_timeout)
        facts = {**dict(server_facts or {}), "proxy": True, "behind": hidden}
        return _measure(spec, server, facts, on_progress, watch, hidden, resp=login)
    target = Target.of(server, options=server_options, resp=login)
    with target.open(memory_mb=memory_mb_for(writes)) as live:
        facts = {**live.facts, **dict(server_facts or {})}
        watch = guard_resp([(live.address, writes)], login, private=bool(facts.get("private")),
                           timeout=spec.connect_timeout, tls=spec.tls)
        return _measure(spec, live.address, facts, on_progress, watch, resp=login)


def _behind(spec: ProfileSpec, server: str | None,
            behind: Sequence[str] | None) -> list[str] | None:
    """The addresses of the servers behind a proxy (None without one), after the checks that
    profiling through it needs."""
    if behind is None:
        return None
    if not isinstance(server, str):
        raise UsageError("a profile through a proxy needs the proxy's HOST:PORT as its server")
    if not behind:
        raise UsageError("a profile through a proxy needs the servers behind it")
    if spec.protocol != "text":
        raise UsageError(f"protocol {spec.protocol} through a proxy: twemproxy closes the "
                         "connection on meta commands; use the text protocol")
    if spec.tls is not None:
        raise UsageError("TLS through a proxy: twemproxy does not speak TLS; profile the "
                         "proxy over plain TCP")
    return [parse_server(b).address for b in behind]


def _stats(address: str, timeout: float, *, required: bool) -> dict[str, Any]:
    """A server's ``version`` and ``stats`` (empty when it does not answer and not
    ``required``)."""
    stats = (servers.read_stats(address, timeout=timeout) if required
             else servers.stats_or_none(address, timeout=timeout))
    if stats is None:
        return {"version": "", "stats": {}}
    return {"version": stats.get("version", ""), "stats": stats}


def _measure(
    spec: ProfileSpec, address: str, facts: Mapping[str, Any],
    on_progress: Callable[[int, int], None] | None,
    watch: EvictionWatch | PoolWatch | None = None, behind: list[str] | None = None,
    resp: RespLogin | None = None,
) -> LatencyProfile:
    seed = spec.seed if spec.seed is not None else secrets.randbits(63)
    spec_dict = spec.to_core(address, seed=seed, proxy=behind is not None)
    timeout = spec.connect_timeout
    if resp is not None and behind is not None:  # Redis servers behind twemproxy: their INFO
        before = [{"stats": snapshot(a, resp, timeout=timeout, required=True)}
                  for a in behind]
    else:
        before = [_stats(a, timeout, required=True) for a in behind or ()]
    info_before: dict[str, str] = {}
    if resp is not None and behind is not None:
        spec_dict["protocol"] = resp.to_core()
    elif resp is not None:
        info_before = snapshot(address, resp, timeout=timeout, tls=core_tls(spec.tls),
                               required=True)
        # (the password goes to the engine alone: never into the spec or the result)
        spec_dict["protocol"] = resp.to_core()
    started = time.time()
    if spec.precision is None:
        raw = _run_with_progress(spec_dict, on_progress, watch)
    else:
        done = [0]  # progress of the batches before, so the bar goes on from there

        def batch(one: dict[str, Any]) -> dict[str, Any]:
            seen = [0]

            def tracked(d: int, t: int) -> None:
                seen[0] = d
                if on_progress:
                    on_progress(done[0] + d, done[0] + t)

            out = _run_with_progress(one, tracked, watch)
            done[0] += seen[0]
            return out

        raw = run_until_precise(spec_dict, spec.precision, spec.samples, batch,
                                spec.precision_percentile)
    lost = watch.poll(force=True) if watch is not None else None
    behind_side: list[dict[str, Any]] | None = None
    if resp is not None and behind is not None:
        behind_side = [
            {"address": a, "server": {"version": resp_version(b["stats"]), **resp_server(
                b["stats"], snapshot(a, resp, timeout=timeout, required=False),
                raw["elapsed_s"])}}
            for a, b in zip(behind, before)]
        every = [b["server"]["calls"] for b in behind_side]
        # The proxy has no INFO: what the servers behind it counted, added up.
        side = {"deltas": {}, "restart": None, "calls": None if any(
            c is None for c in every) else {k: sum(c.get(k, 0) for c in every)
                                            for k in sorted({k for c in every for k in c})}}
        raw["server"]["version"] = behind_side[0]["server"]["version"]
    elif resp is not None:
        side = resp_server(info_before, snapshot(address, resp, timeout=timeout,
                                                 tls=core_tls(spec.tls), required=False),
                           raw["elapsed_s"])
    else:
        side = None
        after = [_stats(a, timeout, required=False) for a in behind or ()]
        if behind is not None:
            behind_side = [
                {"address": a, "server": server_view(
                    {"version": b["version"], "before": b["stats"], "after": f["stats"]},
                    raw["elapsed_s"])}
                for a, b, f in zip(behind, before, after)]
    cells = [with_percentiles(Cell.from_dict(c, "profile run"), intervals=True)
             for c in raw["cells"]]
    if spec.precision is not None:
        for c in cells:
            c.precision = cell_precision(c, spec.precision, spec.precision_percentile)
    client = {k: v for k, v in spec_dict.items() if k not in ("address", "tls")}
    client.update(tls=describe_tls(spec.tls), protocol=spec.protocol,
                  commands=dict(raw.get("commands") or {}))
    if resp is not None:
        client["login"] = resp.described()
    result = LatencyProfile(
        name=(raw["server"]["version"] if resp is not None
              else f"memcached {raw['server']['version']}") + " "
        + ("through the proxy at " if behind is not None else "at ") + address,
        source="measured",
        created=created_now(),
        cells=cells,
        server={
            "address": address,
            "transport": raw["transport"],
            "private": False,
            **facts,
            "version": raw["server"]["version"],
            "settings": raw["server"]["settings"],
            **({} if side is None else {"protocol": "resp", **side}),
        },
        client={**client, "floor_command": raw["floor_command"]},
        environment=environment.facts(),
        run={
            "started_unix": round(started, 3),
            "elapsed_s": round(raw["elapsed_s"], 3),
            "cancelled": raw["cancelled"],
            "aborted": raw["aborted"],
            "leftover_keys": raw["leftover_keys"],
            "cleaned_up_keys": raw["cleaned_up_keys"],
            **({} if lost is None else {"user_items_lost": lost}),
        },
        behind=behind_side,
        precision=raw.get("precision"),
    )
    if raw.get("evicting"):
        # Stopped by us, not by a signal: a partial profile that says why.
        result.run.update(cancelled=False, aborted=evicted_message(lost or 0))
    elif raw["cancelled"]:
        raise Interrupted("stopped by a signal; partial results kept", partial=result)
    return result


def _run_with_progress(
    spec_dict: dict[str, Any], on_progress: Callable[[int, int], None] | None,
    watch: EvictionWatch | PoolWatch | None = None,
) -> dict[str, Any]:
    """Runs the Rust profile in a thread; Ctrl-C cancels and keeps the partial result, and so
    does the server evicting items (``watch``; the result then says ``evicting``)."""
    progress = _core.Progress()
    evicting = False

    def poll() -> None:
        nonlocal evicting
        if on_progress:
            on_progress(progress.done, progress.total)
        if watch is not None and not evicting and watch.poll():
            evicting = True
            progress.cancel()

    raw = run_cancellable(lambda: _core.profile_run(spec_dict, progress), progress.cancel,
                          name="cachelab-profile", poll=poll)
    raw["evicting"] = evicting
    return raw
