"""A USL fit's answer card (:mod:`cachelab.answers`): contention α and coherency β (Gunther's
σ and κ) with the fit's intervals, where throughput stops rising (Nmax) and the peak
throughput with their bootstrap intervals. Each line is *certified* when the fit converged and
its interval is finite, else *indicative* with why.

One wording everywhere for an Nmax interval without an upper end (bootstrap resamples whose
β is 0 have no peak): :data:`NO_UPPER_BOUND`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, Answer
from cachelab.units import num

__all__ = ["NO_UPPER_BOUND", "bound_text", "nmax_answer", "peak_answer", "usl_answers"]

#: An interval's upper end when bootstrap resamples have β = 0 (no finite peak).
NO_UPPER_BOUND = "no upper bound (β's interval reaches 0)"


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def bound_text(v: Any, digits: int = 3) -> str:
    """One end of a bootstrap interval of Nmax: the number, or :data:`NO_UPPER_BOUND` for an
    infinite or missing end (JSON has no infinity: a saved fit's is null)."""
    return num(v, digits) if _finite(v) else NO_UPPER_BOUND


def _iv(lo: Any, hi: Any, unit: str = "") -> str:
    return f" (95 % {num(lo)}–{num(hi)}{unit})"


def _fit(f: Any) -> dict[str, Any]:
    """A fit as its JSON (``usl.json``, or ``scale.json``'s ``fit``)."""
    return dict(f.to_dict()) if hasattr(f, "to_dict") else dict(f)


def _unsure(d: Mapping[str, Any]) -> str:
    """Why nothing of the fit is certified: it did not converge."""
    return "" if d.get("converged", True) else "the fit did not converge"


def nmax_answer(f: Any, question: str = "stops scaling at", unit: str = "") -> Answer:
    """Where the fit's throughput peaks: Nmax with its bootstrap interval, or why there is
    no finite peak (β = 0: Amdahl's law), or that throughput never rises."""
    d = _fit(f)
    peak = d.get("peak") or {}
    boot = (d.get("bootstrap") or {}).get("n_max") or {}
    ns = [float(n) for n in d.get("n") or []]
    why = _unsure(d)
    if peak.get("n_max_infinite") or (isinstance(peak.get("n_max"), float)
                                      and math.isinf(peak["n_max"])):
        return Answer(question, "no peak: β = 0 (Amdahl's law), throughput approaches "
                      f"{num(peak.get('amdahl_limit'))}{unit}", INDICATIVE,
                      why or "β at its bound 0: no coherency delay detected")
    if not _finite(peak.get("n_max")):
        return Answer(question, "no peak: throughput never rises with load", INDICATIVE,
                      why or "no peak in the data")
    value = f"N ≈ {num(peak['n_max'])}"
    if boot:
        value += f" (95 % {bound_text(boot.get('lo'))}–{bound_text(boot.get('hi'))})"
        if not why and not (_finite(boot.get("lo")) and _finite(boot.get("hi"))):
            why = "β's interval reaches 0"
    elif not why:
        why = "no interval: no bootstrap"
    if not why and ns and peak["n_max"] > max(ns):
        why = f"beyond the loads measured (N ≤ {num(max(ns))})"
    return Answer(question, value, INDICATIVE if why else CERTIFIED, why)


def peak_answer(f: Any, unit: str = "", question: str = "peak throughput (fit)") -> Answer:
    """The fit's peak throughput X(Nmax) with its bootstrap interval."""
    d = _fit(f)
    peak = d.get("peak") or {}
    boot = (d.get("bootstrap") or {}).get("x_max") or {}
    if not _finite(peak.get("x_max")):
        return Answer(question, "no finite peak", NOT_MEASURED,
                      "β = 0: throughput keeps rising" if peak.get("n_max_infinite")
                      else "throughput never rises with load")
    value = f"{num(peak['x_max'])}{unit}"
    why = _unsure(d)
    if _finite(boot.get("lo")) and _finite(boot.get("hi")):
        value += _iv(boot["lo"], boot["hi"], unit)
    elif not why:
        why = "no interval: no bootstrap"
    if peak.get("n_max_infinite"):
        value += ", approached as N grows, never reached"
        why = why or "no finite peak (β = 0)"
    return Answer(question, value, INDICATIVE if why else CERTIFIED, why)


def usl_answers(f: Any, unit: str = "") -> list[Answer]:
    """The card of a USL fit (a :class:`~cachelab.usl.UslFit` or its JSON): α, β, Nmax and
    the peak throughput, each with its interval."""
    d = _fit(f)
    ci = d.get("ci") or {}
    out = []
    for key, question in (("alpha", "contention α (σ)"), ("beta", "coherency β (κ)")):
        value, iv = d.get(key), ci.get(key)
        why = _unsure(d)
        text = num(value, 4)
        if iv and _finite(iv[0]) and _finite(iv[1]):
            text += _iv(iv[0], iv[1])
        elif not why:
            why = "no interval" + ("" if (d.get("free") or {}).get(key, True)
                                   else f": {key} fixed")
        if not why and (d.get("at_bound") or {}).get(key):
            why = "at its bound 0: one-sided interval"
        out.append(Answer(question, text, INDICATIVE if why else CERTIFIED, why))
    out.append(nmax_answer(d, unit=unit))
    out.append(peak_answer(d, unit))
    return out
