"""Trace formats by name and extension; load, save and convert any of them.

Request traces (jsonl, parquet) are read and written here in Python; flat key traces (csv,
oracle, lines) by the Rust core's ``cachelab._core.FlatTrace``. A request trace converts to a
flat one by :func:`write_flat_csv` (one access per first touch of an item in a request).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from cachelab.artifacts import atomic_file
from cachelab.errors import UsageError
from cachelab.traces.names import (
    CAPTURE_FORMAT,
    FLAT_FORMATS,
    MAX_FLAT_VALUE,
    REQUEST_FORMATS,
    detect_format,
    flat_class,
    format_name,
    is_request_format,
    load_flat,
)
from cachelab.traces.request import RequestTrace

__all__ = [
    "CAPTURE_FORMAT",
    "FLAT_FORMATS",
    "REQUEST_FORMATS",
    "convert",
    "detect_format",
    "flat_accesses",
    "format_name",
    "is_request_format",
    "load_flat",
    "load_request_trace",
    "render_conversion",
    "save_request_parts",
    "save_request_trace",
    "write_flat_csv",
]

def load_request_trace(path: str | os.PathLike[str], format: str | None = None) -> RequestTrace:
    """Reads a request trace (JSONL or Parquet). Raises InputError naming file and line/row."""
    fmt = detect_format(path, format)
    if fmt == "jsonl":
        # deferred: pyarrow takes ~0.1 s to import; only reading and writing request traces needs it
        from cachelab.traces.jsonl import read_jsonl

        return read_jsonl(path)
    if fmt == "parquet":
        # deferred: pyarrow takes ~0.1 s to import; only reading and writing request traces needs it
        from cachelab.traces.parquet import read_parquet

        return read_parquet(path)
    raise UsageError(f"{path}: a {fmt} file is a flat key trace, not a request trace")


def save_request_trace(
    trace: RequestTrace, path: str | os.PathLike[str], format: str | None = None
) -> Path:
    """Writes a request trace as JSONL or Parquet (atomically) and returns the path."""
    return save_request_parts(trace, [trace], path, format)


def save_request_parts(
    catalog: RequestTrace, parts: Iterable[RequestTrace], path: str | os.PathLike[str],
    format: str | None = None,
) -> Path:
    """Writes the header and catalog of ``catalog``, then the requests of each of ``parts``
    (traces over that catalog) as they come, as JSONL or Parquet (atomically: nothing is left
    at ``path`` if a part raises); returns the path."""
    fmt = detect_format(path, format)
    if fmt == "jsonl":
        # deferred: pyarrow takes ~0.1 s to import; only reading and writing request traces needs it
        from cachelab.traces.jsonl import write_jsonl_parts

        return write_jsonl_parts(catalog, parts, path)
    if fmt == "parquet":
        # deferred: pyarrow takes ~0.1 s to import; only reading and writing request traces needs it
        from cachelab.traces.parquet import write_parquet_parts

        return write_parquet_parts(catalog, parts, path)
    raise UsageError(f"{path}: {fmt} is a flat trace format; use write_flat_csv or convert()")


# -- request -> flat -------------------------------------------------------------------------


def flat_accesses(trace: RequestTrace) -> tuple[np.ndarray, np.ndarray]:
    """The flat view of a request trace: (request position, item index) of every first touch
    of an item within its request, in request order and then touch order."""
    mask = trace.first_touch_mask()
    return trace.request_of_touch()[mask], trace.touch_items[mask].astype(np.int64)


def write_flat_csv(trace: RequestTrace, path: str | os.PathLike[str]) -> int:
    """Writes the flat view (:func:`flat_accesses`) as CSV ``time,key,size`` (time in seconds
    with 6 decimals, the item's key and size), atomically. Returns the number of accesses.

    The time is cut, not rounded, to the microsecond: a reader that keeps whole seconds (the
    oracleGeneral view) then sees the same second as the request trace, never the next one."""
    requests, items = flat_accesses(trace)
    used = np.unique(items)
    for i in used.tolist():
        if "," in trace.item_keys[i]:
            raise UsageError(
                f"item key {trace.item_keys[i]!r} holds a comma, which a flat CSV trace cannot "
                "hold (it has no quoting); convert to .bin (oracleGeneral) instead"
            )
    big = used[trace.item_sizes[used] > MAX_FLAT_VALUE]
    if len(big):
        i = int(big[0])
        raise UsageError(
            f"item {trace.item_keys[i]!r} is {int(trace.item_sizes[i])} bytes; a flat trace "
            f"holds sizes up to {MAX_FLAT_VALUE}"
        )
    late = np.flatnonzero(trace.time[requests] >= MAX_FLAT_VALUE + 1)
    if len(late):
        r = int(requests[late[0]])
        raise UsageError(
            f"request {int(trace.request_ids[r])} is at {float(trace.time[r])!r} s; a flat "
            f"trace holds whole seconds up to {MAX_FLAT_VALUE}"
        )
    keys = np.array(trace.item_keys, dtype=object)
    sizes = trace.item_sizes.astype(np.int64)
    times = trace.time
    chunk = 1 << 16
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as out:
        out.write("time,key,size\n")
        for start in range(0, len(items), chunk):
            it = items[start : start + chunk]
            t = times[requests[start : start + chunk]].astype(np.float64)
            whole = np.floor(t)
            micros = np.minimum(np.floor((t - whole) * 1e6), 999_999).astype(np.int64).tolist()
            k = keys[it].tolist()
            s = sizes[it].tolist()
            out.write("".join(f"{w}.{u:06d},{b},{c}\n"
                              for w, u, b, c in zip(whole.astype(np.int64).tolist(), micros, k, s)))
    return len(items)


def convert(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    from_format: str | None = None,
    to_format: str | None = None,
) -> dict[str, Any]:
    """Converts ``src`` to ``dst``; returns a summary. Request → request (jsonl/parquet),
    request → flat (one access per first touch), flat → flat. Nothing is written when the
    input is malformed."""
    src_fmt = detect_format(src, from_format)
    dst_fmt = detect_format(dst, to_format)
    summary: dict[str, Any] = {
        "source": str(src), "source_format": src_fmt,
        "destination": str(dst), "destination_format": dst_fmt,
    }
    if Path(src).resolve() == Path(dst).resolve():
        raise UsageError(f"{dst}: the destination is the source")
    if is_request_format(src_fmt) and is_request_format(dst_fmt):
        # deferred: pyarrow takes ~0.1 s to import; only request traces need it
        from cachelab.traces.stream import convert_in_parts

        summary.update(convert_in_parts(src, dst, src_fmt, dst_fmt))
        return summary
    if is_request_format(src_fmt):
        trace = load_request_trace(src, src_fmt)
        summary.update(requests=trace.n_requests, items=trace.n_items, touches=trace.n_touches)
        if is_request_format(dst_fmt):
            save_request_trace(trace, dst, dst_fmt)
            return summary
        if dst_fmt == "csv":
            summary["accesses"] = write_flat_csv(trace, dst)
            return summary
        # request -> oracle / lines: through a temporary CSV that FlatTrace reads
        target = Path(dst)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".convert.") as tmpdir:
            tmp = Path(tmpdir) / "flat.csv"
            summary["accesses"] = write_flat_csv(trace, tmp)
            # no accesses: an empty trace, as the CSV is (the flat reader refuses both)
            flat = (flat_class().load(str(tmp), format="csv") if summary["accesses"]
                    else flat_class().from_arrays([], [], []))
            _write_flat(flat, dst, dst_fmt)
        return summary
    if is_request_format(dst_fmt):
        raise UsageError(
            f"cannot convert a flat key trace ({src_fmt}) to a request trace ({dst_fmt}): it "
            "has no requests or catalog"
        )
    if dst_fmt == CAPTURE_FORMAT:
        raise UsageError("a capture is written only by `cachelab trace capture`, not converted "
                         "to")
    flat = load_flat(src, src_fmt)
    summary["accesses"] = len(flat)
    _write_flat(flat, dst, dst_fmt)
    return summary


def _write_flat(flat: Any, dst: str | os.PathLike[str], fmt: str) -> None:
    """``flat.write`` (Rust, which names its own temporary file) inside a fresh private
    directory, its file then renamed to ``dst`` by :func:`atomic_file`: nothing but a file
    this run created is opened, and only a regular file at ``dst`` is replaced."""
    with atomic_file(dst) as tmp, \
            tempfile.TemporaryDirectory(dir=tmp.parent, prefix=".convert.") as scratch:
        inner = Path(scratch) / "trace"
        flat.write(str(inner), format=fmt)
        os.replace(inner, tmp)


def render_conversion(summary: dict[str, Any]) -> str:
    """The one line ``cachelab trace convert`` prints on a terminal, from :func:`convert`'s
    summary."""
    what = f"{summary['requests']:,} requests" if "requests" in summary else ""
    if "accesses" in summary:
        what += (", " if what else "") + f"{summary['accesses']:,} accesses"
    return (f"{summary['source']} ({summary['source_format']}) -> {summary['destination']} "
            f"({summary['destination_format']}): {what}")
