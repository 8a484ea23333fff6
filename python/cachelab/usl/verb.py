"""``cachelab.usl.run``: the verb's one entry — the USL fitted to a CSV's columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachelab.progress import Progress
from cachelab.target import Target
from cachelab.units import limited, limits_of
from cachelab.usl.data import fit_csv
from cachelab.usl.result import UslFit

__all__ = ["LIMITS", "UslSpec", "run"]


@dataclass(frozen=True)
class UslSpec:
    """What to fit: the CSV ``file``, its load and throughput columns (None: found by name),
    and the fit's settings (:func:`cachelab.usl.fit_usl`'s)."""

    file: str | Path
    n: str | None = None
    x: str | None = None
    method: str = "bounded"
    #: The confidence level of every interval.
    level: float = limited(0.95, 0.0, 1.0, above=True, below=True)
    #: Bootstrap resamples for Nmax and the peak (0: none).
    bootstrap: int = limited(1000, 0, 1_000_000)
    seed: int = 0
    predict: Sequence[float] = ()


#: The range of each numeric field only Python checks (``usl --bootstrap`` and ``--level``;
#: ``scale``'s bootstrap too).
LIMITS = limits_of(UslSpec)


def run(spec: UslSpec, target: Target | None = None, *,
        progress: Progress | None = None) -> UslFit:
    """Fits the USL as ``spec`` says (no server: ``target`` and ``progress`` are unused).
    Data problems are InputErrors naming the file."""
    options: dict[str, Any] = {"method": spec.method, "level": spec.level,
                               "bootstrap": spec.bootstrap, "seed": spec.seed,
                               "predict": list(spec.predict)}
    return fit_csv(spec.file, spec.n, spec.x, **options)
