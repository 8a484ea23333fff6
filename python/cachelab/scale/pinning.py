"""Where a sweep's private memcached and its load client run: on a machine with few CPUs
(:data:`PIN_MAX_CPUS` or fewer usable by this process) ``scale`` pins the private server to
the first CPUs of this process's set and the client (this process: the load engine's threads
inherit its affinity when they are created) to the rest, for the sweep only, so the two stop
taking each other's cores and a client that saturates does so on a core of its own.

:func:`plan` decides the layout (recorded in ``scale.json``'s ``server.cpus``),
:func:`pinned_client` pins this process's threads for the sweep and restores each one's
previous affinity after it (also on an error or Ctrl-C), :func:`layout_text` says it in words.
A server cachelab did not start is never pinned.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["PIN_MAX_CPUS", "cpu_list", "layout_text", "pinned_client", "plan"]

#: Pin the server and the client apart when this process may use at most this many CPUs
#: (with more, each has room without it).
PIN_MAX_CPUS = 4


def usable_cpus() -> list[int]:
    """The CPUs this process may run on, in order."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def plan(*, pin: bool, private: bool, ray: bool, server_threads: int,
         cpus: Sequence[int] | None = None) -> dict[str, Any]:
    """The sweep's CPU layout: ``{"pinned": True, "server": [0], "client": [1], "usable": 2}``,
    or ``{"pinned": False, "usable": n, "reason": "..."}`` saying why not.

    The server gets ``min(usable // 2, server_threads)`` CPUs (at least one; its worker
    threads — ``--server-threads``, or N with ``--vary server-threads`` — time-share them
    when there are more threads than CPUs), the lowest of the set; the client the rest, so
    with 3 CPUs it gets 2, with ``--server-threads 1`` on 4 it gets 3."""
    have = list(cpus) if cpus is not None else usable_cpus()
    out: dict[str, Any] = {"pinned": False, "usable": len(have)}

    def why(reason: str) -> dict[str, Any]:
        return {**out, "reason": reason}

    if not private:
        return why("a server cachelab did not start is never pinned")
    if ray:
        return why("the load agents are Ray actors: not pinned")
    if not pin:
        return why("--no-pin")
    if len(have) < 2:
        return why(f"{len(have)} CPU, shared by the client and the server")
    if len(have) > PIN_MAX_CPUS:
        return why(f"{len(have)} CPUs (pinned only on {PIN_MAX_CPUS} or fewer)")
    if not hasattr(os, "sched_setaffinity"):
        return why("this platform cannot pin threads")
    k = max(1, min(len(have) // 2, server_threads))
    return {"pinned": True, "server": have[:k], "client": have[k:], "usable": len(have)}


def cpu_list(cpus: Sequence[int]) -> str:
    """A CPU set as taskset and /proc write it: ``0``, ``1-3``, ``0,2``."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(_span(run))
        run = [c]
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def _cpus_word(cpus: Sequence[int]) -> str:
    return ("CPU " if len(cpus) == 1 else "CPUs ") + cpu_list(cpus)


def layout_text(layout: Mapping[str, Any] | None) -> str | None:
    """The layout in words: "server on CPU 0, client on CPU 1" or "not pinned: --no-pin";
    None for a sweep saved before layouts were recorded."""
    if not layout:
        return None
    if layout.get("pinned"):
        if not layout.get("server") or not layout.get("client"):
            return "pinned (the CPU sets not recorded)"
        return (f"server on {_cpus_word(layout['server'])}, "
                f"client on {_cpus_word(layout['client'])}")
    return f"not pinned: {layout.get('reason') or 'no reason recorded'}"


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: the calling thread alone (it starts the engine's threads)
        return [0]


@contextlib.contextmanager
def pinned_client(layout: Mapping[str, Any]) -> Iterator[None]:
    """Every thread of this process on the layout's client CPUs while the block lasts (the
    load engine's threads, started inside it, inherit that); then each thread back on the
    CPUs it had (one started inside the block: those this thread had), also on an error or
    Ctrl-C. Nothing when the layout is not pinned."""
    if not layout.get("pinned"):
        yield
        return
    before = os.sched_getaffinity(0)
    kept: dict[int, set[int]] = {}
    for tid in _threads():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            kept[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, layout["client"])
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
        for tid in _threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, kept.get(tid, before))
