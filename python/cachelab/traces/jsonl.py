"""Request traces as JSONL: a header line, catalog lines, then request lines (docs/traces.md).

Reading parses one JSON object per line and interns item keys as it goes, so no per-touch
Python object outlives its line. Every problem raises :class:`~cachelab.errors.InputError`
naming the file and the (1-based) line. Writing is atomic. A name ending in ``.gz`` is read and
written through gzip.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from cachelab import _core
from cachelab.errors import InputError, InvalidKey
from cachelab.traces._files import atomic_file
from cachelab.traces.columns import MAX_INSTANCE, Place, from_arrow
from cachelab.traces.request import MAX_SIZE, SCHEMA, SCHEMA_VERSION, RequestTrace

__all__ = ["TraceBuilder", "header", "read_jsonl", "write_jsonl"]

_ITEM_FIELDS = frozenset(("item", "size", "kind", "children"))
_REQUEST_FIELDS = frozenset(("request", "time", "instance", "route", "base_ms", "items"))
_HEADER_FIELDS = frozenset(("schema", "version", "generator"))
_MAX_ID = 2**63 - 1


def header(generator: dict[str, Any] | None) -> dict[str, Any]:
    """The header object of a request trace."""
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, "generator": generator}


def check_header(obj: Any, where: str) -> dict[str, Any] | None:
    """Validates a header object; returns its ``generator``."""
    if not isinstance(obj, dict):
        raise InputError(f"{where}: the header must be a JSON object")
    if obj.get("schema") != SCHEMA:
        raise InputError(
            f"{where}: not a cachelab request trace (schema is {obj.get('schema')!r}, "
            f"expected {SCHEMA!r})"
        )
    version = obj.get("version")
    if version != SCHEMA_VERSION or type(version) is not int:
        raise InputError(
            f"{where}: request trace version {version!r} is not supported "
            f"(this cachelab reads version {SCHEMA_VERSION})"
        )
    unknown = sorted(set(obj) - _HEADER_FIELDS)
    if unknown:
        raise InputError(f"{where}: unknown header field(s) {', '.join(map(repr, unknown))}")
    generator = obj.get("generator")
    if generator is not None and not isinstance(generator, dict):
        raise InputError(f"{where}: 'generator' must be an object or null")
    return generator


def _field_problem(rec: dict[str, Any], fields: frozenset[str], optional: set[str]) -> str:
    unknown = sorted(set(rec) - fields)
    if unknown:
        return f"unknown field(s) {', '.join(map(repr, unknown))}"
    missing = sorted(fields - optional - set(rec))
    return f"missing field(s) {', '.join(map(repr, missing))}"


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_number(v: Any) -> bool:
    return (type(v) is float or type(v) is int) and math.isfinite(v)


class TraceBuilder:
    """Accumulates catalog and request records into columns, checking each one.

    ``where`` names the input (a file path); every error says ``{where}: line N: ...``, or
    ``{where}: {unit} N: ...`` with another ``unit`` (``"row"`` for Parquet).
    """

    def __init__(self, where: str, unit: str = "line") -> None:
        self.where = where
        self.unit = unit
        self.keys: list[str] = []
        self.key_index: dict[str, int] = {}
        self.sizes = array("Q")
        self.kind_codes = array("I")
        self.kinds: dict[str, int] = {}
        self._children: list[tuple[int, list[str], int]] = []  # (item, child keys, line)
        self.child_offsets: np.ndarray | None = None
        self.child_items: np.ndarray | None = None
        self.catalog_done = False
        self.first_item_line = 0
        self.first_request_line: int | None = None
        self.ids = array("q")
        self.times = array("d")
        self.instances = array("I")
        self.route_codes = array("I")
        self.routes: dict[str, int] = {}
        self.base_ms = array("d")
        self.touch_offsets = array("Q", [0])
        self.touch_items = array("I")

    def error(self, line: int | None, message: str) -> InputError:
        at = f"{self.unit} {line}: " if line is not None else ""
        return InputError(f"{self.where}: {at}{message}")

    # -- catalog ----------------------------------------------------------------------------

    def add_item(self, rec: dict[str, Any], line: int) -> None:
        if self.catalog_done:
            raise self.error(
                line, "catalog item after the first request (the catalog comes first)"
            )
        if not rec.keys() <= _ITEM_FIELDS or len(rec) < 3:
            raise self.error(line, _field_problem(rec, _ITEM_FIELDS, {"children"}))
        key = rec["item"]
        if type(key) is not str:
            raise self.error(line, "'item' must be a string (the item's key)")
        try:
            _core.validate_key(key)
        except InvalidKey as e:
            raise self.error(line, f"item {key!r} is not a valid memcached key: {e}") from None
        if key in self.key_index:
            first = self.first_item_line + self.key_index[key]
            raise self.error(line, f"duplicate item {key!r} (first at {self.unit} {first})")
        size = rec["size"]
        if not _is_int(size):
            raise self.error(line, f"item {key!r}: 'size' must be an integer number of bytes")
        if not 0 <= size <= MAX_SIZE:
            raise self.error(line, f"item {key!r}: size {size} is negative or too large")
        kind = rec["kind"]
        if type(kind) is not str or not kind:
            raise self.error(line, f"item {key!r}: 'kind' must be a non-empty string")
        children = rec.get("children")
        if children is not None:
            if type(children) is not list or any(type(c) is not str for c in children):
                raise self.error(line, f"item {key!r}: 'children' must be a list of keys")
            if len(set(children)) != len(children):
                raise self.error(line, f"item {key!r}: a child is listed twice")
        index = len(self.keys)
        if index == 0:
            self.first_item_line = line
        self.keys.append(key)
        self.key_index[key] = index
        self.sizes.append(size)
        self.kind_codes.append(self.kinds.setdefault(kind, len(self.kinds)))
        if children:
            self._children.append((index, children, line))

    def end_catalog(self) -> None:
        """Resolves children to item indices (every child must be a catalog item)."""
        if self.catalog_done:
            return
        self.catalog_done = True
        n = len(self.keys)
        counts = np.zeros(n + 1, dtype=np.int64)
        flat = array("I")
        index = self.key_index
        for item, kids, line in self._children:
            try:
                flat.extend(map(index.__getitem__, kids))
            except KeyError as e:
                raise self.error(
                    line, f"item {self.keys[item]!r}: child {e.args[0]!r} is not in the catalog"
                ) from None
            counts[item + 1] = len(kids)
        self._children = []
        self.child_offsets = np.cumsum(counts).astype(np.uint32)
        self.child_items = np.frombuffer(flat, dtype=np.uint32).copy() if flat else np.zeros(
            0, dtype=np.uint32
        )

    # -- requests ---------------------------------------------------------------------------

    def add_request(self, rec: dict[str, Any], line: int) -> None:
        if not self.catalog_done:
            self.end_catalog()
        if self.first_request_line is None:
            self.first_request_line = line
        elif line != self.first_request_line + len(self.ids):
            raise self.error(line, "internal: request lines must be consecutive")
        if len(rec) != 6 or rec.keys() != _REQUEST_FIELDS:
            raise self.error(line, _field_problem(rec, _REQUEST_FIELDS, set()))
        rid = rec["request"]
        if not _is_int(rid) or not 0 <= rid <= _MAX_ID:
            raise self.error(line, "'request' must be a non-negative integer (the request id)")
        t = rec["time"]
        if not _is_number(t) or t < 0:
            raise self.error(line, f"request {rid}: 'time' must be a number of seconds >= 0")
        inst = rec["instance"]
        if not _is_int(inst) or not 0 <= inst <= MAX_INSTANCE:
            raise self.error(
                line, f"request {rid}: 'instance' must be an integer between 0 and 2^31-1"
            )
        route = rec["route"]
        if type(route) is not str or not route:
            raise self.error(line, f"request {rid}: 'route' must be a non-empty string")
        base = rec["base_ms"]
        if not _is_number(base) or base <= 0:
            raise self.error(line, f"request {rid}: 'base_ms' must be a number > 0")
        items = rec["items"]
        if type(items) is not list:
            raise self.error(line, f"request {rid}: 'items' must be a list of item keys")
        touch_items = self.touch_items
        before = len(touch_items)
        try:
            touch_items.extend(map(self.key_index.__getitem__, items))
        except (KeyError, TypeError):
            del touch_items[before:]
            bad = next(k for k in items if type(k) is not str or k not in self.key_index)
            what = "is not in the catalog" if type(bad) is str else "is not a string"
            raise self.error(line, f"request {rid}: item {bad!r} {what}") from None
        self.touch_offsets.append(len(touch_items))
        self.ids.append(rid)
        self.times.append(t)
        self.instances.append(inst)
        self.route_codes.append(self.routes.setdefault(route, len(self.routes)))
        self.base_ms.append(base)

    def finish(self, generator: dict[str, Any] | None) -> RequestTrace:
        self.end_catalog()
        ids = np.frombuffer(self.ids, dtype=np.int64) if self.ids else np.zeros(0, np.int64)
        if len(ids) > 1:
            order = np.argsort(ids, kind="stable")
            same = ids[order[1:]] == ids[order[:-1]]
            if same.any():
                second = int(order[1:][same].min())
                first = int(order[np.searchsorted(ids[order], ids[second])])
                start = self.first_request_line or 0
                raise self.error(
                    start + second, f"duplicate request id {int(ids[second])} (first at "
                    f"{self.unit} {start + first})"
                )

        def col(a: array, dtype: Any) -> np.ndarray:
            return np.frombuffer(a, dtype=dtype).copy() if len(a) else np.zeros(0, dtype)

        assert self.child_offsets is not None and self.child_items is not None
        return RequestTrace(
            item_keys=self.keys,
            item_sizes=col(self.sizes, np.uint64),
            item_kinds=col(self.kind_codes, np.uint32),
            kind_names=list(self.kinds),
            child_offsets=self.child_offsets,
            child_items=self.child_items,
            request_ids=ids.copy(),
            time=col(self.times, np.float64),
            instance=col(self.instances, np.uint32),
            route=col(self.route_codes, np.uint32),
            route_names=list(self.routes),
            base_ms=col(self.base_ms, np.float64),
            touch_offsets=col(self.touch_offsets, np.uint64),
            touch_items=col(self.touch_items, np.uint32),
            generator=generator,
            _index=self.key_index,
        )


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


def _read_fast(data: bytes, where: str) -> RequestTrace:
    end = data.find(b"\n")
    if end < 0:
        raise _Fallback
    try:
        generator = check_header(json.loads(data[:end]), where)
    except (ValueError, InputError):
        raise _Fallback from None
    body = memoryview(data)[end + 1 :]
    lines = data.count(b"\n", end + 1) + (0 if data.endswith(b"\n") else 1)
    if lines == 0:
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
        except ValueError as e:
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
    return builder.finish(generator)


def _json_reason(e: ValueError) -> str:
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg} at column {e.colno}"
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
    target = Path(path)
    with atomic_file(target) as tmp:
        raw: IO[bytes]
        if target.name.endswith(".gz"):
            raw = gzip.GzipFile(filename="", mode="wb", fileobj=open(tmp, "wb"), mtime=0)  # noqa: SIM115
        else:
            raw = open(tmp, "wb")  # noqa: SIM115
        try:
            write = raw.write
            write((_dumps(header(trace.generator)) + "\n").encode())
            for rec in trace.catalog_records():
                write((_dumps(rec) + "\n").encode())
            batch: list[str] = []
            for text in _request_lines(trace):
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
