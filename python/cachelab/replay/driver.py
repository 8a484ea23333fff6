"""Running a trace through the real tiered cache: the catalog in memcached, one
:class:`Driver` per strategy (a :class:`~cachelab.tiered.TieredCache` per app instance, one
connection), and the tier that times each L2 read and the *think time* before it
(:class:`GapTier`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cachelab.capacity import delete_keys
from cachelab.replay.spec import parse
from cachelab.tiered import FixedMemory, LRUMemory, MemcachedTier, TieredCache

__all__ = ["Driver", "GapTier", "Workload", "clock", "cpu", "delete_catalog", "load_catalog",
           "request", "windows"]

clock = time.perf_counter_ns
cpu = time.thread_time_ns

#: The client calls that read values for the tiered cache's L2 (``_core.Client`` methods).
_L2_READS = ("get_multi", "get_multi_list")


@dataclass
class Workload:
    """The trace as replay uses it: the trace itself, the application's view of it (each
    request's touches and each item's children as lists, read by the requests replay runs),
    and the simulator's (:class:`cachelab._core.RequestTrace`, whose walks replay counts)."""

    trace: Any
    core: Any
    touches: list[list[int]]
    children: list[list[int]]

    @classmethod
    def of(cls, trace: Any) -> Workload:
        return cls(trace, trace.to_core(), [trace.touches(r).tolist() for r in range(len(trace))],
                   [trace.children(i).tolist() for i in range(trace.n_items)])

    def topics(self) -> list[int]:
        """The items with children: where a request's prefetch can start."""
        return [i for i, ch in enumerate(self.children) if ch]

    def subtrees(self, topics: list[int], depth: int) -> list[list[int]]:
        """What a prefetch at each of ``topics`` to ``depth`` walks, as the simulator walks
        it: the topic, then its descendants level by level."""
        return [[t, *d] for t, d in zip(topics, self.core.descendants(topics, depth))]


def windows(trace: Any, train: float) -> tuple[np.ndarray, int, np.ndarray]:
    """The requests in time order (ties by index), how many of the first ones train, and
    which requests are evaluated (the rest)."""
    n = len(trace)
    order = np.lexsort((np.arange(n), trace.time))
    n_train = int(np.floor(train * n))
    evaluated = np.ones(n, dtype=bool)
    evaluated[order[:n_train]] = False
    return order, n_train, evaluated


def load_catalog(cache: TieredCache, kc: Any, sizes: np.ndarray, pool: bytes,
                 check: Callable[[], None] = lambda: None) -> None:
    """Every item into memcached at its size (bytes of ``pool``); ``check()`` after each
    (it raises to stop the loading)."""
    span = len(pool) - int(sizes.max())
    for i, s in enumerate(sizes.tolist()):
        off = (i * 7919) % max(1, span)
        cache.put(kc, i, pool[off:off + s])
        check()


def delete_catalog(address: str, cache: TieredCache, kc: Any, n: int) -> int:
    """Deletes the catalog's ``n`` items (also after an error, within a bounded time: see
    :func:`cachelab.capacity.delete_keys`); how many could not be deleted."""
    return delete_keys(address, (cache.key_for(kc, i) for i in range(n)), timeout=2.0)


class GapTier(MemcachedTier):
    """``MemcachedTier`` that also keeps, per L2 read, the caller's *think time*: how long
    since the previous L2 read of this process (on any connection sharing ``shared``) ended —
    how long client and server were away from each other — in wall time and in this thread's
    CPU time (the work done; the rest of a gap is time the process was not running, which a
    profile must not replay as work). It hooks the tier's client call,
    below whichever read method the tiered cache uses, so the cache's own fast path is kept;
    the profile samples go through the same method, class and connection (:meth:`sample`)."""

    def __init__(self, address: str, *, timeout: float, shared: dict[str, int]) -> None:
        super().__init__(address, timeout=timeout, connect_timeout=timeout)
        #: Think times (ns) before the reads made while ``recording``: wall, and CPU.
        self.gaps: list[int] = []
        self.cpu_gaps: list[int] = []
        self.recording = False
        self._sampling = False
        #: When this process's last L2 read ended: ``last`` (wall) and ``cpu``, ns.
        self.shared = shared
        #: Every read that succeeded since the tier was made: (ns, whether a multi-get). A
        #: failed read is not here (the cache neither times it), so a request's reads pair
        #: their latencies with their kinds one to one.
        self.reads: list[tuple[int, bool]] = []
        #: The header ``get_list`` strips (the key class's own), when the cache reads that way.
        self.strip: bytes | None = None
        #: Calls that raised (the tiered cache counts them as errors and goes on; the replay
        #: checks the server is still there when this grows).
        self.failures = 0

    def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        if method not in _L2_READS or self._sampling:
            try:
                return super()._call(method, *args, **kw)
            except Exception:
                self.failures += 1
                raise
        c0 = cpu()
        t0 = clock()
        shared = self.shared
        if shared["last"] and self.recording:
            self.gaps.append(t0 - shared["last"])
            self.cpu_gaps.append(c0 - shared["cpu"])
        try:
            out = super()._call(method, *args, **kw)
        except Exception:
            self.failures += 1
            raise
        finally:
            shared["last"] = t1 = clock()
            shared["cpu"] = cpu()
        self.reads.append((t1 - t0, len(args[0]) > 1))
        return out

    def sample(self, keys: list[str]) -> tuple[int, int]:
        """One profile sample: an L2 read as the tiered cache makes it, timed as the cache
        times it (without keeping a gap); (ns, keys found)."""
        self._sampling = True
        shared = self.shared
        t0 = clock()
        cpu()  # the same clock reads as an application's read (see _call)
        try:
            if hasattr(self, "get_list"):
                found = self.get_list(keys, self.strip)[1]
            else:  # pragma: no cover - a tiered cache that reads with get_multi
                found = len(self.get_multi(keys))
        finally:
            t1 = shared["last"] = clock()
            shared["cpu"] = cpu()
            self._sampling = False
        return t1 - t0, found

    def forget(self) -> None:
        """The next read's gap is not measured (it follows a pause that is not the app's)."""
        self.shared["last"] = 0


def request(cache: TieredCache, kc: Any, touches: list[int], children: list[list[int]],
            depth: int) -> int:
    """One application request, exactly as replay times it: a scope; at the first topic a
    prefetch strategy's ``prefetch_tree``; a ``get`` per touch. Returns the keys the prefetch
    sent to memcached (0 without one)."""
    kp = 0
    with cache.request() as req:
        prefetched = depth == 0
        for item in touches:
            if not prefetched and children[item]:
                prefetched = True
                kp = req.prefetch_tree(kc, item, children.__getitem__, depth)
            req.get(kc, item)
    return kp


class Driver:
    """One strategy built for real: a TieredCache per app instance over one memcached
    connection, driven one request at a time. ``fixed``: the strategy's fixed set as the
    simulator picks it (:func:`cachelab._core.fixed_set`), None without ``fixed:``."""

    def __init__(self, work: Workload, address: str, prefix: str, strategy: str,
                 fixed: list[int] | None, timeout: float, shared: dict[str, int]) -> None:
        parsed = parse(strategy)
        self.strategy = str(parsed)
        self.depth = parsed.prefetch_depth
        self.lru = parsed.l1 == "lru"
        self.lru_items, self.lru_bytes = parsed.lru_items, parsed.lru_bytes
        self.fixed = fixed
        self.work = work
        self.prefix = prefix
        self.tier = GapTier(address, timeout=timeout, shared=shared)
        trace = work.trace
        self.caches: dict[int, tuple[TieredCache, Any]] = {}
        for inst in sorted(set(trace.instance.tolist())):
            self.caches[int(inst)] = self.new_cache()
        #: Per request run: the memcached calls the cache made.
        self.round_trips = np.zeros(len(trace), dtype=np.int64)
        #: Per request run: its L2 reads' latencies (ns, timed at the tier) and whether each
        #: was a multi-get (the reads that failed are not among them).
        self.calls: dict[int, tuple[list[int], list[bool]]] = {}

    def new_cache(self, extra_pins: tuple[int, ...] | list[int] = ()) -> tuple[TieredCache, Any]:
        """A TieredCache with this strategy's L1 on this strategy's connection (pinned and
        loaded for ``fixed:``, with ``extra_pins`` too)."""
        sizes = self.work.trace.item_sizes

        def loader(idents: list[int]) -> dict[int, bytes]:
            # Never expected: the catalog is all in memcached (counted as loader_keys).
            return {i: bytes(int(sizes[i])) for i in idents}

        pins = None if self.fixed is None else [*self.fixed, *extra_pins]
        if self.lru:
            # ttl=None: a replay has no writers, and expiry would skew the simulated hit ratio
            l1: Any = LRUMemory(max_items=self.lru_items, max_bytes=self.lru_bytes, ttl=None)
        elif pins is not None:
            l1 = FixedMemory.from_keys("item", pins, ttl=None)
        else:
            l1 = None
        c = TieredCache(self.tier, l1, prefix=self.prefix)
        kc = c.key_class("item", loader, codec="raw")
        if pins:
            c.get_many(kc, pins)  # pin the hot set before the evaluation
        return c, kc

    def warm(self, requests: np.ndarray) -> None:
        """The training window, untimed: only an LRU has state to warm."""
        if self.lru:
            for r in requests:
                self.run(int(r))
        for c, _ in self.caches.values():
            c.reset_stats()
        self.round_trips[:] = 0
        self.calls.clear()

    def run(self, r: int) -> tuple[int, int]:
        """Runs request ``r``; (its wall time, the part inside memcached calls), ns. Also keeps
        its memcached calls: how many, how long, which were multi-gets."""
        cache, kc = self.caches[int(self.work.trace.instance[r])]
        recorded = cache.l2_stats.latencies_ns
        n0, c0 = len(recorded), cache.l2_stats.calls
        k0 = len(self.tier.reads)
        t0 = clock()
        request(cache, kc, self.work.touches[r], self.work.children, self.depth)
        t1 = clock()
        reads = self.tier.reads[k0:]
        self.calls[r] = ([ns for ns, _ in reads], [multi for _, multi in reads])
        self.round_trips[r] = cache.l2_stats.calls - c0
        return t1 - t0, sum(recorded[n0:])

    def counts(self, requests: int) -> dict[str, Any]:
        """Totals over the requests run since :meth:`warm`, from the caches' own counters."""
        caches = [c for c, _ in self.caches.values()]
        return {
            "l1_hits": sum(c.l1_stats.hits for c in caches),
            "round_trips": sum(c.l2_stats.calls for c in caches),
            "requests": requests,
            "loader_keys": sum(c.l3_stats.keys for c in caches),
            "errors": sum(c.l2_stats.errors for c in caches),
        }
