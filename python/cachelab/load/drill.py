"""Failure drills (docs/pools.md, "Failure drills"): a membership change driven mid-run —
``--add MEMBER@T`` and ``--remove MEMBER@T`` (the client's member list: the engine switches
to the pool's distribution over the new members at T), ``--fail MEMBER@T[:stop|kill|
restart][:S]`` (a member of the private pool stopped, killed or restarted for real) — and what
the run saw around each event: hit ratio and latency per interval, the miss storm and its
recovery.

A MEMBER is its 1-based position in the pool (``2``) or its ``host:port``; ``--add`` takes a
``host:port[:weight]`` not in the pool, or ``new`` with ``--private-pool`` (one more private
server, started with the pool, joining at T). Times are seconds from the start of sending (the
time series' clock, warm-up included).
"""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cachelab.errors import UsageError
from cachelab.pool import parse_server

__all__ = ["ACTIONS", "Event", "FailPlan", "changes_of", "dip", "drill_headline", "drill_lines",
           "drill_summary", "parse_event"]

#: What ``--fail`` does to a member of the private pool: SIGSTOP (SIGCONT after S seconds,
#: or at the end), SIGKILL (it stays dead), or SIGKILL and a new memcached on the same port
#: (after S seconds, default at once: it comes back empty).
ACTIONS = ("stop", "kill", "restart")

#: Intervals shown before each event in the table.
BEFORE = 2


@dataclass(frozen=True)
class Event:
    """One drill event: ``kind`` (add, remove, fail), the member as given, when (seconds from
    the start of sending), and for a failure its action and how long it lasts (None: to the
    end for stop; at once for restart)."""

    kind: str
    member: str
    at_s: float
    action: str | None = None
    hold_s: float | None = None

    @property
    def text(self) -> str:
        tail = f":{self.action}" if self.action else ""
        tail += f":{self.hold_s:g}" if self.hold_s is not None else ""
        return f"--{self.kind} {self.member}@{self.at_s:g}{tail}"


def parse_event(kind: str, text: str) -> Event:
    """``MEMBER@T`` (``--add``, ``--remove``) or ``MEMBER@T[:ACTION[:S]]`` (``--fail``);
    UsageError naming the flag and the text."""
    flag = f"--{kind} {text!r}"
    member, sep, when = str(text).rpartition("@")
    if not sep or not member:
        raise UsageError(f"{flag}: expected MEMBER@SECONDS, e.g. 2@5"
                         + (" or 2@5:stop:2" if kind == "fail" else ""))
    parts = when.split(":")
    if kind != "fail" and len(parts) > 1:
        raise UsageError(f"{flag}: expected MEMBER@SECONDS (an action is for --fail)")
    at = _seconds(parts[0], flag)
    if at <= 0:
        raise UsageError(f"{flag}: the time must be above 0 s")
    action = hold = None
    if kind == "fail":
        action = parts[1] if len(parts) > 1 else "stop"
        if action not in ACTIONS:
            raise UsageError(f"{flag}: the action is one of {', '.join(ACTIONS)}, not {action!r}")
        if len(parts) > 2:
            if action == "kill":
                raise UsageError(f"{flag}: kill lasts to the end (restart:S comes back after S)")
            hold = _seconds(parts[2], flag)
        if len(parts) > 3:
            raise UsageError(f"{flag}: expected MEMBER@SECONDS[:ACTION[:SECONDS]]")
    return Event(kind, member, at, action, hold)


def _seconds(text: str, flag: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a number of seconds") from None
    if not math.isfinite(v) or v < 0 or v > 3600:
        raise UsageError(f"{flag}: {text!r} must be from 0 to 3600 seconds")
    return v


def resolve(member: str, pool: Sequence[tuple[str, int]], flag: str) -> int:
    """The index in ``pool`` (``(address, weight)`` pairs) of a member given by 1-based
    position or ``host:port``; UsageError if it is not in the pool."""
    if member.isdigit():
        n = int(member)
        if not 1 <= n <= len(pool):
            raise UsageError(f"{flag}: the pool has members 1 to {len(pool)}, not {n}")
        return n - 1
    address = parse_server(member).address
    for i, (a, _) in enumerate(pool):
        if a == address:
            return i
    raise UsageError(f"{flag}: {member} is not a member of the pool "
                     f"({', '.join(a for a, _ in pool)})")


def changes_of(events: Sequence[Event], pool: list[tuple[str, int]],
               spares: Sequence[str] = ()) -> list[tuple[float, int, str]]:
    """The engine's membership changes ``(at_s, member index, "add"|"remove")`` for the
    ``--add``/``--remove`` events; ``pool`` (the initial members) is extended in place with
    each member added (``new`` takes the next of ``spares``, the private pool's spare
    servers). UsageError for a member added twice or removed that is not in the pool."""
    out: list[tuple[float, int, str]] = []
    spare = iter(spares)
    for e in sorted((e for e in events if e.kind in ("add", "remove")), key=lambda e: e.at_s):
        flag = f"--{e.kind} {e.member}@{e.at_s:g}"
        if e.kind == "remove":
            out.append((e.at_s, resolve(e.member, pool, flag), "remove"))
            continue
        if e.member == "new":
            address = next(spare, None)
            if address is None:
                raise UsageError(f"{flag}: 'new' adds a spare server of the private pool: "
                                 "give --private-pool N")
            server = parse_server(address)
        else:
            server = parse_server(e.member)
        known = [i for i, (a, _) in enumerate(pool) if a == server.address]
        if known:
            out.append((e.at_s, known[0], "add"))  # re-added after a removal
        else:
            pool.append((server.address, server.weight))
            out.append((e.at_s, len(pool) - 1, "add"))
    return out


class FailPlan:
    """The ``--fail`` events of a run on its private pool, done when the run's clock (the
    engine's progress, ms since the start of sending) reaches each: SIGSTOP/SIGCONT, SIGKILL,
    or a restart on the same port. Only servers this run started are ever signalled: the
    plan holds their process objects, never a pid it was given. :meth:`finish` (always
    called) resumes a stopped server. ``done`` lists what was done and when."""

    def __init__(self, events: Sequence[Event], servers: Sequence[Any],
                 pool: Sequence[tuple[str, int]]) -> None:
        self._todo: list[tuple[float, str, Event, Any]] = []
        for e in events:
            if e.kind != "fail":
                continue
            address = pool[resolve(e.member, pool, e.text)][0]
            mine = [mc for mc in servers if mc.address == address]
            if not mine:
                raise UsageError(f"{e.text}: {address} is not a server this run started; "
                                 "--fail only touches the private pool's")
            self._todo.append((e.at_s, "start", e, mine[0]))
        self._todo.sort(key=lambda t: t[0])
        self._stopped: list[Any] = []
        self._killed: list[Any] = []
        self._ended = False
        self.done: list[dict[str, Any]] = []

    def poll(self, elapsed_s: float) -> None:
        """Does every step due by ``elapsed_s``."""
        while self._todo and self._todo[0][0] <= elapsed_s:
            at, step, e, mc = self._todo.pop(0)
            self._do(step, e, mc, at, elapsed_s)

    def _do(self, step: str, e: Event, mc: Any, planned_s: float, now_s: float) -> None:
        record = {"member": mc.address, "action": e.action if step == "start" else step,
                  "planned_s": planned_s, "done_s": round(now_s, 3)}
        if step == "start" and e.action == "stop":
            os.kill(mc.pid, signal.SIGSTOP)
            self._stopped.append(mc)
            if e.hold_s is not None:
                self._push(e.at_s + e.hold_s, "cont", e, mc)
        elif step == "cont":
            self._resume(mc)
        elif step == "start":  # kill or restart
            mc.kill()
            self._killed.append(mc)
            if e.action == "restart":
                self._push(e.at_s + (e.hold_s or 0.0), "restart", e, mc)
        elif step == "restart" and mc in self._killed:
            self._killed.remove(mc)
            mc.restart()
        self.done.append(record)

    def _push(self, at: float, step: str, e: Event, mc: Any) -> None:
        self._todo.append((at, step, e, mc))
        self._todo.sort(key=lambda t: t[0])

    def _resume(self, mc: Any) -> None:
        if mc in self._stopped:
            self._stopped.remove(mc)
            if mc.running:
                os.kill(mc.pid, signal.SIGCONT)

    def sending_ended(self, elapsed_s: float) -> None:
        """Sending is over: a member still killed is started again, empty, so that the
        clean-up finds its keys gone (they died with it) instead of waiting it out; a stopped
        one is continued. Steps still planned are dropped."""
        if self._ended:
            return
        self._ended = True
        self._todo.clear()
        for mc in list(self._stopped):
            self._resume(mc)
            self.done.append({"member": mc.address, "action": "cont", "planned_s": None,
                              "done_s": round(elapsed_s, 3)})
        for mc in list(self._killed):
            self._killed.remove(mc)
            mc.restart()
            self.done.append({"member": mc.address, "action": "restart", "planned_s": None,
                              "done_s": round(elapsed_s, 3)})

    def finish(self) -> None:
        """Resumes every server still stopped (also after an error or Ctrl-C)."""
        for mc in list(self._stopped):
            self._resume(mc)


def drill_summary(events: Sequence[Event], done: Sequence[Mapping[str, Any]],
                  intervals: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``drill`` in load.json: the events as given, what was done to the private pool and
    when, and per interval the gets' hit ratio (hits / keys asked, over the gets and
    multi-gets answered), the replies per second (a closed loop's connections held up by a
    member that stopped answering show here), the requests that failed, and the p99
    (corrected in open loop)."""
    rows = []
    for iv in intervals:
        keys = iv["hits"] + iv["misses"]
        best = iv.get("corrected") or iv["uncorrected"]
        rows.append({"index": iv["index"], "start_s": iv["start_s"],
                     "hit_ratio": round(iv["hits"] / keys, 5) if keys else None,
                     "throughput": round(iv["throughput"], 1),
                     "errors": sum(iv["errors"].values()), "lost": iv["lost"],
                     "p99_ns": best["percentiles"]["99"]})
    return {"events": [{"kind": e.kind, "member": e.member, "at_s": e.at_s,
                        "action": e.action, "hold_s": e.hold_s} for e in events],
            "done": list(done), "intervals": rows}


def drill_lines(drill: Mapping[str, Any] | None, interval_s: float,
                us: Callable[[float], str]) -> list[str]:
    """The table's drill section: each event, then the intervals from :data:`BEFORE` before
    the first event to the end: hit ratio, errors and p99 per interval."""
    if not drill or not drill.get("events"):
        return []
    events = sorted(drill["events"], key=lambda e: e["at_s"])
    lines = ["", "failure drill: " + "; ".join(
        f"{e['kind']} {e['member']} at {e['at_s']:g} s"
        + (f" ({e['action']}" + (f" for {e['hold_s']:g} s" if e["hold_s"] else "") + ")"
           if e["action"] else "") for e in events)]
    for d in drill.get("done") or []:
        lines.append(f"  {d['action']} {d['member']} at {d['done_s']:.2f} s "
                     + (f"(planned {d['planned_s']:g} s)" if d["planned_s"] is not None
                        else "(sending over: for the clean-up)"))
    first = events[0]["at_s"]
    rows = [r for r in drill["intervals"]
            if r["start_s"] + interval_s > first - BEFORE * interval_s]
    lines.append(f"  {'from s':>7} {'hit ratio':>10} {'replies/s':>10} {'errors':>8} "
                 f"{'p99 µs':>10}")
    for r in rows:
        mark = "".join(" <- " + e["kind"] + " " + e["member"] for e in events
                       if r["start_s"] <= e["at_s"] < r["start_s"] + interval_s)
        hr = "-" if r["hit_ratio"] is None else f"{r['hit_ratio']:.1%}"
        lines.append(f"  {r['start_s']:>7.1f} {hr:>10} {r.get('throughput', 0):>10.0f} "
                     f"{r['errors']:>8} "
                     f"{us(r['p99_ns']):>10}{mark}")
    return lines


def dip(rows: Sequence[Mapping[str, Any]], at_s: float, interval_s: float,
        after: int = 3) -> dict[str, Any] | None:
    """The hit-ratio dip around an event at ``at_s`` in per-interval ``rows`` (``start_s``,
    ``hit_ratio``): the ratio of the last whole interval before it, the lowest of the first
    ``after`` intervals from the one it falls in, and their difference (points, 0-100)."""
    before = [r for r in rows if r["start_s"] + interval_s <= at_s + 1e-9
              and r["hit_ratio"] is not None]
    during = [r for r in rows if r["start_s"] + interval_s > at_s
              and r["hit_ratio"] is not None][:after]
    if not before or not during:
        return None
    low = min(during, key=lambda r: r["hit_ratio"])
    return {"before": before[-1]["hit_ratio"], "lowest": low["hit_ratio"],
            "lowest_at_s": low["start_s"],
            "points": round(100 * (before[-1]["hit_ratio"] - low["hit_ratio"]), 2)}


def drill_headline(drill: Mapping[str, Any] | None) -> list[str]:
    """One line per event for the top of the table: the hit ratio before it, the lowest just
    after (the miss storm), and the errors in those intervals."""
    if not drill or not drill.get("events"):
        return []
    rows = drill["intervals"]
    iv = (rows[1]["start_s"] - rows[0]["start_s"]) if len(rows) > 1 else 1.0
    lines = []
    for e in sorted(drill["events"], key=lambda e: e["at_s"]):
        d = dip(rows, e["at_s"], iv)
        what = f"DRILL {e['kind']} {e['member']} at {e['at_s']:g} s"
        if e["action"]:
            what += f" ({e['action']})"
        if d is None:
            lines.append(f"{what}: no gets answered around it to measure a hit ratio")
            continue
        errors = sum(r["errors"] for r in rows
                     if e["at_s"] - iv < r["start_s"] < e["at_s"] + 3 * iv)
        lines.append(f"{what}: hit ratio {d['before']:.1%} before, {d['lowest']:.1%} at its "
                     f"lowest (from {d['lowest_at_s']:.1f} s), a dip of {d['points']:.1f} "
                     f"points; {errors} requests failed in its first {3 * iv:g} s "
                     "(per interval below)")
    return lines
