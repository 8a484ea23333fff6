"""The latency probe (``load --probe-rate R``) and how busy the load client was.

The probe is one more connection, on its own client thread, that sends the run's mix over the
run's keys at a low open-loop Poisson rate beside the load connections — mutilate's master
agent, Lancet's latency agent. Its latencies (from each request's intended send time) are kept
in their own histogram: a load client whose threads are busy adds its own queueing to every
latency it measures, the probe's thread has almost nothing to do. Its requests are the run's:
the server counts them, its errors are the run's errors, the keys it sets are deleted with the
others.

The headline never takes the probe's figures in place of the load connections': both are
shown, the load connections' first (docs/load.md, "Latency probe and client saturation").
:func:`probe_result` builds load.json's ``probe`` section from the engine's record;
:func:`client_busy` is the load threads' busy share that the validity verdict's ``client``
check judges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachelab.answers import ratio_bounds, ratio_text, spans_one
from cachelab.load.precision import with_intervals
from cachelab.load.validity import headline, validity
from cachelab.units import dur, us

__all__ = ["client_busy", "p99_ratio", "probe_errors", "probe_finding", "probe_lines",
           "probe_result"]


def client_busy(cpu_s: float, wait_s: float, elapsed_s: float,
                threads: int) -> dict[str, Any] | None:
    """Client threads over the sending phase: their CPU and run-queue wait (seconds), the
    wall time of ``threads`` threads over ``elapsed_s``, and ``share``, the part of it they
    were busy (on a CPU or waiting for one). None without a wall time."""
    if elapsed_s <= 0 or threads <= 0:
        return None
    return {"cpu_s": round(cpu_s, 6), "run_queue_wait_s": round(wait_s, 6), "threads": threads,
            "wall_s": round(elapsed_s * threads, 6),
            "share": round((cpu_s + wait_s) / (elapsed_s * threads), 4)}


def probe_result(probe: Mapping[str, Any] | None, *, interval_s: float, warmup_s: float,
                 late_threshold_ns: int) -> dict[str, Any] | None:
    """load.json's ``probe`` from the engine's ``probe`` record (None without a probe): its
    rate, its totals over the measured run (``totals``, with the percentiles' intervals) and
    over every interval (``all``), its thread's CPU and queueing, what it left unsent, and
    its own validity verdict (an open loop with Poisson arrivals of its own)."""
    if not probe:
        return None
    cpu = probe["cpu_user_s"] + probe["cpu_system_s"]
    verdict = validity(
        mode="open", arrivals="poisson", rate=float(probe["rate"]), interval_s=interval_s,
        intervals=probe["intervals"], samples=probe.get("samples"),
        lateness=probe.get("send_lateness"), late_sends=int(probe.get("late_sends") or 0),
        late_threshold_ns=late_threshold_ns, warmup_s=warmup_s,
        client=client_busy(cpu, probe["wait_s"], probe["elapsed_s"], 1))
    totals = probe["measured"]
    with_intervals(totals, verdict["checks"]["independent"])
    lateness = probe["send_lateness"]
    return {
        "rate": probe["rate"],
        "connections": 1,
        "totals": totals,
        "all": probe["all"],
        "client": {
            "cpu_s": round(cpu, 6),
            "run_queue_wait_s": round(probe["wait_s"], 6),
            "queueing": {"sends": lateness["count"], "p50_ns": lateness["percentiles"]["50"],
                         "p99_ns": lateness["percentiles"]["99"], "max_ns": lateness["max"],
                         "late_sends": int(probe.get("late_sends") or 0),
                         "late_threshold_ns": late_threshold_ns},
        },
        "backlog_at_end": probe["backlog_at_end"],
        "skipped_disconnected": probe["skipped_disconnected"],
        "stalls": probe["stalls"],
        "aborted": probe["aborted"],
        "elapsed_s": round(probe["elapsed_s"], 3),
        "validity": verdict,
    }


def probe_errors(probe: Mapping[str, Any] | None) -> tuple[int, int]:
    """The probe's errors and requests lost in flight over the whole run (0, 0 without)."""
    if not probe:
        return 0, 0
    return sum(probe["all"]["errors"].values()), int(probe["all"]["lost"])


def _row(label: str, h: Mapping[str, Any]) -> str:
    """One latency row: µs with the load rows' columns, "n/a (k)" where too few samples lie
    beyond a percentile."""
    p = h["percentiles"]
    ivs = h.get("intervals") or {}
    ranges, tail = ivs.get("ranges") or {}, ivs.get("tail") or {}
    return f"{label:14}" + "".join(
        f"{f'n/a ({tail[k]})' if k in ranges and ranges[k] is None else us(p[k]):>10}"
        for k in ("50", "90", "99", "99.9", "max"))


def _p99(h: Mapping[str, Any] | None) -> int | None:
    """A histogram entry's p99, or None when it is "n/a" (too few samples beyond it) or
    there are no latencies. (An interval withheld because the latencies are not
    independent leaves the estimate standing.)"""
    if not h or not h.get("count"):
        return None
    ranges = (h.get("intervals") or {}).get("ranges")
    return h["percentiles"]["99"] if ranges is None or ranges.get("99") else None


def p99_ratio(probe: Mapping[str, Any] | None, load: Mapping[str, Any],
              open_loop: bool) -> float | None:
    """The load connections' p99 over the probe's, like for like (open loop: both from the
    intended send time; closed loop: both from the send); None when either is "n/a"."""
    if not probe:
        return None
    t = probe["totals"]
    mine = _p99(load.get("corrected") if open_loop else load.get("uncorrected"))
    theirs = _p99(t["corrected"] if open_loop else t["uncorrected"])
    return mine / theirs if mine and theirs else None


def probe_finding(probe: Mapping[str, Any], load: Mapping[str, Any], open_loop: bool) -> str:
    """The report's finding on the probe: its p50 and p99, and the load connections' p99 as a
    multiple of it, like for like, with the ratio's ≥ 90 % interval from both p99s' 95 %
    intervals (:func:`~cachelab.answers.ratio_bounds`) — left out when that interval holds 1
    (the two cannot be told apart), "no interval" when the intervals were withheld."""
    which = "corrected" if open_loop else "uncorrected"
    t, mine = probe["totals"][which], load[which]
    text = (f"The latency probe (1 connection at {probe['rate']:g}/s on its own thread) saw "
            f"p50 {dur(t['percentiles']['50'])}")
    ratio = p99_ratio(probe, load, open_loop)
    if ratio is None:
        return text + ("; too few of its samples lie beyond the p99 to compare it with the load "
                       "connections'.")
    a, b = mine["percentiles"]["99"], t["percentiles"]["99"]

    def iv(h: Mapping[str, Any]) -> Any:
        return ((h.get("intervals") or {}).get("ranges") or {}).get("99")

    bounds = ratio_bounds(a, iv(mine), b, iv(t))
    text += f", p99 {dur(b)}; the load connections' p99, {dur(a)}, "
    if spans_one(bounds):
        return text + "cannot be told from it (their intervals overlap)."
    return text + f"is {ratio_text(a, b, bounds)} it."


def probe_lines(probe: Mapping[str, Any] | None, load: Mapping[str, Any],
                open_loop: bool) -> list[str]:
    """The latency table's probe rows under the load connections' (``load``: the measured
    totals): its latencies from the intended send time (``probe``) and from the actual send
    (``probe sent``), µs; its replies, errors and verdict; its intervals; and how the load
    connections' p99 compares with the probe's like for like (open loop: both from the
    intended time; closed loop: both from the send), when both have an interval."""
    if not probe:
        return []
    t = probe["totals"]
    lines = [_row("probe", t["corrected"]), _row("probe sent", t["uncorrected"])]
    errors = sum(t["errors"].values())
    lines.append(f"  probe: 1 connection on its own thread at {probe['rate']:g}/s (Poisson), "
                 f"{t['replies']} replies, {errors} error(s) after the warm-up; "
                 + (headline(probe["validity"]) or ""))
    ivs = t["corrected"].get("intervals") or {}
    if ivs.get("ranges") is not None:
        ranges, tail = ivs["ranges"], ivs["tail"]
        cells = [f"p{k} " + (f"n/a ({tail[k]})" if ranges.get(k) is None
                             else f"{us(ranges[k][0])}–{us(ranges[k][1])}")
                 for k in ("50", "99")]
        lines.append("  probe 95 %:      " + ", ".join(cells))
    elif ivs:
        lines.append(f"  probe 95 %:      interval not given: {ivs['basis']['withheld']}")
    ratio = p99_ratio(probe, load, open_loop)
    if ratio is not None:
        basis = "both from the intended send time" if open_loop else "both from the send"
        lines.append(f"  the load connections' p99 is {ratio:.2f}× the probe's ({basis})"
                     + (": the load client's own queueing, or the server's queues per busy "
                        "connection, add to it" if ratio > 1.5 else ""))
    return lines
