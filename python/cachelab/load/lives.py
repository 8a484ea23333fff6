"""A server's counters over a run, process by process: a memcached stopped and started again on
the same address during a run is a new process whose counters start from zero, so its
``stats`` after the run must never be subtracted from the old process's ``stats`` before it
(``get_hits +-313184 … CPU -3.19 s``).

:func:`server_side` splits the reads of one server — ``stats`` before the measured phase,
any read during it (the eviction watch's, on a server cachelab did not start) and ``stats``
after — into *lives* (:func:`cachelab.servers.restarted`: another pid, an uptime that went
down, a start time that moved) and counts each life on its own: the first from ``before`` to
its last read, a later one from its start (its counters as they are) to its last read. The
run's deltas are the sum over the lives whose counters are known; ``restart`` says what
happened and which lives are counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cachelab.servers import restarted, started_unix

__all__ = ["DELTA_STATS", "counter_deltas", "merged_reads", "restart_text", "server_side"]

#: ``stats`` fields whose change over the run is reported; for Redis and Valkey, ``INFO``'s
#: (commands processed, keyspace hits and misses, evicted keys, connections, bytes).
DELTA_STATS = ("get_hits", "get_misses", "cmd_get", "cmd_set", "delete_hits", "delete_misses",
               "evictions", "total_connections", "bytes_read", "bytes_written",
               "total_commands_processed", "keyspace_hits", "keyspace_misses", "evicted_keys",
               "total_connections_received", "total_net_input_bytes", "total_net_output_bytes")
#: Gauges: shown as they were before and after, never subtracted.
_GAUGES = ("curr_connections", "curr_items", "connected_clients")
#: CPU seconds: memcached's ``rusage_*``, Redis's ``used_cpu_*``.
_RUSAGE = ("rusage_user", "rusage_system", "used_cpu_user", "used_cpu_sys")


def counter_deltas(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, Any]:
    """Counters' changes and CPU seconds used (rusage) between two reads of ONE process (an
    empty ``before`` counts from the process's start), never below 0; the gauges
    (connections, items) before and after."""
    out: dict[str, Any] = {}
    for k in DELTA_STATS:
        if k in after and (k in before or not before):
            out[k] = max(0, int(after[k]) - int(before.get(k, 0)))
    for k in _RUSAGE:
        if k in after and (k in before or not before):
            out[f"{k}_s"] = round(max(0.0, float(after[k]) - float(before.get(k, 0))), 6)
    for k in _GAUGES:
        if k in before and k in after:
            out[k] = {"before": int(before[k]), "after": int(after[k])}
    return out


def merged_reads(*sources: Mapping[str, Sequence[Mapping[str, str]]]
                 ) -> dict[str, list[Mapping[str, str]]]:
    """The ``stats`` reads of each address from several watchers (the eviction watch, the
    poll of the servers behind a proxy) as one list per address in the order they were
    taken: by the process's start time, then its uptime (the ``samples`` of
    :func:`server_side`)."""
    out: dict[str, list[Mapping[str, str]]] = {}
    for source in sources:
        for address, reads in source.items():
            out.setdefault(address, []).extend(reads)
    for reads in out.values():
        reads.sort(key=lambda s: (started_unix(s) or 0.0, _uptime(s)))
    return out


def server_side(before: Mapping[str, str], after: Mapping[str, str],
                samples: Sequence[Mapping[str, str]] = ()) -> tuple[dict[str, Any],
                                                                     dict[str, Any] | None]:
    """A server's deltas over the measured phase and, when it restarted, what happened
    (None when one process served the whole run). ``before`` and ``after`` are its ``stats``
    around the phase; ``samples`` any read in between, in order (reads outside the phase are
    ignored). Either read missing: no deltas.

    ``restart``: ``restarts`` (how many), ``pids`` (each life's), ``at_s`` (when the first
    new process started, seconds after ``before``, to a second or two), ``lives`` (each
    one's ``pid``, ``from_s`` — None for the first, which began before the run —, ``to_s``
    (its last read) and ``deltas``, None when unknown) and ``counted``: ``"per life"`` (every
    life's counters known and summed in the deltas), ``"the new life only"`` (the first
    life's counters after ``before`` were never read: the deltas are the last life's), or
    ``"some lives"``."""
    if not before or not after:
        return {}, None
    t0 = _time(before)
    t1 = _time(after)
    reads = [dict(s) for s in samples if s and t0 is not None and t1 is not None
             and _time(s) is not None and t0 <= _time(s) <= t1]  # type: ignore[operator]
    lives: list[list[Mapping[str, str]]] = [[before]]
    for s in [*reads, after]:
        if restarted(lives[-1][-1], s):
            lives.append([s])
        else:
            lives[-1].append(s)
    if len(lives) == 1:
        return counter_deltas(before, after), None
    # the last read of each life; the final life ends with ``after`` (the engine's read)
    counted: list[dict[str, Any] | None] = []
    described = []
    for i, life in enumerate(lives):
        last = after if i == len(lives) - 1 else life[-1]
        start = started_unix(life[0])
        if i == 0:
            deltas = counter_deltas(before, last) if last is not before else None
        elif start is not None and t0 is not None and start < t0 - 2:
            deltas = None  # started before the run: its counters are not the run's
        else:
            deltas = counter_deltas({}, last)
        counted.append(deltas)
        described.append({
            "pid": _pid(life[0]),
            "from_s": None if i == 0 else _rel(start, t0),
            "to_s": _rel(_time(last), t0) if last is not before else 0.0,
            "deltas": deltas,
        })
    known = [d for d in counted if d is not None]
    total = _summed(known)
    for k in _GAUGES:
        if k in before and k in after:
            total[k] = {"before": int(before[k]), "after": int(after[k])}
    if len(known) == len(lives):
        how = "per life"
    elif known and known[-1] is counted[-1] and len(known) == 1:
        how = "the new life only"
    elif known:
        how = "some lives"
    else:
        how = "none"
    return total, {
        "restarts": len(lives) - 1,
        "pids": [d["pid"] for d in described],
        "at_s": described[1]["from_s"],
        "lives": described,
        "counted": how,
    }


def restart_text(where: str, restart: Mapping[str, Any]) -> str:
    """The headline's line for a server that restarted during the run."""
    at = restart.get("at_s")
    when = f"about {at:.0f} s into the run" if at is not None else "during the run"
    times = "" if restart["restarts"] == 1 else f" ({restart['restarts']} times)"
    pids = " -> ".join(str(p or "?") for p in restart["pids"])
    counted = {
        "per life": "its counters are shown per life (summed below; each in load.json)",
        "the new life only": "only the new life's counters are known (the old process's "
                             "after the start were never read): the server line counts "
                             "the new life only",
        "some lives": "the counters of some of its lives are unknown: the server line "
                      "counts the others",
        "none": "no life's counters are known: the server line is left out",
    }[restart["counted"]]
    return (f"SERVER RESTARTED: {where} restarted {when}{times} (pid {pids}); the stats "
            f"before and after come from different processes, so {counted}")


def _summed(deltas: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d in deltas:
        for k, v in d.items():
            if not isinstance(v, dict):
                out[k] = round(out.get(k, 0) + v, 6)
    return out


def _uptime(stats: Mapping[str, str]) -> int:
    try:
        return int(stats["uptime"])
    except (KeyError, ValueError):
        return -1


def _time(stats: Mapping[str, str]) -> float | None:
    try:
        return float(stats["time"])
    except (KeyError, ValueError):
        return None


def _pid(stats: Mapping[str, str]) -> int | None:
    pid = str(stats.get("pid", ""))
    return int(pid) if pid.isdigit() else None


def _rel(t: float | None, t0: float | None) -> float | None:
    return None if t is None or t0 is None else round(max(0.0, t - t0), 1)
