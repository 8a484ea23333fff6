"""Request traces as Parquet: a directory ``NAME.parquet/`` holding ``catalog.parquet`` and
``requests.parquet``, the header in the requests file's key-value metadata (docs/traces.md).

Checks are vectorised with pyarrow.compute; every problem raises
:class:`~cachelab.errors.InputError` naming the file and the (1-based) row. Writing is atomic:
the directory is built beside its final name and renamed into place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cachelab.artifacts import atomic_dir
from cachelab.errors import InputError
from cachelab.traces.arrow import Place, first_true, from_arrow
from cachelab.traces.request import RequestTrace
from cachelab.traces.schema import MAX_INSTANCE, check_header, header

__all__ = ["CATALOG_FILE", "HEADER_KEY", "REQUESTS_FILE", "read_parquet", "write_parquet",
           "write_parquet_parts"]

CATALOG_FILE = "catalog.parquet"
#: Requests per row group of requests.parquet: a reader in parts holds about one row group.
ROW_GROUP = 1 << 16
REQUESTS_FILE = "requests.parquet"
#: Key of the header (JSON) in requests.parquet's key-value metadata.
HEADER_KEY = b"cachelab.request-trace"

CATALOG_SCHEMA = pa.schema([
    ("key", pa.string()),
    ("size", pa.int64()),
    ("kind", pa.string()),
    ("children", pa.list_(pa.string())),
])
REQUESTS_SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("time", pa.float64()),
    ("instance", pa.int32()),
    ("route", pa.string()),
    ("base_ms", pa.float64()),
    ("items", pa.list_(pa.string())),
])


# -- writing -------------------------------------------------------------------------------


def _list_column(keys: pa.Array, offsets: np.ndarray, items: np.ndarray) -> pa.Array:
    values = keys.take(pa.array(items, type=pa.uint32()))
    if int(offsets[-1]) < 2**31:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    large = pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), values)
    return large


def write_parquet(trace: RequestTrace, path: str | os.PathLike[str]) -> Path:
    """Writes ``trace`` as a Parquet directory at ``path``, atomically."""
    return write_parquet_parts(trace, [trace], path)


def _requests_table(trace: RequestTrace, keys: pa.Array) -> pa.Table:
    if len(trace.instance) and int(trace.instance.max()) > MAX_INSTANCE:
        raise InputError(f"instance ids above {MAX_INSTANCE} do not fit Parquet's int32")
    routes = pa.array(trace.route_names, type=pa.string()).take(pa.array(trace.route))
    items = _list_column(keys, trace.touch_offsets, trace.touch_items)
    return pa.table(
        {
            "id": pa.array(trace.request_ids, type=pa.int64()),
            "time": pa.array(trace.time, type=pa.float64()),
            "instance": pa.array(trace.instance.astype(np.int32), type=pa.int32()),
            "route": routes,
            "base_ms": pa.array(trace.base_ms, type=pa.float64()),
            "items": items,
        }
    )


def write_parquet_parts(catalog: RequestTrace, parts: Iterable[RequestTrace],
                        path: str | os.PathLike[str]) -> Path:
    """Writes the header and catalog of ``catalog``, then the requests of each of ``parts``
    (traces over the same catalog) in order, as a Parquet directory, atomically: nothing is
    left at ``path`` if reading a part raises."""
    target = Path(path)
    keys = pa.array(catalog.item_keys, type=pa.string())
    kinds = pa.array(catalog.kind_names, type=pa.string()).take(pa.array(catalog.item_kinds))
    cat = pa.table(
        {
            "key": keys,
            "size": pa.array(catalog.item_sizes.astype(np.int64)),
            "kind": kinds,
            "children": _list_column(keys, catalog.child_offsets, catalog.child_items),
        }
    )
    meta = {HEADER_KEY: json.dumps(header(catalog.generator), separators=(",", ":")).encode()}
    with atomic_dir(target) as tmp:
        pq.write_table(cat, tmp / CATALOG_FILE)
        writer: pq.ParquetWriter | None = None
        schema: pa.Schema | None = None
        try:
            for part in parts:
                try:
                    table = _requests_table(part, keys).replace_schema_metadata(meta)
                except InputError as e:
                    raise InputError(f"{target}: {e}") from None
                if writer is None or schema is None:  # the first part's: list or large list
                    schema = table.schema
                    writer = pq.ParquetWriter(tmp / REQUESTS_FILE, schema)
                writer.write_table(table.cast(schema), row_group_size=ROW_GROUP)
            if writer is None:
                pq.write_table(REQUESTS_SCHEMA.with_metadata(meta).empty_table(),
                               tmp / REQUESTS_FILE)
        finally:
            if writer is not None:
                writer.close()
    return target


# -- reading -------------------------------------------------------------------------------


def _read_table(path: Path, dictionary: str | None = None) -> pa.Table:
    """The whole file; column ``dictionary``'s strings inside lists read dictionary-encoded
    (:func:`string_leaves`)."""
    if not path.is_file():
        raise InputError(f"{path}: missing (a Parquet request trace is a directory holding "
                         f"{CATALOG_FILE} and {REQUESTS_FILE})")
    try:
        with pq.ParquetFile(path) as f:
            leaves = string_leaves(f.metadata.schema, dictionary) if dictionary else []
        return pq.read_table(path, read_dictionary=leaves or None)
    except (pa.ArrowException, OSError, ValueError) as e:
        # (ValueError: pyarrow decodes a damaged footer's column names as UTF-8)
        raise InputError(f"{path}: not a readable Parquet file ({e})") from None


def string_leaves(schema: pq.ParquetSchema, name: str) -> list[str]:
    """The paths of column ``name``'s string leaves inside lists (``items.list.element``):
    what ``read_dictionary`` takes to read a list of strings dictionary-encoded, as a Parquet
    writer stores it, instead of one string per value."""
    leaves = (schema.column(i) for i in range(len(schema)))
    return [c.path for c in leaves if c.path.startswith(f"{name}.")
            and c.logical_type.type == "STRING"]


def _column(table: pa.Table, path: Path, name: str, want: pa.DataType) -> pa.Array:
    if name not in table.column_names:
        raise InputError(f"{path}: no column {name!r} (expected {', '.join(table.column_names)}"
                         f" to include it)")
    col = table.column(name).combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_list(want):
        value = col.type.value_type if (pa.types.is_list(col.type)
                                        or pa.types.is_large_list(col.type)) else None
        if value is not None and pa.types.is_dictionary(value):
            value = value.value_type  # kept encoded: interned once per distinct string
        if value is None or not (pa.types.is_string(value) or pa.types.is_large_string(value)):
            raise InputError(f"{path}: column {name!r} is {col.type}, expected a list of strings")
        return col
    same_family = (
        (pa.types.is_integer(want) and pa.types.is_integer(col.type))
        or (pa.types.is_floating(want) and (pa.types.is_floating(col.type)
                                            or pa.types.is_integer(col.type)))
        or (pa.types.is_string(want) and (pa.types.is_string(col.type)
                                          or pa.types.is_large_string(col.type)))
    )
    if not same_family:
        raise InputError(f"{path}: column {name!r} is {col.type}, expected {want}")
    if pa.types.is_integer(want) and col.type != want:
        # keep the values exact: check the range before narrowing
        lo, hi = pc.min_max(col).values()
        info = np.iinfo(want.to_pandas_dtype())
        if lo.is_valid and (lo.as_py() < info.min or hi.as_py() > info.max):
            bad = pc.or_(pc.less(col, info.min), pc.greater(col, info.max))
            row = first_true(bad)
            raise InputError(f"{path}: row {(row or 0) + 1}: {name} is out of range for {want}")
    return col.cast(want)


def read_parquet(path: str | os.PathLike[str]) -> RequestTrace:
    """Reads a Parquet request trace directory. Raises InputError naming the file and row."""
    d = Path(path)
    if not d.is_dir():
        if d.exists():
            raise InputError(f"{d}: a Parquet request trace is a directory holding "
                             f"{CATALOG_FILE} and {REQUESTS_FILE}, not a file")
        raise InputError(f"{d}: no such directory")
    cat_path, req_path = d / CATALOG_FILE, d / REQUESTS_FILE
    cat = _read_table(cat_path)
    req = _read_table(req_path, "items")

    meta = req.schema.metadata or {}
    if HEADER_KEY not in meta:
        raise InputError(f"{req_path}: no {HEADER_KEY.decode()!r} metadata (not a cachelab "
                         "request trace)")
    try:
        head = json.loads(meta[HEADER_KEY])
    except (ValueError, RecursionError) as e:
        reason = "nested too deeply" if isinstance(e, RecursionError) else e
        raise InputError(f"{req_path}: header metadata is not valid JSON ({reason})") from None
    generator = check_header(head, f"{req_path}: header metadata")

    catalog = {
        "key": _column(cat, cat_path, "key", pa.string()),
        "size": _column(cat, cat_path, "size", pa.int64()),
        "kind": _column(cat, cat_path, "kind", pa.string()),
        "children": _column(cat, cat_path, "children", pa.list_(pa.string()))
        if "children" in cat.column_names else None,
    }
    requests = {
        "id": _column(req, req_path, "id", pa.int64()),
        "time": _column(req, req_path, "time", pa.float64()),
        "instance": _column(req, req_path, "instance", pa.int64()),
        "route": _column(req, req_path, "route", pa.string()),
        "base_ms": _column(req, req_path, "base_ms", pa.float64()),
        "items": _column(req, req_path, "items", pa.list_(pa.string())),
    }
    return from_arrow(catalog, requests, generator, Place(str(cat_path)), Place(str(req_path)))
