"""``simulate`` on a flat key trace: eviction policies at several sizes, and the LRU curve.

:func:`simulate_flat_trace` reads a flat trace once (``.csv``, ``.oracleGeneral``/``.bin``,
``.txt``), runs every policy of a :class:`FlatSimulateSpec` at every size with
:func:`~cachelab.simulate.flat.simulate_flat` and, with ``mrc``, the one-pass LRU curve
(:func:`~cachelab.simulate.flat.miss_ratio_curve`); the :class:`FlatSimulationResult` writes
``simulate.json`` (schema ``cachelab.simulation``, mode ``flat``), the CSVs and the plots.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import created_now, write_json
from cachelab.errors import UsageError
from cachelab.simulate import flat
from cachelab.simulate.answers import flat_answers
from cachelab.simulate.render import render_flat
from cachelab.simulate.request import LIMITS as REQUEST_LIMITS
from cachelab.simulate.request import SCHEMA, SCHEMA_VERSION
from cachelab.units import check_limit, limited, limits_of, parse_size

__all__ = [
    "FLAT_LIMITS",
    "FlatSimulateSpec",
    "FlatSimulationResult",
    "parse_sizes",
    "simulate_flat_trace",
    "split_policies",
]


def parse_sizes(text: str, unit: str = "objects") -> list[int | float]:
    """``1000,1MiB,0.1%`` -> ``[1000, 1048576, 0.001]``: capacities in ``unit`` (objects or
    bytes; K/M suffixes allowed in both) as they are, a percentage as that share of the
    trace's working set."""
    out: list[int | float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.endswith("%"):
            try:
                share = float(part[:-1]) / 100.0
            except ValueError:
                raise UsageError(f"--sizes: {part!r} is not a percentage") from None
            if not 0.0 < share <= 1.0:
                raise UsageError(f"--sizes: {part} must be above 0 % and at most 100 %")
            out.append(share)
        else:
            out.append(_capacity(part, unit))
    if not out:
        raise UsageError("--sizes: give at least one size, e.g. 0.1%,1%,10% or 1000,10000")
    return out


def _capacity(part: str, unit: str) -> int:
    """One ``--sizes`` capacity in ``unit``; the error names the unit."""
    try:
        value = parse_size(part, allow_zero=True)
    except UsageError as e:
        if unit == "bytes":
            raise UsageError(f"--sizes: {e}") from None
        raise UsageError(
            f"--sizes: {part!r} is not a number of objects (a whole number such as 1000 or "
            "10K) or a share of the trace's objects (such as 1%)"
        ) from None
    if value == 0:
        noun = "byte" if unit == "bytes" else "object"
        raise UsageError(f"--sizes: {part!r}: a cache holds at least 1 {noun}")
    return value


def split_policies(text: str) -> tuple[str, ...]:
    """``"LRU, s3fifo"`` -> ``("lru", "s3fifo")`` (checked by :meth:`FlatSimulateSpec.check`)."""
    return tuple(p.strip().lower() for p in text.split(",") if p.strip())


@dataclass
class FlatSimulateSpec:
    """What to simulate on a flat trace. ``sizes``: ints are capacities (objects or bytes, per
    ``unit``), floats in (0, 1] shares of the working set; ``shards``: the LRU curve's SHARDS
    sampling rate (None: exact); ``format``: the trace's, when its name does not tell."""

    policies: tuple[str, ...] = flat.DEFAULT_POLICIES
    sizes: tuple[int | float, ...] = flat.DEFAULT_SIZES
    unit: str = "objects"
    mrc: bool = False
    shards: float | None = limited(None, 0.0, 1.0, above=True)
    #: Worker threads (0: one per core), in the request-level simulation's range.
    threads: int = field(default=0, metadata={"limit": REQUEST_LIMITS["threads"]})
    format: str | None = None

    def check(self) -> None:
        """Raises UsageError naming the first bad field."""
        for name, limit in FLAT_LIMITS.items():
            if getattr(self, name) is not None:
                check_limit(name, limit, getattr(self, name))
        known = flat.policies()
        unknown = [p for p in self.policies if p not in known]
        if unknown or not self.policies:
            raise UsageError(
                f"--policies: unknown {', '.join(unknown) or '(none given)'}; "
                f"choose from {', '.join(known)}"
            )


#: The range of each numeric field only Python checks (the flags' too).
FLAT_LIMITS = limits_of(FlatSimulateSpec)


@dataclass
class FlatSimulationResult:
    """Every (policy, capacity) miss ratio of one flat trace, and the LRU curve if asked for."""

    created: str
    #: ``source`` (the path as given) and the trace's inspection (requests, unique keys, ...).
    trace: dict[str, Any]
    unit: str
    policies: list[str]
    capacities: list[int]
    simulation: flat.FlatSimulation
    curve: flat.MissRatioCurve | None = None
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "mode": "flat",
            "created": self.created,
            "trace": self.trace,
            "unit": self.unit,
            "policies": self.policies,
            "capacities": self.capacities,
            "elapsed_s": round(self.elapsed_s, 3),
            "results": [r.to_dict() for r in self.simulation.results],
        }
        if self.curve is not None:
            doc["mrc"] = self.curve.to_dict()
        return doc

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    def render(self) -> str:
        """The tables ``cachelab simulate`` prints for a flat trace."""
        return render_flat(self.to_dict(), self.simulation)

    def answers(self) -> list[Answer]:
        """The answer card: each policy's miss ratio at each size asked and the best policy,
        *predicted* (:func:`~cachelab.simulate.answers.flat_answers`)."""
        return flat_answers(self.to_dict())

    def csv_table(self) -> tuple[list[str], list[list[Any]]]:
        """``simulate.csv`` (and ``--format csv``): a row per (policy, capacity)."""
        return self.simulation.csv_table()

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """Writes ``simulate.json``, ``simulate.csv``, ``simulate-mrc.csv`` (with the curve)
        and, with ``plots``, ``simulate-miss-ratio.png``/``.svg`` (and in bytes
        ``simulate-byte-miss-ratio.png``/``.svg``) into ``out_dir``; returns their paths."""
        out = Path(out_dir)
        written = [self.save(out / "simulate.json"),
                   self.simulation.write_csv(out / "simulate.csv")]
        if self.curve is not None:
            written.append(self.curve.write_csv(out / "simulate-mrc.csv"))
        if plots:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.simulate.plots import miss_ratio_plot

            name = Path(self.trace["source"]).name
            written += miss_ratio_plot(self.simulation, self.curve,
                                       title=f"Miss ratio by cache size: {name}",
                                       out_base=out / "simulate-miss-ratio")
            if self.unit == "bytes":
                written += miss_ratio_plot(self.simulation, self.curve,
                                           title=f"Byte miss ratio by cache size: {name}",
                                           out_base=out / "simulate-byte-miss-ratio",
                                           byte_ratio=True)
        return written


#: What runs the (policy, capacity) grid: ``runner(trace, policies, capacities, unit)``.
GridRunner = Callable[[flat.FlatTrace, Sequence[str], Sequence[int], str], flat.FlatSimulation]


def simulate_flat_trace(
    path: str | os.PathLike[str], spec: FlatSimulateSpec | None = None,
    *, runner: GridRunner | None = None,
) -> FlatSimulationResult:
    """Reads the flat trace at ``path`` once and simulates ``spec`` on it. Bad files raise
    :class:`~cachelab.errors.InputError` naming the file and line or offset. ``runner``
    replaces the local run of the policy × capacity grid (:mod:`cachelab.simulate.fanout`
    runs it on a Ray cluster)."""
    spec = spec or FlatSimulateSpec()
    spec.check()
    started = time.perf_counter()
    trace = flat.load_trace(path, spec.format)
    info = trace.inspect()
    capacities = flat.resolve_sizes(trace, spec.sizes, spec.unit, inspection=info)
    if runner is None:
        sim = flat.simulate_flat(trace, spec.policies, capacities, spec.unit,
                                 threads=spec.threads)
    else:
        sim = runner(trace, spec.policies, capacities, spec.unit)
    curve = flat.miss_ratio_curve(trace, spec.unit, sample_rate=spec.shards) if spec.mrc else None
    elapsed = time.perf_counter() - started
    return FlatSimulationResult(
        created=created_now(),
        trace={"source": str(path), **info},
        unit=spec.unit,
        policies=list(spec.policies),
        capacities=capacities,
        simulation=sim,
        curve=curve,
        elapsed_s=elapsed,
    )
