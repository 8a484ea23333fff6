"""What an open-loop schedule's counts may be: a Poisson process of the asked rate."""

from __future__ import annotations

from scipy.stats import poisson

#: How unlikely a true Poisson count may be to fall outside the bounds checked.
TAIL = 1e-6


def poisson_bounds(rate: float, seconds: float) -> tuple[int, int]:
    """The counts a Poisson process of ``rate`` over ``seconds`` stays within but for a
    chance of :data:`TAIL` on each side."""
    mean = rate * seconds
    return int(poisson.ppf(TAIL, mean)), int(poisson.isf(TAIL, mean))
