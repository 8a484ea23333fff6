"""What ``compare`` compares (:class:`CompareSpec`), with the ranges of its numeric fields
written beside them (:data:`LIMITS`), which the bootstrap (``engine``) and the live A/B
(``servers``) check and the flags read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachelab.tls import TlsOptions
from cachelab.units import check_limit, limited, limits_of

__all__ = ["LIMITS", "CompareSpec"]


@dataclass(frozen=True)
class CompareSpec:
    """What to compare: saved results (``paths``, the first the baseline A), or the
    commands of a live A/B (``server_cmds``, ``repeats`` rounds of ``duration`` s each,
    over ``tls`` when given; its files under ``out``); and the intervals' settings."""

    paths: Sequence[str | Path] = ()
    server_cmds: Sequence[str] = ()
    resamples: int = limited(2000, 100, 1_000_000)
    level: float = limited(0.95, 0.5, 1.0, below=True)
    seed: int = 0
    allow_different: bool = False
    #: Interleaved rounds per server (intervals need two).
    repeats: int = limited(4, 2, 1000)
    duration: float = limited(2.0, 0.2, 3600.0, unit="seconds")
    tls: TlsOptions | None = None
    out: Path | None = None

    @classmethod
    def quick(cls, **overrides: Any) -> CompareSpec:
        """The live A/B, short: 2 rounds of 1 s per server."""
        return cls(**{"repeats": 2, "duration": 1.0, **overrides})

    def check(self) -> None:
        """Raises UsageError naming the first numeric field out of its range."""
        for name, limit in LIMITS.items():
            check_limit(name, limit, getattr(self, name))


#: The range of each numeric field only Python checks.
LIMITS = limits_of(CompareSpec)
