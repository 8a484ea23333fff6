"""Trace formats by name and extension, and reading a flat key trace — importing nothing heavy.

:mod:`cachelab.traces.formats` (numpy, the request-trace readers) re-exports these; flat
simulation (:mod:`cachelab.simulate.flat`) imports this module alone, so simulating a flat
trace starts without loading numpy, pandas or pyarrow.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cachelab._core as _core
from cachelab.errors import InputError, UsageError

__all__ = [
    "CAPTURE_FORMAT",
    "FLAT_FORMATS",
    "MAX_FLAT_VALUE",
    "REQUEST_FORMATS",
    "detect_format",
    "flat_class",
    "format_name",
    "is_request_format",
    "load_flat",
]

REQUEST_FORMATS = ("jsonl", "parquet")
FLAT_FORMATS = ("csv", "oracle", "lines")
#: A capture of a live memcached (:mod:`cachelab.traces.capture`): read as a flat trace of
#: its gets, never written by conversion.
CAPTURE_FORMAT = "capture"

#: Largest size (bytes) and time (whole seconds) of a flat trace's access (u32 columns).
MAX_FLAT_VALUE = 2**32 - 1

_ALIASES = {
    "jsonl": "jsonl", "json": "jsonl", "ndjson": "jsonl",
    "parquet": "parquet",
    "capture": "capture",
    "csv": "csv",
    "oracle": "oracle", "oraclegeneral": "oracle", "bin": "oracle", "binary": "oracle",
    "lines": "lines", "txt": "lines", "text": "lines",
}
_SUFFIXES = (
    (".jsonl.gz", "jsonl"), (".jsonl", "jsonl"), (".ndjson", "jsonl"),
    (".capture.parquet", "capture"),
    (".parquet", "parquet"),
    (".csv", "csv"),
    (".oraclegeneral.bin", "oracle"), (".oraclegeneral", "oracle"), (".bin", "oracle"),
    (".txt", "lines"), (".lines", "lines"),
)


def format_name(name: str) -> str:
    """The canonical name of a format given by name or alias; UsageError if unknown."""
    canonical = _ALIASES.get(name.lower())
    if canonical is None:
        raise UsageError(
            f"unknown trace format {name!r} (request traces: jsonl, parquet; flat traces: csv, "
            "oracle (oracleGeneral, bin), lines (txt))"
        )
    return canonical


def detect_format(path: str | os.PathLike[str], override: str | None = None) -> str:
    """``override`` (a name or alias) if given, else the format ``path``'s extension implies."""
    if override:
        return format_name(override)
    name = Path(path).name.lower().rstrip("/")
    for suffix, fmt in _SUFFIXES:
        if name.endswith(suffix):
            return fmt
    raise UsageError(
        f"{path}: cannot tell the trace format from the name (use .jsonl, .jsonl.gz, "
        ".parquet, .capture.parquet, .csv, .bin, .oracleGeneral or .txt, or name the format)"
    )


def is_request_format(fmt: str) -> bool:
    return fmt in REQUEST_FORMATS


def flat_class() -> Any:
    cls = getattr(_core, "FlatTrace", None)
    if cls is None:
        raise UsageError("this build of cachelab has no flat-trace support (_core.FlatTrace)")
    return cls


def load_flat(path: str | os.PathLike[str], format: str | None = None) -> Any:
    """Reads a flat key trace with ``cachelab._core.FlatTrace``."""
    fmt = detect_format(path, format)
    if is_request_format(fmt):
        raise UsageError(f"{path}: a {fmt} file is a request trace, not a flat key trace")
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    if fmt == CAPTURE_FORMAT:
        # deferred: capture imports pyarrow, which takes ~0.1 s
        from cachelab.traces.capture import capture_accesses

        ids, sizes, times = capture_accesses(path)
        return flat_class().from_arrays(ids.tolist(), sizes.tolist(), times.tolist())
    return flat_class().load(str(path), format=fmt)
