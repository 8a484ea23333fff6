"""Request traces read part by part: the catalog up front, then the requests in parts of a
fixed number of requests, in memory that does not grow with the trace.

:func:`open_request_parts` reads a JSONL or Parquet request trace's header and catalog, and
counts its requests (Parquet: from the file's metadata; JSONL: one pass counting lines, which
also finds lines that are not JSON objects). :meth:`RequestParts.parts` then reads the
requests in order — Parquet by record batches, JSONL through pyarrow's streaming JSON reader
— each part checked with the rules of :mod:`cachelab.traces.arrow` (errors name the file and
the line or row) and interned against the catalog; route names are interned across parts,
so a route's code is the same in every part. At most one part and one reader block are held
at a time (:attr:`RequestParts.buffered` says how many requests are waiting).

Two whole-trace checks are left out, because they need memory that grows with the trace:
duplicate request ids are looked for within each part only, and whether requests are in time
order is left to the caller (the simulator checks it as it reads).

A JSONL file the streaming reader cannot take (pyarrow refuses a line) is read again by the
line-by-line reader of :mod:`cachelab.traces.jsonl`, which names the first bad line.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from cachelab.errors import InputError
from cachelab.traces.arrow import Catalog, Place, check_catalog, check_requests
from cachelab.traces.jsonl import _ARROW_PARSE, read_jsonl, write_jsonl_parts
from cachelab.traces.parquet import (
    CATALOG_FILE,
    HEADER_KEY,
    REQUESTS_FILE,
    _column,
    string_leaves,
    write_parquet_parts,
)
from cachelab.traces.request import RequestTrace
from cachelab.traces.schema import check_header

__all__ = ["PART_MULTIPLE", "Part", "RequestParts", "convert_in_parts", "open_request_parts"]

#: Requests per part must be a multiple of this (the simulator sums results in blocks of it).
PART_MULTIPLE = 4096
#: Requests per part by default: 16 blocks (65,536 requests).
DEFAULT_PART = 16 * PART_MULTIPLE
_BLOCK = 16 << 20
_NOT_AN_OBJECT = re.compile(rb"\n[^{]")


@dataclass
class Part:
    """One part's request columns, interned (``route`` codes index ``RequestParts.route_names``
    as it is when the part is handed out); ``first``: the 0-based index of its first request in
    the trace; ``place``: where its rows are, for errors."""

    first: int
    request_ids: np.ndarray
    time: np.ndarray
    instance: np.ndarray
    route: np.ndarray
    base_ms: np.ndarray
    touch_offsets: np.ndarray
    touch_items: np.ndarray
    place: Place

    def __len__(self) -> int:
        return len(self.time)

    def core_columns(self) -> dict[str, bytes]:
        """The columns as ``_core.RequestStream.feed`` takes them (little-endian bytes)."""
        return {
            "time": self.time.astype("<f8", copy=False).tobytes(),
            "instance": self.instance.astype("<u4", copy=False).tobytes(),
            "route": self.route.astype("<u4", copy=False).tobytes(),
            "base_ms": self.base_ms.astype("<f8", copy=False).tobytes(),
            "touch_offsets": self.touch_offsets.astype("<u8", copy=False).tobytes(),
            "touch_items": self.touch_items.astype("<u4", copy=False).tobytes(),
        }


@dataclass
class RequestParts:
    """A request trace's catalog and request count, and a reader of its requests in parts."""

    path: Path
    format: str
    catalog: Catalog
    n_requests: int
    generator: dict[str, Any] | None
    part_requests: int = DEFAULT_PART
    route_names: list[str] = field(default_factory=list)
    #: Requests read from the file but not yet handed out in a part (the reader's buffer).
    buffered: int = 0
    _routes: dict[str, int] = field(default_factory=dict, repr=False)
    _first_request_line: int = 0
    #: Parquet: the ``items`` string leaves, read dictionary-encoded (each part's distinct
    #: item names are then decoded and looked up once, not once per touch).
    _dictionary_leaves: list[str] = field(default_factory=list, repr=False)

    @property
    def n_items(self) -> int:
        return len(self.catalog.keys)

    def core_catalog(self) -> dict[str, bytes]:
        """The catalog as ``_core.RequestStream`` takes it."""
        c = self.catalog
        return {
            "item_sizes": c.sizes.astype("<u8").tobytes(),
            "child_offsets": c.child_offsets.astype("<u4").tobytes(),
            "child_items": c.child_items.astype("<u4").tobytes(),
        }

    def trace_of(self, part: Part | None = None) -> RequestTrace:
        """The catalog and ``part``'s requests (none without one) as a :class:`RequestTrace`
        (route names as read so far)."""
        c = self.catalog
        if part is None:
            cols: dict[str, Any] = {
                "request_ids": np.zeros(0, np.int64), "time": np.zeros(0), "instance":
                np.zeros(0, np.uint32), "route": np.zeros(0, np.uint32), "base_ms": np.zeros(0),
                "touch_offsets": np.zeros(1, np.uint64), "touch_items": np.zeros(0, np.uint32)}
        else:
            cols = {name: getattr(part, name) for name in (
                "request_ids", "time", "instance", "route", "base_ms", "touch_offsets",
                "touch_items")}
        return RequestTrace(item_keys=c.keys, item_sizes=c.sizes, item_kinds=c.kinds,
                            kind_names=c.kind_names, child_offsets=c.child_offsets,
                            child_items=c.child_items, route_names=list(self.route_names),
                            generator=self.generator, _index=c.index, **cols)

    def where(self, request: int) -> str:
        """Where request ``request`` (0-based) is: ``FILE: line N`` or ``FILE: row N``."""
        if self.format == "jsonl":
            return f"{self.path}: line {self._first_request_line + request}"
        return f"{self.path / REQUESTS_FILE}: row {request + 1}"

    def parts(self) -> Iterator[Part]:
        """The requests in parts of :attr:`part_requests` (the last may be shorter), in file
        order; every call reads the file again from the start."""
        first = 0
        for batch in self._rebatched():
            yield self._part(batch, first)
            first += batch.num_rows
        if first != self.n_requests:
            raise InputError(f"{self.path}: read {first} requests, expected {self.n_requests} "
                             "(the file changed while it was read?)")

    # -- inside -----------------------------------------------------------------------------

    def _part(self, batch: pa.RecordBatch, first: int) -> Part:
        if self.format == "jsonl":
            place = Place(str(self.path), "line", self._first_request_line + first)
            cols = {"id": batch.column("request"), **{
                n: batch.column(n) for n in ("time", "instance", "route", "base_ms", "items")}}
        else:
            req_path = self.path / REQUESTS_FILE
            place = Place(str(req_path), "row", first + 1)
            table = pa.Table.from_batches([batch])
            cols = {
                "id": _column(table, req_path, "id", pa.int64()),
                "time": _column(table, req_path, "time", pa.float64()),
                "instance": _column(table, req_path, "instance", pa.int64()),
                "route": _column(table, req_path, "route", pa.string()),
                "base_ms": _column(table, req_path, "base_ms", pa.float64()),
                "items": _column(table, req_path, "items", pa.list_(pa.string())),
            }
        req = check_requests(self.catalog, cols, place)
        enc = req.pop("route_enc")
        codes = np.array([self._routes.setdefault(r, len(self._routes))
                          for r in enc.dictionary.to_pylist()], dtype=np.uint32)
        self.route_names = list(self._routes)
        route = codes[np.asarray(enc.indices, dtype=np.int64)] if len(codes) else np.zeros(
            0, np.uint32)
        return Part(first=first, route=route, place=place, **req)

    def _rebatched(self) -> Iterator[pa.RecordBatch]:
        """The request rows in batches of exactly :attr:`part_requests` (the last shorter)."""
        pending: list[pa.RecordBatch] = []
        self.buffered = 0
        for batch in self._batches():
            if batch.num_rows == 0:
                continue
            pending.append(batch)
            self.buffered += batch.num_rows
            while self.buffered >= self.part_requests:
                table = pa.Table.from_batches(pending)
                head = table.slice(0, self.part_requests).combine_chunks()
                rest = table.slice(self.part_requests).combine_chunks()
                pending = rest.to_batches()
                self.buffered = rest.num_rows
                yield head.to_batches()[0] if head.num_rows else head
        if self.buffered:
            table = pa.Table.from_batches(pending).combine_chunks()
            self.buffered = 0
            yield table.to_batches()[0]

    def _batches(self) -> Iterator[pa.RecordBatch]:
        if self.format == "parquet":
            # Row group by row group: ParquetFile.iter_batches holds on to memory as it goes
            # (pyarrow 2x: +3 MB every 65,536 requests), read_row_group does not.
            where = self.path / REQUESTS_FILE
            try:
                f = pq.ParquetFile(where, read_dictionary=self._dictionary_leaves or None)
            except (pa.ArrowException, OSError, ValueError) as e:  # changed since it was opened
                raise InputError(f"{where}: not a readable Parquet file ({e})") from None
            with f:
                for i in range(f.num_row_groups):
                    try:
                        group = f.read_row_group(i)
                    except (pa.ArrowException, OSError) as e:  # a damaged page, not the output
                        raise InputError(f"{where}: not a readable Parquet file (row group "
                                         f"{i + 1}: {e})") from None
                    yield from group.to_batches(max_chunksize=PART_MULTIPLE * 16)
            return
        skip = self.n_items
        with _open(self.path) as handle:
            handle.readline()
            try:
                reader = pa_json.open_json(handle, read_options=pa_json.ReadOptions(
                    block_size=_BLOCK), parse_options=_ARROW_PARSE)
                for batch in reader:
                    if skip:
                        cut = min(skip, batch.num_rows)
                        batch, skip = batch.slice(cut), skip - cut
                    _requests_only(batch, self)
                    yield batch
            except (pa.ArrowException, ValueError):
                _line_error(self.path)


def _requests_only(batch: pa.RecordBatch, src: RequestParts) -> None:
    """A request row has no catalog fields and every request field."""
    for name in ("item", "size", "kind", "children"):
        if batch.column(name).null_count != batch.num_rows:
            _line_error(src.path)
    for name in ("request", "time", "instance", "route", "base_ms", "items"):
        if batch.column(name).null_count:
            _line_error(src.path)


def _line_error(path: Path) -> None:
    """Reads ``path`` with the line-by-line reader, which raises naming the first bad line."""
    read_jsonl(path)
    raise InputError(f"{path}: the streaming reader could not read it, though the line-by-line "
                     "reader can; report this as a bug")


def _open(path: Path) -> IO[bytes]:
    try:
        return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


def _count_lines(path: Path) -> int:
    """Lines of a JSONL file (a last line without a newline counts), checking that every line
    after the first starts with "{" (otherwise the line-by-line reader names the bad one)."""
    lines, last, tail = 0, b"\n", b""
    try:
        with _open(path) as f:
            while block := f.read(_BLOCK):
                lines += block.count(b"\n")
                if _NOT_AN_OBJECT.search(tail + block[:1]) or _NOT_AN_OBJECT.search(block):
                    _line_error(path)
                tail = last = block[-1:]
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    return lines + (0 if last == b"\n" else 1)


def _jsonl_catalog(path: Path) -> tuple[Catalog, dict[str, Any] | None, int]:
    """The header's generator, the catalog, and the number of catalog lines."""
    with _open(path) as handle:
        head = handle.readline()
        try:
            generator = check_header(json.loads(head), f"{path}: line 1")
        except (ValueError, RecursionError):
            _line_error(path)
            raise
        tables: list[pa.Table] = []
        try:
            reader = pa_json.open_json(handle, read_options=pa_json.ReadOptions(
                block_size=_BLOCK), parse_options=_ARROW_PARSE)
            for batch in reader:
                is_item = np.asarray(batch.column("item").is_valid())
                k = int(np.argmin(is_item)) if not is_item.all() else len(is_item)
                tables.append(pa.Table.from_batches([batch.slice(0, k)]))
                if k < batch.num_rows:
                    break
        except (pa.ArrowException, ValueError):
            _line_error(path)
    table = pa.concat_tables(tables) if tables else pa.table({})
    n = table.num_rows
    for name in ("request", "time", "instance", "route", "base_ms", "items"):
        if n and table.column(name).null_count != n:
            _line_error(path)
    cols = {name: table.column(name).combine_chunks() if n else pa.array([], pa.string())
            for name in ("item", "kind", "children")}
    cols["size"] = table.column("size").combine_chunks() if n else pa.array([], pa.int64())
    catalog = check_catalog({"key": cols["item"], "size": cols["size"], "kind": cols["kind"],
                             "children": cols["children"] if n else None},
                            Place(str(path), "line", 2))
    return catalog, generator, n


def open_request_parts(path: str | os.PathLike[str], format: str,
                       part_requests: int = DEFAULT_PART) -> RequestParts:
    """Opens a request trace in ``format`` ("jsonl" or "parquet", as
    :func:`~cachelab.traces.formats.detect_format` names it) for reading in parts of
    ``part_requests`` requests (a multiple of :data:`PART_MULTIPLE`). Raises InputError naming
    file and line."""
    if part_requests <= 0 or part_requests % PART_MULTIPLE:
        raise ValueError(f"part_requests must be a positive multiple of {PART_MULTIPLE}")
    p = Path(path)
    fmt = format
    if fmt == "jsonl":
        if p.is_dir() or not p.exists():
            read_jsonl(p)  # raises the reader's own message
        lines = _count_lines(p)
        if lines == 0:
            raise InputError(f"{p}: empty file (expected the header on line 1)")
        catalog, generator, n_items = _jsonl_catalog(p)
        parts = RequestParts(p, fmt, catalog, lines - 1 - n_items, generator, part_requests)
        parts._first_request_line = 2 + n_items
        return parts
    if fmt != "parquet":
        raise InputError(f"{p}: a {fmt} file is a flat key trace, not a request trace")
    if not p.is_dir():
        raise InputError(f"{p}: a Parquet request trace is a directory holding {CATALOG_FILE} "
                         f"and {REQUESTS_FILE}")
    req_path, cat_path = p / REQUESTS_FILE, p / CATALOG_FILE
    try:
        meta = pq.ParquetFile(req_path).metadata
        leaves = string_leaves(meta.schema, "items")
        cat = pq.read_table(cat_path)
        cat_names = cat.column_names  # decoded now: a damaged footer's names raise here
    except (pa.ArrowException, OSError, ValueError) as e:
        # (ValueError: pyarrow decodes a damaged footer's column names as UTF-8)
        raise InputError(f"{p}: not a readable Parquet request trace ({e})") from None
    kv = meta.metadata or {}
    if HEADER_KEY not in kv:
        raise InputError(f"{req_path}: no {HEADER_KEY.decode()!r} metadata (not a cachelab "
                         "request trace)")
    try:
        generator = check_header(json.loads(kv[HEADER_KEY]), f"{req_path}: header metadata")
    except (ValueError, RecursionError) as e:
        raise InputError(f"{req_path}: header metadata is not valid JSON ({e})") from None
    catalog = check_catalog({
        "key": _column(cat, cat_path, "key", pa.string()),
        "size": _column(cat, cat_path, "size", pa.int64()),
        "kind": _column(cat, cat_path, "kind", pa.string()),
        "children": _column(cat, cat_path, "children", pa.list_(pa.string()))
        if "children" in cat_names else None,
    }, Place(str(cat_path)))
    parts = RequestParts(p, fmt, catalog, meta.num_rows, generator, part_requests)
    parts._dictionary_leaves = leaves
    return parts


def convert_in_parts(src: str | os.PathLike[str], dst: str | os.PathLike[str], src_format: str,
                     dst_format: str, part_requests: int = DEFAULT_PART) -> dict[str, int]:
    """A request trace converted JSONL <-> Parquet part by part (memory that does not grow
    with the trace); the counts of :func:`cachelab.traces.formats.convert`'s summary."""
    parts = open_request_parts(src, src_format, part_requests)
    counts = {"requests": parts.n_requests, "items": parts.n_items, "touches": 0}

    def traces() -> Iterator[RequestTrace]:
        for part in parts.parts():
            counts["touches"] += len(part.touch_items)
            yield parts.trace_of(part)

    catalog = parts.trace_of()
    if dst_format == "jsonl":
        write_jsonl_parts(catalog, traces(), dst)
    else:
        write_parquet_parts(catalog, traces(), dst)
    return counts
