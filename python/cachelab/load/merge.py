"""Merging the outcomes of several load agents into one outcome of the engine's shape, so that
:func:`cachelab.load.engine.result_from_outcome` turns it into an ordinary ``load.json``.

Nothing is averaged that can be added: counts are summed, histograms (corrected and
uncorrected) are merged from their HdrHistogram encodings (``_core.hist_merge``) per interval,
and every total (the whole run, the measured run, the steady window) is the merge of the merged
intervals. Interval ``i`` of every agent covers the same wall-clock stretch because the agents
start at one common instant (their start skew is reported per agent, docs/scale-out.md).

Choices where there is no sum:

* the steady window starts at the latest of the agents' steady starts, and is reached only if
  every agent reached it;
* the server's counters before the run are the earliest snapshot any agent took (the smallest
  counts), after the run the latest (the largest), so the deltas cover every agent's traffic;
* an agent's stall keeps its agent's number (``agent``) and the stalls are listed by start;
* a pool member's down episodes are every agent's (each marks the member down on its own),
  each with its agent's number (``agent``), listed by start; its key count is any agent's
  (the same key space and distribution for all); its server's counters are chosen as the
  server's are, per member (and per server behind a proxy) — the driver of a run on Ray
  replaces them with its own reads (:mod:`cachelab.load.agents`); a Redis Cluster master's
  ``MOVED`` and ``ASK`` redirections are summed (each agent follows its own);
* a trailing interval that only some agents closed and in which nothing happened is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import cachelab._core as _core
from cachelab.load.spec import OPS

__all__ = ["latency_entry", "merge_latency", "merge_members", "merge_outcomes", "totals_over"]

Outcome = Mapping[str, Any]

#: The percentiles every histogram entry carries (as the engine writes them).
_PERCENTILES = (("50", 50.0), ("90", 90.0), ("99", 99.0), ("99.9", 99.9), ("max", 100.0))

#: The client counters summed over agents.
_CLIENT_SUMS = ("client_cpu_user_s", "client_cpu_system_s", "client_wait_s", "client_sleeps",
                "client_preempted", "client_busy_polls", "client_busy_caught", "client_spins",
                "client_spun_s", "client_writes", "process_cpu_s")


def latency_entry(histogram: str) -> dict[str, Any]:
    """A histogram entry (``count``, ``histogram``, ``percentiles``, ``mean``, ``max``) from an
    encoded histogram, with the engine's percentiles."""
    summary = _core.hist_summary(histogram)
    values = _core.hist_percentiles(histogram, [p for _, p in _PERCENTILES])
    count = int(summary["count"])
    pct = {name: int(v) if count else 0 for (name, _), v in zip(_PERCENTILES, values)}
    mean = float(summary["mean"]) if count else 0.0
    return {"count": count, "histogram": histogram, "percentiles": pct, "mean": mean,
            "max": pct["max"]}


def merge_latency(entries: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The lossless merge of histogram entries (None where none of them exists)."""
    present = [e for e in entries if e]
    if not present:
        return None
    if len(present) == 1:
        return dict(present[0])
    return latency_entry(_core.hist_merge([e["histogram"] for e in present]))


def _sum_dicts(dicts: Sequence[Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + int(v)
    return dict(sorted(out.items()))


def _merge_interval(index: int, parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    duration = max(p["duration_s"] for p in parts)
    ops = {op: sum(int(p["ops"].get(op, 0)) for p in parts) for op in OPS}
    replies = sum(int(p["replies"]) for p in parts)
    return {
        "index": index,
        "start_s": min(p["start_s"] for p in parts),
        "duration_s": duration,
        "warmup": any(p["warmup"] for p in parts),
        "ops": ops,
        "replies": replies,
        "throughput": replies / duration if duration > 0 else 0.0,
        "hits": sum(int(p["hits"]) for p in parts),
        "misses": sum(int(p["misses"]) for p in parts),
        "errors": _sum_dicts([p["errors"] for p in parts]),
        "lost": sum(int(p["lost"]) for p in parts),
        "sent": sum(int(p["sent"]) for p in parts),
        "corrected": merge_latency([p.get("corrected") for p in parts]),
        "uncorrected": merge_latency([p.get("uncorrected") for p in parts]),
    }


def merge_intervals(series: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Interval ``i`` of the merge is interval ``i`` of every agent that has one. A trailing
    sliver that only some agents closed, in which nothing was sent or answered (an agent
    stopping a few ms after the others), is left out: it would read as dead time."""
    longest = max((len(s) for s in series), default=0)
    merged = [_merge_interval(i, [s[i] for s in series if i < len(s)]) for i in range(longest)]
    shortest = min((len(s) for s in series), default=0)
    while len(merged) > max(shortest, 1) and _empty(merged[-1]):
        merged.pop()
    return merged


def _empty(iv: Mapping[str, Any]) -> bool:
    return not (iv["sent"] or iv["replies"] or iv["lost"] or iv["errors"])


def totals_over(intervals: Sequence[Mapping[str, Any]], first: int,
                open_loop: bool) -> dict[str, Any]:
    """The totals of the engine's shape over ``intervals[first:]`` (with empty histograms
    when there are none, as the engine writes them: ``corrected`` in open loop only)."""
    ivs = list(intervals[first:])
    merged = _merge_interval(first, ivs) if ivs else None
    duration = sum(iv["duration_s"] for iv in ivs)
    if merged is None:
        empty = latency_entry(_core.hist_merge([]))
        return {"first_index": first, "intervals": 0, "duration_s": 0.0,
                "ops": dict.fromkeys(OPS, 0), "replies": 0, "throughput": 0.0, "hits": 0,
                "misses": 0, "errors": {}, "lost": 0, "sent": 0,
                "corrected": empty if open_loop else None, "uncorrected": empty}
    merged.pop("index"), merged.pop("start_s"), merged.pop("warmup")
    return {"first_index": first, "intervals": len(ivs), **merged, "duration_s": duration,
            "throughput": merged["replies"] / duration if duration > 0 else 0.0}


def _counter_total(stats: Mapping[str, str]) -> int:
    """A number that only grows while the server runs: to order snapshots in time."""
    return sum(int(stats[k]) for k in ("cmd_get", "cmd_set", "cmd_touch", "delete_hits",
                                       "delete_misses", "total_connections", "bytes_read",
                                       # a Redis's or Valkey's INFO
                                       "total_commands_processed",
                                       "total_connections_received", "total_net_input_bytes")
               if k in stats and str(stats[k]).isdigit())


def _server_view(views: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    with_stats = [v for v in views if v.get("before") and v.get("after")]
    if not with_stats:
        return dict(views[0]) if views else {"version": None, "before": {}, "after": {}}
    first = min(with_stats, key=lambda v: _counter_total(v["before"]))
    last = max(with_stats, key=lambda v: _counter_total(v["after"]))
    return {**first, "after": last["after"], "schedstat_after": last.get("schedstat_after")}


def merge_members(per_agent: Sequence[Sequence[Mapping[str, Any]]],
                  agents: Sequence[int]) -> list[dict[str, Any]]:
    """A pool's members (the engine's ``members``) over agents that each drove the whole
    pool: per member the counts and errors summed, the latency histograms merged, every
    agent's down episodes (with ``agent``, its number in ``agents``), the key count, and the
    server's view (:func:`_server_view`). [] for one server."""
    if not per_agent or not per_agent[0]:
        return []
    merged = []
    for m, first in enumerate(per_agent[0]):
        parts = [members[m] for members in per_agent]
        down = sorted(({**e, "agent": k} for k, p in zip(agents, parts) for e in p["down"]),
                      key=lambda e: (e["start_s"], e["agent"]))
        merged.append({
            "address": first["address"], "weight": first["weight"], "keys": first["keys"],
            **{k: sum(int(p[k]) for p in parts) for k in ("sent", "replies", "hits", "misses")},
            "errors": _sum_dicts([p["errors"] for p in parts]),
            "lost": sum(int(p["lost"]) for p in parts),
            "latency": merge_latency([p["latency"] for p in parts]),
            "down": down,
            "server": _server_view([p["server"] for p in parts]),
            # A Redis Cluster's master: the redirections it answered, every agent's.
            **({k: sum(int(p[k]) for p in parts) for k in ("moved", "ask")}
               if "moved" in first else {}),
        })
    return merged


def merge_outcomes(outcomes: Sequence[Outcome], *, rate: float | None,
                   agents: Sequence[int] | None = None) -> dict[str, Any]:
    """One outcome of ``_core.load_run``'s shape from the agents' outcomes (at least one).

    ``rate`` is the requested total rate of an open loop (None: closed loop); ``agents`` the
    outcomes' agent numbers, as stalls and down episodes name them (default 0, 1, …). The
    run's keys (``prefilled_keys``, ``prefill_s``, ``deleted_keys``, ``leftover_keys``) are
    the sums of the agents'; the caller sets them when it prefilled or cleaned up itself."""
    if not outcomes:
        raise ValueError("no outcomes to merge")
    numbers = list(range(len(outcomes))) if agents is None else list(agents)
    if len(numbers) != len(outcomes):
        raise ValueError("one agent number per outcome")
    intervals = merge_intervals([o["intervals"] for o in outcomes])
    warm = next((i for i, iv in enumerate(intervals) if not iv["warmup"]), len(intervals))
    steady_start = min(max(o["steady"]["start_index"] for o in outcomes), len(intervals))
    open_loop = rate is not None
    window = totals_over(intervals, steady_start, open_loop)
    best = window.get("corrected") or window.get("uncorrected")
    stalls = sorted(({**s, "agent": k} for k, o in zip(numbers, outcomes) for s in o["stalls"]),
                    key=lambda s: (s["start_s"], s["agent"]))
    schedules = [o["schedule"] for o in outcomes if o.get("schedule")]
    aborted = [f"agent {k}: {o['aborted']}" for k, o in zip(numbers, outcomes) if o.get("aborted")]
    behind = [o.get("behind") or [] for o in outcomes]
    merged: dict[str, Any] = {
        "intervals": intervals,
        "steady": {
            "start_index": steady_start,
            "reached": all(o["steady"]["reached"] for o in outcomes),
            "reference_throughput": sum(o["steady"]["reference_throughput"] for o in outcomes),
            "reference_p50_ns": best["percentiles"]["50"] if best else 0,
        },
        "all": totals_over(intervals, 0, open_loop),
        "measured": totals_over(intervals, warm, open_loop),
        "window": window,
        "stalls": stalls,
        "stalls_dropped": sum(int(o["stalls_dropped"]) for o in outcomes),
        "server": _server_view([o["server"] for o in outcomes]),
        "members": merge_members([o.get("members") or [] for o in outcomes], numbers),
        "behind": [_server_view([b[i] for b in behind]) for i in range(len(behind[0]))],
        "schedule": None if rate is None else {
            "target_rate": float(rate),
            "backlog_at_end": sum(int(s["backlog_at_end"]) for s in schedules),
            "skipped_disconnected": sum(int(s["skipped_disconnected"]) for s in schedules),
        },
        "prefilled_keys": sum(int(o["prefilled_keys"]) for o in outcomes),
        "prefill_s": max(float(o["prefill_s"]) for o in outcomes),
        "deleted_keys": sum(int(o["deleted_keys"]) for o in outcomes),
        "leftover_keys": sum(int(o["leftover_keys"]) for o in outcomes),
        "cancelled": any(o["cancelled"] for o in outcomes),
        "aborted": "; ".join(aborted) or None,
        "elapsed_s": max(float(o["elapsed_s"]) for o in outcomes),
    }
    for key in _CLIENT_SUMS:
        merged[key] = sum(o[key] for o in outcomes)
    return merged
