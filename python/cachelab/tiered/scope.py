"""Request scope: within one request each key is looked up at most once, and prefetches gather
what L1 lacks into one multi-get. Made by :meth:`cachelab.tiered.TieredCache.request`."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol

from cachelab.errors import UsageError
from cachelab.tiered.checks import bad_key_class, idents_list, unhashable_ident, unhashable_in
from cachelab.tiered.keys import KeyClass
from cachelab.tiered.memory import MISS, Memory
from cachelab.tiered.stats import TierStats

__all__ = ["NOT_FOUND", "RequestScope", "ScopeHost"]


class _NotFound:
    __slots__ = ()


#: What a scope keeps for a key the request looked up and did not find.
NOT_FOUND: Any = _NotFound()


class ScopeHost(Protocol):
    """What a scope uses of its cache (:class:`cachelab.tiered.TieredCache`)."""

    @property
    def l1(self) -> Memory | None: ...

    l1_stats: TierStats

    def _ns_version(self, namespace: str) -> int: ...

    def _lookup(self, kc: KeyClass, idents: list[Any],
                values: dict[Hashable, Any] | None) -> dict: ...


class RequestScope:
    """One request's view of the cache: each key is looked up at most once; what it found
    (or did not) is kept for the rest of the request. Use as a context manager or directly."""

    __slots__ = ("_cache", "_values")

    def __init__(self, cache: ScopeHost) -> None:
        self._cache = cache
        #: (class name, ident) -> object, or NOT_FOUND, for the keys this request looked up.
        self._values: dict[Hashable, Any] = {}

    def __enter__(self) -> RequestScope:
        return self

    def __exit__(self, *exc: object) -> None:
        self._values.clear()

    def __contains__(self, key: tuple[KeyClass, Any]) -> bool:
        kc, ident = key
        return (kc.name, ident) in self._values

    def get(self, kc: KeyClass, ident: Any, default: Any = None) -> Any:
        try:  # free unless it raises: the scope's hit path pays nothing for the checks
            v = self._values.get((kc.name, ident), MISS)
        except AttributeError:
            bad_key_class("RequestScope.get", kc)
        except TypeError:
            raise unhashable_ident(kc.name, ident, "RequestScope.get") from None
        if v is not MISS:
            return default if v is NOT_FOUND else v
        return self._cache._lookup(kc, [ident], self._values).get(ident, default)

    def get_many(self, kc: KeyClass, idents: Iterable[Any]) -> dict[Any, Any]:
        if kc.__class__ is not KeyClass:
            bad_key_class("RequestScope.get_many", kc)
        idents = idents_list("RequestScope.get_many", kc.name, idents)
        try:
            return self._cache._lookup(kc, idents, self._values)
        except TypeError:
            unhashable_in(kc.name, idents, "RequestScope.get_many")
            raise

    def prefetch(self, kc: KeyClass, idents: Iterable[Any]) -> int:
        """Fetches the idents neither in this request nor in L1 with one multi-get (and the
        loader for what memcached lacks); returns how many keys that multi-get asked for."""
        if kc.__class__ is not KeyClass:
            bad_key_class("RequestScope.prefetch", kc)
        idents = idents_list("RequestScope.prefetch", kc.name, idents)
        cache = self._cache
        version = cache._ns_version(kc.namespace) if kc.namespace else 0
        l1 = cache.l1 if kc.l1 else None
        name = kc.name
        wanted = []
        try:
            unique = dict.fromkeys(idents)
        except TypeError:
            unhashable_in(kc.name, idents, "RequestScope.prefetch")
            raise
        for i in unique:
            sk = (name, i)
            if sk in self._values:
                continue
            # In L1: left out (and made most recent, like the simulator's walk); the touch
            # that follows is an L1 hit.
            if l1 is not None and l1.get(sk, version) is not MISS:
                continue
            wanted.append(i)
        if wanted:
            cache._lookup(kc, wanted, self._values)
        return len(wanted)

    def prefetch_tree(
        self, kc: KeyClass, root: Any, children: Callable[[Any], Iterable[Any]], depth: int = 1,
    ) -> int:
        """Prefetches ``root`` and its descendants down to ``depth`` levels (children are
        level 1), in one multi-get of those neither in this request nor in L1. ``children``
        maps an ident to its children's idents without loading anything (the structure must
        be known up front for one round trip). Returns the keys sent to memcached."""
        if depth < 0:
            raise UsageError(f"prefetch depth must be 0 or more, got {depth}")
        cache = self._cache
        sk = (kc.name, root)
        if kc.l1 and cache.l1 is not None and sk not in self._values:
            # The root is about to be used: an L1 hit now is its lookup (before the multi-get
            # can evict it from a byte-bounded L1), as in the simulator.
            v = cache.l1.get(sk, cache._ns_version(kc.namespace) if kc.namespace else 0)
            if v is not MISS:
                cache.l1_stats.hits += 1
                self._values[sk] = v
        seen = {root}
        order = [root]
        frontier = [root]
        for _ in range(depth):
            nxt = []
            for p in frontier:
                for c in children(p):
                    if c not in seen:
                        seen.add(c)
                        order.append(c)
                        nxt.append(c)
            if not nxt:
                break
            frontier = nxt
        return self.prefetch(kc, order)

    def clear(self) -> None:
        self._values.clear()
