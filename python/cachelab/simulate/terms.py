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
from cachelab.simulate.model import QUANTILE_POINTS, LatencyModel
from cachelab.tables import table_text
from cachelab.traces import RequestTrace

__all__ = ["TERMS", "StreamedTerms", "cost_terms", "terms_of", "terms_text", "unit_costs"]

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


def _summary(_name: str, x: np.ndarray) -> dict[str, float]:
    if not len(x):
        return {"mean": 0.0, **{f"p{p}": 0.0 for p in PERCENTILES}}
    return {"mean": float(x.mean()),
            **{f"p{p}": float(np.percentile(x, p)) for p in PERCENTILES}}


#: The request_costs columns the terms are made of.
COLUMNS = ("added_ms", "round_trips", "multiget_keys", "multigets", "bytes", "l1_hits",
           "prefetch_hits")


def cost_terms(trace: RequestTrace, model: LatencyModel, strategy: str, *, train: float = 0.5,
               seed: int = 0) -> dict[str, Any]:
    """The terms of ``strategy``'s predicted time per evaluated request (first draw): the
    unit costs, each term's mean and p50/p90/p99 in ms, their share of the mean, and the
    counts per request (round trips, keys, KB, L1 and prefetch hits)."""
    costs = _core.request_costs(trace.to_core(), model.to_core(), strategy, train=train,
                                seed=seed)
    return terms_of({name: np.asarray(costs[name], dtype=np.float64) for name in COLUMNS},
                    unit_costs(model))


def _split(c: dict[str, np.ndarray], units: dict[str, float]) -> dict[str, np.ndarray]:
    terms = {"round_trips": c["round_trips"] * units["round_trip_ms"],
             "keys": (c["multiget_keys"] - c["multigets"]) * units["key_ms"],
             "bytes": c["bytes"] * units["byte_ms"]}
    terms["spread"] = c["added_ms"] - sum(terms.values())
    return terms


def _means(arrays: dict[str, np.ndarray]) -> dict[str, float]:
    return {name: float(x.mean()) if len(x) else 0.0 for name, x in arrays.items()}


def terms_of(c: dict[str, np.ndarray], units: dict[str, float],
             summary: Any = None,
             means: tuple[dict[str, float], dict[str, float]] | None = None) -> dict[str, Any]:
    """The terms from every evaluated request's :data:`COLUMNS` (float arrays). ``summary``
    and ``means`` replace the percentiles and the means (for :class:`StreamedTerms`):
    ``means`` is the columns' means (counts per request) and the terms' (ms per request),
    apart, because a term shares its name with the column it counts (``round_trips``,
    ``bytes``)."""
    terms = _split(c, units)
    if summary is None:
        summary = _summary
        means = _means(c), _means(terms)
    assert means is not None
    counts, term_ms = means
    total = counts["added_ms"]
    return {
        "unit_costs": {k: round(v, 9) for k, v in units.items()},
        "ms": {name: summary(name, terms[name]) for name in TERMS},
        "share": {name: (term_ms[name] / total if total else 0.0) for name in TERMS},
        "total_ms": summary("added_ms", c["added_ms"]),
        "per_request": {
            "round_trips": counts["round_trips"],
            "multiget_keys": counts["multiget_keys"],
            "kb": counts["bytes"] / 1000,
            "l1_hits": counts["l1_hits"],
            "prefetch_hits": counts["prefetch_hits"],
        },
    }


_BINS_PER_OCTAVE = 256
_OCTAVES = 64


def _bins(x: np.ndarray) -> np.ndarray:
    """Signed log bins: 0 for zero, then by sign and log2 of the magnitude (256 per octave,
    2^-64..2^64)."""
    mag = np.abs(x)
    with np.errstate(divide="ignore"):
        k = np.floor(np.log2(np.where(mag > 0, mag, 1.0)) * _BINS_PER_OCTAVE).astype(np.int64)
    k = np.clip(k, -_OCTAVES * _BINS_PER_OCTAVE, _OCTAVES * _BINS_PER_OCTAVE - 1)
    k += _OCTAVES * _BINS_PER_OCTAVE + 1
    return np.where(mag > 0, np.where(x > 0, _SIDE + k, _SIDE - k), _SIDE)


_SIDE = 2 * _OCTAVES * _BINS_PER_OCTAVE + 1
_NBINS = 2 * _SIDE + 1


def _value_of(b: int) -> float:
    if b == _SIDE:
        return 0.0
    k = abs(b - _SIDE) - (_OCTAVES * _BINS_PER_OCTAVE + 1)
    v = float(2.0 ** ((k + 0.5) / _BINS_PER_OCTAVE))
    return v if b > _SIDE else -v


class StreamedTerms:
    """The terms of one strategy from request_costs' columns fed part by part: the columns are
    kept while they hold up to ``limit`` requests (then :func:`terms_of` gives exactly what
    :func:`cost_terms` gives on the whole trace); past it, the percentiles come from signed log
    histograms (256 bins per power of two: within 0.14 % of the value at that rank) and the
    means from running sums."""

    def __init__(self, units: dict[str, float], limit: int) -> None:
        self.units, self.limit = units, limit
        self.parts: list[dict[str, np.ndarray]] = []
        self.n = 0
        self.sums: dict[str, float] = {}  # the columns' sums
        self.term_sums: dict[str, float] = {}  # the terms' (ms)
        self.hists: dict[str, np.ndarray] | None = None

    def add(self, costs: dict[str, Any]) -> None:
        c = {name: np.asarray(costs[name], dtype=np.float64) for name in COLUMNS}
        self.n += len(c["added_ms"])
        for sums, arrays in ((self.sums, c), (self.term_sums, _split(c, self.units))):
            for name, x in arrays.items():
                sums[name] = sums.get(name, 0.0) + float(x.sum())
        if self.hists is None:
            self.parts.append(c)
            if self.n <= self.limit:
                return
            self.hists = {name: np.zeros(_NBINS, np.int64) for name in ("added_ms", *TERMS)}
            for part in self.parts:
                self._fold(part)
            self.parts = []
            return
        self._fold(c)

    def _fold(self, c: dict[str, np.ndarray]) -> None:
        assert self.hists is not None
        for name, x in {"added_ms": c["added_ms"], **_split(c, self.units)}.items():
            self.hists[name] += np.bincount(_bins(x), minlength=_NBINS)

    def result(self) -> dict[str, Any]:
        if self.hists is None:
            joined = {name: np.concatenate([p[name] for p in self.parts]) if self.parts
                      else np.zeros(0) for name in COLUMNS}
            return terms_of(joined, self.units)
        hists = self.hists
        n = self.n
        counts = {name: s / n for name, s in self.sums.items()}
        term_ms = {name: s / n for name, s in self.term_sums.items()}
        means = {**term_ms, "added_ms": counts["added_ms"]}  # what summary() is asked for

        def summary(name: str, _x: Any) -> dict[str, float]:
            cum = np.cumsum(hists[name])
            out = {"mean": means[name]}
            for p in PERCENTILES:
                rank = min(n - 1, int(round((n - 1) * p / 100)))
                out[f"p{p}"] = _value_of(int(np.searchsorted(cum, rank + 1)))
            return out

        empty = {name: np.zeros(0) for name in COLUMNS}
        return terms_of(empty, self.units, summary=summary, means=(counts, term_ms))


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
