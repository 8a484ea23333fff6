"""A size result's answer card (:mod:`cachelab.answers`): the memory each target hit ratio
needs, and what the server's memory gets — *predicted*, an LRU simulated on the trace or
capture (exact, or from a SHARDS sample); a capture's own hit ratio is shown beside the
prediction at the server's memory, as its check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachelab.answers import PREDICTED, Answer
from cachelab.units import human_bytes, pct, times

__all__ = ["size_answers"]


def _hit(h: float) -> str:
    return pct(h, 2 if h > 0.99 else 1)


def size_answers(d: Mapping[str, Any]) -> list[Answer]:
    """The card of a ``size.json``."""
    policy = d.get("policy", "lru")
    who = "an LRU" if policy == "lru" else str(policy)
    why = f"{who} simulated on the " + ("capture" if d.get("check") is not None else "trace")
    if not d.get("exact", True):
        why += " (SHARDS sample)"
    memory = d.get("memory")
    best = float(d["max_hit_ratio"])
    out = []
    for t in d.get("targets") or []:
        need = t.get("bytes")
        if need is None:
            value = (f"out of reach: no size does better than {pct(best, 2)} (each key's "
                     "first access misses)")
        else:
            value = human_bytes(need) + (f" ({times(need, memory)} the server's "
                                         f"{human_bytes(memory)})" if memory else "")
        out.append(Answer(f"memory for {_hit(t['hit_ratio'])} hits", value, PREDICTED, why))
    at = {float(r["multiple"]): r for r in d.get("at_memory") or []}
    if memory and 1.0 in at:
        value = f"{_hit(at[1.0]['hit_ratio'])} starting empty"
        check = d.get("check")
        if check:
            value += (f", {pct(check['predicted_warm'])} warm; the server had "
                      f"{pct(check['observed'])}")
        if 2.0 in at:
            value += f"; twice the memory: {_hit(at[2.0]['hit_ratio'])}"
        out.append(Answer(f"hit ratio at the server's {human_bytes(memory)}", value,
                          PREDICTED, why))
    return out
