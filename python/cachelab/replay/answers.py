"""A replay's answer card (:mod:`cachelab.answers`): the best strategy as measured, each
replayed strategy's measured added time per request at p50 and p90 with its 95 % bootstrap
interval against the prediction (how far off, and whether the prediction falls inside the
measurement's interval), and whether the replay confirms the prediction.

The measured numbers are *certified* when the measurement's own checks pass — the run went to
the end, the machine was quiet, the server kept the catalog, and the real cache did what the
simulator counts (hit ratio, round trips per request, no loader call, no error) — else
*indicative* with the first that failed. Whether the prediction is close is what the card
reports, not a check of the measurement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, Answer
from cachelab.replay.compare import TOLERANCE
from cachelab.units import dur, pct

__all__ = ["replay_answers", "strategy_why"]


def _ms(ms: float) -> str:
    return dur(ms * 1e6)


def strategy_why(s: Mapping[str, Any]) -> str:
    """The first of a strategy's checks that failed, in a few words; "" when all passed."""
    c = s.get("checks") or {}
    hit = c.get("hit_ratio") or {}
    if c.get("errors"):
        return f"{c['errors']} memcached error(s)"
    if c.get("round_trips_differ_in_requests"):
        return (f"round trips differ from the simulator's in "
                f"{c['round_trips_differ_in_requests']} request(s)")
    if hit and abs(hit.get("measured", 0.0) - hit.get("predicted", 0.0)) > 1e-9:
        return (f"L1 hit ratio {hit['measured']:.4f}, not the simulator's "
                f"{hit['predicted']:.4f}")
    if c.get("loader_keys"):
        return f"the loader fetched {c['loader_keys']} key(s): items missing from memcached"
    return ""


def run_why(d: Mapping[str, Any]) -> str:
    """What makes the whole run's measurement not certain: cut short, a busy machine, the
    server evicting the catalog; "" for none."""
    run = d.get("run") or {}
    if run.get("aborted") or run.get("cancelled"):
        return "PARTIAL"
    if (d.get("machine") or {}).get("busy"):
        m = d["machine"]
        return f"machine busy: {m['others_cores']:.2f} of {m['cores']} cores used by others"
    if (d.get("server") or {}).get("user_items_lost"):
        return "the server evicted items during the replay"
    return ""


def _percentile(a: Mapping[str, Any], k: str) -> str:
    """"p50 0.515 ms (95 % 0.491 ms–0.542 ms), predicted 0.528 ms: +2.5 %, inside"."""
    ci = a.get("measured_ci95")
    text = f"p{k} {_ms(a['measured'])}" + (f" (95 % {_ms(ci[0])}–{_ms(ci[1])})" if ci else "")
    text += f", predicted {_ms(a['predicted'])}"
    if a.get("error") is None:
        return text + ": nothing measured to compare"
    inside = ("inside its interval" if ci and ci[0] <= a["predicted"] <= ci[1]
              else "outside its interval" if ci else "no interval")
    return text + f": {100 * a['error']:+.1f} %, {inside}"


def replay_answers(d: Mapping[str, Any], failure: str | None) -> list[Answer]:
    """The card of a ``replay.json`` (``failure``: :meth:`ReplayResult.failure
    <cachelab.replay.result.ReplayResult.failure>`, None when the prediction held)."""
    strategies = d.get("strategies") or []
    if not strategies:
        return [Answer("added time per request", "no strategy compared", NOT_MEASURED,
                       run_why(d) or "no slice finished")]
    whole = run_why(d)
    out = []
    for s in strategies:
        why = whole or strategy_why(s)
        out.append(Answer(f"added, {s['strategy']}",
                          "; ".join(_percentile(s["added_ms"][k], k) for k in ("50", "90")
                                    if k in s["added_ms"]),
                          INDICATIVE if why else CERTIFIED, why))
    measured = [s for s in strategies if "90" in s["added_ms"]]
    if len(measured) > 1:
        best = min(measured, key=lambda s: s["added_ms"]["90"]["measured"])
        a = best["added_ms"]["90"]
        why = whole or strategy_why(best)
        none = next((s for s in measured if s["strategy"] == "none"), None)
        against = ""
        if none is not None and none is not best:
            n = none["added_ms"]["90"]
            against = (f" against no cache's {_ms(n['measured'])} (predicted "
                       f"{_ms(n['predicted'])})")
        out.insert(0, Answer(
            "best strategy (lowest p90)",
            f"{best['strategy']}: p90 {_ms(a['measured'])} added per request (predicted "
            f"{_ms(a['predicted'])}){against}", INDICATIVE if why else CERTIFIED, why))
    why = whole or next((w for s in strategies if (w := strategy_why(s))), "")
    confirms = (f"yes: every strategy within ±{pct(TOLERANCE, 0)} at p50, p90 and p99"
                if failure is None else f"NO: {failure}")
    out.append(Answer("replay confirms the prediction", confirms,
                      INDICATIVE if why else CERTIFIED, why))
    return out
