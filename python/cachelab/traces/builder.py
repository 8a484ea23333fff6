"""Record by record into checked columns: the rules of every catalog item and request.

:class:`TraceBuilder` takes records shaped like the JSONL lines (``item``/``size``/``kind``/
``children``, then ``request``/``time``/``instance``/``route``/``base_ms``/``items``), checks
each one as it comes, interns item keys, kinds and routes, and hands back the columns of a
:class:`~cachelab.traces.request.RequestTrace` as its keyword arguments. The JSONL reader's
line-by-line path and ``RequestTrace.from_records`` use it; the vectorised readers
(:mod:`cachelab.traces.arrow`) check the same rules on whole columns.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.errors import InputError, InvalidKey
from cachelab.traces.schema import MAX_INSTANCE, MAX_REQUEST_ID, MAX_SIZE, first_duplicate

__all__ = ["TraceBuilder"]

_ITEM_FIELDS = frozenset(("item", "size", "kind", "children"))
_REQUEST_FIELDS = frozenset(("request", "time", "instance", "route", "base_ms", "items"))


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
        if not _is_int(rid) or not 0 <= rid <= MAX_REQUEST_ID:
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

    def finish(self, generator: dict[str, Any] | None) -> dict[str, Any]:
        """The checked columns, as :class:`~cachelab.traces.request.RequestTrace`'s keyword
        arguments (``generator`` is the header's)."""
        self.end_catalog()
        ids = np.frombuffer(self.ids, dtype=np.int64) if self.ids else np.zeros(0, np.int64)
        dup = first_duplicate(ids)
        if dup is not None:
            second, first = dup
            start = self.first_request_line or 0
            raise self.error(start + second, f"duplicate request id {int(ids[second])} (first at "
                             f"{self.unit} {start + first})")

        def col(a: array, dtype: Any) -> np.ndarray:
            return np.frombuffer(a, dtype=dtype).copy() if len(a) else np.zeros(0, dtype)

        assert self.child_offsets is not None and self.child_items is not None
        return dict(
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

