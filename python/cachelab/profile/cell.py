"""A profile's cells: one :class:`Cell` per operation and value size or key count, the
operations a profile holds, and the names of their tables' rows and figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cachelab._core as _core
from cachelab.errors import InputError
from cachelab.intervals import intervals as percentile_intervals
from cachelab.intervals import tail_samples
from cachelab.tables import PERCENTILES
from cachelab.units import format_size, pct_key

#: Rows of the printed tables and keys of each cell's ``percentiles``.
TABLE_ROWS = tuple(pct_key(p) for p in PERCENTILES) + ("max",)

#: The operations a profile holds, in the order they are reported.
OPS = ("get", "set", "multiget")

#: Each operation's figure: its file's base name and its title.
PLOT_FILES = {"get": "get-by-size", "set": "set-by-size", "multiget": "multiget-by-keys"}
PLOT_TITLES = {
    "get": "get latency by value size",
    "set": "set latency by value size",
    "multiget": "multi-get latency by key count",
}


@dataclass
class Cell:
    """One measured operation at one value size or key count."""

    op: str
    value_size: int
    keys: int
    samples: int
    histogram: str
    errors: dict[str, int] = field(default_factory=dict)
    mismatches: int = 0
    misses: int = 0
    percentiles: dict[str, int] = field(default_factory=dict)
    #: 95 % intervals of the table's percentiles, ``{row: [low, high] or None}`` (None: too
    #: few samples beyond it; :mod:`cachelab.intervals`); empty when not computed (published
    #: and pooled cells).
    intervals: dict[str, list[int] | None] = field(default_factory=dict)
    #: With a precision target (``profile --precision``): ``{"half_width": relative
    #: half-width of the p99's interval or None, "reached": bool}``; None without one.
    precision: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        if self.op == "multiget":
            return f"{self.keys} key" + ("" if self.keys == 1 else "s")
        if self.op == "floor":
            return "floor"
        return format_size(self.value_size)

    def at(self, percentiles: list[float]) -> list[int]:
        """Latency (ns) at each percentile, read from the histogram."""
        return _core.hist_percentiles(self.histogram, percentiles) if self.samples else [0] * len(
            percentiles
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> Cell:
        try:
            cell = cls(
                op=str(d["op"]),
                value_size=int(d["value_size"]),
                keys=int(d["keys"]),
                samples=int(d["samples"]),
                histogram=str(d["histogram"]),
                errors={str(k): int(v) for k, v in dict(d.get("errors", {})).items()},
                mismatches=int(d.get("mismatches", 0)),
                misses=int(d.get("misses", 0)),
                percentiles={str(k): int(v) for k, v in dict(d.get("percentiles", {})).items()},
                intervals={str(k): None if v is None else [int(v[0]), int(v[1])]
                           for k, v in dict(d.get("intervals", {})).items()},
                precision=None if d.get("precision") is None else {
                    "half_width": d["precision"].get("half_width"),
                    "reached": bool(d["precision"]["reached"])},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"{where}: a cell is missing or has a bad field: {e}") from None
        try:
            _core.hist_summary(cell.histogram)
        except InputError as e:
            raise InputError(f"{where}: {cell.op} cell: {e}") from None
        return cell


def with_percentiles(cell: Cell, *, intervals: bool = False) -> Cell:
    """``cell`` with its ``percentiles`` (the table rows) read from its histogram; with
    ``intervals``, also their 95 % intervals (for a cell of measured, independent samples)."""
    values = cell.at([*PERCENTILES, 100.0])
    cell.percentiles = dict(zip(TABLE_ROWS, values))
    if intervals and cell.samples:
        cell.intervals = percentile_intervals(
            cell.histogram, cell.samples, dict(zip(TABLE_ROWS, PERCENTILES)))
    return cell


def shown_percentiles(cell: Cell) -> dict[str, float | str]:
    """A cell's column of the printed table: each percentile in ns, or ``"n/a (k)"`` when its
    interval could not be given (``k`` samples beyond it); empty without samples."""
    if not cell.samples:
        return {}
    out: dict[str, float | str] = {}
    for row, value in cell.percentiles.items():
        if cell.intervals and row in cell.intervals and cell.intervals[row] is None:
            out[row] = f"n/a ({tail_samples(cell.samples, float(row))})"
        else:
            out[row] = float(value)
    return out


def interval_text(cell: Cell, row: str) -> str:
    """``"-2/+3%"``: the 95 % interval of a percentile relative to it; "—" without one."""
    iv, value = cell.intervals.get(row), cell.percentiles.get(row)
    if not iv or not value:
        return "n/a" if row in cell.intervals and iv is None else "—"
    return f"-{100 * (value - iv[0]) / value:.0f}/+{100 * (iv[1] - value) / value:.0f}%"


def floor_p50(cells: Sequence[Cell]) -> int | None:
    """The median of the loopback floor among ``cells``; None when there is none (or it has
    no samples)."""
    floor = next((c for c in cells if c.op == "floor"), None)
    return floor.percentiles.get("50") if floor and floor.samples else None
