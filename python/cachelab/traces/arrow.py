"""Arrow columns -> a checked :class:`RequestTrace`, vectorised (for Parquet and fast JSONL).

The same rules as :class:`~cachelab.traces.builder.TraceBuilder`, checked on whole columns.

Every problem raises :class:`~cachelab.errors.InputError` naming ``where`` and the row (or
line) as ``{unit} {first + position}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import cachelab._core as _core
from cachelab.errors import InputError, InvalidKey
from cachelab.traces.request import RequestTrace
from cachelab.traces.schema import MAX_INSTANCE, first_duplicate

__all__ = ["Catalog", "Place", "check_catalog", "check_requests", "first_true", "from_arrow"]


@dataclass
class Place:
    """Where rows come from: errors read ``{where}: {unit} {first + position}: ...``."""

    where: str
    unit: str = "row"
    first: int = 1

    def error(self, position: int | None, message: str) -> InputError:
        if position is None:
            return InputError(f"{self.where}: {message}")
        return InputError(f"{self.where}: {self.unit} {self.first + position}: {message}")


def first_true(mask: Any) -> int | None:
    """Position of the first True in a boolean array (numpy or arrow; nulls count as False)."""
    if isinstance(mask, (pa.Array, pa.ChunkedArray)):
        mask = np.asarray(pc.fill_null(mask, False))
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def _no_nulls(col: pa.Array, place: Place, name: str) -> None:
    if col.null_count:
        raise place.error(first_true(col.is_null()), f"{name} is missing (null)")


def _utf8(values: pa.Array, place: Place, name: str, offsets: np.ndarray | None = None) -> None:
    """Strings must be UTF-8: the file readers pass other bytes through. ``offsets`` map the
    position of a flattened list's value to its row. A dictionary array's dictionary is
    checked (once per distinct string); a bad entry counts where it is used (a slice keeps
    its whole dictionary, entries it does not use included)."""
    try:
        values.validate(full=True)
        return
    except pa.ArrowInvalid:
        pass
    if pa.types.is_dictionary(values.type):
        bad = _bad_utf8(values.dictionary)
        if bad:
            used = first_true(pc.is_in(values.indices, value_set=pa.array(bad, pa.int64())))
            if used is None:
                return  # every string used is valid UTF-8
            bad = [used]
    else:
        bad = _bad_utf8(values, first=True)
    if bad:
        pos = bad[0]
        row = pos if offsets is None else int(np.searchsorted(offsets, pos, side="right")) - 1
        raise place.error(row, f"{name} is not valid UTF-8")
    raise place.error(None, f"{name}: the column is not a valid string column")


def _bad_utf8(values: pa.Array, first: bool = False) -> list[int]:
    """Positions of the strings that are not UTF-8 (only the first with ``first``)."""
    bad = []
    for pos in range(len(values)):
        try:
            values[pos].as_py()
        except UnicodeDecodeError:
            bad.append(pos)
            if first:
                break
    return bad


def _list_parts(col: pa.Array, place: Place, name: str, what: str) -> tuple[np.ndarray, pa.Array]:
    """(offsets as int64 with len rows+1, the flat values); a null list counts as empty. The
    values stay dictionary-encoded if they are (a Parquet reader's ``read_dictionary``)."""
    lengths = np.asarray(pc.fill_null(pc.list_value_length(col), 0), dtype=np.int64)
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pc.list_flatten(col)
    if pa.types.is_dictionary(values.type) and values.dictionary.null_count:
        values = values.dictionary_decode()  # a null in the dictionary: count it as a null
    if values.null_count:
        pos = first_true(values.is_null())
        row = int(np.searchsorted(offsets, pos, side="right")) - 1
        raise place.error(row, f"{name} holds a null {what}")
    _utf8(values, place, name, offsets)
    return offsets, values


def _index_of(values: pa.Array, keys: pa.Array) -> tuple[np.ndarray, int | None]:
    """Catalog index of every value (uint32), and the position of the first value not in the
    catalog (None if all are); each distinct value is hashed once (values already
    dictionary-encoded are not encoded again). ``values`` hold no nulls."""
    if len(values) == 0:
        return np.zeros(0, np.uint32), None
    enc = values if pa.types.is_dictionary(values.type) else values.dictionary_encode()
    where = pc.index_in(enc.dictionary, value_set=keys)
    indices = np.asarray(enc.indices)
    unknown = None
    if where.null_count:  # a dictionary entry may be unused (a slice keeps its dictionary)
        unknown = first_true(np.asarray(where.is_null())[indices])
        where = pc.fill_null(where, 0)
    return np.asarray(where).astype(np.uint32)[indices], unknown


def _empty_to_first(col: pa.Array) -> int | None:
    return first_true(pc.equal(pc.utf8_length(col), 0)) if len(col) else None


@dataclass
class Catalog:
    """A checked catalog: keys (list and arrow array), their index, sizes, kinds, children."""

    keys: list[str]
    key_array: pa.Array
    index: dict[str, int]
    sizes: np.ndarray
    kinds: np.ndarray
    kind_names: list[str]
    child_offsets: np.ndarray
    child_items: np.ndarray


def check_catalog(catalog: dict[str, pa.Array | None], cat: Place) -> Catalog:
    """Checks and interns the catalog columns: key (string), size (int64), kind (string),
    children (list<string> or None)."""
    key_col, size_col, kind_col = catalog["key"], catalog["size"], catalog["kind"]
    assert key_col is not None and size_col is not None and kind_col is not None
    for name, col in (("key", key_col), ("size", size_col), ("kind", kind_col)):
        _no_nulls(col, cat, name)
    _utf8(key_col, cat, "key")
    _utf8(kind_col, cat, "kind")
    keys: list[str] = key_col.to_pylist()
    index: dict[str, int] = {}
    for row, key in enumerate(keys):
        try:
            _core.validate_key(key)
        except InvalidKey as e:
            raise cat.error(row, f"key {key!r} is not a valid memcached key: {e}") from None
        if index.setdefault(key, row) != row:
            raise cat.error(row, f"duplicate key {key!r} (first at {cat.unit} "
                            f"{cat.first + index[key]})")
    sizes = np.asarray(size_col, dtype=np.int64)
    row = first_true(sizes < 0)
    if row is not None:
        raise cat.error(row, f"size {int(sizes[row])} is negative")
    row = _empty_to_first(kind_col)
    if row is not None:
        raise cat.error(row, "kind is empty")
    kind_enc = kind_col.dictionary_encode()
    key_array = pa.array(keys, type=pa.string())
    child_col = catalog.get("children")
    if child_col is not None:
        child_offsets, child_values = _list_parts(child_col, cat, "children", "child")
    else:
        child_offsets, child_values = np.zeros(len(keys) + 1, np.int64), pa.array([], pa.string())
    child_items, pos = _index_of(child_values, key_array)
    if pos is not None:
        row = int(np.searchsorted(child_offsets, pos, side="right")) - 1
        raise cat.error(row, f"child {child_values[pos].as_py()!r} of {keys[row]!r} is not in "
                        "the catalog")
    if len(child_items):
        parent = np.repeat(np.arange(len(keys), dtype=np.int64), np.diff(child_offsets))
        pair = np.sort(parent * len(keys) + child_items)
        dup = np.flatnonzero(pair[1:] == pair[:-1])
        if len(dup):
            row = int(pair[dup[0]] // len(keys))
            raise cat.error(row, f"a child of {keys[row]!r} is listed twice")
    return Catalog(
        keys=keys, key_array=key_array, index=index, sizes=sizes.astype(np.uint64),
        kinds=np.asarray(kind_enc.indices, dtype=np.uint32),
        kind_names=kind_enc.dictionary.to_pylist(),
        child_offsets=child_offsets.astype(np.uint32), child_items=child_items.astype(np.uint32),
    )


def check_requests(catalog: Catalog, requests: dict[str, pa.Array], req: Place
                   ) -> dict[str, Any]:
    """Checks and interns request columns against ``catalog``: id (int64), time (float64),
    instance (int64), route (string), base_ms (float64), items (list<string>). Returns the
    request columns of :class:`RequestTrace` (``route`` as an arrow dictionary array under
    ``route_enc``)."""
    for name in ("id", "time", "instance", "route", "base_ms", "items"):
        _no_nulls(requests[name], req, name)
    ids = np.asarray(requests["id"], dtype=np.int64)
    times = np.asarray(requests["time"], dtype=np.float64)
    insts = np.asarray(requests["instance"], dtype=np.int64)
    bases = np.asarray(requests["base_ms"], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        checks = (
            (ids < 0, "id is negative"),
            (~np.isfinite(times) | (times < 0), "time must be a finite number of seconds >= 0"),
            ((insts < 0) | (insts > MAX_INSTANCE), "instance must be between 0 and 2^31-1"),
            (~np.isfinite(bases) | (bases <= 0), "base_ms must be a finite number > 0"),
        )
    for bad, message in checks:
        row = first_true(bad)
        if row is not None:
            raise req.error(row, message)
    route_col = requests["route"]
    _utf8(route_col, req, "route")
    row = _empty_to_first(route_col)
    if row is not None:
        raise req.error(row, "route is empty")
    dup = first_duplicate(ids)
    if dup is not None:
        second, first = dup
        raise req.error(second, f"duplicate request id {int(ids[second])} (first at "
                        f"{req.unit} {req.first + first})")
    touch_offsets, touch_values = _list_parts(requests["items"], req, "items", "item")
    touch_idx, pos = _index_of(touch_values, catalog.key_array)
    if pos is not None:
        row = int(np.searchsorted(touch_offsets, pos, side="right")) - 1
        raise req.error(row, f"item {touch_values[pos].as_py()!r} is not in the catalog")
    return dict(
        request_ids=ids, time=times, instance=insts.astype(np.uint32),
        route_enc=route_col.dictionary_encode(),
        base_ms=bases, touch_offsets=touch_offsets.astype(np.uint64),
        touch_items=touch_idx,
    )


def from_arrow(
    catalog: dict[str, pa.Array | None],
    requests: dict[str, pa.Array],
    generator: dict[str, Any] | None,
    catalog_place: Place,
    requests_place: Place,
) -> RequestTrace:
    """Checks and interns the columns (see :func:`check_catalog` and :func:`check_requests`)."""
    cat = check_catalog(catalog, catalog_place)
    req = check_requests(cat, requests, requests_place)
    route_enc = req.pop("route_enc")
    return RequestTrace(
        item_keys=cat.keys,
        item_sizes=cat.sizes,
        item_kinds=cat.kinds,
        kind_names=cat.kind_names,
        child_offsets=cat.child_offsets,
        child_items=cat.child_items,
        route=np.asarray(route_enc.indices, dtype=np.uint32),
        route_names=route_enc.dictionary.to_pylist(),
        generator=generator,
        _index=cat.index,
        **req,
    )
