"""What ``replay`` runs (:class:`ReplaySpec`), its default strategies, and which strategies it
can build for real (:func:`parse`: the simulator's own reading of a strategy, through
:class:`cachelab._core.Strategy`, plus replay's restriction to one L1 per strategy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cachelab._core as _core
from cachelab.errors import UsageError
from cachelab.units import check_limit, limited, limits_of

__all__ = ["LIMITS", "ReplaySpec", "default_strategies", "parse"]


def parse(strategy: str) -> _core.Strategy:
    """``strategy`` as the simulator reads it — a :class:`cachelab._core.Strategy`: its L1
    (``l1``: none, lru or fixed, with a capacity in items or in bytes) and its prefetch depth —
    if replay can build it. Replay runs one L1 per strategy (none, lru or fixed), with or
    without prefetch. UsageError otherwise, and for a spec the simulator refuses (its message,
    which says what is allowed)."""
    s = _core.Strategy(strategy)
    if s.l1 == "fixed+lru":
        raise UsageError(f"{s}: replay runs one L1 per strategy (lru or fixed, not both)")
    return s


def default_strategies(n_items: int) -> list[str]:
    """none, lru:N, fixed:N and fixed:N+prefetch-children, N = 5 % of the catalog (at least
    10): ``simulate``'s defaults but the deepest prefetch."""
    n = max(10, round(0.05 * n_items))
    return ["none", f"lru:{n}", f"fixed:{n}", f"fixed:{n}+prefetch-children"]


@dataclass
class ReplaySpec:
    """What ``replay`` runs. ``strategies=None``: :func:`default_strategies`."""

    strategies: tuple[str, ...] | None = None
    train: float = limited(0.5, 0.0, 1.0, above=True, below=True)
    draws: int = limited(5, 1, 100)
    seed: int = 0
    #: Samples per cell of each strategy's profile (split over the slices).
    profile_samples: int = limited(1000, 50, 10_000_000)
    profile_warmup: int = 20
    #: Crafted requests per measurement of each library cost term, per slice.
    calibration_reps: int = limited(200, 10, 100_000)
    #: When each strategy's profile samples are taken: ``interleaved`` — a few after each of
    #: its requests, with think time, so each sample follows the application's own work;
    #: ``slices`` — a slice's worth after each slice, back to back with think time. Measured on
    #: a quiet machine, interleaved predicts better (docs/tiered.md).
    profile_mode: str = "interleaved"
    #: memcached's request deadline.
    timeout: float = limited(1.0, 0.0, 3600.0, above=True, unit="seconds")
    #: The evaluation is cut into this many slices; within each, every request runs under
    #: every strategy in turn (in ``interleaved`` mode each followed by its strategy's profile
    #: samples and calibration requests; in ``slices`` mode those come after the slice) — so
    #: the model and every strategy sample the same stretch of a machine whose load drifts.
    slices: int = limited(4, 1, 100)
    #: Within a request, the simulator's draws follow the profile's rank sequence (the order
    #: its samples came in: consecutive calls' latencies are correlated, as the application's
    #: are). False: independent draws. Either way the other prediction is reported too.
    sequence: bool = True

    @classmethod
    def quick(cls, **overrides: Any) -> ReplaySpec:
        return cls(**{"profile_samples": 500, "profile_warmup": 10, "draws": 3,
                      "calibration_reps": 100, **overrides})

    def check(self) -> None:
        """Raises UsageError naming the first bad field."""
        for name, limit in LIMITS.items():
            check_limit(name, limit, getattr(self, name))
        if self.profile_mode not in ("interleaved", "slices"):
            raise UsageError(f"--profile-mode must be interleaved or slices, not "
                             f"{self.profile_mode!r}")
        for s in self.strategies or ():
            parse(s)


#: The range of each numeric field only Python checks (the flags' too).
LIMITS = limits_of(ReplaySpec)
