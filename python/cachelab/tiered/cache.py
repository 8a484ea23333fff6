"""The read-through cache: L1 (in process) → L2 (memcached) → L3 (your loader).

::

    cache = TieredCache(MemcachedTier("127.0.0.1:11211"), LRUMemory(max_bytes=64 << 20),
                        prefix="myapp")
    users = cache.key_class("user", load_users, codec="msgpack", compression="zstd")
    with cache.request() as req:
        req.prefetch(users, [1, 2, 3])         # one multi-get for whatever L1 lacks
        alice = req.get(users, 1)              # from this request's scope: no round trip

How a lookup goes, for each key not already fetched in the request:

1. **L1** — the ready object, if this process holds it (and, for a versioned namespace, it was
   filled under the current version).
2. **L2** — one multi-get (:meth:`Tier.get_list <cachelab.tiered.backends.Tier.get_list>`)
   for all keys L1 lacked. Values are decoded by the header their writer put in front (codec
   and compression, :mod:`cachelab.tiered.codecs`); those in the class's own uncompressed
   format come from Rust without it and are decoded with one ``map``.
3. **L3** — the loader, once per batch of keys still missing, behind two guards against
   stampedes (:mod:`cachelab.tiered.flight`): in-process *single flight* (one thread loads a
   key, the others wait for it) and memcached *leases* (one process loads a key, the others
   poll L2 for its value while the lease lives — at most ``lease_ttl`` seconds, or
   ``lease_wait`` if given — then load it themselves without storing).

Stale-while-revalidate (a key class's ``soft_ttl``, :mod:`cachelab.tiered.swr`): a value
past its soft TTL found in step 2 is returned at once while one caller across processes
claims and reloads it; L1 holds such a value only while it is fresh.

Failures: a memcached error or timeout (``MemcachedTier(timeout=...)``) counts against a
:class:`CircuitBreaker`; the keys are read from the loader instead (``fallbacks``). While the
breaker is open, L2 is skipped entirely (``skipped``) until a trial call succeeds.

Staleness (:meth:`TieredCache.staleness`, also in ``stats()``): once :meth:`TieredCache.put`
or :meth:`TieredCache.invalidate` returns, no read in this process sees the older value, and
other processes stop serving it within their L1's ``ttl`` (1 s by default). Each write bumps an
*epoch* after it reached memcached, and changes L1, under a small lock; a fill is admitted to L1
under that lock only if the epoch is the one it began at, and threads waiting on a fill of a
key written meanwhile fetch again instead of using it.

Writes go through the same breaker: a ``put`` or ``invalidate`` that cannot reach memcached
(breaker open, error, timeout) does not raise by default (``write_errors="swallow"``; counted in
``write_errors`` / ``writes_skipped``); its key is queued for deletion instead, so no older
value stays readable there after the outage. Queued deletes go out in bulk
(:meth:`Tier.delete_many <cachelab.tiered.backends.Tier.delete_many>`) on the next call the
breaker allows, or sooner from a background thread (:class:`~cachelab.tiered.lanes.OwedReplay`)
at the breaker's trial cadence, so they reach memcached within a stated time after it answers
again whatever the writer does next (``staleness()["owed_delivery_s"]``). A write blocks at
most one tier timeout; none while the breaker is open.

Invalidation: :meth:`TieredCache.invalidate` deletes the key from memcached and then drops it
from this process's L1. A fill that began before the invalidation is not admitted to L1, and
with leases its CAS set fails, so it does not land in memcached either (without leases a fill
stores with ``add``, so it never overwrites a put, but may re-store a value just deleted). A
delete that cannot reach memcached is kept as pending: until every pending delete has reached
memcached, reads go past L2 (and fills are not stored there). Other processes' L1s are not
told: their ``ttl`` bounds it.
:meth:`TieredCache.invalidate_namespace` bumps a version counter in memcached that is part of
every key of that namespace (:mod:`cachelab.tiered.keys`); other processes see the new version
within ``ns_refresh`` seconds.

:class:`TieredCache` composes the parts: :class:`~cachelab.tiered.keys.Keyring` (key classes,
keys, namespaces), :class:`~cachelab.tiered.flight.SingleFlight` and
:func:`~cachelab.tiered.flight.fill` (stampede protection), and
:class:`~cachelab.tiered.scope.RequestScope`; it keeps the read and write paths.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar, overload

from cachelab.errors import ServerError, UsageError
from cachelab.tiered.asyncbridge import sync_loader
from cachelab.tiered.backends import Tier
from cachelab.tiered.breaker import CircuitBreaker
from cachelab.tiered.checks import bad_key_class, hashable, idents_list, ttl_seconds, unhashable_in
from cachelab.tiered.decorators import Cached, CachedMany, cached, cached_many
from cachelab.tiered.flight import LEASE_POLL_MAX, SingleFlight, fill, l2_failed
from cachelab.tiered.keys import KeyClass, Keyring, Loader, RandomPrefixWarning, with_ttl
from cachelab.tiered.lanes import Lane, OwedReplay, per_member
from cachelab.tiered.memory import MISS, LRUMemory, Memory
from cachelab.tiered.pool import MemcachedPool
from cachelab.tiered.scope import NOT_FOUND, RequestScope
from cachelab.tiered.stats import BreakerStats, TierStats
from cachelab.tiered.swr import settle

__all__ = ["KeyClass", "Loader", "RequestScope", "TieredCache"]

_now_ns = time.perf_counter_ns
_monotonic = time.monotonic
T = TypeVar("T")
D = TypeVar("D")


def _keys_attribute(name: str, doc: str) -> Any:
    """A property of :class:`TieredCache` that reads and sets its :class:`Keyring`'s
    ``name``."""
    return property(lambda cache: getattr(cache._keys, name),
                    lambda cache, value: setattr(cache._keys, name, value), doc=doc)


class TieredCache:
    """A read-through cache over an optional L1 (:class:`~cachelab.tiered.LRUMemory`,
    :class:`~cachelab.tiered.FixedMemory`) and an optional L2 (:class:`MemcachedTier`,
    :class:`PymemcacheTier`), with loaders per key class.

    ``prefix`` starts every memcached key; without it a unique one is made for this object
    (``cachelab:<12 hex>``), right for tests and benchmarks — give a stable one in production
    (with an L2 and no ``prefix``, a :class:`~cachelab.tiered.RandomPrefixWarning` says so).

    ``l2`` may be a :class:`~cachelab.tiered.MemcachedPool`: each key then goes to its member,
    and each member gets a breaker like ``breaker`` (its settings: ``failures`` consecutive
    failures mark the member down for ``reset_after`` seconds) and a queue of owed deletes of
    its own; a down member's keys go to the loader, never to another member. ``breaker`` itself
    then only carries the settings; per-member state is in ``stats()["pool"]``.
    """

    def __init__(
        self,
        l2: Tier | None = None,
        l1: Memory | None = None,
        *,
        prefix: str | None = None,
        breaker: CircuitBreaker | None = None,
        leases: bool = True, lease_ttl: int = 10,
        lease_wait: float | None = None,
        ns_refresh: float = 1.0,
        write_errors: str = "swallow",
    ) -> None:
        keys = Keyring(prefix, ns_refresh)  # checks the prefix
        if prefix is None and l2 is not None:
            warnings.warn(
                f"TieredCache without prefix= uses a random one ({keys.prefix!r}): no other "
                "process, nor this one after a restart, shares its memcached entries; "
                "pass a stable prefix (e.g. your app's name)", RandomPrefixWarning, stacklevel=2)
        if lease_ttl < 1 or (lease_wait is not None and lease_wait < 0) or ns_refresh < 0:
            raise UsageError("lease_ttl must be >= 1 s; lease_wait and ns_refresh >= 0")
        if write_errors not in ("swallow", "raise"):
            raise UsageError(f"write_errors must be 'swallow' or 'raise', not {write_errors!r}")
        self._keys = keys
        self.l2 = l2
        self.l1 = l1  # a property: it also sets the hit path's table
        self.breaker = breaker or CircuitBreaker()
        #: The pool L2 is, if it is one (its keys are routed to one lane per member).
        self._pool = l2 if isinstance(l2, MemcachedPool) else None
        #: One lane per memcached server: a lone tier's (with ``breaker``), or one per member.
        self._lanes: list[Lane] = (
            [] if l2 is None else [Lane(self, l2, self.breaker)] if self._pool is None
            else [Lane(self, m, self.breaker.like(), s.address, s.weight)
                  for m, s in zip(self._pool.members, self._pool.servers)])
        self.leases = leases
        self.lease_ttl = lease_ttl
        #: How long a lease waiter polls before loading without storing; None: while the
        #: holder's lease lives (``lease_ttl``), so a slow loader is still called once.
        self.lease_wait = lease_wait
        #: "swallow": a write memcached did not take is counted, its key queued for deletion;
        #: "raise": the same, then the ServerError is raised to the caller.
        self.write_errors = write_errors
        self.l1_stats = TierStats("l1")
        self.l2_stats = TierStats("l2")
        self.l3_stats = TierStats("l3")
        self.events = BreakerStats()
        self._flights = SingleFlight()
        #: Bumped by every put and invalidation once it has reached memcached: a fill that
        #: began before one is not admitted to L1.
        self._epoch = 0
        #: Held for a fill's epoch check + L1 store, and a write's epoch bump + L1 change, so
        #: neither lands between the other's two steps (never taken on an L1 hit).
        self._admit = threading.Lock()
        #: Deletes owed, over all lanes (the sum of ``events.pending_invalidations``).
        self._owed = 0
        #: The background thread that sends them once their server answers again.
        self._replay = OwedReplay(self)
        self._tracking: Any = None  #: a RedisTracking telling L1 of writes (tracking.py)

    def __repr__(self) -> str:
        return f"TieredCache(l2={self.l2!r}, l1={self.l1!r}, prefix={self.prefix!r})"

    @property
    def l1(self) -> Memory | None:
        """The in-process tier (None: no L1)."""
        return self._l1

    @l1.setter
    def l1(self, memory: Memory | None) -> None:
        self._l1 = memory
        #: An LRUMemory's table, read directly by :meth:`get` on a hit (one Python call less).
        self._hot = memory.hot_table() if isinstance(memory, LRUMemory) else None

    prefix = _keys_attribute("prefix", "What every memcached key of this cache starts with.")
    ns_refresh = _keys_attribute(
        "refresh", "Seconds a namespace version is used before it is read from memcached again.")

    @property
    def _classes(self) -> dict[str, KeyClass]:
        """The key classes registered, by name."""
        return self._keys.classes

    # -- configuration ----------------------------------------------------------------------

    def key_class(
        self,
        name: str,
        loader: Callable[[list[Any]], Mapping[Any, T]]
        | Callable[[list[Any]], Awaitable[Mapping[Any, T]]],
        *,
        codec: str = "msgpack", compression: str = "none", threshold: int = 1024,
        ttl: int = 3600, l1: bool = True, namespace: str | None = None,
        soft_ttl: int | None = None,
    ) -> KeyClass[T]:
        """Registers a key class: its loader, codec (``raw``, ``msgpack``, ``orjson``, or
        ``pickle`` — opt-in, it executes what it reads), compression (``none``, ``zlib``,
        ``zstd``, ``lz4``) for encoded values of at least ``threshold`` bytes, memcached TTL in
        seconds, whether L1 may hold it, and an optional versioned ``namespace``. The loader
        may be a coroutine function (``async def``): see :mod:`cachelab.tiered.aio`.

        ``soft_ttl`` (seconds, 1 to ``ttl`` - 1) turns on stale-while-revalidate: a value is
        fresh for ``soft_ttl``; after that a read returns it at once while one caller (across
        processes) reloads it, until ``ttl`` (:mod:`cachelab.tiered.swr`). It needs memcached
        with leases (``MemcachedTier`` or ``MemcachedPool``, ``leases=True``)."""
        loader = sync_loader(loader)
        if soft_ttl is not None and not (self.l2 is not None and self.leases
                                         and self.l2.supports_leases):
            raise UsageError(f"key class {name!r}: soft_ttl needs memcached with leases "
                             "(MemcachedTier or MemcachedPool, leases=True): one caller across "
                             "processes claims a stale value through its CAS")
        return self._keys.register(name, loader, codec, compression, threshold, ttl, l1,
                                   namespace, soft_ttl)

    # -- keys ---------------------------------------------------------------------------------

    def key_for(self, kc: KeyClass, ident: Any, version: int | None = None) -> str:
        """The memcached key of ``ident``: ``<prefix>:<class>[@<version>]:<ident>`` when the
        ident is short and made of safe characters, else ``...:#<blake2b of it>``. Anything
        else a caller passes can therefore never reach the wire as a command."""
        if kc.namespace is None:
            version = 0
        elif version is None:
            version = self._ns_version(kc.namespace)
        return self._keys.key_for(kc, ident, version)

    def _ns_version(self, namespace: str) -> int:
        if self._pool is None:
            return self._keys.ns_version(namespace, self.l2, self.breaker)
        lane = self._lane_for(self._keys.ns_key(namespace))
        return self._keys.ns_version(namespace, lane.l2, lane.breaker)

    # -- reads --------------------------------------------------------------------------------

    def request(self) -> RequestScope:
        """A request scope: every key is fetched at most once within it."""
        return RequestScope(self)

    @overload
    def get(self, kc: KeyClass[T], ident: Any, default: None = None, *,
            ttl: int | None = None) -> T | None: ...
    @overload
    def get(self, kc: KeyClass[T], ident: Any, default: D, *,
            ttl: int | None = None) -> T | D: ...

    def get(self, kc: KeyClass[T], ident: Any, default: Any = None, *,
            ttl: int | None = None) -> Any:
        """The object for ``ident``: L1, else memcached, else the loader; ``default`` if the
        loader does not know it. ``ttl`` (seconds) replaces the class's memcached TTL for a
        value this call loads."""
        if ttl is not None or kc.__class__ is not KeyClass:  # checks.py; ~15 ns inline
            if kc.__class__ is not KeyClass:
                bad_key_class("TieredCache.get", kc)
            ttl = ttl_seconds(ttl)
        try:  # free unless it raises: the hit path pays nothing for the check below
            hot = self._hot
            if hot is not None and kc.plain_l1:
                # LRUMemory.get inlined: the hit path is most of what an L1 hit costs.
                sk = (kc.name, ident)
                e = hot.get(sk)
                if e is not None:
                    x = e[3]
                    if e[2] == 0 and (x is None or x >= _monotonic()):
                        try:  # noqa: SIM105 - cheaper than contextlib.suppress on the hit path
                            hot.move_to_end(sk)
                        except KeyError:  # evicted by another thread in between
                            pass
                        self.l1_stats.hits += 1
                        return e[0]
                    # expired: _lookup below drops it and counts the miss
            else:
                l1 = self._l1
                if l1 is not None and kc.l1:
                    v = l1.get((kc.name, ident),
                               self._ns_version(kc.namespace) if kc.namespace else 0)
                    if v is not MISS:
                        self.l1_stats.hits += 1
                        return v
            found = self._lookup(with_ttl(kc, ttl), [ident], None)
            return found.get(ident, default)
        except TypeError:
            unhashable_in(kc.name, (ident,), "TieredCache.get")  # raises it, if that was it
            raise

    def get_many(self, kc: KeyClass[T], idents: Iterable[Any], *,
                 ttl: int | None = None) -> dict[Any, T]:
        """{ident: object} for the idents found; one memcached round trip for L1's misses.
        ``ttl`` as in :meth:`get`."""
        if kc.__class__ is not KeyClass:
            bad_key_class("TieredCache.get_many", kc)
        idents = idents_list("get_many", kc.name, idents)
        try:
            return self._lookup(with_ttl(kc, ttl), idents, None)
        except TypeError:
            unhashable_in(kc.name, idents, "TieredCache.get_many")  # raises it, if that
            raise

    # -- decorators (cachelab.tiered.decorators) ----------------------------------------------

    def cached(self, name: str | None = None, **options: Any) -> Callable[..., Cached]:
        """``@cache.cached(...)``: caches a function by its arguments; see
        :func:`cachelab.tiered.decorators.cached`."""
        return cached(self, name, **options)

    def cached_many(self, name: str | None = None, **options: Any) -> Callable[..., CachedMany]:
        """``@cache.cached_many(...)``: a function of a list of idents returning
        ``{ident: value}``, read through :meth:`get_many`; see
        :func:`cachelab.tiered.decorators.cached_many`."""
        return cached_many(self, name, **options)

    # -- writes -------------------------------------------------------------------------------

    def put(self, kc: KeyClass[T], ident: Any, obj: T, ttl: int | None = None) -> None:
        """Writes through: memcached (a set, ``ttl`` seconds if given, else the class's) and
        this process's L1, its ttl from the put's start (a put elsewhere that lands first is not
        outlived here by this value, however long this thread is held up). Once it returns, no
        read in this process sees an older value (fills under way are not admitted to L1). When
        memcached cannot take the set (breaker open, error, timeout) the key's delete is queued
        instead and, by default (``write_errors="swallow"``), nothing is raised."""
        if kc.__class__ is not KeyClass:
            bad_key_class("TieredCache.put", kc)
        hashable("TieredCache.put", kc.name, ident)
        kc = with_ttl(kc, ttl)
        enc = kc.encode(obj)
        version = self._ns_version(kc.namespace) if kc.namespace else 0
        key = self.key_for(kc, ident, version)
        began = _monotonic()  # L1's ttl counts from here, as a fill's from its start
        try:
            lane = self._write_lane(key)
            if lane is not None:
                lane.write(key, enc.data, enc.flags, kc.ttl)
        finally:  # also when write_errors="raise" raised: L1 holds what the caller wrote
            l1 = self.l1 if kc.l1 else None
            with self._admit:
                self._epoch += 1
                if l1 is not None:  # (a class with a soft ttl: held while fresh)
                    soft = kc.soft_ttl and began + min(kc.soft_ttl, kc.ttl or kc.soft_ttl)
                    l1.put((kc.name, ident), obj, enc.plain_size, version, began, soft or None)
            self._flights.mark_stale(key)

    def invalidate(self, kc: KeyClass, ident: Any) -> None:
        """Forget ``ident`` here and in memcached (see the module docstring for what is
        guaranteed). When memcached is down the delete is kept pending, and nothing is raised
        unless ``write_errors="raise"``.

        L1 is dropped (and the epoch bumped) *after* the delete: a fill that read memcached
        before the delete is not admitted, and one that begins after the drop reads past it."""
        if kc.__class__ is not KeyClass:
            bad_key_class("TieredCache.invalidate", kc)
        hashable("TieredCache.invalidate", kc.name, ident)
        version = self._ns_version(kc.namespace) if kc.namespace else 0
        key = self.key_for(kc, ident, version)
        try:
            lane = self._write_lane(key)
            if lane is not None:
                lane.delete(key)
        finally:
            l1 = self.l1
            with self._admit:
                self._epoch += 1
                if l1 is not None:
                    l1.discard((kc.name, ident))
            self._flights.mark_stale(key)

    def invalidate_namespace(self, namespace: str) -> int:
        """Moves ``namespace`` to a new version (every key in it changes); returns it. Raises
        ServerError if memcached cannot be reached: a namespace cannot be bumped locally only."""
        l2 = self.l2 if self._pool is None else self._lane_for(self._keys.ns_key(namespace)).l2
        version = self._keys.bump(namespace, l2)
        with self._admit:
            self._epoch += 1
        return version

    # -- stats --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Per tier: hits, misses, calls, keys, errors, bytes, latency percentiles (L2, L3)
        and their HdrHistogram; fallback and lease counters; L1 occupancy."""
        lanes = self._lanes
        self.events.opened = (self.breaker.opened if self._pool is None
                              else sum(lane.breaker.opened for lane in lanes))
        l1 = self.l1_stats.to_dict()
        if self.l1 is not None:
            l1["items"] = self.l1.items
            l1["bytes_held"] = self.l1.bytes
        out = {"l1": l1, "l2": self.l2_stats.to_dict(), "l3": self.l3_stats.to_dict(),
               "events": self.events.to_dict(), "breaker": self.breaker.state,
               "staleness": self.staleness()}
        if self._pool is not None:
            members = [lane.to_dict() for lane in lanes]
            down = sum(m["state"] != "closed" for m in members)
            out["breaker"] = "closed" if not down else f"{down} of {len(members)} members down"
            out["pool"] = {"distribution": self._pool.distribution.kind, "members": members}
        return out

    def staleness(self) -> dict[str, Any]:
        """The staleness bound this configuration guarantees (also in :meth:`stats`):
        ``same_process`` (what a read in the writing process may see), ``cross_process_s``
        (seconds after a put/invalidate returns until no other process serves the older
        value; None: no bound), ``namespace_s`` (the same for ``invalidate_namespace``),
        ``why``; and for outages (None without an L2, or when the tier's timeouts are not
        known): ``owed_delivery_s`` (seconds after memcached answers again until the deletes
        a write could not deliver have reached it, for up to ``delete_batch`` of them per
        server), ``after_outage_s`` (seconds after memcached answers again until no other
        process serves a value older than a write made during the outage: that plus
        ``cross_process_s``), ``orphan_lease_s`` (seconds after memcached answers again that
        a get may wait on a lease placeholder this process left and nobody fills: that plus
        one lease poll), ``lost_request_s`` (a set or lease request that timed out may still
        run on a slow or stopped server after the delete its loss queued: if it runs within
        this many seconds of that delete reaching the server, a second one undoes it) and
        ``after_outage`` (the same in words, with what a partition cannot guarantee).
        ``stale_serve_s``: the most seconds a value of a key class with a ``soft_ttl`` may be
        served past it (``ttl - soft_ttl``, the worst over the classes; 0.0 with none), by
        class in ``stale_serve``: by *age* only — writes stay bounded as above."""
        l1 = self.l1
        ttl = None if l1 is None else l1.ttl
        leases = self.l2 is None or (self.leases and self.l2.supports_leases)
        if l1 is None:
            cross: float | None = 0.0
            why = "no L1: every read goes to memcached"
        elif ttl is None:
            cross = None
            why = "L1 ttl=None: another process's L1 keeps a value until evicted"
        else:
            cross = float(ttl)
            why = (f"other processes' L1 entries expire {ttl:g} s after the read that "
                   "filled them began (or the put)")
        if self._tracking is not None and l1 is not None:
            cross, why = self._tracking.tighten(cross, why)
        same = "none after put/invalidate returns"
        if not leases:
            same += " (invalidate: a fill racing it may store the old value in memcached)"
            why += "; without leases a fill racing an invalidate may store the old value " \
                   "in memcached until the class ttl"
            if self.l2 is not None:
                cross = None
        swr = {n: k.ttl - k.soft_ttl for n, k in self._classes.items() if k.soft_ttl}
        if swr:
            why += ("; stale-while-revalidate (" + ", ".join(f"{n}: {s} s" for n, s in
                                                         swr.items())
                    + "): a value past its class's soft_ttl is served at most ttl - soft_ttl "
                    "seconds more (its age never over ttl) while one caller reloads it; a "
                    "put or invalidate is not delayed by it")
        out: dict[str, Any] = {
            "same_process": same, "cross_process_s": cross, "namespace_s": self.ns_refresh,
            "why": why, "after_outage": None, "owed_delivery_s": None, "after_outage_s": None,
            "orphan_lease_s": None, "lost_request_s": None,
            "stale_serve_s": float(max(swr.values(), default=0)), "stale_serve": swr}
        if self.l2 is None:
            out["after_outage_s"] = cross
            return out
        owed, srv = self._owed_delivery_s(), getattr(self.l2, "server", "memcached")
        if owed is None:
            out["after_outage"] = (
                "a write whose delete could not reach its memcached is deleted there by a "
                "background thread at the breaker's trial cadence; this tier's timeouts are "
                "not known, so no bound is stated")
            return out
        after = None if cross is None else round(owed + cross, 3)
        lost = max(lane.lost_request_s() for lane in self._lanes)
        out.update(owed_delivery_s=owed, after_outage_s=after,
                   orphan_lease_s=round(owed + LEASE_POLL_MAX, 3) if leases else None,
                   lost_request_s=round(lost, 3))
        out["after_outage"] = (
            f"a write whose delete or set could not reach its {srv} (stopped, killed, "
            f"unreachable) has its key's delete sent by a background thread at the breaker's "
            f"trial cadence: it reaches {srv} within {owed:g} s after it answers "
            f"again (reset_after {self.breaker.reset_after:g} s + three attempts of "
            f"{self.l2.bound_words}{per_member(len(self._lanes))}), whatever this "
            "process does next; other processes stop serving the older value within "
            + ("no bound (see cross_process_s)" if after is None
               else f"{after:g} s after it answers again (adding their L1 ttl)")
            + ". A partition that cuts off only this process cannot be bounded: "
            f"processes that still reach {srv} may read the older value for as long as "
            "it lasts, plus that bound once it heals. A set or lease request that timed out "
            "on a server that still answers (only slow) may run there after the delete its "
            f"loss queued: a second delete follows {lost:g} s after the loss (a request "
            "later still can leave an older value until the class TTL, or a lease "
            "placeholder that other processes wait on up to lease_wait)")
        return out

    def _owed_delivery_s(self) -> float | None:
        """Seconds after memcached answers again within which the owed deletes reach it
        (None: the tier's timeouts are unknown): the breaker's pause, plus the trial under way
        when it came back (it may still fail), the next one, and the delete that confirms it
        (:meth:`~cachelab.tiered.lanes.Lane.flush`), each behind one on every other member."""
        bound, n = self.l2.request_bound_s() if self.l2 is not None else None, len(self._lanes)
        return None if bound is None else round(self.breaker.reset_after + 3 * n * bound, 3)

    def close(self) -> None:
        """Stops the background replay of owed deletes after one last try of each server
        whose breaker allows a call (each bounded by the tier's timeout). Deletes still owed
        then are dropped: their keys' older values stay in memcached until their TTL. The
        tiers are not closed (they may be shared). The cache stays usable; owed deletes then
        go out only with calls. A :class:`~cachelab.tiered.RedisTracking` is stopped too."""
        self._replay.stop()
        if self._tracking is not None:
            self._tracking.close()
        for lane in self._lanes:
            if lane.pending and lane.breaker.allow():
                lane.flush()

    def __enter__(self) -> TieredCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset_stats(self) -> None:
        for s in (self.l1_stats, self.l2_stats, self.l3_stats):
            s.reset()
        self.events = BreakerStats()
        self.events.pending_invalidations = self._owed
        for lane in self._lanes:
            lane.reset_stats()

    # -- internals ----------------------------------------------------------------------------

    @property
    def _pending(self) -> set[str]:
        """The keys whose delete is owed, over all lanes (a copy)."""
        return set().union(*(lane._pending for lane in self._lanes))

    def _queue_delete(self, key: str, lost: bool = True) -> None:
        """Queues ``key``'s delete on the lane that holds it (none without an L2)."""
        if self._lanes:
            self._lane_for(key)._queue_delete(key, lost)

    def lost_until(self, key: str) -> float | None:
        """:meth:`Lane.lost_until <cachelab.tiered.lanes.Lane.lost_until>` of its lane."""
        return self._lane_for(key).lost_until(key) if self._lanes else None

    def _lane_for(self, key: str) -> Lane:
        """The lane (memcached server) that holds ``key``; the cache has an L2."""
        pool = self._pool
        if pool is None:
            return self._lanes[0]
        return self._lanes[pool.member_of(key)]

    def _write_lane(self, key: str) -> Lane | None:
        """The lane a write of ``key`` goes through, once the deletes owed are replayed (a
        write lands after them); None without an L2."""
        if not self._lanes:
            return None
        if self._owed:
            self._replay_owed()
        return self._lane_for(key)

    def _count_pending(self) -> None:
        """Recounts the deletes owed over all lanes (a lane's queue changed)."""
        lanes = self._lanes
        n = lanes[0].pending if len(lanes) == 1 else sum(lane.pending for lane in lanes)
        self._owed = self.events.pending_invalidations = n
        if n or any(lane._confirm for lane in lanes):  # (or a second delete, see Lane)
            self._replay.poke()

    def _replay_owed(self) -> None:
        """Sends the deletes owed to every *pool member* whose breaker allows a call (a trial,
        once it has been down for ``reset_after``), so a member that is back gets them on the
        next call to any member, as a lone server gets them on the next call. A failure keeps
        them queued and counts against that member only."""
        if self._pool is None:
            return  # a lone server's queue goes out first on its own next call
        for lane in self._lanes:
            if lane.pending and lane.breaker.allow():
                lane.flush()

    def _lookup(self, kc: KeyClass, idents: list[Any],
                values: dict[Hashable, Any] | None) -> dict:
        """L1, then :meth:`_fetch`, for ``idents``; ``values`` is a request scope's
        (consulted first, and told what was found and what was not), or None."""
        version = self._ns_version(kc.namespace) if kc.namespace else 0
        l1 = self.l1 if kc.l1 else None
        if values is None and l1 is None:
            # Nothing in process to look at: straight to memcached (and the loader).
            return self._fetch(kc, list(dict.fromkeys(idents)), version)[0]
        name = kc.name
        out: dict[Any, Any] = {}
        need: list[Any] = []
        hits = misses = 0
        for i in idents:
            sk = (name, i)
            if values is not None:
                v = values.get(sk, MISS)
                if v is not MISS:
                    if v is not NOT_FOUND:
                        out[i] = v
                    continue
            if l1 is not None:
                v = l1.get(sk, version)
                if v is not MISS:
                    hits += 1
                    out[i] = v
                    if values is not None:
                        values[sk] = v
                    continue
                misses += 1
            need.append(i)
        if hits or misses:
            self.l1_stats.hits += hits
            self.l1_stats.misses += misses
        if not need:
            return out
        need = list(dict.fromkeys(need))
        epoch = self._epoch
        born = [_monotonic()]
        objs, sizes = self._fetch(kc, need, version, born)
        for i in need:  # in request order: the order L1 admits them in, as simulated
            if i not in objs:
                if values is not None:
                    values[(name, i)] = NOT_FOUND
                continue
            obj = out[i] = objs[i]
            if values is not None:
                values[(name, i)] = obj
        if l1 is not None and objs:
            self._admit_l1(l1, kc, objs, sizes, version, born[0], epoch)
        return out

    def _admit_l1(self, l1: Memory, kc: KeyClass, objs: dict, sizes: dict, version: int,
                  since: float, epoch: int) -> None:
        """Puts what a fetch begun at ``since`` (``_monotonic()``) read into L1, unless a write
        came in between (``epoch``); also the asyncio path's (:mod:`cachelab.tiered.aio`)."""
        name, soft = kc.name, kc.soft_ttl
        with self._admit:  # no write's epoch bump + L1 change can come in between
            if self._epoch == epoch and soft is None:
                for i, obj in objs.items():
                    if l1.admits((name, i)):
                        l1.put((name, i), obj, sizes[i], version, since)
            elif self._epoch == epoch:  # held while fresh: (weight, until) from memcached
                for i, obj in objs.items():  # (swr.settle), a fill's for soft_ttl
                    w = sizes[i]
                    w, until = w if type(w) is tuple else (w, since + soft)
                    if l1.admits((name, i)):
                        l1.put((name, i), obj, w, version, since, until)

    def _fetch(self, kc: KeyClass, idents: list[Any], version: int,
               born: list[float] | None = None) -> tuple[dict, dict]:
        """L2 then L3 for ``idents`` (distinct, none in L1), one flight per key in this
        process: ``({ident: object}, {ident: L1 weight})`` for those found, in ``idents``'
        order. ``born[0]`` is lowered to when the oldest flight used began."""
        return self._flights.fetch(kc, idents, self._keys.keys_of(kc, idents, version),
                                   self._fetch_leading, self.events, born)

    def _fetch_leading(self, kc: KeyClass, idents: list[Any], keys: list[str]) -> tuple[dict, dict]:
        """One multi-get for ``idents`` (their memcached ``keys`` aligned), then the loader for
        what it lacks. Values in this class's own uncompressed format arrive without their
        header and are read with one C-level ``map``; others go through ``decode_sized``."""
        if self._pool is not None:
            return self._fetch_pooled(kc, idents, keys)
        objs: dict[Any, Any] = {}
        sizes: dict[Any, int] = {}
        n = len(idents)
        lane = self._lanes[0] if self._lanes else None
        l2_ok = lane is not None and lane.usable()
        found = 0
        gone: set = set()  # stale values whose reload the loader no longer knows
        if lane is not None and l2_ok:
            fmt = kc.format
            t0 = _now_ns()
            try:
                values, found, others, nbytes = lane.l2.get_list(keys, fmt.own_header)
            except ServerError:
                l2_failed(lane)
                l2_ok = False
            else:
                self.l2_stats.record(_now_ns() - t0)
                lane.breaker.success()
            hits = 0
            if found:
                stamps: dict | None = {} if kc.soft_ttl else None
                hits, nbytes, corrupt = fmt.decode_list(idents, values, found, others, nbytes,
                                                        objs, sizes, stamps)
                if corrupt:
                    self.events.corrupt += corrupt
                if stamps:
                    gone = settle(lane, kc, stamps, objs, sizes, dict(zip(idents, keys)),
                                  lambda i: lane)
            st = self.l2_stats  # plain increments: counters may drift by one under threads
            st.keys += n
            if l2_ok:
                st.calls += 1
                st.hits += hits
                st.misses += n - hits
                st.bytes_read += nbytes
        if len(objs) < n:
            missing = [i for i in idents if i not in objs and i not in gone]
            if not l2_ok and lane is not None:
                self.events.fallbacks += len(missing)
            filled = fill(lane or self, kc, missing, dict(zip(idents, keys)), l2_ok)
            for i, (obj, weight) in filled.items():
                objs[i] = obj
                sizes[i] = weight
            if found:  # hits first, fills after: back to the order asked
                objs = {i: objs[i] for i in idents if i in objs}
        return objs, sizes

    def _fetch_pooled(self, kc: KeyClass, idents: list[Any],
                      keys: list[str]) -> tuple[dict, dict]:
        """:meth:`_fetch_leading` over a pool: one multi-get per member holding any of
        ``keys`` (members one after the other), the answers put back in order and decoded at
        once, then one loader call for what every member lacked — each key's lease and store on
        its own member. A member that is down, or owed deletes it cannot take yet, is not
        asked: its keys count as L2 misses (and in its ``bypassed``) and go to the loader."""
        assert self._pool is not None
        if self._owed:
            self._replay_owed()
        objs: dict[Any, Any] = {}
        sizes: dict[Any, int] = {}
        n = len(idents)
        fmt = kc.format
        strip = fmt.own_header
        lanes = self._lanes
        st = self.l2_stats  # plain increments: counters may drift by one under threads
        values: list[bytes | None] = [None] * n
        others: list[int] = []
        found = nbytes = 0
        gone: set = set()  # as in _fetch_leading
        read: dict[int, bool] = {}  # member -> whether it answered
        bypassed = 0
        for m, positions in self._pool.split(keys).items():
            lane = lanes[m]
            ok = lane.usable()
            if ok:
                t0 = _now_ns()
                try:
                    v, f, o, nb = lane.l2.get_list([keys[p] for p in positions], strip)
                except ServerError:
                    l2_failed(lane)
                    ok = False
                else:
                    st.record(_now_ns() - t0)
                    lane.breaker.success()
                    st.calls += 1
                    for p, x in zip(positions, v):
                        values[p] = x
                    others.extend(positions[j] for j in o)
                    found += f
                    nbytes += nb
            read[m] = ok
            if not ok:
                lane.bypassed += len(positions)
                bypassed += len(positions)
        hits = 0
        if found:
            others.sort()
            stamps: dict | None = {} if kc.soft_ttl else None
            hits, nbytes, corrupt = fmt.decode_list(idents, values, found, others, nbytes,
                                                    objs, sizes, stamps)
            if corrupt:
                self.events.corrupt += corrupt
            st.bytes_read += nbytes
            if stamps:
                where = dict(zip(idents, self._pool.members_of(keys)))
                gone = settle(self, kc, stamps, objs, sizes, dict(zip(idents, keys)),
                              lambda i: lanes[where[i]])
        st.keys += n
        st.hits += hits
        st.misses += n - hits  # a down member's keys are misses too
        if len(objs) < n:
            members = self._pool.members_of(keys)
            for m, i in zip(members, idents):
                if read[m]:
                    if i in objs:
                        lanes[m].hits += 1
                    else:
                        lanes[m].misses += 1
            routes = {i: (lanes[m], read[m]) for m, i in zip(members, idents)
                      if i not in objs and i not in gone}
            if bypassed:
                self.events.fallbacks += bypassed
            filled = fill(self, kc, list(routes), dict(zip(idents, keys)), True, routes)
            for i, (obj, weight) in filled.items():
                objs[i] = obj
                sizes[i] = weight
            if found:  # hits first, fills after: back to the order asked
                objs = {i: objs[i] for i in idents if i in objs}
        else:
            for m, positions in self._pool.split(keys).items():
                lanes[m].hits += len(positions)
        return objs, sizes
