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
   stampedes: in-process *single flight* (one thread loads a key, the others wait for it) and
   memcached *leases* (one process loads a key, the others poll L2 for its value, for at most
   ``lease_wait`` seconds, then load it themselves without storing).

Failures: a memcached error or timeout (``MemcachedTier(timeout=...)``) counts against a
:class:`CircuitBreaker`; the keys are read from the loader instead (``fallbacks``). While the
breaker is open, L2 is skipped entirely (``skipped``) until a trial call succeeds.

Invalidation: :meth:`TieredCache.invalidate` drops the key from this process's L1 and deletes
it from memcached. A fill that began before the invalidation is not admitted to L1, and with
leases its CAS set fails, so it does not land in memcached either. A delete that cannot reach
memcached is kept as pending: the key is read past L2 (and not stored there) until the delete
succeeds. Other processes' L1s are not told: bound their staleness with ``LRUMemory(ttl=...)``.
:meth:`TieredCache.invalidate_namespace` bumps a version counter in memcached that is part of
every key of that namespace; other processes see the new version within ``ns_refresh`` seconds.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from cachelab import _core
from cachelab.errors import ServerError, UsageError
from cachelab.tiered.backends import Tier
from cachelab.tiered.breaker import CircuitBreaker
from cachelab.tiered.codecs import CorruptValue, ValueFormat
from cachelab.tiered.memory import MISS, LRUMemory, Memory
from cachelab.tiered.stats import BreakerStats, TierStats

__all__ = ["KeyClass", "Loader", "RequestScope", "TieredCache"]

#: ``loader(idents) -> {ident: object}``; idents it leaves out are "not found" (not cached).
Loader = Callable[[list[Any]], Mapping[Any, Any]]

_SAFE = re.compile(r"[A-Za-z0-9_.\-:/]+")
_NAME = re.compile(r"[A-Za-z0-9_\-]{1,40}")
_MAX_KEY = 250
_now_ns = time.perf_counter_ns
_allocate_lock = threading.Lock
#: Memcached keys remembered per key class (ident -> key); beyond this the memo is cleared.
_KEY_MEMO = 100_000


@dataclass(frozen=True, eq=False)
class KeyClass:
    """A family of keys with one loader, one value format, one TTL. Made by
    :meth:`TieredCache.key_class`."""

    name: str
    loader: Loader
    format: ValueFormat
    ttl: int
    l1: bool
    namespace: str | None
    #: In L1 and not versioned: an L1 hit needs no namespace version (the hit path's test).
    plain_l1: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain_l1", self.l1 and self.namespace is None)

    def __repr__(self) -> str:
        return f"KeyClass({self.name!r}, {self.format!r}, ttl={self.ttl}, l1={self.l1})"


class _Flight:
    """A batch of keys being filled by one thread; other threads wanting any of them wait on
    it. The lock is held by the filling thread until it is done (one lock per batch, not per
    key: a 100-key multi-get makes one)."""

    __slots__ = ("error", "lock", "results", "waiters")

    def __init__(self) -> None:
        self.lock = _allocate_lock()
        self.lock.acquire()
        #: memcached key -> (object, weight) for the keys found; None if nobody was waiting
        #: when the flight ended (a waiter that comes that late fetches for itself)
        self.results: dict[str, tuple] | None = None
        self.waiters = 0
        self.error: BaseException | None = None


class TieredCache:
    """A read-through cache over an optional L1 (:class:`~cachelab.tiered.LRUMemory`,
    :class:`~cachelab.tiered.FixedMemory`) and an optional L2 (:class:`MemcachedTier`,
    :class:`PymemcacheTier`), with loaders per key class.

    ``prefix`` starts every memcached key; without it a unique one is made for this object
    (``cachelab:<12 hex>``), right for tests and benchmarks — give a stable one in production.
    """

    def __init__(
        self,
        l2: Tier | None = None,
        l1: Memory | None = None,
        *,
        prefix: str | None = None,
        breaker: CircuitBreaker | None = None,
        leases: bool = True,
        lease_ttl: int = 10,
        lease_wait: float = 0.5,
        ns_refresh: float = 1.0,
    ) -> None:
        prefix = prefix if prefix is not None else f"cachelab:{secrets.token_hex(6)}"
        if not _SAFE.fullmatch(prefix) or len(prefix) > 100:
            raise UsageError(
                f"prefix {prefix!r}: 1-100 characters of letters, digits and _ . - : /"
            )
        if lease_ttl < 1 or lease_wait < 0 or ns_refresh < 0:
            raise UsageError("lease_ttl must be >= 1 s; lease_wait and ns_refresh >= 0")
        self.l2 = l2
        self.l1 = l1  # a property: it also sets the hit path's table
        self.prefix = prefix
        self.breaker = breaker or CircuitBreaker()
        self.leases = leases
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait
        self.ns_refresh = ns_refresh
        self.l1_stats = TierStats("l1")
        self.l2_stats = TierStats("l2")
        self.l3_stats = TierStats("l3")
        self.events = BreakerStats()
        self._classes: dict[str, KeyClass] = {}
        self._flights: dict[str, _Flight] = {}
        self._epoch = 0
        self._pending: set[str] = set()
        self._ns: dict[str, tuple[int, float]] = {}
        #: Per key class: (namespace version, {ident: memcached key}) for the version in use.
        self._memos: dict[str, tuple[int, dict[Any, str]]] = {}

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

    # -- configuration ----------------------------------------------------------------------

    def key_class(
        self,
        name: str,
        loader: Loader,
        *,
        codec: str = "msgpack",
        compression: str = "none",
        threshold: int = 1024,
        ttl: int = 3600,
        l1: bool = True,
        namespace: str | None = None,
    ) -> KeyClass:
        """Registers a key class: its loader, codec (``raw``, ``msgpack``, ``orjson``, or
        ``pickle`` — opt-in, it executes what it reads), compression (``none``, ``zlib``,
        ``zstd``, ``lz4``) for encoded values of at least ``threshold`` bytes, memcached TTL in
        seconds, whether L1 may hold it, and an optional versioned ``namespace``."""
        if not _NAME.fullmatch(name):
            raise UsageError(f"key class name {name!r}: 1-40 letters, digits, _ or -")
        if namespace is not None and not _NAME.fullmatch(namespace):
            raise UsageError(f"namespace {namespace!r}: 1-40 letters, digits, _ or -")
        if name in self._classes:
            raise UsageError(f"key class {name!r} is already registered")
        if not 0 <= ttl <= 30 * 86400:
            raise UsageError(f"ttl must be 0 (none) to 30 days in seconds, got {ttl}")
        kc = KeyClass(name, loader, ValueFormat(codec, compression, threshold), ttl, l1,
                      namespace)
        self._classes[name] = kc
        return kc

    # -- keys ---------------------------------------------------------------------------------

    def key_for(self, kc: KeyClass, ident: Any, version: int | None = None) -> str:
        """The memcached key of ``ident``: ``<prefix>:<class>[@<version>]:<ident>`` when the
        ident is short and made of safe characters, else ``...:#<blake2b of it>``. Anything
        else a caller passes can therefore never reach the wire as a command."""
        if kc.namespace is None:
            version = 0
        elif version is None:
            version = self._ns_version(kc.namespace)
        memo = self._memo(kc.name, version)
        key = memo.get(ident)
        if key is None:
            key = self._make_key(kc, ident, version, memo)
        return key

    def _memo(self, name: str, version: int) -> dict[Any, str]:
        """The ident -> key memo of a class at ``version`` (a new version starts a new one)."""
        m = self._memos.get(name)
        if m is None or m[0] != version:
            m = self._memos[name] = (version, {})
        return m[1]

    def _make_key(self, kc: KeyClass, ident: Any, version: int, memo: dict[Any, str]) -> str:
        if kc.namespace is not None:
            head = f"{self.prefix}:{kc.name}@{version}:"
        else:
            head = f"{self.prefix}:{kc.name}:"
        if isinstance(ident, bytes):
            raw = ident
            text = None
        else:
            text = ident if isinstance(ident, str) else str(ident)
            raw = text.encode("utf-8", "surrogatepass")
        if text is not None and _SAFE.fullmatch(text) and len(head) + len(text) <= _MAX_KEY:
            key = head + text
        else:
            key = head + "#" + hashlib.blake2b(raw, digest_size=20).hexdigest()
        _core.validate_key(key)
        if len(memo) >= _KEY_MEMO:
            memo.clear()
        memo[ident] = key
        return key

    def _keys_of(self, kc: KeyClass, idents: list[Any], version: int) -> list[str]:
        """The memcached keys of ``idents``, in their order (memo lookups run in C)."""
        memo = self._memo(kc.name, version)
        keys = list(map(memo.get, idents))
        if not all(keys):  # keys are never empty: a falsy one is a None, not memoised yet
            make = self._make_key
            keys = [k or make(kc, i, version, memo) for k, i in zip(keys, idents)]
        return keys

    # -- reads --------------------------------------------------------------------------------

    def request(self) -> RequestScope:
        """A request scope: every key is fetched at most once within it."""
        return RequestScope(self)

    def get(self, kc: KeyClass, ident: Any, default: Any = None) -> Any:
        """The object for ``ident``: L1, else memcached, else the loader; ``default`` if the
        loader does not know it."""
        hot = self._hot
        if hot is not None and kc.plain_l1:
            # LRUMemory.get inlined: the hit path is most of what an L1 hit costs.
            sk = (kc.name, ident)
            e = hot.get(sk)
            if e is not None:
                if e[2] == 0 and e[3] is None:
                    try:  # noqa: SIM105 - cheaper than contextlib.suppress on the hit path
                        hot.move_to_end(sk)
                    except KeyError:  # evicted by another thread in between
                        pass
                    self.l1_stats.hits += 1
                    return e[0]
                v = self._l1.get(sk, 0)  # type: ignore[union-attr] - one with a TTL
                if v is not MISS:
                    self.l1_stats.hits += 1
                    return v
        else:
            l1 = self._l1
            if l1 is not None and kc.l1:
                v = l1.get((kc.name, ident),
                           self._ns_version(kc.namespace) if kc.namespace else 0)
                if v is not MISS:
                    self.l1_stats.hits += 1
                    return v
        found = self._lookup(kc, [ident], None)
        return found.get(ident, default)

    def get_many(self, kc: KeyClass, idents: Iterable[Any]) -> dict[Any, Any]:
        """{ident: object} for the idents found; one memcached round trip for L1's misses."""
        return self._lookup(kc, list(idents), None)

    # -- writes -------------------------------------------------------------------------------

    def put(self, kc: KeyClass, ident: Any, obj: Any) -> None:
        """Writes through: memcached (plain set) and this process's L1."""
        enc = kc.format.encode(obj)
        version = self._ns_version(kc.namespace) if kc.namespace else 0
        key = self.key_for(kc, ident, version)
        if self.l2 is not None:
            t0 = _now_ns()
            self.l2.set(key, enc.data, enc.flags, kc.ttl)
            self.l2_stats.record(_now_ns() - t0)
            self.l2_stats.add(calls=1, keys=1, bytes_written=len(enc.data))
        if kc.l1 and self.l1 is not None:
            self.l1.put((kc.name, ident), obj, enc.plain_size, version)

    def invalidate(self, kc: KeyClass, ident: Any) -> None:
        """Forget ``ident`` here and in memcached (see the module docstring for what is
        guaranteed). Raises nothing when memcached is down: the delete is kept pending."""
        self._epoch += 1
        version = self._ns_version(kc.namespace) if kc.namespace else 0
        if self.l1 is not None:
            self.l1.discard((kc.name, ident))
        if self.l2 is None:
            return
        key = self.key_for(kc, ident, version)
        self._pending.add(key)
        self.events.pending_invalidations = len(self._pending)
        if self.breaker.allow():
            self._flush_pending()

    def invalidate_namespace(self, namespace: str) -> int:
        """Moves ``namespace`` to a new version (every key in it changes); returns it. Raises
        ServerError if memcached cannot be reached: a namespace cannot be bumped locally only."""
        self._epoch += 1
        if self.l2 is None:
            v = self._ns.get(namespace, (0, 0.0))[0] + 1
        else:
            v = self.l2.incr_or_add(self._ns_key(namespace))
        self._ns[namespace] = (v, time.monotonic())
        return v

    # -- stats --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Per tier: hits, misses, calls, keys, errors, bytes, latency percentiles (L2, L3)
        and their HdrHistogram; fallback and lease counters; L1 occupancy."""
        self.events.opened = self.breaker.opened
        l1 = self.l1_stats.to_dict()
        if self.l1 is not None:
            l1["items"] = self.l1.items
            l1["bytes_held"] = self.l1.bytes
        return {"l1": l1, "l2": self.l2_stats.to_dict(), "l3": self.l3_stats.to_dict(),
                "events": self.events.to_dict(), "breaker": self.breaker.state}

    def reset_stats(self) -> None:
        for s in (self.l1_stats, self.l2_stats, self.l3_stats):
            s.reset()
        self.events = BreakerStats()

    # -- internals ----------------------------------------------------------------------------

    def _ns_key(self, namespace: str) -> str:
        return f"{self.prefix}:ns:{namespace}"

    def _ns_version(self, namespace: str) -> int:
        cached = self._ns.get(namespace)
        now = time.monotonic()
        if cached is not None and now - cached[1] < self.ns_refresh:
            return cached[0]
        version = cached[0] if cached else 0
        if self.l2 is not None and self.breaker.allow():
            try:
                got = self.l2.get_multi([self._ns_key(namespace)])
                self.breaker.success()
                raw = got.get(self._ns_key(namespace))
                if raw is None:
                    # A random start: if the counter is ever evicted, the keys written under
                    # the old version do not come back.
                    self.l2.set(self._ns_key(namespace), str(secrets.randbits(31)).encode(), 0, 0)
                    raw = self.l2.get_multi([self._ns_key(namespace)]).get(
                        self._ns_key(namespace), b"0")
                version = int(raw)
            except (ServerError, ValueError):
                self.breaker.failure()
        self._ns[namespace] = (version, now)
        return version

    def _l2_usable(self) -> bool:
        if self.l2 is None:
            return False
        if not self.breaker.allow():
            self.events.skipped += 1
            return False
        if self._pending:
            return self._flush_pending()
        return True

    def _flush_pending(self) -> bool:
        """Retries pending deletes (the breaker has allowed a call); False if one failed."""
        assert self.l2 is not None
        for key in list(self._pending):
            try:
                self.l2.delete(key)
            except ServerError:
                self.breaker.failure()
                self.l2_stats.add(errors=1)
                return False
            self.breaker.success()
            self._pending.discard(key)
        self.events.pending_invalidations = len(self._pending)
        return True

    def _lookup(self, kc: KeyClass, idents: list[Any], scope: RequestScope | None) -> dict:
        version = self._ns_version(kc.namespace) if kc.namespace else 0
        l1 = self.l1 if kc.l1 else None
        values = scope._values if scope is not None else None
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
                    if v is not _NOT_FOUND:
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
        objs, sizes = self._fetch(kc, need, version)
        admit = l1 is not None and self._epoch == epoch
        for i in need:  # in request order: the order L1 admits them in, as simulated
            if i not in objs:
                if values is not None:
                    values[(name, i)] = _NOT_FOUND
                continue
            obj = out[i] = objs[i]
            if values is not None:
                values[(name, i)] = obj
            if admit and l1.admits((name, i)):  # type: ignore[union-attr]
                l1.put((name, i), obj, sizes[i], version)  # type: ignore[union-attr]
        return out

    def _fetch(self, kc: KeyClass, idents: list[Any], version: int) -> tuple[dict, dict]:
        """L2 then L3 for ``idents`` (distinct, none in L1), one flight per key in this
        process: ``({ident: object}, {ident: L1 weight})`` for those found, in ``idents``'
        order.

        ``dict.setdefault`` and ``dict.pop`` are atomic under the GIL, so claiming and ending a
        flight needs no lock of its own."""
        keys = self._keys_of(kc, idents, version)
        flights = self._flights
        mine = _Flight()
        n = len(keys)
        claimed = list(map(flights.setdefault, keys, repeat(mine, n)))
        follow: list[tuple[Any, str, _Flight]] = []
        if claimed.count(mine) == n:  # the usual case: nobody else is fetching any of them
            lead, lead_keys = idents, keys
        else:
            lead, lead_keys = [], []
            for i, k, f in zip(idents, keys, claimed):
                if f is mine:
                    lead.append(i)
                    lead_keys.append(k)
                else:
                    follow.append((i, k, f))
        objs: dict[Any, Any] = {}
        sizes: dict[Any, int] = {}
        try:
            if lead:
                objs, sizes = self._fetch_leading(kc, lead, lead_keys)
        except BaseException as e:
            mine.error = e
            raise
        finally:
            list(map(flights.pop, lead_keys, repeat(None, len(lead_keys))))
            if mine.waiters:  # no one can start waiting on us after the pops
                key_of = dict(zip(lead, lead_keys))
                mine.results = {key_of[i]: (o, sizes[i]) for i, o in objs.items()}
            mine.lock.release()
        if not follow:
            return objs, sizes
        late = []
        for i, k, f in follow:
            self.events.singleflight_waits += 1
            f.waiters += 1
            f.lock.acquire()
            f.lock.release()
            if f.error is not None:
                raise f.error
            if f.results is None:
                late.append(i)
                continue
            r = f.results.get(k)
            if r is not None:
                objs[i], sizes[i] = r
        if late:
            more = self._fetch(kc, late, version)
            objs.update(more[0])
            sizes.update(more[1])
        return {i: objs[i] for i in idents if i in objs}, sizes

    def _fetch_leading(self, kc: KeyClass, idents: list[Any], keys: list[str]) -> tuple[dict, dict]:
        """One multi-get for ``idents`` (their memcached ``keys`` aligned), then the loader for
        what it lacks. Values in this class's own uncompressed format arrive without their
        header and are read with one C-level ``map``; others go through ``decode_sized``."""
        objs: dict[Any, Any] = {}
        sizes: dict[Any, int] = {}
        n = len(idents)
        l2_ok = self._l2_usable()
        found = 0
        if l2_ok:
            assert self.l2 is not None
            fmt = kc.format
            t0 = _now_ns()
            try:
                values, found, others, nbytes = self.l2.get_list(keys, fmt.own_header)
            except ServerError:
                self._l2_failed()
                l2_ok = False
            else:
                self.l2_stats.record(_now_ns() - t0)
                self.breaker.success()
            hits = 0
            if found:
                hits, nbytes = self._decode(kc, idents, values, found, others, nbytes,
                                            objs, sizes)
            st = self.l2_stats  # plain increments: counters may drift by one under threads
            st.keys += n
            if l2_ok:
                st.calls += 1
                st.hits += hits
                st.misses += n - hits
                st.bytes_read += nbytes
        if len(objs) < n:
            missing = [i for i in idents if i not in objs]
            if not l2_ok and self.l2 is not None:
                self.events.fallbacks += len(missing)
            filled = self._fill(kc, missing, dict(zip(idents, keys)), l2_ok)
            for i, (obj, weight) in filled.items():
                objs[i] = obj
                sizes[i] = weight
            if found:  # hits first, fills after: back to the order asked
                objs = {i: objs[i] for i in idents if i in objs}
        return objs, sizes

    def _decode(self, kc: KeyClass, idents: list[Any], values: list[bytes | None], found: int,
                others: list[int], nbytes: int, objs: dict, sizes: dict) -> tuple[int, int]:
        """Fills ``objs`` and ``sizes`` from a multi-get's ``values`` (aligned with ``idents``;
        the ``others`` still carry their header); returns (hits, bytes read of the hits)."""
        fmt = kc.format
        rest = [(idents[x], values[x]) for x in others]
        if rest:
            values = values.copy()
            for x in others:
                values[x] = None
        if found - len(rest) == len(idents):
            plain_ids: list[Any] = idents
            payloads: list[Any] = values
        else:
            plain_ids = [i for i, v in zip(idents, values) if v is not None]
            payloads = [v for v in values if v is not None]
        hits = len(payloads)
        loads = fmt.loads
        if loads is None:
            objs.update(zip(plain_ids, payloads))
        else:
            try:
                objs.update(zip(plain_ids, map(loads, payloads)))
            except Exception:  # some payload is not what we wrote: find which, one by one
                objs.clear()
                for i, p in zip(plain_ids, payloads):
                    try:
                        objs[i] = loads(p)
                    except Exception:
                        self.events.corrupt += 1
                        hits -= 1
                        nbytes -= len(p) + len(fmt.own_header)
        sizes.update(zip(plain_ids, map(len, payloads)))
        decode = fmt.decode_sized
        for i, data in rest:
            if not data:  # a lease placeholder: a miss
                continue
            try:
                objs[i], sizes[i] = decode(data)
            except CorruptValue:
                self.events.corrupt += 1
                continue
            hits += 1
            nbytes += len(data)
        if len(sizes) > len(objs):  # drop the sizes of corrupt payloads
            for i in [i for i in sizes if i not in objs]:
                del sizes[i]
        return hits, nbytes

    def _l2_failed(self) -> None:
        self.breaker.failure()
        self.l2_stats.add(errors=1)

    def _fill(self, kc: KeyClass, missing: list[Any], keys: dict, l2_ok: bool) -> dict:
        """Loads ``missing`` (not in L2) and stores them in L2, under leases when possible."""
        result: dict[Any, tuple] = {}
        winners: dict[Any, int | None] = {}
        waiters: list[Any] = []
        l2 = self.l2
        use_leases = l2_ok and self.leases and l2 is not None and l2.supports_leases
        if use_leases:
            assert l2 is not None
            for n, i in enumerate(missing):
                try:
                    lease = l2.lease_get(keys[i], self.lease_ttl)
                except ServerError:
                    self._l2_failed()
                    l2_ok = False
                    for j in missing[n:]:
                        winners[j] = None
                    break
                self.l2_stats.add(calls=1, keys=1)
                if lease.value is not None:
                    try:
                        result[i] = kc.format.decode_sized(lease.value)
                        continue
                    except CorruptValue:
                        self.events.corrupt += 1
                        winners[i] = None
                elif lease.win:
                    self.events.lease_wins += 1
                    winners[i] = lease.cas
                else:
                    waiters.append(i)
        else:
            winners = dict.fromkeys(missing)
        if winners:
            loaded = self._load(kc, list(winners))
            for i, cas in winners.items():
                if i not in loaded:
                    if cas is not None and l2_ok:
                        self._release(keys[i], cas)
                    continue
                enc = kc.format.encode(loaded[i])
                result[i] = (loaded[i], enc.plain_size)
                if l2_ok and keys[i] not in self._pending:
                    l2_ok = self._store(kc, keys[i], enc, cas)
        for i in waiters:
            self.events.lease_waits += 1
            got = self._await_fill(kc, i, keys[i])
            if got is not None:
                result[i] = got
        return result

    def _store(self, kc: KeyClass, key: str, enc: Any, cas: int | None) -> bool:
        assert self.l2 is not None
        t0 = _now_ns()
        try:
            if cas is not None:
                stored = self.l2.lease_set(key, enc.data, enc.flags, kc.ttl, cas)
                if not stored:
                    self.events.lease_lost += 1
            else:
                stored = self.l2.set(key, enc.data, enc.flags, kc.ttl)
        except ServerError:
            self._l2_failed()
            return False
        self.l2_stats.record(_now_ns() - t0)
        self.l2_stats.add(calls=1, keys=1, bytes_written=len(enc.data) if stored else 0)
        return True

    def _release(self, key: str, cas: int) -> None:
        assert self.l2 is not None
        try:
            self.l2.lease_release(key, cas)
        except ServerError:
            self._l2_failed()

    def _await_fill(self, kc: KeyClass, ident: Any, key: str) -> tuple | None:
        """Another process holds the lease: poll memcached for its value; win the lease if it
        is released; after ``lease_wait`` seconds load without storing."""
        assert self.l2 is not None
        deadline = time.monotonic() + self.lease_wait
        pause = 0.001
        while time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
            try:
                lease = self.l2.lease_get(key, self.lease_ttl)
            except ServerError:
                self._l2_failed()
                break
            self.l2_stats.add(calls=1, keys=1)
            if lease.value is not None:
                try:
                    return kc.format.decode_sized(lease.value)
                except CorruptValue:
                    self.events.corrupt += 1
                    break
            if lease.win:
                self.events.lease_wins += 1
                loaded = self._load(kc, [ident])
                if ident not in loaded:
                    self._release(key, lease.cas or 0)
                    return None
                enc = kc.format.encode(loaded[ident])
                if key not in self._pending:
                    self._store(kc, key, enc, lease.cas)
                return loaded[ident], enc.plain_size
        else:
            self.events.lease_timeouts += 1
        loaded = self._load(kc, [ident])
        if ident not in loaded:
            return None
        return loaded[ident], kc.format.encode(loaded[ident]).plain_size

    def _load(self, kc: KeyClass, idents: list[Any]) -> Mapping[Any, Any]:
        t0 = _now_ns()
        try:
            loaded = kc.loader(idents)
        except BaseException:
            self.l3_stats.add(errors=1)
            raise
        self.l3_stats.record(_now_ns() - t0)
        found = sum(1 for i in idents if i in loaded)
        self.l3_stats.add(calls=1, keys=len(idents), hits=found, misses=len(idents) - found)
        return loaded


class _NotFound:
    __slots__ = ()


_NOT_FOUND: Any = _NotFound()


class RequestScope:
    """One request's view of the cache: each key is looked up at most once; what it found
    (or did not) is kept for the rest of the request. Use as a context manager or directly."""

    __slots__ = ("_cache", "_values")

    def __init__(self, cache: TieredCache) -> None:
        self._cache = cache
        self._values: dict[Hashable, Any] = {}

    def __enter__(self) -> RequestScope:
        return self

    def __exit__(self, *exc: object) -> None:
        self._values.clear()

    def __contains__(self, key: tuple[KeyClass, Any]) -> bool:
        kc, ident = key
        return (kc.name, ident) in self._values

    def get(self, kc: KeyClass, ident: Any, default: Any = None) -> Any:
        v = self._values.get((kc.name, ident), MISS)
        if v is not MISS:
            return default if v is _NOT_FOUND else v
        return self._cache._lookup(kc, [ident], self).get(ident, default)

    def get_many(self, kc: KeyClass, idents: Iterable[Any]) -> dict[Any, Any]:
        return self._cache._lookup(kc, list(idents), self)

    def prefetch(self, kc: KeyClass, idents: Iterable[Any]) -> int:
        """Fetches the idents neither in this request nor in L1 with one multi-get (and the
        loader for what memcached lacks); returns how many keys that multi-get asked for."""
        cache = self._cache
        version = cache._ns_version(kc.namespace) if kc.namespace else 0
        l1 = cache.l1 if kc.l1 else None
        name = kc.name
        wanted = []
        for i in dict.fromkeys(idents):
            sk = (name, i)
            if sk in self._values:
                continue
            # In L1: left out (and made most recent, like the simulator's walk); the touch
            # that follows is an L1 hit.
            if l1 is not None and l1.get(sk, version) is not MISS:
                continue
            wanted.append(i)
        if wanted:
            cache._lookup(kc, wanted, self)
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
