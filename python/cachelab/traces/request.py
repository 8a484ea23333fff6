"""Request traces in memory: a content catalog plus requests that touch catalog items.

A :class:`RequestTrace` holds numpy columns, with every item key interned to its index in the
catalog, so a million-request trace costs a few hundred megabytes, not millions of Python
objects. The file formats (JSONL and Parquet) are in :mod:`cachelab.traces.jsonl` and
:mod:`cachelab.traces.parquet` and documented in ``docs/traces.md``; the rules every record
obeys are checked by :class:`~cachelab.traces.builder.TraceBuilder`.

Columns (``n`` items, ``m`` requests)::

    item_keys       list[str]      n   the memcached key of each catalog item
    item_sizes      uint64         n   value size in bytes
    item_kinds      uint32         n   code into kind_names ("video", "topic", ...)
    child_offsets   uint32         n+1 children of item i: child_items[child_offsets[i]:...[i+1]]
    child_items     uint32             item indices
    request_ids     int64          m
    time            float64        m   seconds (>= 0)
    instance        uint32         m   the app instance that served the request
    route           uint32         m   code into route_names
    base_ms         float64        m   latency of the request without memcached, ms (> 0)
    touch_offsets   uint64         m+1 items of request r: touch_items[touch_offsets[r]:...[r+1]]
    touch_items     uint32             item indices, in the order the request touched them
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.errors import InputError
from cachelab.traces.builder import TraceBuilder
from cachelab.traces.schema import MAX_ITEMS, SCHEMA, SCHEMA_VERSION

__all__ = ["SCHEMA", "SCHEMA_VERSION", "RequestTrace"]


def _col(values: Any, dtype: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=dtype))


@dataclass(eq=False)
class RequestTrace:
    """A request trace: catalog columns, request columns and the generator's parameters."""

    item_keys: list[str]
    item_sizes: np.ndarray
    item_kinds: np.ndarray
    kind_names: list[str]
    child_offsets: np.ndarray
    child_items: np.ndarray
    request_ids: np.ndarray
    time: np.ndarray
    instance: np.ndarray
    route: np.ndarray
    route_names: list[str]
    base_ms: np.ndarray
    touch_offsets: np.ndarray
    touch_items: np.ndarray
    #: The ``generator`` field of the header: the parameters that made the trace, or None.
    generator: dict[str, Any] | None = None
    _index: dict[str, int] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.item_keys = list(self.item_keys)
        self.kind_names = list(self.kind_names)
        self.route_names = list(self.route_names)
        self.item_sizes = _col(self.item_sizes, np.uint64)
        self.item_kinds = _col(self.item_kinds, np.uint32)
        self.child_offsets = _col(self.child_offsets, np.uint32)
        self.child_items = _col(self.child_items, np.uint32)
        self.request_ids = _col(self.request_ids, np.int64)
        self.time = _col(self.time, np.float64)
        self.instance = _col(self.instance, np.uint32)
        self.route = _col(self.route, np.uint32)
        self.base_ms = _col(self.base_ms, np.float64)
        self.touch_offsets = _col(self.touch_offsets, np.uint64)
        self.touch_items = _col(self.touch_items, np.uint32)

    # -- sizes ------------------------------------------------------------------------------

    @property
    def n_items(self) -> int:
        return len(self.item_keys)

    @property
    def n_requests(self) -> int:
        return len(self.request_ids)

    @property
    def n_touches(self) -> int:
        return len(self.touch_items)

    def __len__(self) -> int:
        return self.n_requests

    def __repr__(self) -> str:
        return (
            f"RequestTrace({self.n_items} items, {self.n_requests} requests, "
            f"{self.n_touches} touches)"
        )

    # -- lookups ----------------------------------------------------------------------------

    def index(self) -> dict[str, int]:
        """Key -> item index (built on first use)."""
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self.item_keys)}
        return self._index

    def children(self, item: int) -> np.ndarray:
        """Item indices of ``item``'s children, in catalog order."""
        return self.child_items[self.child_offsets[item] : self.child_offsets[item + 1]]

    def touches(self, request: int) -> np.ndarray:
        """Item indices the ``request``-th request (0-based position) touched, in order."""
        a, b = self.touch_offsets[request], self.touch_offsets[request + 1]
        return self.touch_items[int(a) : int(b)]

    def item_kind(self, item: int) -> str:
        return self.kind_names[int(self.item_kinds[item])]

    def route_name(self, request: int) -> str:
        return self.route_names[int(self.route[request])]

    def touches_per_request(self) -> np.ndarray:
        """Touches of every request (int64)."""
        return np.diff(self.touch_offsets).astype(np.int64)

    def request_of_touch(self) -> np.ndarray:
        """For every touch, the position of its request (int64)."""
        return np.repeat(np.arange(self.n_requests, dtype=np.int64), self.touches_per_request())

    def first_touch_mask(self) -> np.ndarray:
        """True for a touch that is the first touch of its item within its request."""
        n = self.n_touches
        if n == 0:
            return np.zeros(0, dtype=bool)
        combined = self.request_of_touch().astype(np.uint64) * np.uint64(
            max(self.n_items, 1)
        ) + self.touch_items.astype(np.uint64)
        order = np.argsort(combined, kind="stable")
        ordered = combined[order]
        first_sorted = np.ones(n, dtype=bool)
        first_sorted[1:] = ordered[1:] != ordered[:-1]
        mask = np.empty(n, dtype=bool)
        mask[order] = first_sorted
        return mask

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def from_records(
        cls,
        catalog: Iterable[Mapping[str, Any]],
        requests: Iterable[Mapping[str, Any]],
        generator: dict[str, Any] | None = None,
        *,
        where: str = "<records>",
    ) -> RequestTrace:
        """Build a trace from dicts shaped like the JSONL lines (``item``/``size``/``kind``/
        ``children`` and ``request``/``time``/``instance``/``route``/``base_ms``/``items``).

        Checks everything the file readers check; errors name ``where`` and the record number.
        """
        builder = TraceBuilder(where, unit="record")
        items = 0
        for items, record in enumerate(catalog, start=1):
            builder.add_item(dict(record), items)
        builder.end_catalog()
        for n, record in enumerate(requests, start=items + 1):
            builder.add_request(dict(record), n)
        return cls(**builder.finish(generator))

    def catalog_records(self) -> list[dict[str, Any]]:
        """The catalog as JSONL-shaped dicts (``children`` only on items that have some)."""
        out = []
        for i, key in enumerate(self.item_keys):
            rec: dict[str, Any] = {
                "item": key,
                "size": int(self.item_sizes[i]),
                "kind": self.kind_names[int(self.item_kinds[i])],
            }
            kids = self.children(i)
            if len(kids):
                rec["children"] = [self.item_keys[c] for c in kids]
            out.append(rec)
        return out

    def request_records(self) -> list[dict[str, Any]]:
        """The requests as JSONL-shaped dicts (slow for big traces; for tests and small files)."""
        keys = self.item_keys
        return [
            {
                "request": int(self.request_ids[r]),
                "time": float(self.time[r]),
                "instance": int(self.instance[r]),
                "route": self.route_names[int(self.route[r])],
                "base_ms": float(self.base_ms[r]),
                "items": [keys[i] for i in self.touches(r)],
            }
            for r in range(self.n_requests)
        ]

    def equals(self, other: RequestTrace) -> bool:
        """Same catalog, same requests, same header (codes may be numbered differently)."""
        if not isinstance(other, RequestTrace):
            return False
        if self.item_keys != other.item_keys or self.generator != other.generator:
            return False
        kinds_a = np.array(self.kind_names, dtype=object)[self.item_kinds]
        kinds_b = np.array(other.kind_names, dtype=object)[other.item_kinds]
        routes_a = np.array(self.route_names, dtype=object)[self.route]
        routes_b = np.array(other.route_names, dtype=object)[other.route]
        pairs = [
            (self.item_sizes, other.item_sizes),
            (kinds_a, kinds_b),
            (self.child_offsets, other.child_offsets),
            (self.child_items, other.child_items),
            (self.request_ids, other.request_ids),
            (self.time, other.time),
            (self.instance, other.instance),
            (routes_a, routes_b),
            (self.base_ms, other.base_ms),
            (self.touch_offsets, other.touch_offsets),
            (self.touch_items, other.touch_items),
        ]
        return all(a.shape == b.shape and bool(np.array_equal(a, b)) for a, b in pairs)

    def check(self, where: str = "trace") -> None:
        """Structural checks of the columns (the readers guarantee these; for hand-built
        traces). Raises InputError naming ``where``."""
        n, m = self.n_items, self.n_requests

        def bad(msg: str) -> InputError:
            return InputError(f"{where}: {msg}")

        for name, col, length in (
            ("item_sizes", self.item_sizes, n),
            ("item_kinds", self.item_kinds, n),
            ("child_offsets", self.child_offsets, n + 1),
            ("time", self.time, m),
            ("instance", self.instance, m),
            ("route", self.route, m),
            ("base_ms", self.base_ms, m),
            ("touch_offsets", self.touch_offsets, m + 1),
        ):
            if len(col) != length:
                raise bad(f"{name} has {len(col)} entries, expected {length}")
        if n > MAX_ITEMS:
            raise bad(f"{n} items; at most {MAX_ITEMS} fit")
        for name, offsets, data in (
            ("child_offsets", self.child_offsets, self.child_items),
            ("touch_offsets", self.touch_offsets, self.touch_items),
        ):
            if offsets[0] != 0 or offsets[-1] != len(data) or np.any(np.diff(offsets.astype(
                np.int64)) < 0):
                raise bad(f"{name} must rise from 0 to {len(data)}")
        if len(self.child_items) and int(self.child_items.max()) >= n:
            raise bad("a child index is out of range")
        if len(self.touch_items) and int(self.touch_items.max()) >= n:
            raise bad("a touched item index is out of range")
        if len(self.item_kinds) and int(self.item_kinds.max()) >= len(self.kind_names):
            raise bad("a kind code is out of range")
        if len(self.route) and int(self.route.max()) >= len(self.route_names):
            raise bad("a route code is out of range")
        if not np.all(np.isfinite(self.time)) or np.any(self.time < 0):
            raise bad("times must be finite and >= 0")
        if not np.all(np.isfinite(self.base_ms)) or np.any(self.base_ms <= 0):
            raise bad("base_ms must be finite and > 0")
        if len(set(self.item_keys)) != n:
            raise bad("duplicate item keys")
        if len(np.unique(self.request_ids)) != m:
            raise bad("duplicate request ids")

    # -- the Rust core ----------------------------------------------------------------------

    def to_core(self) -> Any:
        """The trace as ``cachelab._core.RequestTrace`` for the request-level simulator.

        Only the columns the simulator needs cross over (keys, kinds and route names stay in
        Python); route codes index :attr:`route_names`.
        """

        def le(col: np.ndarray, dtype: str) -> bytes:
            return col.astype(dtype, copy=False).tobytes()

        return _core.RequestTrace(
            item_sizes=le(self.item_sizes, "<u8"),
            child_offsets=le(self.child_offsets, "<u4"),
            child_items=le(self.child_items, "<u4"),
            time=le(self.time, "<f8"),
            instance=le(self.instance, "<u4"),
            route=le(self.route, "<u4"),
            base_ms=le(self.base_ms, "<f8"),
            touch_offsets=le(self.touch_offsets, "<u8"),
            touch_items=le(self.touch_items, "<u4"),
        )

