"""A load run's answer card (:mod:`cachelab.answers`): its latency percentiles with their
95 % intervals and its throughput, each *certified* when every validity check passed (and
the precision asked for was reached), else *indicative* with the worst reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, Answer
from cachelab.load.validity import SHORT, THROUGHPUT_CHECKS
from cachelab.units import dur

__all__ = ["load_answers", "percentile_text"]


def percentile_text(entry: Mapping[str, Any], key: str) -> str:
    """"p99 310 µs (95 % 290–340 µs)" from a histogram entry with ``intervals``; "(no
    interval)" when it has none (too few samples beyond it)."""
    value = (entry.get("percentiles") or {}).get(key)
    if value is None:
        return f"p{key} —"
    ranges = ((entry.get("intervals") or {}).get("ranges") or {})
    iv = ranges.get(key)
    if iv:
        return f"p{key} {dur(value)} (95 % {dur(iv[0])}–{dur(iv[1])})"
    return f"p{key} {dur(value)} (no interval)"


def _why(d: Mapping[str, Any], checks: tuple[str, ...] | None) -> str:
    """The worst reason not to certify: partial, a failed check (of ``checks``, None: any),
    a precision not reached."""
    run = d.get("run") or {}
    if run.get("aborted") or run.get("cancelled"):
        return "PARTIAL"
    v = d.get("validity") or {}
    failed = [c for c in v.get("failed") or [] if checks is None or c in checks]
    if failed:
        return "INVALID: " + SHORT.get(failed[0], failed[0])
    if checks is None and v.get("verdict") == "INVALID":  # a repeat's or the repeats' own
        return "INVALID"
    p = d.get("precision")
    if checks is None and p and not p.get("reached"):
        return "precision NOT reached"
    return ""


def load_answers(d: Mapping[str, Any], best: Mapping[str, Any]) -> list[Answer]:
    """The card of a load result (``d``, its ``to_dict()``; ``best``, its headline latency
    entry)."""
    totals = d.get("totals") or {}
    if not best.get("count"):
        return [Answer("latency", "no replies measured", NOT_MEASURED,
                       _why(d, None) or "no request succeeded")]
    spec = d.get("spec") or {}
    where = (f" at {spec['rate']:,.0f}/s" if spec.get("rate") else
             f" with {spec.get('connections')} connection(s)")
    why = _why(d, None)
    ranges = (best.get("intervals") or {}).get("ranges") or {}
    if not why and not all(ranges.get(k) for k in ("50", "99")):
        why = "no p99 interval: too few samples beyond it"
    latency = Answer(f"latency{where}", ", ".join(percentile_text(best, k)
                                                  for k in ("50", "99")),
                     INDICATIVE if why else CERTIFIED, why)
    why = _why(d, ("client", *THROUGHPUT_CHECKS))  # a saturated client set the pace
    throughput = Answer("throughput", f"{float(totals.get('throughput') or 0):,.0f} replies/s",
                        INDICATIVE if why else CERTIFIED, why)
    return [latency, throughput]
