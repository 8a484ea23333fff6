"""Plain-text percentile tables laid out like the appendix of the seed post, and a CSV helper.

A table has one row per percentile and one column per experiment (a value size, a key count,
...); every cell is a latency in nanoseconds shown in a single unit named in the title::

    Get latency by value size (ms)
    %ile     1B    10B
    ----  -----  -----
    5      1.38   1.35
    ...
    99.9  34.59  24.57
    max   61.02      —
"""

from __future__ import annotations

import csv
import math
import os
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from cachelab.artifacts import atomic_file
from cachelab.units import MISSING, format_duration_ns, pct_key, pick_unit

__all__ = [
    "CsvTable",
    "DEFAULT_ROWS",
    "MAX_ROW",
    "PERCENTILES",
    "percentile_table",
    "table_text",
    "text_table",
    "write_csv",
    "write_csv_rows",
    "write_json_and_csv",
]

#: The percentiles a table shows, in order; a :data:`MAX_ROW` row follows them.
PERCENTILES: tuple[float, ...] = (5.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9)

#: Row name (and mapping key) of the largest observed value.
MAX_ROW = "max"

_GAP = "  "  # between columns
_CAPTION_WIDTH = 72  # wrap captions at this width, or at the table's width if wider


#: The rows of a table unless told otherwise: ``"5", "25", ..., "99.9", "max"``.
DEFAULT_ROWS: tuple[str, ...] = (*(pct_key(p) for p in PERCENTILES), MAX_ROW)


def percentile_table(
    title: str,
    columns: Sequence[tuple[str, Mapping[str, float | str]]],
    *,
    rows: Sequence[str] | None = None,
    unit: str | None = None,
    caption: str | None = None,
    footer: Sequence[tuple[str, Sequence[str]]] = (),
) -> str:
    """Render latencies as a monospace table, one column per ``(label, values)`` pair.

    ``values`` maps a row name (see :func:`pct_key` and :data:`MAX_ROW`) to a latency in
    nanoseconds, or to ready text (``"n/a (3)"``); a row it lacks, or a ``None``/NaN value,
    shows as "—".  ``rows`` defaults to
    :data:`DEFAULT_ROWS`.  ``unit`` (``"µs"``, ``"ms"``, ...) defaults to
    :func:`~cachelab.units.pick_unit` over every value shown, and is appended to the title line.

    ``footer`` rows such as ``("samples", ["10000", "10000"])`` hold ready-made text, one
    string per column, and are printed under a rule; ``caption`` is wrapped below the table.
    Numbers and column labels are right-aligned and every line of the table below the title
    has the same width.  The result has no trailing newline and no colour codes.
    """
    row_names = list(DEFAULT_ROWS if rows is None else rows)
    values = [[_number(mapping.get(name)) for _, mapping in columns] for name in row_names]
    texts = [[mapping.get(name) if isinstance(mapping.get(name), str) else None
              for _, mapping in columns] for name in row_names]
    if unit is None:
        unit = pick_unit(v for row in values for v in row if v is not None)

    header = ["%ile", *(label for label, _ in columns)]
    body = [
        [name, *(t if t is not None else MISSING if v is None else format_duration_ns(v, unit)
                 for v, t in zip(row, text_row))]
        for name, row, text_row in zip(row_names, values, texts)
    ]
    foot = []
    for name, cells in footer:
        if len(cells) != len(columns):
            raise ValueError(
                f"footer row {name!r} has {len(cells)} cells for {len(columns)} columns"
            )
        foot.append([name, *cells])

    grid = [header, *body, *foot]
    widths = [max(len(line[i]) for line in grid) for i in range(len(header))]

    def render(cells: Sequence[str]) -> str:
        first, *rest = cells
        return first.ljust(widths[0]) + "".join(
            _GAP + cell.rjust(width) for cell, width in zip(rest, widths[1:])
        )

    rule = render(["-" * width for width in widths])
    lines = [f"{title} ({unit})", render(header), rule, *map(render, body)]
    if foot:
        lines += [rule, *map(render, foot)]
    if caption:
        lines += textwrap.wrap(caption, width=max(len(rule), _CAPTION_WIDTH))
    return "\n".join(lines)


def _number(value: float | str | None) -> float | None:
    """A cell's value as a float, or ``None`` when it is missing, not finite or ready text."""
    if value is None or isinstance(value, str):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


class CsvTable(Protocol):
    """A result with one main table: the rows of its ``VERB.csv``, which is also what
    ``--format csv`` prints on stdout (cli/output.py)."""

    def csv_table(self) -> tuple[Sequence[str], Iterable[Sequence[object]]]:
        """The header and the rows."""
        ...


def write_csv_rows(handle: TextIO, header: Sequence[str],
                   rows: Iterable[Sequence[object]]) -> None:
    """``header`` then ``rows`` as CSV (RFC 4180: lines end in ``\\r\\n``, fields quoted
    when they need it) to an open text ``handle`` (a file opened with ``newline=""``, or
    stdout)."""
    writer = csv.writer(handle)
    writer.writerow(header)
    writer.writerows(rows)


def write_csv(
    path: str | os.PathLike[str],
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
) -> None:
    """Write ``header`` and then ``rows`` to a UTF-8 CSV file, creating parent directories;
    atomically, replacing only a regular file (:func:`~cachelab.artifacts.atomic_file`).

    The file is opened with ``newline=""`` as the :mod:`csv` module requires, so lines end in
    ``\\r\\n`` on every platform and quoted fields may hold newlines.
    """
    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8", newline="") as handle:
        write_csv_rows(handle, header, rows)


def write_json_and_csv(result: Any, out_dir: Path, name: str) -> list[Path]:
    """A result's two main artifacts in ``out_dir`` (made if missing): ``NAME.json``
    (``result.save``) and ``NAME.csv`` (its :class:`CsvTable` ``csv_table()``); their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [result.save(out_dir / f"{name}.json")]
    write_csv(out_dir / f"{name}.csv", *result.csv_table())
    return [*written, out_dir / f"{name}.csv"]


def table_text(header: Sequence[object], rows: Iterable[Sequence[object]], *,
               left: int = 1) -> str:
    """:func:`text_table` as one string."""
    return "\n".join(text_table(header, rows, left=left))


def text_table(
    header: Sequence[object], rows: Iterable[Sequence[object]], *, left: int = 1
) -> list[str]:
    """A plain-text table, one string per line: the header, a rule, then the rows. The first
    ``left`` columns are left-aligned, the rest right-aligned; columns are two spaces apart and
    trailing blanks are dropped."""
    grid = [[str(c) for c in header], *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in grid) for i in range(len(grid[0]))]

    def line(cells: list[str]) -> str:
        return _GAP.join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(grid[0]), line(["-" * w for w in widths]), *map(line, grid[1:])]
