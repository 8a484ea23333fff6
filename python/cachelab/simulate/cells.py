"""The profile a simulation needs: the value sizes and multi-get key counts its strategies issue.

A latency model answers between its measured cells by interpolation, and beyond the largest
one by extrapolation; both are guesses where a measurement could be had. Before a simulation
against a live server (``simulate --server``, and ``run`` on its own server), the strategies
are counted on the trace — the simulator's own ``request_costs``, which needs no latencies —
and the profile measures what they will ask for:

- **key counts**: the median, p90, p99 and largest multi-get of each prefetching strategy;
- **value sizes**: the median, p90 and p99 of the sizes of the items requests touch, and the
  largest when it lies beyond every other cell (above ~100 KB a get's cost per byte grows, so
  extrapolating from smaller cells under-predicts it: benches/runs/2026-11-27-latency-model.md),
  at most what the server can store;
- **the multi-get value size**: the median of the same sizes (the default cells use 1 KB).

A candidate within 15 % of a cell already in the profile (by ratio) is not added: the model's
log-scale interpolation between near neighbours is already close. The default cells are kept,
so a profile measured for one trace still serves others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.profile import LatencyProfile, ProfileSpec, profile
from cachelab.profile.spec import MAX_KEY_COUNT
from cachelab.servers import stats_or_none
from cachelab.simulate.request import SimulateSpec, SimulationResult, default_strategies, simulate
from cachelab.traces import RequestTrace

__all__ = ["IssuedCells", "cells_for", "issued_cells", "measure_and_simulate", "measure_for",
           "profile_spec_for"]

#: Quantiles of the issued key counts and value sizes that become cells.
QUANTILES = (50, 90, 99)
#: A candidate this close (as a ratio) to an existing cell is not measured apart.
NEAR = 1.15
#: At most this many cells are added per dimension.
MAX_ADDED = 6
#: Bytes of a stored item besides its value, at most (header, CAS, the profile's key): the
#: largest size cell is the server's item limit less this.
ITEM_OVERHEAD = 1024
#: memcached's item limit (``-I``) unless the server says: 1 MiB.
DEFAULT_ITEM_SIZE_MAX = 1 << 20


@dataclass
class IssuedCells:
    """What the strategies issue on a trace, and the cells chosen to profile it."""

    #: Per prefetching strategy: multi-gets issued and the quantiles of their key counts.
    multigets: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Quantiles of the touched items' value sizes (bytes), by touch.
    sizes: dict[str, int] = field(default_factory=dict)
    #: Cells to measure besides the base profile's.
    added_key_counts: list[int] = field(default_factory=list)
    added_sizes: list[int] = field(default_factory=list)
    #: The value size of the multi-get cells (the median touched size).
    multi_value_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "multigets": self.multigets,
            "sizes": self.sizes,
            "added_key_counts": self.added_key_counts,
            "added_sizes": self.added_sizes,
            "multi_value_size": self.multi_value_size,
        }


def _round2(x: float) -> int:
    """``x`` to two significant digits (3,071 -> 3,100): cells with readable labels."""
    if x < 100:
        return max(1, round(x))
    digits = 10 ** (int(math.log10(x)) - 1)
    return int(round(x / digits) * digits)


def _choose(candidates: list[int], existing: list[int], limit: int) -> list[int]:
    """Candidates not within :data:`NEAR` of an existing or already chosen cell."""
    have = list(existing)
    added: list[int] = []
    for c in sorted(set(candidates)):
        if len(added) >= limit:
            break
        if all(max(c, h) / min(c, h) > NEAR for h in have):
            have.append(c)
            added.append(c)
    return added


def issued_cells(trace: RequestTrace, strategies: list[str] | None = None, *, train: float = 0.5,
                 base: ProfileSpec | None = None, largest: int | None = None) -> IssuedCells:
    """Counts what ``strategies`` (default: simulate's defaults) issue on ``trace``, and the
    cells to add to ``base`` (default :class:`~cachelab.profile.ProfileSpec`) to measure it;
    ``largest``: the largest value the server stores (None: no limit)."""
    base = base or ProfileSpec()
    strategies = list(strategies or default_strategies(trace.n_items))
    core_trace = trace.to_core()
    # Counts only: the model's latencies do not change what a strategy fetches, so a constant
    # one (building a real one reads and interpolates a whole profile).
    core_model = _core.LatencyModel([(1, [1.0, 1.0])], [(1, [1.0, 1.0])])
    issued = IssuedCells()
    key_candidates: list[int] = []
    for s in strategies:
        canonical = _core.parse_strategy(s)
        if "prefetch" not in canonical:
            continue
        costs = _core.request_costs(core_trace, core_model, canonical, train=train)
        mg = np.asarray(costs["multigets"], dtype=np.int64)
        keys = np.asarray(costs["multiget_keys"], dtype=np.float64)
        some = mg > 0
        if not some.any():
            issued.multigets[canonical] = {"multigets": 0}
            continue
        # A request's multi-gets are counted at its mean size (the simulator issues one per
        # prefetching topic; the mean is exact when a request has one, as in most traces).
        per = np.repeat(keys[some] / mg[some], mg[some])
        qs = {f"p{q}": float(np.percentile(per, q)) for q in QUANTILES}
        issued.multigets[canonical] = {"multigets": int(mg.sum()), **{
            k: round(v, 1) for k, v in qs.items()}, "max": int(per.max())}
        key_candidates += [max(1, round(v)) for v in qs.values()] + [int(per.max())]
    issued.added_key_counts = _choose(
        [min(k, MAX_KEY_COUNT) for k in key_candidates], list(base.key_counts), MAX_ADDED)
    if trace.n_touches:
        touched = np.asarray(trace.item_sizes)[np.asarray(trace.touch_items)]
        issued.sizes = {f"p{q}": int(np.percentile(touched, q)) for q in QUANTILES}
        issued.sizes["max"] = int(touched.max())
        issued.added_sizes = _choose([_round2(max(1, v)) for k, v in issued.sizes.items()
                                      if k != "max"], list(base.sizes), MAX_ADDED)
        cells = [*base.sizes, *issued.added_sizes]
        top = issued.sizes["max"] if largest is None else min(issued.sizes["max"], largest)
        if cells and top > max(cells) * NEAR and len(issued.added_sizes) < MAX_ADDED:
            issued.added_sizes.append(top)
        if issued.multigets and any(v.get("multigets") for v in issued.multigets.values()):
            issued.multi_value_size = _round2(max(1, issued.sizes["p50"]))
    return issued


def profile_spec_for(base: ProfileSpec, issued: IssuedCells) -> ProfileSpec:
    """``base`` with the issued cells added (the base's cells are kept)."""
    spec = replace(
        base,
        sizes=tuple(sorted({*base.sizes, *issued.added_sizes})) if base.sizes else (),
        key_counts=tuple(sorted({*base.key_counts, *issued.added_key_counts})),
    )
    if issued.multi_value_size is not None and base.key_counts:
        spec = replace(spec, multi_value_size=issued.multi_value_size)
    return spec


def measure_for(trace: RequestTrace, server: str, *, strategies: list[str] | None = None,
                train: float = 0.5, base: ProfileSpec | None = None,
                server_facts: Mapping[str, Any] | None = None,
                on_progress: Callable[[int, int], None] | None = None,
                ) -> tuple[LatencyProfile, IssuedCells]:
    """Profiles the memcached at ``server`` at the cells ``strategies`` issue on ``trace``
    (:func:`issued_cells`), with ``base``'s samples and settings (``server_facts`` as
    :func:`~cachelab.profile.profile` takes them). The profile records the
    issued cells under ``client.cells_from_trace``. Ctrl-C raises
    :class:`~cachelab.errors.Interrupted` with the partial profile, as ``profile`` does."""
    spec, issued = cells_for(trace, server, strategies=strategies, train=train, base=base)
    result = profile(spec, server=server, server_facts=server_facts, on_progress=on_progress)
    result.client["cells_from_trace"] = issued.to_dict()
    return result, issued


def cells_for(trace: RequestTrace, server: str, *, strategies: list[str] | None = None,
              train: float = 0.5, base: ProfileSpec | None = None,
              ) -> tuple[ProfileSpec, IssuedCells]:
    """The profile :func:`measure_for` measures: ``base`` with the cells ``strategies``
    issue on ``trace`` that fit the memcached at ``server`` (its item size limit), and those
    cells (recorded as the profile's ``client.cells_from_trace``)."""
    base = base or ProfileSpec()
    # The largest cell a value fits in: the server's item limit less an item's overhead
    # (memcached's default limit when the server does not say: a proxy, TLS).
    settings = stats_or_none(server, "settings") or {}
    try:
        limit = int(settings.get("item_size_max", DEFAULT_ITEM_SIZE_MAX))
    except ValueError:
        limit = DEFAULT_ITEM_SIZE_MAX
    largest = limit - ITEM_OVERHEAD
    issued = issued_cells(trace, strategies, train=train, base=base, largest=largest)
    return profile_spec_for(base, issued), issued


def measure_and_simulate(trace: RequestTrace, spec: SimulateSpec, server: str, *,
                         base: ProfileSpec | None = None,
                         trace_info: dict[str, Any] | None = None,
                         on_progress: Callable[[int, int], None] | None = None,
                         ) -> SimulationResult:
    """``simulate --server`` on a trace in memory: profiles the memcached at ``server`` at
    the cells ``spec``'s strategies issue on ``trace`` (:func:`measure_for`), then simulates
    it with that profile (kept in the result, to write under ``profile/``)."""
    spec.check()
    measured, _ = measure_for(trace, server, strategies=spec.strategies, train=spec.train,
                              base=base, on_progress=on_progress)
    return simulate(trace, spec, profile=measured, trace_info=trace_info)
