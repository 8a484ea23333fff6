"""Measurements from a CSV file: :func:`read_csv` reads (load, throughput) columns with errors
naming the file and line; :func:`fit_csv` reads and fits."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from cachelab.errors import InputError, UsageError
from cachelab.usl.fit import MIN_POINTS, fit_usl
from cachelab.usl.result import UslFit

__all__ = ["fit_csv", "read_csv"]


def read_csv(
    path: str | Path, n: str | None = None, x: str | None = None
) -> tuple[list[float], list[float], tuple[str, str]]:
    """Loads and throughputs from the columns named ``n`` and ``x`` of a CSV file with a
    header row (default: the first two columns). Blank lines and lines starting with ``#``
    are skipped. Returns (N values, X values, (N column, X column)). A malformed row raises
    InputError naming the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"{path}: empty file; expected a header row and data rows")
    rows = list(zip([i for i, _ in lines], csv.reader(line for _, line in lines)))
    header_line, header = rows[0]
    header = [h.strip() for h in header]
    if len(header) < 2:
        raise InputError(f"{path}:{header_line}: expected a header with at least two columns, "
                         f"got {','.join(header)!r}")
    n_col = n if n is not None else header[0]
    x_col = x if x is not None else header[1]
    idx = []
    for col in (n_col, x_col):
        if col not in header:
            raise InputError(f"{path}:{header_line}: no column {col!r}; columns: "
                             f"{', '.join(header)}")
        idx.append(header.index(col))
    ns: list[float] = []
    xs: list[float] = []
    for line_no, row in rows[1:]:
        values = []
        for col, i in zip((n_col, x_col), idx):
            if i >= len(row):
                raise InputError(f"{path}:{line_no}: missing column {col!r} "
                                 f"({len(row)} field(s), expected {len(header)})")
            cell = row[i].strip()
            try:
                v = float(cell)
            except ValueError:
                raise InputError(f"{path}:{line_no}: {col} {cell!r} is not a number") from None
            if not math.isfinite(v):
                raise InputError(f"{path}:{line_no}: {col} {cell!r} is not a finite number")
            values.append(v)
        if values[0] <= 0:
            raise InputError(f"{path}:{line_no}: load {n_col} = {row[idx[0]].strip()} must be "
                             "above 0")
        if values[1] < 0:
            raise InputError(f"{path}:{line_no}: throughput {x_col} = {row[idx[1]].strip()} "
                             "must not be negative")
        ns.append(values[0])
        xs.append(values[1])
    if len(ns) < MIN_POINTS:
        raise InputError(
            f"{path}: {len(ns)} data row(s) is too few to fit the USL's three parameters: "
            f"give at least {MIN_POINTS}"
        )
    return ns, xs, (n_col, x_col)


def fit_csv(path: str | Path, n: str | None = None, x: str | None = None,
            **kwargs: Any) -> UslFit:
    """:func:`read_csv` then :func:`fit_usl`; data problems are InputErrors naming the file."""
    ns, xs, (n_col, x_col) = read_csv(path, n, x)
    try:
        return fit_usl(ns, xs, source={"file": str(path), "n": n_col, "x": x_col}, **kwargs)
    except InputError:
        raise
    except UsageError as e:
        if "method" in str(e) or "bootstrap" in str(e) or "level" in str(e):
            raise
        raise InputError(f"{path}: {e}") from None
