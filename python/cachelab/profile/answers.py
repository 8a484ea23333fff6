"""A profile's answer card (:mod:`cachelab.answers`): a small get's p50 and p99, the cost of
each extra key in a multi-get, and a small set's, each with its 95 % intervals; *certified*
when the cell has its intervals (and reached the precision asked for), else *indicative*."""

from __future__ import annotations

from typing import Any

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, Answer
from cachelab.profile.cell import Cell
from cachelab.profile.precise import precision_percentile
from cachelab.units import dur

__all__ = ["profile_answers"]

#: The value size a "small" get or set is read at (the nearest measured).
SMALL = 1000


def _pct(cell: Cell, key: str) -> str:
    value = cell.percentiles.get(key)
    iv = cell.intervals.get(key)
    if value is None:
        return f"p{key} —"
    return f"p{key} {dur(value)}" + (f" (95 % {dur(iv[0])}–{dur(iv[1])})" if iv else "")


def _trust(cells: list[Cell], partial: str | None, keys: tuple[str, ...] = ("50", "99"),
           precision: dict[str, Any] | None = None) -> tuple[str, str]:
    """The trust of ``cells``' percentiles ``keys``: certified when each has its interval and,
    under a precision target, the targeted percentile reached it and any other is within
    the target too (a p99 the run did not aim at may be wide: then indicative, with its
    width)."""
    if partial:
        return INDICATIVE, "PARTIAL"
    target = float(precision["target"]) if precision else None
    aimed = precision_percentile(precision) if precision else None
    for c in cells:
        if not c.intervals:
            return INDICATIVE, "published figures: no intervals"
        for k in keys:
            iv, value = c.intervals.get(k), c.percentiles.get(k)
            if iv is None or not value:
                return INDICATIVE, f"no p{k} interval: too few samples beyond it"
            if k == aimed and c.precision is not None and not c.precision.get("reached"):
                return INDICATIVE, "precision NOT reached"
            width = (iv[1] - iv[0]) / 2 / value
            if target is not None and k != aimed and width > target:
                return INDICATIVE, f"p{k} not the precision target: ±{100 * width:.0f} %"
    return CERTIFIED, ""


def _small(cells: list[Cell]) -> Cell | None:
    measured = [c for c in cells if c.samples]
    return min(measured, key=lambda c: abs(c.value_size - SMALL)) if measured else None


def profile_answers(p: Any, partial: str | None = None) -> list[Answer]:
    """The card of a :class:`~cachelab.profile.LatencyProfile` (``partial``: its PARTIAL note,
    None when complete)."""
    out = []
    precision = p.precision if isinstance(p.precision, dict) else None
    get = _small(p.cells_of("get"))
    if get is not None:  # each percentile its own line: a target may be on one of them
        out += [Answer(f"get {get.label} p{k}", _pct(get, k).split(" ", 1)[1],
                       *_trust([get], partial, (k,), precision)) for k in ("50", "99")]
    put = _small(p.cells_of("set"))
    if put is not None:
        out.append(Answer(f"set {put.label}", f"{_pct(put, '50')}, {_pct(put, '99')}",
                          *_trust([put], partial, precision=precision)))
    multi = sorted((c for c in p.cells_of("multiget") if c.samples), key=lambda c: c.keys)
    if len(multi) >= 2 and multi[-1].keys > multi[0].keys:
        lo, hi = multi[0], multi[-1]
        per_key = (hi.percentiles["50"] - lo.percentiles["50"]) / (hi.keys - lo.keys)
        a, b = lo.intervals.get("50"), hi.intervals.get("50")
        # Both cells' 95 % intervals at once hold with at least 90 %: the difference's
        # interval from their ends (wider than an exact one, never narrower).
        span = (f" (≥ 90 % {dur((b[0] - a[1]) / (hi.keys - lo.keys))}–"
                f"{dur((b[1] - a[0]) / (hi.keys - lo.keys))})" if a and b else "")
        out.append(Answer(
            "multi-get, per extra key",
            f"{dur(per_key)} at p50{span}; {lo.label} {dur(lo.percentiles['50'])}, "
            f"{hi.label} {dur(hi.percentiles['50'])}",
            *_trust([lo, hi], partial, ("50",), precision)))
    if not out:
        out.append(Answer("latency", "no cell measured", NOT_MEASURED, partial or "no samples"))
    return out
