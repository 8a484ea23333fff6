"""Servers' ``stats`` before and after a run, read by this process: what the load engine reads
for itself in a local run (``crates/load/src/server.rs``), for a run whose traffic comes from
elsewhere — the agents of ``load --ray`` on a pool or through a proxy, where the driver reads
each member (or each server behind the proxy) once instead of once per agent.

A view has the engine's shape (``version``, ``before``, ``after``, ``pid``,
``schedstat_before``, ``schedstat_after``), so :func:`cachelab.load.result_from_outcome` turns
it into a member's ``server`` section as it does the engine's own. A Redis or Valkey's view
is its ``INFO`` (:func:`cachelab.resp.info_or_none`), as the engine reads it over RESP.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cachelab._core as _core
from cachelab.errors import ServerError
from cachelab.resp import RespLogin, info_or_none
from cachelab.servers import STATS_TIMEOUT, on_this_machine, restarted, stats_or_none

__all__ = ["POLL_PERIOD", "Poller", "Reading", "Snapshots", "schedstat"]


class Snapshots:
    """The views of ``addresses`` (in order), each read with the run's connect timeout,
    request timeout and TLS (``core`` is the engine's spec dict); Redis or Valkey servers'
    with ``login`` (their ``INFO``)."""

    def __init__(self, addresses: Sequence[str], core: Mapping[str, Any],
                 login: RespLogin | None = None) -> None:
        self.addresses = list(addresses)
        self.core = core
        self.login = login
        self.views: list[dict[str, Any]] = [
            {"version": None, "before": {}, "after": {}, "pid": None,
             "schedstat_before": None, "schedstat_after": None} for _ in self.addresses]

    def _stats(self, address: str) -> dict[str, str] | None:
        c = self.core
        if self.login is not None:
            return info_or_none(address, self.login, timeout=max(STATS_TIMEOUT, c["timeout"]),
                                tls=c["tls"])
        return stats_or_none(address, timeout=max(STATS_TIMEOUT, c["timeout"]),
                             connect_timeout=c["connect_timeout"], tls=c["tls"])

    def before(self) -> None:
        """Just before the measured phase (after the prefill). A server that does not answer
        keeps ``before`` empty (no deltas) and ``version`` None, as in a local run (whose
        engine stops first if a server does not answer at its start)."""
        for address, view in zip(self.addresses, self.views):
            stats = self._stats(address)
            if stats is None:
                continue
            pid = _local_pid(address, stats)
            view.update(version=_version(stats), before=stats, pid=pid,
                        schedstat_before=schedstat(pid) if pid else None)

    def after(self) -> None:
        """Once the run is over. A server that does not answer keeps ``after`` empty (no
        deltas), as in a local run."""
        for address, view in zip(self.addresses, self.views):
            if view["pid"]:
                view["schedstat_after"] = schedstat(view["pid"])
            view["after"] = self._stats(address) or {}


def schedstat(pid: int) -> dict[str, int] | None:
    """``/proc/<pid>/task/*/schedstat`` summed over the threads (``on_cpu_ns``, ``wait_ns``,
    ``slices``, ``threads``), as the engine reads it; None when the process is not there."""
    total = {"on_cpu_ns": 0, "wait_ns": 0, "slices": 0, "threads": 0}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:
            continue
        if len(fields) >= 3 and all(f.isdigit() for f in fields[:3]):
            total["on_cpu_ns"] += int(fields[0])
            total["wait_ns"] += int(fields[1])
            total["slices"] += int(fields[2])
            total["threads"] += 1
    return total if total["threads"] else None


def _version(stats: Mapping[str, str]) -> str | None:
    """The version as the engine writes it: memcached's ``version``, or a Redis's (Valkey's)
    ``redis 7.0.15`` from ``INFO``'s ``redis_version`` (``valkey_version``)."""
    for name in ("valkey", "redis"):
        if stats.get(f"{name}_version"):
            return f"{name} {stats[f'{name}_version']}"
    return stats.get("version")


def _local_pid(address: str, stats: Mapping[str, str]) -> int | None:
    """The pid of a memcached or redis-server on this machine whose schedstat can be read
    (the engine's rule: a loopback or Unix-socket address, and a process of that name), else
    None."""
    if not on_this_machine(address):
        return None
    pid = str(stats.get("pid", ""))
    if not pid.isdigit():
        return None
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    return int(pid) if comm in ("memcached", "redis-server", "valkey-server") else None


# -- counters during the run ------------------------------------------------------------------

#: The longest time between two reads of a server's ``stats`` during a run (s): a server that
#: stops answering is placed in time to within this (or the run's interval, when shorter).
POLL_PERIOD = 0.25
#: The longest a read during the run may wait (s), for its connect and for its reply.
_POLL_TIMEOUT = 1.0
#: The counters whose change means the server is serving the run's requests.
_TRAFFIC = ("cmd_get", "cmd_set", "cmd_touch", "get_hits", "delete_hits", "delete_misses")


@dataclass
class Reading:
    """What the poll knows of one server: its last ``stats`` that answered and when
    (monotonic seconds), when its traffic counters last moved, and — while it does not
    answer — when it first failed and why."""

    stats: dict[str, str] | None = None
    at: float | None = None
    changed_at: float | None = None
    failed_at: float | None = None
    error: str | None = None
    #: The last read of each server process seen, in order (a restart starts a new one), as
    #: :attr:`cachelab.capacity.EvictionWatch.lives`: what the counters per life come from.
    lives: list[dict[str, str]] = field(default_factory=list)


class Poller:
    """Each of ``addresses`` read (``stats``) every ``period`` seconds from a thread while a
    run goes on — the engine holds no GIL — so that a server that stops answering keeps the
    counts it had: its last good reading stands for its ``after`` (:meth:`amend`).

    Cheap and bounded: one connection per server (opened in :meth:`start`, before the run
    reads its ``before``, so the counts of connections are not changed; reopened only after
    a failure), each read within 1 s (or the run's timeouts, when shorter); :meth:`stop`
    returns within a read's time. ``core`` is the engine's spec dict (timeouts, TLS)."""

    def __init__(self, addresses: Sequence[str], core: Mapping[str, Any],
                 period: float = POLL_PERIOD) -> None:
        self.addresses = list(addresses)
        self.period = max(0.01, min(float(period), float(core.get("interval") or period)))
        self._timeout = min(_POLL_TIMEOUT, float(core["timeout"]))
        self._connect_timeout = min(_POLL_TIMEOUT, float(core["connect_timeout"]))
        self._tls = core.get("tls")
        self.readings = [Reading() for _ in self.addresses]
        self._clients: list[_core.Client | None] = [None] * len(self.addresses)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started: float | None = None

    def start(self) -> Poller:
        """Connect to each server and read it once (here, before the run), then poll from a
        thread; returns self."""
        self.started = time.monotonic()
        self._read_all()
        self._thread = threading.Thread(target=self._loop, name="cachelab-behind-poll",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the polling (within one read's time) and close the connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.period + 2 * (self._timeout + self._connect_timeout))
            self._thread = None
        for i, c in enumerate(self._clients):
            if c is not None:
                with contextlib.suppress(Exception):
                    c.close()
                self._clients[i] = None

    def __enter__(self) -> Poller:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self._read_all()

    def _read_all(self) -> None:
        for i, address in enumerate(self.addresses):
            if self._stop.is_set() and self._thread is not None:
                return
            self._read(i, address)

    def _read(self, i: int, address: str) -> None:
        r = self.readings[i]
        try:
            if self._clients[i] is None:
                self._clients[i] = _core.Client(address, timeout=self._timeout,
                                                connect_timeout=self._connect_timeout,
                                                tls=self._tls)
            stats = dict(self._clients[i].stats())  # type: ignore[union-attr]
        except ServerError as e:
            now = time.monotonic()
            if r.failed_at is None:
                r.failed_at, r.error = now, str(e)
            client, self._clients[i] = self._clients[i], None
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()
            return
        now = time.monotonic()
        if r.stats is None or any(stats.get(k) != r.stats.get(k) for k in _TRAFFIC):
            r.changed_at = now
        r.stats, r.at, r.failed_at, r.error = stats, now, None, None
        if r.lives and not restarted(r.lives[-1], stats):
            r.lives[-1] = stats
        else:
            r.lives.append(stats)

    def lives(self) -> dict[str, list[dict[str, str]]]:
        """Each server's :attr:`Reading.lives`, by address."""
        return {a: list(r.lives) for a, r in zip(self.addresses, self.readings)}

    def amend(self, views: Sequence[dict[str, Any]], origin: float,
              end_s: float) -> None:
        """After the run: each view (the engine's shape, in the order of ``addresses``) whose
        final read found the server gone (``after`` empty) takes the last good reading as its
        ``after`` (from another process when it restarted meanwhile: the counters are then
        split per life with :meth:`lives` as the samples) and gets ``stopped``: ``at_s``
        (when it was first found not answering, else ``end_s``), ``last_answer_s``,
        ``traffic_until_s`` (when its counters last moved), in seconds since ``origin``
        (monotonic: the start of the sending phase), and the ``error``."""
        for view, r in zip(views, self.readings):
            if view.get("after"):
                continue
            usable = r.stats is not None and bool(view.get("before"))
            if usable:
                view["after"] = dict(r.stats or {})

            def since(t: float | None) -> float | None:
                return None if t is None else round(max(0.0, t - origin), 3)

            view["stopped"] = {
                "at_s": since(r.failed_at) if r.failed_at is not None else round(end_s, 3),
                "last_answer_s": since(r.at) if usable else None,
                "traffic_until_s": since(r.changed_at) if usable else None,
                "error": r.error or "it did not answer stats at the end of the run",
            }

