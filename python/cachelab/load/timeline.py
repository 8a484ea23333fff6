"""What happened when in a load run: the verdicts that need the time series, not the totals.

- **Stalls** (from the engine): stretches when requests waited at least ``spec.stall_ms`` —
  slow replies, timeouts, connections down — each with its start, end and what happened in
  it, so a two-second stall is named even when it is a handful of samples in the tail.
- **Dead intervals**: measured intervals with no reply at all. Throughput is reported for the
  live part alone, so a run whose server died half-way does not average the dead half in.
- **Held intervals** (open loop): an interval held the rate when it sent what the schedule
  asked for, give or take the schedule's own randomness. The run held its rate only if every
  measured interval did, and nothing due was left unsent at the end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["RATE_BACKLOG", "interval_held", "liveness", "schedule_verdict", "stall_text"]

#: An open-loop run held its rate when no more than this share of the requests sent (or one
#: request) was still due but unsent at the end.
RATE_BACKLOG = 0.01

Interval = Mapping[str, Any]


def measured(intervals: Sequence[Interval]) -> list[Interval]:
    """The intervals after the warm-up: what the headline covers."""
    return [iv for iv in intervals if not iv.get("warmup")]


def interval_held(iv: Interval, rate: float, connections: int, interval_s: float) -> bool:
    """Whether an open-loop interval sent what its schedule asked for. A Poisson schedule's
    count varies by about its square root, and each connection's phase by one request, so
    the interval may fall short by ``connections + 4·sqrt(expected)``. An interval shorter
    than half the interval length (the run's last) is too short to judge and counts as held.
    """
    if iv["duration_s"] < interval_s / 2:
        return True
    expected = rate * iv["duration_s"]
    return iv["sent"] >= expected - connections - 4 * math.sqrt(expected)


def schedule_verdict(
    schedule: Mapping[str, Any], intervals: Sequence[Interval], *, rate: float,
    connections: int, interval_s: float, sent: int, achieved: float,
) -> dict[str, Any]:
    """The open loop's schedule with ``held``, ``achieved_rate`` and the measured intervals
    (by index) that fell behind it."""
    behind = [iv["index"] for iv in measured(intervals)
              if not interval_held(iv, rate, connections, interval_s)]
    backlog_ok = schedule["backlog_at_end"] <= max(1, RATE_BACKLOG * sent)
    return {**schedule, "achieved_rate": achieved, "intervals_behind": behind,
            "held": bool(backlog_ok and not behind)}


#: The shortest interval without replies counted as dead time, seconds.
MIN_DEAD_S = 0.01


def liveness(intervals: Sequence[Interval]) -> dict[str, Any]:
    """The measured run split into the time the server answered (``live_s``) and the
    intervals with no reply at all (``dead_intervals``, ``dead_s``), with the throughput of
    the live part."""
    ivs = measured(intervals)
    dead = [iv for iv in ivs if iv["replies"] == 0 and iv["duration_s"] >= MIN_DEAD_S]
    dead_s = sum(iv["duration_s"] for iv in dead)
    live_s = sum(iv["duration_s"] for iv in ivs) - dead_s
    replies = sum(iv["replies"] for iv in ivs)
    return {
        "dead_intervals": [iv["index"] for iv in dead],
        "dead_s": round(dead_s, 3),
        "live_s": round(live_s, 3),
        "live_throughput": replies / live_s if live_s > 0 else 0.0,
    }


def stall_text(s: Mapping[str, Any]) -> str:
    """One stall as a line: when, how long, and what happened in it."""
    what = []
    if s.get("down"):
        failed = s.get("connect_failures", 0)
        what.append("connections down" + (f", {failed} connect attempts failed" if failed
                                          else ""))
    if s.get("timeouts"):
        what.append(f"{s['timeouts']} request(s) timed out")
    if s.get("slow_replies"):
        what.append(f"{s['slow_replies']} slow replies (worst {s['worst_ns'] / 1e9:.3g} s)")
    length = s["end_s"] - s["start_s"]
    return (f"{s['start_s']:.2f}–{s['end_s']:.2f} s ({length:.2f} s): "
            + ("; ".join(what) or "requests waited"))
