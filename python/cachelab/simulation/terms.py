"""Why a strategy wins: each request's predicted memcached time split into cost terms.

The simulator charges a request a latency draw per round trip (a get, or a multi-get of *k*
keys). Per request, with the latency model's medians:

- **round trips** — round trips × the median of the smallest get (a round trip's fixed cost);
- **keys** — keys beyond the first in each multi-get × the model's per-key slope (median of the
  largest multi-get cell less the smallest's, over the keys between them);
- **bytes** — bytes fetched × the per-byte slope of the get cells' medians (largest size less
  smallest, over the bytes between them);
- **spread** — the rest: how far the request's draws fell from those medians (the tail; can
  be negative).

The four add up to the request's predicted memcached time (``added_ms``). The in-process
cache's work is counted (L1 hits, prefetch hits), not timed: ``simulate`` has no library cost
model — ``replay`` measures the library's time through the real cache. Percentiles are of
each term on its own, so they do not add up; means do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.simulation.model import QUANTILE_POINTS, LatencyModel
from cachelab.tables import table_text
from cachelab.traces import RequestTrace

__all__ = ["TERMS", "cost_terms", "terms_text", "unit_costs"]

#: The timed terms, in the order they are shown.
TERMS = ("round_trips", "keys", "bytes", "spread")
PERCENTILES = (50, 90, 99)
_MEDIAN = (QUANTILE_POINTS - 1) // 2


def _median_ms(table: list[float]) -> float:
    return float(table[_MEDIAN]) / 1000.0


def unit_costs(model: LatencyModel) -> dict[str, float]:
    """The model's unit costs in ms: a round trip, a further key of a multi-get, a byte."""
    gets = sorted(model.get)
    rt = _median_ms(gets[0][1]) if gets else 0.0
    per_byte = 0.0
    if len(gets) > 1 and gets[-1][0] > gets[0][0]:
        per_byte = max(0.0, (_median_ms(gets[-1][1]) - rt) / (gets[-1][0] - gets[0][0]))
    multi = sorted(model.multiget)
    per_key = 0.0
    if len(multi) > 1 and multi[-1][0] > multi[0][0]:
        per_key = max(0.0, (_median_ms(multi[-1][1]) - _median_ms(multi[0][1]))
                      / (multi[-1][0] - multi[0][0]))
    return {"round_trip_ms": rt, "key_ms": per_key, "byte_ms": per_byte}


def _summary(x: np.ndarray) -> dict[str, float]:
    if not len(x):
        return {"mean": 0.0, **{f"p{p}": 0.0 for p in PERCENTILES}}
    return {"mean": float(x.mean()),
            **{f"p{p}": float(np.percentile(x, p)) for p in PERCENTILES}}


def cost_terms(trace: RequestTrace, model: LatencyModel, strategy: str, *, train: float = 0.5,
               seed: int = 0) -> dict[str, Any]:
    """The terms of ``strategy``'s predicted time per evaluated request (first draw): the
    unit costs, each term's mean and p50/p90/p99 in ms, their share of the mean, and the
    counts per request (round trips, keys, KB, L1 and prefetch hits)."""
    costs = _core.request_costs(trace.to_core(), model.to_core(), strategy, train=train,
                                seed=seed)
    units = unit_costs(model)
    added = np.asarray(costs["added_ms"], dtype=np.float64)
    trips = np.asarray(costs["round_trips"], dtype=np.float64)
    extra_keys = (np.asarray(costs["multiget_keys"], dtype=np.float64)
                  - np.asarray(costs["multigets"], dtype=np.float64))
    nbytes = np.asarray(costs["bytes"], dtype=np.float64)
    terms = {"round_trips": trips * units["round_trip_ms"],
             "keys": extra_keys * units["key_ms"],
             "bytes": nbytes * units["byte_ms"]}
    terms["spread"] = added - sum(terms.values())
    total = float(added.mean()) if len(added) else 0.0
    return {
        "unit_costs": {k: round(v, 9) for k, v in units.items()},
        "ms": {name: _summary(terms[name]) for name in TERMS},
        "share": {name: (float(terms[name].mean()) / total if total else 0.0) for name in TERMS},
        "total_ms": _summary(added),
        "per_request": {
            "round_trips": float(trips.mean()) if len(trips) else 0.0,
            "multiget_keys": float(np.mean(costs["multiget_keys"])) if len(added) else 0.0,
            "kb": float(nbytes.mean() / 1000) if len(nbytes) else 0.0,
            "l1_hits": float(np.mean(costs["l1_hits"])) if len(added) else 0.0,
            "prefetch_hits": float(np.mean(costs["prefetch_hits"])) if len(added) else 0.0,
        },
    }


def terms_text(strategies: list[dict[str, Any]]) -> list[str]:
    """The title and table of where each strategy's predicted time goes (mean ms per
    request), for ``simulate``'s output; nothing when the result has no terms."""
    rows = []
    for s in strategies:
        t = s.get("terms")
        if not t:
            continue
        ms, per = t["ms"], t["per_request"]
        rows.append([s["strategy"], f"{t['total_ms']['mean']:.3f}",
                     *(f"{ms[name]['mean']:.3f}" for name in TERMS),
                     f"{per['round_trips']:.2f}", f"{per['multiget_keys']:.1f}",
                     f"{per['kb']:.1f}", f"{per['l1_hits']:.1f}", f"{per['prefetch_hits']:.1f}"])
    if not rows:
        return []
    units = strategies[0]["terms"]["unit_costs"]
    return [
        "Where the predicted memcached time goes: mean ms per request (round trips × "
        f"{units['round_trip_ms']:.3f} ms, further multi-get keys × {units['key_ms']:.4f} ms, "
        f"bytes × {units['byte_ms'] * 1e6:.3f} ms/MB, and the draws' spread about those medians)",
        table_text(["strategy", "total", "round trips", "keys", "bytes", "spread", "RT/req",
                    "keys/req", "KB/req", "L1 hits/req", "prefetched/req"], rows),
    ]
