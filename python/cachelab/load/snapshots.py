"""Servers' ``stats`` before and after a run, read by this process: what the load engine reads
for itself in a local run (``crates/load/src/server.rs``), for a run whose traffic comes from
elsewhere — the agents of ``load --ray`` on a pool or through a proxy, where the driver reads
each member (or each server behind the proxy) once instead of once per agent.

A view has the engine's shape (``version``, ``before``, ``after``, ``pid``,
``schedstat_before``, ``schedstat_after``), so :func:`cachelab.load.result_from_outcome` turns
it into a member's ``server`` section as it does the engine's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cachelab.servers import STATS_TIMEOUT, on_this_machine, stats_or_none

__all__ = ["Snapshots", "schedstat"]


class Snapshots:
    """The views of ``addresses`` (in order), each read with the run's connect timeout,
    request timeout and TLS (``core`` is the engine's spec dict)."""

    def __init__(self, addresses: Sequence[str], core: Mapping[str, Any]) -> None:
        self.addresses = list(addresses)
        self.core = core
        self.views: list[dict[str, Any]] = [
            {"version": None, "before": {}, "after": {}, "pid": None,
             "schedstat_before": None, "schedstat_after": None} for _ in self.addresses]

    def _stats(self, address: str) -> dict[str, str] | None:
        c = self.core
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
            view.update(version=stats.get("version"), before=stats, pid=pid,
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


def _local_pid(address: str, stats: Mapping[str, str]) -> int | None:
    """The pid of a memcached on this machine whose schedstat can be read (the engine's
    rule: a loopback or Unix-socket address, and a process named memcached), else None."""
    if not on_this_machine(address):
        return None
    pid = str(stats.get("pid", ""))
    if not pid.isdigit():
        return None
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    return int(pid) if comm == "memcached" else None
