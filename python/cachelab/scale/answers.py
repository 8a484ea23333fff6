"""A scale sweep's answer card (:mod:`cachelab.answers`): the highest throughput measured,
with its 95 % interval over the repeats and the N where it occurs, and where throughput stops
rising (the USL fit's Nmax with its bootstrap interval, and where the server and the client
ran when ``scale`` pinned them), or why that is not known: no fit (too few usable
measurements), or a load client that saturated on this one box — then scaling is not
measurable on this machine (the curve is the client's ceiling, not memcached's), and the card,
the table's first lines (:func:`ceiling_line`) and the report say how to measure it instead."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, Answer
from cachelab.scale.pinning import layout_text
from cachelab.usl import MIN_POINTS, t_quantile
from cachelab.usl.answers import nmax_answer

__all__ = ["card_layout", "ceiling_line", "saturated_at", "scale_answers"]

#: The question of the second line.
STOPS = "stops scaling at"


def _client_saturated(run: Mapping[str, Any]) -> bool:
    """Whether a run's load client set the pace: its client check failed, or its threads
    waited for a CPU (the fix its verdict names is to quiet the machine for the client)."""
    if "client" in (run.get("failed_checks") or []):
        return True
    if any("client's threads waited" in str(f) for f in (run.get("fixes") or {}).values()):
        return True
    # (a sweep saved before runs named their failed checks)
    return any("CLIENT SATURATED" in str(r) for r in run.get("invalid_reasons") or [])


def saturated_at(d: Mapping[str, Any]) -> list[int]:
    """The loads, from the highest measured throughput's up (where the curve is read for its
    peak; at least the highest load), at which a run's client saturated."""
    summary = [r for r in d.get("summary") or [] if r.get("throughput_mean") is not None]
    best = max(summary, key=lambda r: r["throughput_mean"], default=None)
    ns = sorted({int(r["n"]) for r in d.get("runs") or []})
    if not ns:
        return []
    start = min(int(best["n"]), ns[-1]) if best else ns[-1]
    return sorted({int(r["n"]) for r in d.get("runs") or []
                   if int(r["n"]) >= start and _client_saturated(r)})


def _peak(d: Mapping[str, Any], partial: str | None, saturated: list[int]) -> Answer:
    spec = d.get("spec") or {}
    summary = [r for r in d.get("summary") or [] if r.get("throughput_mean") is not None]
    best = max(summary, key=lambda r: r["throughput_mean"], default=None)
    if best is None:
        return Answer("peak throughput", "not measured", NOT_MEASURED,
                      partial or "no run measured a usable throughput")
    n, mean = best["n"], float(best["throughput_mean"])
    used = [float(r["throughput"]) for r in d.get("runs") or [] if r["n"] == n
            and r["throughput"] > 0 and (spec.get("keep_invalid")
                                         or not r.get("throughput_reasons"))]
    value = f"{mean:,.0f} replies/s at N = {n}"
    layout = card_layout(d)  # where it was measured
    why = ""
    if len(used) >= 2:
        m = sum(used) / len(used)
        sd = math.sqrt(sum((x - m) ** 2 for x in used) / (len(used) - 1))
        half = t_quantile(0.975, len(used) - 1) * sd / math.sqrt(len(used))
        value += f" (95 % {max(0.0, mean - half):,.0f}–{mean + half:,.0f})"
    else:
        value += " (one run: no interval)"
        why = "one run at that N: no interval"
    if layout:
        value += f"; {layout}"
    if n in saturated:
        why = "INVALID: client saturated"
    if partial:
        why = "PARTIAL"
    return Answer("peak throughput", value, INDICATIVE if why else CERTIFIED, why)


def _stops(d: Mapping[str, Any], partial: str | None, saturated: list[int]) -> Answer:
    spec = d.get("spec") or {}
    if saturated:
        at = ", ".join(str(n) for n in saturated)
        if spec.get("vary") == "agents":
            return Answer(STOPS, f"not measurable with these agents (they saturated at N = "
                          f"{at}): measure with more agents on more nodes", INDICATIVE,
                          "client saturated")
        return Answer(STOPS, f"not measurable on this machine: {_client_first(d, at)}: "
                      "measure with `--ray` or run the client on another host", INDICATIVE,
                      "client saturated")
    fit = d.get("fit")
    if not fit:
        usable = [r for r in d.get("runs") or [] if r["throughput"] > 0
                  and (spec.get("keep_invalid") or not r.get("throughput_reasons"))]
        return Answer(STOPS, f"not measured: no fit — only {len(usable)} usable "
                      "measurement(s)", NOT_MEASURED,
                      f"the USL needs {MIN_POINTS} at 3 or more loads")
    a = nmax_answer(fit, STOPS, unit=" replies/s")
    if partial and a.trust == CERTIFIED:
        return Answer(a.question, a.value, INDICATIVE, "PARTIAL")
    return a


def card_layout(d: Mapping[str, Any]) -> str | None:
    """Where a private server and the client ran, for the card: "server on CPU 0, client on
    CPU 1"; "not pinned: 1 CPU, shared by …" or "not pinned: --no-pin" when they shared the
    CPUs of a small machine; None otherwise (a server given, a large machine, a sweep saved
    before layouts were recorded)."""
    layout = (d.get("server") or {}).get("cpus") or {}
    if layout.get("pinned") or layout.get("usable") == 1 or layout.get("reason") == "--no-pin":
        return layout_text(layout)
    return None


def _client_first(d: Mapping[str, Any], at: str, curve: str = "the curve") -> str:
    """"the load client saturated at N = 4 (memcached on CPU 0, client on CPU 1), so the
    curve is the client's ceiling, not memcached's", with the sweep's layout when the card
    shows one."""
    layout = card_layout(d)
    name = server_name(d)
    where = f" ({layout.replace('server on', f'{name} on')})" if layout else ""
    return (f"the load client saturated at N = {at}{where}, so {curve} is the client's "
            f"ceiling, not {name}'s")


def server_name(d: Mapping[str, Any]) -> str:
    """What the sweep measured, as its sentences name it: ``memcached``, or ``redis-server``
    for a sweep over RESP."""
    return "redis-server" if (d.get("server") or {}).get("protocol") == "resp" else "memcached"


def ceiling_line(d: Mapping[str, Any]) -> str | None:
    """The table's and the report's headline when the load client saturated from the peak
    up (:func:`saturated_at`): scaling NOT measurable on this machine, the USL fit (if any)
    the client's ceiling, with the way out; None otherwise, and for Ray agents (whose card
    says to add agents)."""
    at = saturated_at(d)
    if not at or (d.get("spec") or {}).get("vary") == "agents":
        return None
    curve = "the curve (and the USL fit's Nmax)" if d.get("fit") else "the curve"
    return ("scaling NOT measurable on this machine: "
            f"{_client_first(d, ', '.join(map(str, at)), curve)} → measure with `--ray` or run "
            "the client on another host")


def scale_answers(d: Mapping[str, Any], partial: str | None = None) -> list[Answer]:
    """The card of a sweep (``scale.json``'s content; ``partial``: its PARTIAL note, None when
    it is complete): the peak measured throughput and where throughput stops rising."""
    saturated = saturated_at(d)
    return [_peak(d, partial, saturated), _stops(d, partial, saturated)]
