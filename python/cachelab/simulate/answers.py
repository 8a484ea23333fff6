"""A simulation's answer card (:mod:`cachelab.answers`), every line *predicted*:

* request level — the best strategy (the lowest p90, as the table's routes) and what it
  saves against no cache in added time per request, then its p50 and p90 added latency
  against no cache's, each with the band the latency draws give (min–max of the draws), and
  which latency model;
* flat — the miss ratio of each policy at each size asked, the best first, and the policy
  that misses least at most sizes;
* a failure drill — each membership change's hit-ratio dip, measured and predicted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachelab.answers import NOT_MEASURED, PREDICTED, Answer
from cachelab.profile import builtin
from cachelab.simulate.summary import band_at, best_strategy
from cachelab.units import dur, human_bytes, pct, share

__all__ = ["drill_answers", "flat_answers", "request_answers"]


def _ms(ms: float) -> str:
    return dur(ms * 1e6)


def _band(b: Mapping[str, float] | None, fmt: Any, what: str) -> str:
    """"2.84–2.96 ms" of a band's low and high (its ``what``); "" for a band of one draw."""
    if not b or b["low"] == b["high"]:
        return ""
    return f" ({what}: {fmt(b['low'])}–{fmt(b['high'])})"


def model_why(d: Mapping[str, Any]) -> str:
    """Which latency model the numbers come from: a built-in one, or a measured profile (by
    ``simulate --server``, or a saved one given as ``--model``)."""
    m = d.get("model") or {}
    name = str(m.get("name", "?"))
    return (f"model {name}" if name in builtin.PROFILES
            else f"model: measured profile {name}")


def request_answers(d: Mapping[str, Any]) -> list[Answer]:
    """The card of a request-level ``simulate.json``."""
    why = model_why(d)
    best = best_strategy(dict(d))
    if best is None:
        return [Answer("best strategy", "no strategy simulated", NOT_MEASURED,
                       "no strategy has a p90")]
    draws = int((d.get("spec") or {}).get("draws") or best.get("draws") or 1)
    what = f"{str(best.get('band', 'min-max')).replace('-', '–')} of {draws} draws"
    none = next((s for s in d.get("strategies", []) if s["strategy"] == "none"), None)
    added = best.get("mean_added_ms")
    if added is None:  # a simulate.json without its mean added time
        value = f"{best['strategy']}"
    elif none is not None and none is not best and none.get("mean_added_ms"):
        base = none["mean_added_ms"]
        saved = base["median"] - added["median"]
        lo, hi = base["low"] - added["high"], base["high"] - added["low"]
        # The two bands' far ends: what the draws allow at most and at least.
        value = (f"{best['strategy']} saves {_ms(saved)} per request against no cache"
                 + (f" (from the draws' bands: {_ms(lo)}–{_ms(hi)})" if hi > lo else "")
                 + f", {_ms(added['median'])} added instead of {_ms(base['median'])}")
    else:
        value = (f"{best['strategy']}: {_ms(added['median'])} added per request"
                 f"{_band(added, _ms, what)}"
                 + (" (no cache not simulated: nothing to save against)" if none is None
                    else ""))
    out = [Answer("best strategy", value, PREDICTED, why)]
    for p in ("50", "90"):
        b = band_at(best, "percentiles", "percentile", float(p))
        if b is None:
            continue
        text = f"+{share(b['median'])}{_band(b, share, what)} of the base latency"
        nb = band_at(none, "percentiles", "percentile", float(p)) if none else None
        if nb is not None and none is not best:
            text += f"; no cache +{share(nb['median'])}{_band(nb, share, what)}"
        out.append(Answer(f"p{p} added, best", text, PREDICTED, why))
    return out


def _capacity(cap: float, unit: str) -> str:
    return human_bytes(cap) if unit == "bytes" else f"{cap:,.0f} objects"


def flat_answers(d: Mapping[str, Any]) -> list[Answer]:
    """The card of a flat ``simulate.json``: per size asked, each policy's miss ratio (and
    byte miss ratio, by bytes), lowest first; then the policy lowest at most sizes."""
    unit = d.get("unit") or "objects"
    why = "simulated on the trace"
    by: dict[float, list[tuple[float, str, float | None]]] = {}
    for r in d.get("results") or []:
        by.setdefault(r["capacity"], []).append(
            (float(r["miss_ratio"]), str(r["policy"]),
             r.get("byte_miss_ratio") if unit == "bytes" else None))
    if not by:
        return [Answer("miss ratio", "no policy simulated", NOT_MEASURED, "no results")]
    out = []
    wins: dict[str, int] = {}
    for cap in sorted(by):
        rated = sorted(by[cap])
        if len(rated) > 1 and rated[0][0] < rated[1][0]:  # a tie is nobody's win
            wins[rated[0][1]] = wins.get(rated[0][1], 0) + 1
        cells = [f"{p} {pct(m, 2)}" + (f" (bytes {pct(b, 2)})" if b is not None else "")
                 for m, p, b in rated]
        out.append(Answer(f"miss ratio at {_capacity(cap, unit)}",
                          ", ".join(cells), PREDICTED, why))
    if len({p for rated in by.values() for _, p, _ in rated}) > 1:
        if wins:
            name, n = max(wins.items(), key=lambda kv: kv[1])
            text = f"{name}: the lowest miss ratio at {n} of {len(by)} size(s)"
        else:
            text = "none: the policies tie at every size"
        out.insert(0, Answer("best policy", text, PREDICTED, why))
    return out


def drill_answers(d: Mapping[str, Any]) -> list[Answer]:
    """The card of a failure drill's prediction: each membership change's dip, measured and
    predicted by the run's distribution, and the distribution that dips least."""
    dist = d.get("distribution")
    why = "members taken as caches that never evict"
    out = []
    for e in d.get("dips") or []:
        predicted = {k: v for k, v in (e.get("predicted") or {}).items() if v is not None}
        mine = predicted.get(dist)
        value = (f"measured {e['measured']:.1f} points; predicted ({dist}) "
                 + (f"{mine:.1f} points ({e['difference']:+.1f} from the measurement)"
                    if mine is not None and e.get("difference") is not None else "—"))
        if len(predicted) > 1:
            least = min(predicted.items(), key=lambda kv: kv[1])
            value += f"; the least dip: {least[0]} {least[1]:.1f} points"
        out.append(Answer(f"hit-ratio dip, {e['event']}", value, PREDICTED, why))
    if not out:
        out.append(Answer("hit-ratio dip", "no dip measured", NOT_MEASURED,
                          "the run has no interval around its membership change"))
    return out
