"""The tiers benchmark's answer card (:mod:`cachelab.answers`): for each data shape, the
fastest way to read it and the fastest through memcached, each with its p50 and 95 % interval
(from the reads' histogram, :mod:`cachelab.intervals`) and its effect against reading the
store — a ratio with its ≥ 90 % interval from both ends, or "no clear difference" when that
interval holds 1.

Every read is checked to return the data before the timing (the run stops otherwise), so a
complete run with its intervals is *certified*; a run cut short, or a cell with too few reads
for an interval, is *indicative*. ``memcached raw`` (bytes, not decoded) is not a way to read
the data and is not a candidate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachelab.answers import (
    CERTIFIED,
    INDICATIVE,
    NOT_MEASURED,
    Answer,
    ratio_bounds,
    ratio_text,
    spans_one,
)
from cachelab.intervals import interval
from cachelab.tiers.spec import SHAPES
from cachelab.units import dur

__all__ = ["tiers_answers"]

#: Not a way to read the data: the bytes memcached holds, not decoded.
RAW = "memcached raw"


def _p50(row: Mapping[str, Any]) -> tuple[float, list[float] | None]:
    """A row's p50 and its 95 % interval, ns (None: too few reads, or no histogram)."""
    iv = (interval(row["histogram"], int(row["reads"]), 50.0)
          if row.get("histogram") and row.get("reads") else None)
    return row["wall_p50_us"] * 1000, None if iv is None else [float(iv[0]), float(iv[1])]


def _effect(row: Mapping[str, Any], store: Mapping[str, Any] | None) -> str:
    """The row's p50 with its interval, and how it compares with the store's."""
    p, iv = _p50(row)
    text = f"{row['method']} p50 {dur(p)}" + (f" (95 % {dur(iv[0])}–{dur(iv[1])})" if iv
                                               else " (no interval)")
    if store is None or store is row:
        return text
    s, siv = _p50(store)
    bounds = ratio_bounds(s, siv, p, iv)
    if spans_one(bounds):
        return text + f"; no clear difference from the store's {dur(s)}"
    if p <= s:
        return text + f", {ratio_text(s, p, bounds)} faster than the store's {dur(s)}"
    flipped = None if bounds is None else (1 / bounds[1], 1 / bounds[0])
    return text + f"; the store's {dur(s)} is {ratio_text(p, s, flipped)} faster"


def tiers_answers(d: Mapping[str, Any]) -> list[Answer]:
    """The card of a ``tiers.json``."""
    rows = d.get("rows") or []
    run = d.get("run") or {}
    partial = "PARTIAL" if run.get("aborted") or run.get("cancelled") else ""
    if not rows:
        return [Answer("fastest read", "no round of reads finished", NOT_MEASURED,
                       partial or "nothing measured")]
    out = []
    for shape in SHAPES:
        mine = [r for r in rows if r["shape"] == shape and r["method"] != RAW]
        if not mine:
            continue
        store = next((r for r in mine if r["method"] == "store"), None)
        fastest = min(mine, key=lambda r: r["wall_p50_us"])
        through = [r for r in mine if r["method"].startswith("memcached")]
        picks = [(f"fastest, {shape}", fastest)]
        if through:
            picks.append((f"best via memcached, {shape}",
                          min(through, key=lambda r: r["wall_p50_us"])))
        for question, row in picks:
            why = partial or ("no interval: too few reads" if _p50(row)[1] is None else "")
            out.append(Answer(question, _effect(row, store), INDICATIVE if why else CERTIFIED,
                              why))
    return out
