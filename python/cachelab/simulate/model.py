"""Latency models for the simulator: a latency profile turned into quantile tables.

A model answers two questions, as distributions: how long does a get of a value of *s* bytes
take, and how long does a multi-get of *k* keys take. It is built from a latency profile —
one measured by ``cachelab profile`` (``profile.json``) or the built-in ``appengine-2017``
(the App Engine tables of Khan Academy's "Profiling App Engine Memcached").

Each measured cell becomes a quantile table: the latency at probabilities ``i / (n - 1)``
for ``i = 0 … n - 1`` (``n`` = :data:`QUANTILE_POINTS`), read from the cell's HdrHistogram.
The Rust simulator draws from a table by inverse transform: a uniform *u* picks a point
between two adjacent quantiles, interpolating on the log of latency. Between two measured
sizes (or key counts) it interpolates on a log scale with the same *u* on both sides; beyond
the largest it extrapolates linearly in bytes (keys) by the slope of the two largest cells at
the same *u* — a multi-get of 200 keys costs the 100-key cell plus 100 times the measured
per-key cost — and below the smallest it uses the smallest. The model never gets cheaper as
the size or key count grows: where measured cells are out of order at some quantile (noise),
that quantile's values are replaced by their least-squares monotone fit (pooled runs take the
geometric mean); cells in order are read back exactly. ``docs/simulation.md`` has the rules
and the error measured on held-back cells. Draws are seeded by the simulator, per request and
per touch.

A profile that kept the order its samples were taken in (``sequence``: each sample's rank
within its cell, in time order — replay's profiles do) gives the model a *rank sequence*: a
request's draws are then consecutive ranks of it from a random start, instead of independent
uniforms, so a slow stretch of the machine slows several calls of one request, as it does in
an application. Each cell's own distribution is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cachelab._core as _core
from cachelab.errors import InputError
from cachelab.profile import LatencyProfile, load_profile

__all__ = ["QUANTILE_POINTS", "LatencyModel", "latency_model"]

#: Points per quantile table: every 0.1 percentile.
QUANTILE_POINTS = 1001


@dataclass
class LatencyModel:
    """A latency profile as quantile tables (µs), ready for the Rust simulator."""

    name: str
    #: (value size in bytes, latency in µs at each of the QUANTILE_POINTS probabilities)
    get: list[tuple[int, list[float]]]
    #: (key count, latency in µs at each probability)
    multiget: list[tuple[int, list[float]]]
    #: The profile's rank sequence (see the module's docs); None: independent draws.
    sequence: dict[str, Any] | None = None

    def to_core(self) -> _core.LatencyModel:
        if self.sequence is None:
            return _core.LatencyModel(self.get, self.multiget)
        return _core.LatencyModel(self.get, self.multiget, self.sequence["ranks"],
                                  self.sequence["segments"])

    @property
    def draws(self) -> str:
        """How a request's draws relate: ``independent`` or ``sequence``."""
        return "independent" if self.sequence is None else "sequence"

    def describe(self) -> dict[str, object]:
        """What ``simulate.json`` records of the model; ``monotone_fit`` counts the table
        values (out of cells x quantile points) the monotone fit moved, per table."""
        get_moved, multiget_moved = self.to_core().adjusted
        d: dict[str, object] = {
            "name": self.name,
            "get_sizes": [s for s, _ in self.get],
            "multiget_keys": [k for k, _ in self.multiget],
            "quantile_points": QUANTILE_POINTS,
            "draws": self.draws,
            "monotone_fit": {"get": get_moved, "multiget": multiget_moved},
        }
        if self.sequence is not None:
            d["sequence"] = {"ranks": len(self.sequence["ranks"]),
                             "segments": len(self.sequence["segments"]),
                             "lag1": self.sequence.get("lag1")}
        return d


def _table(histogram: str) -> list[float]:
    probs = [100.0 * i / (QUANTILE_POINTS - 1) for i in range(QUANTILE_POINTS)]
    return [ns / 1000.0 for ns in _core.hist_percentiles(histogram, probs)]


def latency_model(profile: LatencyProfile | str, *, sequence: bool = True) -> LatencyModel:
    """The model of a profile, or of a profile named like :func:`cachelab.load_profile` takes.
    ``sequence=False`` ignores a profile's rank sequence (independent draws)."""
    p = load_profile(profile) if isinstance(profile, str) else profile
    get = sorted(
        (c.value_size, _table(c.histogram)) for c in p.cells_of("get") if c.samples > 0
    )
    multiget = sorted(
        (c.keys, _table(c.histogram)) for c in p.cells_of("multiget") if c.samples > 0
    )
    if not get:
        raise InputError(f"latency profile {p.name!r} has no get cells with samples")
    return LatencyModel(name=p.name, get=get, multiget=multiget,
                        sequence=p.sequence if sequence else None)
