"""What ``replay`` runs (:class:`ReplaySpec`), its default strategies, and which strategies it
can build for real (:func:`parse`: the simulator's own reading of a strategy, through
:class:`cachelab._core.Strategy`, plus replay's restriction to one L1 per strategy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cachelab._core as _core
from cachelab.errors import UsageError

__all__ = ["ReplaySpec", "default_strategies", "parse"]


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
    train: float = 0.5
    draws: int = 5
    seed: int = 0
    #: Samples per cell of each strategy's profile (split over the slices).
    profile_samples: int = 1000
    profile_warmup: int = 20
    #: Crafted requests per measurement of each library cost term, per slice.
    calibration_reps: int = 200
    #: When each strategy's profile samples are taken: ``interleaved`` — a few after each of
    #: its requests, with think time, so each sample follows the application's own work;
    #: ``slices`` — a slice's worth after each slice, back to back with think time. Measured on
    #: a quiet machine, interleaved predicts better (docs/tiered.md).
    profile_mode: str = "interleaved"
    timeout: float = 1.0
    #: The evaluation is cut into this many slices; within each, every request runs under
    #: every strategy in turn (in ``interleaved`` mode each followed by its strategy's profile
    #: samples and calibration requests; in ``slices`` mode those come after the slice) — so
    #: the model and every strategy sample the same stretch of a machine whose load drifts.
    slices: int = 4
    #: Within a request, the simulator's draws follow the profile's rank sequence (the order
    #: its samples came in: consecutive calls' latencies are correlated, as the application's
    #: are). False: independent draws. Either way the other prediction is reported too.
    sequence: bool = True

    @classmethod
    def quick(cls, **overrides: Any) -> ReplaySpec:
        return cls(**{"profile_samples": 500, "profile_warmup": 10, "draws": 3,
                      "calibration_reps": 100, **overrides})

    def check(self) -> None:
        if not 0.0 < self.train < 1.0:
            raise UsageError(f"--train must be in (0, 1) for replay, got {self.train}")
        if not 1 <= self.draws <= 100 or not 1 <= self.slices <= 100:
            raise UsageError("--draws and --slices must be 1-100")
        if self.profile_samples < 50:
            raise UsageError("--profile-samples must be at least 50")
        if not 10 <= self.calibration_reps <= 100_000:
            raise UsageError("--calibration-reps must be 10-100000")
        if self.profile_mode not in ("interleaved", "slices"):
            raise UsageError(f"--profile-mode must be interleaved or slices, not "
                             f"{self.profile_mode!r}")
        for s in self.strategies or ():
            parse(s)
