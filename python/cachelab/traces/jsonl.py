"""Request traces as JSONL: a header line, catalog lines, then request lines (docs/traces.md).

Reading parses the file with pyarrow's JSON reader and checks whole columns
(:mod:`cachelab.traces.arrow`); only when that finds a problem is the file read again line by
line (:class:`~cachelab.traces.builder.TraceBuilder`) to name the first bad line. Every problem
raises :class:`~cachelab.errors.InputError` naming the file and the (1-based) line. Writing is
atomic. A name ending in ``.gz`` is read and written through gzip.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from cachelab.artifacts import atomic_file
from cachelab.errors import InputError
from cachelab.traces.arrow import Place, from_arrow
from cachelab.traces.builder import TraceBuilder
from cachelab.traces.request import RequestTrace
from cachelab.traces.schema import check_header, header

__all__ = ["read_jsonl", "write_jsonl", "write_jsonl_parts"]


def _read_bytes(path: Path) -> bytes:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError) as e:  # EOFError: a truncated gzip stream
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise InputError(f"{path}: cannot read: {reason}") from None


def read_jsonl(path: str | os.PathLike[str]) -> RequestTrace:
    """Reads a JSONL request trace. Raises InputError naming the file and line.

    A valid file is parsed by pyarrow's JSON reader and checked column-wise; anything that
    fails there is read again line by line, which finds and names the first bad line.
    """
    p = Path(path)
    where = str(p)
    if p.is_dir():
        raise InputError(f"{where}: is a directory, not a JSONL file")
    data = _read_bytes(p)
    if not data:
        raise InputError(f"{where}: empty file (expected the header on line 1)")
    try:
        return _read_fast(data, where)
    except _Fallback:
        return _read_lines(io.BytesIO(data), where)


class _Fallback(Exception):
    """The fast reader cannot vouch for this input."""


_ARROW_SCHEMA = pa.schema([
    ("item", pa.string()),
    ("size", pa.int64()),
    ("kind", pa.string()),
    ("children", pa.list_(pa.string())),
    ("request", pa.int64()),
    ("time", pa.float64()),
    ("instance", pa.int64()),
    ("route", pa.string()),
    ("base_ms", pa.float64()),
    ("items", pa.list_(pa.string())),
])
_ARROW_PARSE = pa_json.ParseOptions(explicit_schema=_ARROW_SCHEMA,
                                    unexpected_field_behavior="error")
_ARROW_READ = pa_json.ReadOptions(block_size=16 << 20)
#: A line that does not start with "{" (see :func:`_read_fast`).
_NOT_AN_OBJECT = re.compile(rb"\n[^{]")


def _read_fast(data: bytes, where: str) -> RequestTrace:
    end = data.find(b"\n")
    if end < 0:
        raise _Fallback
    try:
        generator = check_header(json.loads(data[:end]), where)
    except (ValueError, RecursionError, InputError):
        raise _Fallback from None
    body = memoryview(data)[end + 1 :]
    lines = data.count(b"\n", end + 1) + (0 if data.endswith(b"\n") else 1)
    if lines == 0:
        raise _Fallback
    # pyarrow's JSON reader crashes the process (pyarrow 26: a segmentation fault) when a
    # block starts with a value other than an object, e.g. a line `null`: the fast path
    # takes only files whose every line starts with "{" (blocks start at line starts).
    if _NOT_AN_OBJECT.search(data, end):
        raise _Fallback
    try:
        table = pa_json.read_json(pa.BufferReader(body), read_options=_ARROW_READ,
                                  parse_options=_ARROW_PARSE)
    except (pa.ArrowException, ValueError):
        raise _Fallback from None
    if table.num_rows != lines:  # blank lines, or two objects on one line
        raise _Fallback
    is_item = np.asarray(table.column("item").is_valid())
    k = int(np.argmin(is_item)) if not is_item.all() else len(is_item)
    if is_item[k:].any():
        raise _Fallback
    head, tail = table.slice(0, k), table.slice(k)
    for name in ("request", "time", "instance", "route", "base_ms", "items"):
        if head.column(name).null_count != k:
            raise _Fallback
    for name in ("item", "size", "kind", "children"):
        if tail.column(name).null_count != len(tail):
            raise _Fallback

    def col(t: pa.Table, name: str) -> pa.Array:
        return t.column(name).combine_chunks()

    catalog = {name: col(head, name) for name in ("size", "kind", "children")}
    catalog["key"] = col(head, "item")
    requests = {name: col(tail, name) for name in ("time", "instance", "route", "base_ms",
                                                   "items")}
    requests["id"] = col(tail, "request")
    try:
        return from_arrow(catalog, requests, generator, Place(where, "line", 2),
                          Place(where, "line", 2 + k))
    except InputError:
        raise _Fallback from None


def _read_lines(handle: IO[bytes], where: str) -> RequestTrace:
    """The line-by-line reader: slower, and names the first bad line exactly."""
    builder = TraceBuilder(where)
    generator: dict[str, Any] | None = None
    line = 0
    for line, raw in enumerate(handle, start=1):
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as e:
            if not raw.strip():
                raise builder.error(line, "empty line") from None
            raise builder.error(line, f"not valid JSON ({_json_reason(e)})") from None
        if line == 1:
            generator = check_header(obj, f"{where}: line 1")
            continue
        if type(obj) is not dict:
            raise builder.error(line, "expected a JSON object")
        if "request" in obj:
            if "item" in obj:
                raise builder.error(line, "a line is a catalog item or a request, not both")
            builder.add_request(obj, line)
        elif "item" in obj:
            builder.add_item(obj, line)
        else:
            raise builder.error(
                line, "expected a catalog item (with 'item') or a request (with 'request')"
            )
    if line == 0:
        raise InputError(f"{where}: empty file (expected the header on line 1)")
    return RequestTrace(**builder.finish(generator))


def _json_reason(e: ValueError | RecursionError) -> str:
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg} at column {e.colno}"
    if isinstance(e, RecursionError):
        return "nested too deeply"
    return str(e)


def _request_lines(trace: RequestTrace, chunk: int = 8192) -> Iterator[str]:
    enc_keys = [json.dumps(k, ensure_ascii=False) for k in trace.item_keys]
    enc_routes = [json.dumps(r, ensure_ascii=False) for r in trace.route_names]
    get = enc_keys.__getitem__
    offsets = trace.touch_offsets
    for start in range(0, trace.n_requests, chunk):
        stop = min(start + chunk, trace.n_requests)
        ids = trace.request_ids[start:stop].tolist()
        times = trace.time[start:stop].tolist()
        insts = trace.instance[start:stop].tolist()
        routes = trace.route[start:stop].tolist()
        bases = trace.base_ms[start:stop].tolist()
        lo, hi = int(offsets[start]), int(offsets[stop])
        items = trace.touch_items[lo:hi].tolist()
        bounds = (offsets[start : stop + 1] - offsets[start]).tolist()
        for j in range(stop - start):
            touched = ",".join(map(get, items[bounds[j] : bounds[j + 1]]))
            yield (
                f'{{"request":{ids[j]},"time":{times[j]!r},"instance":{insts[j]},'
                f'"route":{enc_routes[routes[j]]},"base_ms":{bases[j]!r},'
                f'"items":[{touched}]}}\n'
            )


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write_jsonl(trace: RequestTrace, path: str | os.PathLike[str]) -> Path:
    """Writes ``trace`` as JSONL (gzip-compressed when the name ends in ``.gz``), atomically."""
    return write_jsonl_parts(trace, [trace], path)


def write_jsonl_parts(catalog: RequestTrace, parts: Iterable[RequestTrace],
                      path: str | os.PathLike[str]) -> Path:
    """Writes the header and catalog of ``catalog``, then the requests of each of ``parts``
    (traces over the same catalog) in order, as one JSONL file, atomically: nothing is left
    at ``path`` if reading a part raises."""
    target = Path(path)
    with atomic_file(target) as tmp:
        raw: IO[bytes]
        if target.name.endswith(".gz"):
            raw = gzip.GzipFile(filename="", mode="wb", fileobj=open(tmp, "wb"), mtime=0)  # noqa: SIM115
        else:
            raw = open(tmp, "wb")  # noqa: SIM115
        try:
            write = raw.write
            write((_dumps(header(catalog.generator)) + "\n").encode())
            for rec in catalog.catalog_records():
                write((_dumps(rec) + "\n").encode())
            batch: list[str] = []
            for part in parts:
                for text in _request_lines(part):
                    batch.append(text)
                    if len(batch) >= 4096:
                        write("".join(batch).encode())
                        batch.clear()
            write("".join(batch).encode())
        finally:
            fileobj = getattr(raw, "fileobj", None)
            raw.close()
            if fileobj is not None:
                fileobj.close()
    return target
