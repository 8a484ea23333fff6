"""Reading a simulation result: bands by percentile, the best strategy."""

from __future__ import annotations

from typing import Any


def band_at(s: dict[str, Any], field_: str, key: str, at: float) -> dict[str, float] | None:
    """The band of a simulated strategy's ``field_`` list ("percentiles" by "percentile",
    "slowed" by "threshold") whose ``key`` is ``at``, or None."""
    for b in s.get(field_, []):
        if abs(float(b[key]) - at) < 1e-9:
            return b
    return None


def best_strategy(d: dict[str, Any]) -> dict[str, Any] | None:
    """The strategy with the lowest median p90 fractional increase (ties: fewer round trips)."""
    ss = [s for s in d.get("strategies", []) if band_at(s, "percentiles", "percentile", 90.0)]
    if not ss:
        return None
    return min(ss, key=lambda s: (band_at(s, "percentiles", "percentile", 90.0)["median"],
                                  s.get("round_trips_per_request", 0)))
