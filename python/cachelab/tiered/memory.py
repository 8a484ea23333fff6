"""L1: the in-process tier. It holds ready-to-use objects, never serialized ones.

Two kinds, one interface (:class:`Memory`):

* :class:`LRUMemory` — least recently used, bounded by items and/or bytes. An object's weight
  is the length of its codec encoding (before compression), measured when it was filled; an
  object heavier than the whole byte budget is not admitted.
* :class:`FixedMemory` — a pinned set: only the named keys are admitted and they are never
  evicted (``simulate``'s ``fixed:N`` recommendation, loaded with :meth:`FixedMemory.from_keys`).

Entries are keyed by ``(key class name, ident)``; each remembers the namespace version it was
filled under, so a bumped namespace makes its entries unreachable at once (see
:meth:`cachelab.tiered.TieredCache.invalidate_namespace`). An entry older than ``ttl`` seconds
(:data:`DEFAULT_TTL`, 1 s, unless given) is a miss: that bounds how long one process can serve
a value another process has overwritten or invalidated. Its age counts from when the lookup
that read it *began* (``since``), not from when it was stored, so a slow fill does not stretch
the bound. ``ttl=None`` keeps entries until evicted: no bound across processes.

Values are shared: by default ``get`` hands out the very object L1 holds (and a fill hands the
caller the object it stores), so a caller that mutates it changes what every later reader of
this process gets — mutate at your peril. With ``copy=True`` L1 stores a deep copy of what it
is given and hands out a deep copy on every hit (immutable scalars — str, bytes, int, float,
bool, None — are handed out as they are): safe to mutate, at the price of a
``copy.deepcopy`` per hit (microseconds for a small dict, against 0.2 µs for a shared hit).
"""

from __future__ import annotations

import copy as _copy
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

from cachelab.errors import UsageError

__all__ = ["DEFAULT_TTL", "MISS", "FixedMemory", "LRUMemory", "Memory"]

#: Seconds an L1 entry is served by default: the staleness bound across processes.
DEFAULT_TTL = 1.0


class _Miss:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISS"


#: Returned by ``get`` for an absent key (None is a valid cached object).
MISS: Any = _Miss()


_IMMUTABLE = frozenset((str, bytes, int, float, bool, type(None)))


def _own(obj: Any) -> Any:
    """A deep copy of ``obj``, or ``obj`` itself when it is an immutable scalar."""
    return obj if type(obj) in _IMMUTABLE else _copy.deepcopy(obj)


class Memory:
    """The L1 interface, and the storage both kinds share: ``key -> [obj, weight, version,
    expires]`` under a lock. Keys are ``(class name, ident)`` tuples."""

    #: Current objects held and their total weight.
    items: int = 0
    bytes: int = 0

    def __init__(self, ttl: float | None, store: dict[Hashable, list[Any]]) -> None:
        if ttl is not None and ttl <= 0:
            raise UsageError(f"L1 ttl must be positive, got {ttl}")
        self.ttl = ttl
        self._d = store
        self._lock = threading.Lock()
        self.items = 0
        self.bytes = 0

    def get(self, key: Hashable, version: int = 0) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def contains(self, key: Hashable, version: int = 0) -> bool:
        """Like ``get`` (an LRU also refreshes recency) but answers only whether it is there."""
        return self.get(key, version) is not MISS

    def admits(self, key: Hashable) -> bool:
        """Whether ``put`` would keep ``key`` (a fixed set admits only its pins)."""
        return True

    def put(self, key: Hashable, obj: Any, weight: int | None, version: int = 0,
            since: float | None = None, until: float | None = None) -> None:
        """Holds ``obj`` (``weight``: its encoded size; None — no encoding — is not held);
        ``since`` is the ``time.monotonic()`` its value is known to be current at (default:
        now), from which its ``ttl`` counts; ``until`` (a ``time.monotonic()``) ends it sooner
        (a value of a key class with a soft TTL is held only while it is fresh)."""
        raise NotImplementedError  # pragma: no cover - interface

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._drop(key)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self.items = self.bytes = 0

    def _drop(self, key: Hashable) -> None:
        """Removes ``key`` if present; the caller holds the lock."""
        old = self._d.pop(key, None)
        if old is not None:
            self.items -= 1
            self.bytes -= old[1]

    #: Whether entries are copied in and out (see the module docstring).
    copy: bool = False

    def _add(self, key: Hashable, obj: Any, weight: int, version: int,
             since: float | None, until: float | None = None) -> None:
        """Stores a new entry; the caller holds the lock and has made room."""
        if self.copy:
            obj = _own(obj)
        if self.ttl is None:
            expires = until
        else:
            expires = (time.monotonic() if since is None else since) + self.ttl
            if until is not None and until < expires:
                expires = until
        self._d[key] = [obj, weight, version, expires]
        self.items += 1
        self.bytes += weight


class LRUMemory(Memory):
    """An LRU of ready objects, bounded by ``max_items`` and/or ``max_bytes``."""

    def __init__(
        self, *, max_items: int | None = None, max_bytes: int | None = None,
        ttl: float | None = DEFAULT_TTL,
        copy: bool = False,
    ) -> None:
        if max_items is None and max_bytes is None:
            raise UsageError("LRUMemory needs max_items or max_bytes")
        if (max_items is not None and max_items < 1) or (max_bytes is not None and max_bytes < 1):
            raise UsageError("LRUMemory bounds must be at least 1")
        super().__init__(ttl, OrderedDict())
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.evictions = 0
        self.copy = copy

    def __repr__(self) -> str:
        return (f"LRUMemory(max_items={self.max_items}, max_bytes={self.max_bytes}, "
                f"ttl={self.ttl})")

    def hot_table(self) -> OrderedDict | None:
        """The table behind :meth:`get`, for a caller's inlined hit path
        (:meth:`cachelab.tiered.TieredCache.get`): ``key -> [obj, weight, version, expires]``;
        a hit is an entry of the right version whose ``expires`` is None or not yet past
        (``time.monotonic()``), made most recent with ``move_to_end``. None when L1 copies its
        values or a subclass redefines ``get`` (then only ``get`` is right)."""
        if self.copy or type(self).get is not LRUMemory.get:
            return None
        return self._d  # type: ignore[return-value]

    def get(self, key: Hashable, version: int = 0) -> Any:
        d = self._d
        e = d.get(key)
        if e is None:
            return MISS
        if e[2] != version or (e[3] is not None and e[3] < time.monotonic()):
            self.discard(key)
            return MISS
        try:  # noqa: SIM105 - cheaper than contextlib.suppress on the hit path
            d.move_to_end(key)
        except KeyError:  # evicted by another thread in between
            pass
        return _own(e[0]) if self.copy else e[0]

    def put(self, key: Hashable, obj: Any, weight: int | None, version: int = 0,
            since: float | None = None, until: float | None = None) -> None:
        if weight is None:  # no encoding (a value its codec cannot store): not admitted
            return
        w = max(1, int(weight))
        if self.max_bytes is not None and w > self.max_bytes:
            return
        with self._lock:
            self._drop(key)
            while self._d and (
                (self.max_items is not None and self.items + 1 > self.max_items)
                or (self.max_bytes is not None and self.bytes + w > self.max_bytes)
            ):
                _, victim = self._d.popitem(last=False)  # type: ignore[call-arg]
                self.items -= 1
                self.bytes -= victim[1]
                self.evictions += 1
            self._add(key, obj, w, version, since, until)


class FixedMemory(Memory):
    """A pinned set: admits only ``pins`` (``(class name, ident)`` keys), never evicts them."""

    def __init__(self, pins: Iterable[Hashable], *, ttl: float | None = DEFAULT_TTL,
                 copy: bool = False) -> None:
        super().__init__(ttl, {})
        self.pins = frozenset(pins)
        self.copy = copy

    @classmethod
    def from_keys(cls, key_class: str, idents: Iterable[Any], **kw: Any) -> FixedMemory:
        """Pins for one key class, e.g. the items of a ``fixed:N`` recommendation."""
        return cls(((key_class, i) for i in idents), **kw)

    def __repr__(self) -> str:
        return f"FixedMemory({len(self.pins)} pins, ttl={self.ttl})"

    def get(self, key: Hashable, version: int = 0) -> Any:
        e = self._d.get(key)
        if e is None:
            return MISS
        if e[2] != version or (e[3] is not None and e[3] < time.monotonic()):
            self.discard(key)
            return MISS
        return _own(e[0]) if self.copy else e[0]

    def admits(self, key: Hashable) -> bool:
        return key in self.pins

    def put(self, key: Hashable, obj: Any, weight: int | None, version: int = 0,
            since: float | None = None, until: float | None = None) -> None:
        if key not in self.pins or weight is None:
            return
        with self._lock:
            self._drop(key)
            self._add(key, obj, max(1, int(weight)), version, since, until)
