"""The one change that would fix each failed validity check: the ``fixes`` beside a verdict's
``reasons``, shown after an arrow on every INVALID line (``INVALID: … → --threads 2``).

A fix is written from the run's own figures: a lower ``--rate`` from the rate the run did
hold, more ``--threads`` when the client's threads were busy on a CPU, a quiet machine (or the
client on another host) when they mostly *waited* for one — more threads on an oversubscribed
machine only add to the queue.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OVERSUBSCRIBED_WAIT", "RunShape", "fix_for", "with_fixes"]

#: The share of their wall time the client's threads may wait for a CPU (run-queue wait)
#: before the machine, not the client's thread count, is named as what to change.
OVERSUBSCRIBED_WAIT = 0.2


@dataclass(frozen=True)
class RunShape:
    """What a fix is written from: the run's flags and how busy the machine was."""

    threads: int
    connections: int
    rate: float | None
    duration: float | None
    warmup: float
    max_outstanding: int
    send_batch: int = 1
    #: ``--spin-us`` (0: the pacer sleeps to each send's due time).
    spin_us: int = 0
    #: The client threads' run-queue wait over their wall time (None: not measured).
    client_wait: float | None = None
    #: The server's run-queue wait over the wall time per worker thread (summed over its
    #: threads, over its ``threads`` stat: a private server on this machine; None elsewhere).
    server_wait: float | None = None
    #: The CPUs the client's threads may run on (this thread's affinity, which the engine's
    #: threads inherit: fewer than the machine's under ``taskset`` or a pinned ``scale``);
    #: None: the machine's.
    client_cpus: int | None = None

    @classmethod
    def of(cls, spec: Any, client: Mapping[str, Any] | None,
           server: Mapping[str, Any] | None) -> RunShape:
        """From a :class:`~cachelab.load.LoadSpec`, the client check's figures
        (:func:`cachelab.load.probe.client_busy`) and the server's view."""
        wait = None
        if client and client.get("wall_s"):
            wait = float(client["run_queue_wait_s"]) / float(client["wall_s"])
        sched = (server or {}).get("schedstat") or {}
        server_wait = sched.get("wait_per_wall")
        if server_wait is not None:  # per worker (memcached's other threads mostly sleep)
            workers = ((server or {}).get("stats_after") or {}).get("threads")
            server_wait = float(server_wait) / max(1, int(workers or sched.get("threads") or 1))
        return cls(client_cpus=_cpus_of(0), threads=int(spec.threads),
                   connections=int(spec.connections),
                   rate=None if spec.rate is None else float(spec.rate),
                   duration=None if spec.duration is None else float(spec.duration),
                   warmup=float(spec.warmup), max_outstanding=int(spec.max_outstanding),
                   send_batch=int(getattr(spec, "send_batch", 1) or 1),
                   spin_us=int(getattr(spec, "spin_us", 0) or 0), client_wait=wait,
                   server_wait=server_wait)

    def oversubscribed(self) -> str | None:
        """Why the CPUs the client or the server may use were oversubscribed during the run,
        or None."""
        if self.client_wait is not None and self.client_wait >= OVERSUBSCRIBED_WAIT:
            return (f"the client's threads waited for {_cpus_text(self.client_cpus)} "
                    f"{self.client_wait:.0%} of their time")
        if self.server_wait is not None and self.server_wait >= OVERSUBSCRIBED_WAIT:
            return (f"the server's worker threads waited for {_cpus_text(None)} "
                    f"{self.server_wait:.0%} of the run each")
        return None


def _cpus_of(pid: int) -> int | None:
    """How many CPUs process ``pid`` (0: this thread) may run on; None when unknown."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    try:
        return len(os.sched_getaffinity(pid))
    except OSError:  # gone, or not ours to read
        return None


def _cpus_text(cpus: int | None) -> str:
    """"one of the 2 CPUs" (all the machine's), or "their 1 CPU (of 2: pinned)"."""
    total = os.cpu_count() or 1
    if cpus is None or cpus >= total:
        return f"one of the {total} CPUs"
    return f"their {cpus} CPU{'s' if cpus > 1 else ''} (of {total}: pinned)"


def _quiet(busy: str) -> str:
    return (f"quiet the machine ({busy}), or run the client on another host "
            "(`--ray ray://HEAD:10001`)")


def _longer(shape: RunShape, factor: float = 2.0) -> str:
    if shape.duration:
        return f"`--duration {shape.duration * factor:g}`"
    return "a longer run (`--duration`)"


def fix_for(name: str, check: Mapping[str, Any], shape: RunShape) -> str:
    """The one change that would make failed check ``name`` pass, in a few words with the
    flag and its value."""
    busy = shape.oversubscribed()
    if name == "client":
        if busy:
            return _quiet(busy)
        return (f"`--threads {shape.threads * 2}` (or more machines: "
                "`--ray ray://HEAD:10001`)")
    if name == "rate":
        dev = float(check.get("worst_deviation") or 0.0)
        if busy:
            return _quiet(busy)
        if dev < 0 and shape.rate:
            held = shape.rate * (1 + dev)
            return (f"`--rate {max(1.0, 0.9 * held):.0f}` (the run held {held:.0f}/s at worst), "
                    f"or `--threads {shape.threads * 2}`")
        return "a steady machine: intervals ran ahead of the rate after a pause"
    if name == "stationary":
        if busy:  # a stall or a drift: what the other work on the machine did to the run
            return _quiet(busy)
        if check.get("stalls"):
            return ("find what paused the client or server (swap, a noisy neighbour, GC) and "
                    "run again; `--stall-ms` sets what counts as a stall")
        return (f"`--warmup {max(2 * shape.warmup, 5):g}` and {_longer(shape)}: the series "
                "drifted")
    if name == "late":
        client = check.get("client_status")
        if busy:
            return _quiet(busy)
        if client == "fail":
            return f"`--threads {shape.threads * 2}`"
        rate = f"a lower `--rate` (below {shape.rate:.0f})" if shape.rate else "a lower `--rate`"
        return f"`--max-outstanding {shape.max_outstanding * 2}` or {rate}"
    if name == "independent":
        if busy:
            return _quiet(busy)
        return (f"fewer requests in flight (`--connections {max(1, shape.connections // 2)}`"
                + (" or a lower `--rate`" if shape.rate else "") + "): replies queue behind "
                "each other")
    if name == "arrivals":
        if int(check.get("zero_gaps") or 0) and shape.send_batch > 1:
            return "`--send-batch 1`"
        if busy:
            return _quiet(busy)
        if shape.spin_us == 0 and shape.rate:
            # a thread woken by its timer sends what fell due meanwhile back to back
            return ("`--spin-us 300` (sends written at their due time; it costs CPU: give the "
                    "client a core of its own)")
        return f"`--threads {shape.threads * 2}` or a lower `--rate`"
    return "run again on a quiet machine"


def with_fixes(verdict: dict[str, Any] | None, shape: RunShape) -> dict[str, Any] | None:
    """``verdict`` with ``fixes`` (one per reason, in order) and each failed check's
    ``fix``."""
    if verdict is None:
        return None
    checks = verdict.get("checks") or {}
    fixes = []
    for name in verdict.get("failed") or []:
        check = checks[name]
        check["fix"] = fix_for(name, {**check, "client_status": (checks.get("client") or {})
                                      .get("status")}, shape)
        fixes.append(check["fix"])
    verdict["fixes"] = fixes
    return verdict
