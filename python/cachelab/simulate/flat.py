"""Classic miss-ratio simulation of flat key traces: eviction policies and LRU curves.

A *flat trace* is a sequence of ``(time, key, size)`` requests in one of three formats:
CSV with a header (``time,key,size[,op]``; key columns ``key``/``lbn``/``obj_id``/``id``),
libCacheSim's ``oracleGeneral`` binary, or one key per line.  The work happens in Rust
(``cachelab._core``) with the GIL released; this module turns it into plain dataclasses.

>>> from cachelab.simulate.flat import simulate_flat, miss_ratio_curve
>>> sim = simulate_flat("trace.oracleGeneral.bin", policies=["lru", "s3fifo"],
...                     sizes=[0.001, 0.01, 0.1], unit="bytes")          # doctest: +SKIP
>>> sim.write_csv("out/simulate.csv")                                     # doctest: +SKIP
>>> curve = miss_ratio_curve("trace.oracleGeneral.bin", unit="objects")   # doctest: +SKIP

Semantics follow libCacheSim's ``cachesim`` so its numbers can be checked on the same file:
LRU and FIFO match it exactly; LFU, ARC and S3-FIFO follow its variants and defaults. A float
size ``0 < f <= 1`` means that fraction of the working set (the sum of each key's first size,
or the number of keys in object mode), truncated to an integer, as ``cachesim`` does.
Requests of size 0 and ``delete`` ops are skipped. Bad trace files raise
:class:`cachelab.errors.InputError` naming the file and line or byte offset; bad arguments
raise :class:`cachelab.errors.UsageError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Union

import cachelab._core as _core
from cachelab.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "FlatResult",
    "FlatSimulation",
    "FlatTrace",
    "MissRatioCurve",
    "load_trace",
    "miss_ratio_curve",
    "policies",
    "simulate_flat",
]

#: The Rust trace class (``load``, ``write``, ``inspect``, ``ids_bytes`` …).
FlatTrace = _core.FlatTrace

TraceLike = Union[str, "os.PathLike[str]", "_core.FlatTrace"]

#: Policies simulated when none are named.
DEFAULT_POLICIES = ("lru", "fifo", "lfu", "arc", "s3fifo", "sieve")
#: Sizes simulated when none are given: fractions of the working set, as libCacheSim's defaults.
DEFAULT_SIZES = (0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.8)


def policies() -> list[str]:
    """Names of the available eviction policies (the Rust registry)."""
    return list(_core.flat_policies())


def load_trace(path: str | os.PathLike[str], format: str | None = None) -> _core.FlatTrace:
    """Read a trace; ``format`` is ``csv``, ``oracle``, ``lines`` or ``capture`` (the gets of
    a ``trace capture``), else from the extension."""
    # deferred: simulating a file by path (simulate_flat) never needs the trace names and
    # their imports (pathlib …), and a flat simulation's CPU time counts its start-up
    from cachelab.traces.names import CAPTURE_FORMAT, detect_format, load_flat

    try:
        capture = detect_format(path, format) == CAPTURE_FORMAT
    except UsageError:
        capture = False  # the Rust reader names the formats it takes
    if capture:
        return load_flat(path, CAPTURE_FORMAT)
    return _core.FlatTrace.load(os.fspath(path), format)


def _trace(trace: TraceLike, format: str | None) -> tuple[_core.FlatTrace, str | None]:
    if isinstance(trace, _core.FlatTrace):
        return trace, None
    return load_trace(trace, format), os.fspath(trace)


@dataclass(frozen=True)
class FlatResult:
    """One policy at one capacity."""

    policy: str
    capacity: int
    unit: str
    requests: int
    misses: int
    miss_ratio: float
    bytes: int
    miss_bytes: int
    byte_miss_ratio: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FlatSimulation:
    """Every (policy, capacity) result of one run over one trace."""

    trace: str | None
    unit: str
    results: tuple[FlatResult, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": self.trace,
            "unit": self.unit,
            "results": [r.to_dict() for r in self.results],
        }

    def policies(self) -> list[str]:
        return list(dict.fromkeys(r.policy for r in self.results))

    def series(self, policy: str) -> list[tuple[int, float]]:
        """``(capacity, miss_ratio)`` of one policy, by capacity."""
        return sorted((r.capacity, r.miss_ratio) for r in self.results if r.policy == policy)

    def csv_table(self) -> tuple[list[str], list[list[Any]]]:
        """One row per result, columns as :class:`FlatResult`."""
        header = [f.name for f in fields(FlatResult)]
        return header, [[getattr(r, name) for name in header] for r in self.results]

    def write_csv(self, path: str | os.PathLike[str]) -> Path:
        """:meth:`csv_table` as a CSV file at ``path``."""
        return _write_rows(path, *self.csv_table())


@dataclass(frozen=True)
class MissRatioCurve:
    """An LRU miss-ratio curve from one pass of stack distances.

    ``exact`` is true unless SHARDS sampling was used (``sample_rate < 1``). In objects the
    exact curve equals LRU simulated at each capacity; in bytes it does when every object keeps
    one size and fits the smallest capacity.
    """

    unit: str
    sample_rate: float
    exact: bool
    requests: int
    bytes: int
    capacities: tuple[int, ...]
    miss_ratios: tuple[float, ...]
    byte_miss_ratios: tuple[float, ...]
    trace: str | None = None
    policy: str = "lru"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("capacities", "miss_ratios", "byte_miss_ratios"):
            d[k] = list(d[k])
        return d

    def write_csv(self, path: str | os.PathLike[str]) -> Path:
        """Columns ``capacity, unit, miss_ratio, byte_miss_ratio``."""
        rows = [[c, self.unit, m, b]
                for c, m, b in zip(self.capacities, self.miss_ratios, self.byte_miss_ratios)]
        return _write_rows(path, ["capacity", "unit", "miss_ratio", "byte_miss_ratio"], rows)


def _write_rows(path: str | os.PathLike[str], header: list[str], rows: list[list[Any]]) -> Path:
    # deferred: only writing a CSV needs csv and pathlib (see load_trace on start-up time)
    import csv
    from pathlib import Path

    # deferred: as csv and pathlib, which it imports
    from cachelab.artifacts import atomic_file

    p = Path(path)
    with atomic_file(p) as tmp, tmp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return p


def _check_unit(unit: str) -> None:
    if unit not in ("objects", "bytes"):
        raise UsageError(f'unit must be "objects" or "bytes", got {unit!r}')


def resolve_sizes(
    trace: _core.FlatTrace, sizes: Sequence[int | float], unit: str,
    *, inspection: dict[str, Any] | None = None,
) -> list[int]:
    """Capacities from ``sizes``: ints as they are, floats in (0, 1] as a fraction of the
    working set (objects: distinct keys; bytes: sum of first sizes), truncated like cachesim.
    ``inspection`` is ``trace.inspect()`` when the caller has it already."""
    _check_unit(unit)
    wss: int | None = None
    out: list[int] = []
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            raise UsageError(f"size {s!r} is not a number")
        if isinstance(s, int):
            if s < 0:
                raise UsageError(f"size {s} is negative")
            out.append(s)
            continue
        if not 0.0 < s <= 1.0:
            raise UsageError(f"fractional size {s} must be in (0, 1]")
        if wss is None:
            info = inspection if inspection is not None else trace.inspect()
            wss = info["unique_keys"] if unit == "objects" else info["working_set_bytes"]
        out.append(int(wss * s))
    return out


def simulate_flat(
    trace: TraceLike,
    policies: Sequence[str] = DEFAULT_POLICIES,
    sizes: Sequence[int | float] = DEFAULT_SIZES,
    unit: str = "objects",
    *,
    threads: int = 0,
    format: str | None = None,
) -> FlatSimulation:
    """Simulate each policy at each size over one trace (a path or a loaded :data:`FlatTrace`).

    An int size is a capacity (objects or bytes, per ``unit``); a float in (0, 1] is that
    fraction of the working set, truncated, as in libCacheSim's ``cachesim``. A path is read
    straight into simulation form: an oracleGeneral file is streamed, keeping 8 bytes per
    request — or none at all for one policy at one integer size, which then runs as the file
    is read. Load a :data:`FlatTrace` first to reuse one trace across calls. ``threads=0``
    uses every core. Results are ordered policy by policy, sizes in the given order.
    """
    _check_unit(unit)
    if threads < 0:
        raise UsageError(f"threads must be >= 0, got {threads}")
    if isinstance(trace, _core.FlatTrace):
        source: Any = trace
        path = None
    else:
        path = os.fspath(trace)
        source = path
    rows = _core.flat_simulate(source, list(policies), list(sizes), unit, threads, format)
    return FlatSimulation(path, unit, tuple(FlatResult(**r) for r in rows))


def miss_ratio_curve(
    trace: TraceLike,
    unit: str = "objects",
    *,
    sample_rate: float | None = None,
    sizes: Sequence[int | float] | None = None,
    points: int = 100,
    format: str | None = None,
) -> MissRatioCurve:
    """The LRU miss-ratio curve in one pass: at ``sizes`` (as in :func:`simulate_flat`), or
    else at ``points`` log-spaced capacities from 0.1 % of the working set up to all of it.
    ``sample_rate`` in (0, 1) samples keys with SHARDS (for very large traces)."""
    _check_unit(unit)
    t, path = _trace(trace, format)
    caps = resolve_sizes(t, sizes, unit) if sizes is not None else None
    d = _core.flat_mrc(t, unit, sample_rate, caps, points)
    return MissRatioCurve(
        unit=d["unit"],
        sample_rate=d["sample_rate"],
        exact=d["exact"],
        requests=d["requests"],
        bytes=d["bytes"],
        capacities=tuple(d["capacities"]),
        miss_ratios=tuple(d["miss_ratios"]),
        byte_miss_ratios=tuple(d["byte_miss_ratios"]),
        trace=path,
    )
