"""A comparison's answer card (:mod:`cachelab.answers`): each compared metric's change with its
interval — *certified* only when both results are certified and the interval excludes no
change; an interval that spans no change says "no detectable change".

Each side's trust (:func:`side_trust`) comes from its own result's card: the worst mark of its
answers (a simulation's are *predicted*), recorded in ``compare.json``'s ``trust`` when the
comparison is made."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, PREDICTED, TRUST, Answer
from cachelab.artifacts import Artifact
from cachelab.errors import CachelabError
from cachelab.load import LoadResult
from cachelab.profile import LatencyProfile
from cachelab.scale.result import ScaleResult
from cachelab.units import dur, num, partial_note

__all__ = ["MAX_LINES", "compare_answers", "side_trust", "value_text", "worst"]

#: The most rows the card shows one by one (the largest changes first); the rest in one line.
MAX_LINES = 6


def worst(answers: Sequence[Answer]) -> tuple[str, str]:
    """(mark, why) of the least trusted answer (the first of them), certified for none."""
    if not answers:
        return CERTIFIED, ""
    a = max(answers, key=lambda x: TRUST.index(x.trust))
    return a.trust, a.why or a.value


#: Result kind -> the answers a comparison's side is trusted by (its own card's).
_CARDS: dict[str, Callable[[Artifact], list[Answer]]] = {
    "profile": lambda a: LatencyProfile.from_dict(a.data, str(a.path)).answers(),
    "load": lambda a: LoadResult.from_dict(a.data, str(a.path)).answers(),
    # a comparison of sweeps compares throughput: the peak's trust, not the fit's
    "scale": lambda a: ScaleResult.from_dict(a.data, str(a.path)).answers()[:1],
}


def side_trust(art: Artifact) -> dict[str, str]:
    """How far one compared result is trusted: ``{"trust", "why"}`` — its card's worst mark;
    a simulation's numbers are predicted; another kind is certified unless partial."""
    if art.kind == "simulation":
        return {"trust": PREDICTED, "why": "simulated"}
    card = _CARDS.get(art.kind)
    if card is not None:
        try:
            mark, why = worst(card(art))
        except (CachelabError, KeyError, TypeError, ValueError, IndexError, AttributeError):
            # the comparison does not depend on the card: its side is just not certified
            return {"trust": INDICATIVE, "why": "its answers could not be read"}
        return {"trust": mark, "why": why}
    run = art.data.get("run")
    partial = partial_note(run) if isinstance(run, dict) else None
    return {"trust": INDICATIVE, "why": "PARTIAL"} if partial else {"trust": CERTIFIED,
                                                                    "why": ""}


def value_text(v: float | None, unit: str) -> str:
    """A compared value in its unit: a duration, a rate, or a number (4 digits); "—" for
    none."""
    if v is None:
        return "—"
    if unit == "ns":
        return dur(v)
    if unit == "/s":
        return f"{v:,.0f}/s"
    return num(v, 4)


def _change(r: Mapping[str, Any]) -> str:
    """"+12.3 % (95 % +8.1 % to +16.5 %): 1.05 ms → 1.18 ms"."""
    rel = r.get("relative")
    text = "—" if rel is None else f"{100 * rel:+.1f} %"
    lo, hi = r.get("ci_low"), r.get("ci_high")
    if lo is not None and hi is not None and lo != hi:
        text += f" (95 % {100 * lo:+.1f} % to {100 * hi:+.1f} %)"
    unit = str(r.get("unit") or "")
    return f"{text}: {value_text(r.get('a'), unit)} → {value_text(r.get('b'), unit)}"


def _sides(d: Mapping[str, Any], pair: str) -> tuple[str, str]:
    """(mark, why) of the two results of ``pair`` ("B vs A"): certified when both are."""
    trust = d.get("trust") or {}
    letters = [p.strip() for p in pair.split(" vs ")]
    marks = [(trust.get(k) or {"trust": INDICATIVE, "why": "its trust was not recorded"})
             for k in letters]
    worst_side = max(zip(letters, marks), key=lambda lm: TRUST.index(lm[1]["trust"]))
    mark = worst_side[1]["trust"]
    if mark == CERTIFIED:
        return CERTIFIED, ""
    if mark == NOT_MEASURED:
        mark = INDICATIVE
    why = worst_side[1].get("why") or mark
    return mark, ("" if mark == PREDICTED and why == "simulated"
                  else f"{worst_side[0]}: {why}")


def _answer(d: Mapping[str, Any], r: Mapping[str, Any], pairs: int) -> Answer:
    question = f"{r['item']} {r['metric']}" + (f", {r['versus']}" if pairs > 1 else "")
    mark, why = _sides(d, r["versus"])
    value = _change(r)
    if r.get("direction") or r.get("verdict") in ("higher", "lower"):
        return Answer(question, value, mark, why)
    if r.get("verdict") == "same":
        return Answer(question, f"no change: {value}", mark, why)
    if r.get("ci_low") is None or r.get("ci_high") is None:
        return Answer(question, f"{value} ({r.get('verdict') or 'no interval'})",
                      INDICATIVE if mark == CERTIFIED else mark,
                      why or str(r.get("verdict") or "no interval"))
    return Answer(question, f"no detectable change: {value}",
                  INDICATIVE if mark == CERTIFIED else mark,
                  why or "the interval spans no change")


def compare_answers(d: Mapping[str, Any]) -> list[Answer]:
    """The card of a comparison (``compare.json``'s content): a line per compared metric,
    the clear changes first (largest first), at most :data:`MAX_LINES`; the others counted in
    one line."""
    rows = list(d.get("rows") or [])
    if not rows:
        return [Answer("change", "nothing compared", NOT_MEASURED, "no common items")]
    pairs = len({r["versus"] for r in rows})

    def order(r: Mapping[str, Any]) -> tuple[int, float]:
        clear = bool(r.get("direction")) or r.get("verdict") in ("higher", "lower")
        # the largest change first (to 0.1 %: equal changes keep the table's order)
        return (0 if clear else 1, -round(abs(r.get("relative") or 0.0), 3))

    ranked = sorted(rows, key=order)
    out = [_answer(d, r, pairs) for r in ranked[:MAX_LINES]]
    rest = ranked[MAX_LINES:]
    if rest:
        clear = sum(1 for r in rest if order(r)[0] == 0)
        mark, why = worst([_answer(d, r, pairs) for r in rest])
        out.append(Answer(f"{len(rest)} more", f"{clear} with a clear change, "
                          f"{len(rest) - clear} without (the table below)", mark,
                          "" if mark == CERTIFIED else why))
    return out
