"""The asyncio API: :class:`AsyncTieredCache`, and async loaders.

::

    cache = TieredCache(MemcachedTier("127.0.0.1:11211"), LRUMemory(max_bytes=64 << 20),
                        prefix="myapp")
    acache = AsyncTieredCache(cache)

    async def load_users(ids: list[int]) -> dict[int, User]: ...   # e.g. asyncpg

    users = acache.key_class("user", load_users)
    alice = await acache.get(users, 1)

How it avoids blocking the event loop: an L1 hit is answered on the loop (no I/O). The read
of L1's misses from memcached is awaited on the loop too (the *native path*): over a
:class:`~cachelab.tiered.MemcachedTier`, ``get`` and ``get_many`` send one multi-get through
the tier's asyncio client (``_core.AsyncClient``: a Rust client on a tokio thread, one
connection that every awaiting task's reads are pipelined over), decode the hits with the
synchronous path's own decoder and fill L1 as it does. An L2 error counts in the same breaker
and the keys fall back to the loader, as in the synchronous path.

Everything else is the synchronous :class:`TieredCache` run in a worker thread of a bounded
pool (``max_workers``), one connection per thread: the keys L2 lacks (single flight, leases,
loaders, stores), every read while the breaker is not closed or deletes are owed, namespaced
key classes and those with a soft TTL (stale-while-revalidate), and all reads over a
:class:`~cachelab.tiered.PymemcacheTier`, a :class:`~cachelab.tiered.MemcachedPool` or a tier
subclass that wraps its reads; and every
write (``put``, ``invalidate``, ``invalidate_namespace``: they carry the owed-delete
machinery). ``native=False`` sends all reads to the worker path, as before the native path.

An async loader runs on the caller's event loop: the worker hands the coroutine to the loop
(:func:`asyncio.run_coroutine_threadsafe`) and waits for it at most ``loader_timeout``
seconds. So one ``get`` of a missing key holds one worker while its loader awaits; concurrent
gets of the same key wait for that one load (single flight), they do not load again.

A coroutine-function loader also works without this class: ``TieredCache.key_class`` accepts
one and, called from plain synchronous code (no running loop in the thread), runs it with
:func:`asyncio.run`. Called from the event loop's own thread through the synchronous API, it
raises :class:`~cachelab.errors.UsageError` (it would block the loop): use this class there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar, overload

import cachelab._core as _core
from cachelab.errors import ServerError, UsageError
from cachelab.tiered.asyncbridge import serving
from cachelab.tiered.backends import MemcachedTier
from cachelab.tiered.cache import TieredCache
from cachelab.tiered.checks import bad_key_class, idents_list, ttl_seconds, unhashable_in
from cachelab.tiered.decorators import AsyncCached, AsyncCachedMany, cached, cached_many
from cachelab.tiered.flight import fill, l2_failed
from cachelab.tiered.keys import KeyClass, with_ttl
from cachelab.tiered.lanes import Lane
from cachelab.tiered.memory import MISS

__all__ = ["AsyncTieredCache"]

T = TypeVar("T")
D = TypeVar("D")
R = TypeVar("R")

_now_ns = time.perf_counter_ns
_monotonic = time.monotonic

class AsyncTieredCache:
    """The asyncio face of a :class:`~cachelab.tiered.TieredCache` (see the module docstring):
    ``await get / get_many / put / invalidate / invalidate_namespace``, async loaders, and the
    decorators for coroutine functions. ``executor``: your own (it is not shut down by
    :meth:`close`); else a pool of ``max_workers`` threads made here. ``loader_timeout``: the
    longest a worker waits for an async loader (then :class:`TimeoutError`, and the loader's
    task is cancelled). ``native``: read memcached from the loop where the tier allows it
    (the module docstring says when); False: every read in a worker."""

    def __init__(self, cache: TieredCache, *, max_workers: int = 16,
                 loader_timeout: float = 30.0,
                 executor: concurrent.futures.Executor | None = None,
                 native: bool = True) -> None:
        if max_workers < 1 or loader_timeout <= 0:
            raise UsageError("max_workers must be >= 1 and loader_timeout > 0")
        self.cache = cache
        l2 = cache.l2
        #: The lane read from the loop (None: every read goes to a worker).
        self._native: Lane | None = (
            cache._lanes[0] if native and isinstance(l2, MemcachedTier) and l2.native_async
            and len(cache._lanes) == 1 else None)
        self.loader_timeout = loader_timeout
        self._own = executor is None
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers, thread_name_prefix="cachelab-tiered")

    def __repr__(self) -> str:
        return f"AsyncTieredCache({self.cache!r})"

    # -- configuration ------------------------------------------------------------------------

    def key_class(self, name: str,
                  loader: Callable[[list[Any]], Awaitable[Mapping[Any, T]]]
                  | Callable[[list[Any]], Mapping[Any, T]],
                  **options: Any) -> KeyClass[T]:
        """:meth:`TieredCache.key_class <cachelab.tiered.TieredCache.key_class>`; the loader
        may be ``async def`` (run on the calling loop) or synchronous (run in a worker)."""
        return self.cache.key_class(name, loader, **options)

    def cached(self, name: str | None = None,
               **options: Any) -> Callable[[Callable[..., Any]], AsyncCached[Any]]:
        """``@acache.cached(...)``: like :meth:`TieredCache.cached
        <cachelab.tiered.TieredCache.cached>`, for an ``async def`` function (or a
        synchronous one, then run in a worker); the wrapper is awaited."""
        return cached(self, name, **options)  # type: ignore[return-value]

    def cached_many(self, name: str | None = None,
                    **options: Any) -> Callable[[Callable[..., Any]], AsyncCachedMany[Any]]:
        """``@acache.cached_many(...)``: the multi-key decorator, awaited."""
        return cached_many(self, name, **options)  # type: ignore[return-value]

    # -- reads and writes ---------------------------------------------------------------------

    @overload
    async def get(self, kc: KeyClass[T], ident: Any, default: None = None, *,
                  ttl: int | None = None) -> T | None: ...
    @overload
    async def get(self, kc: KeyClass[T], ident: Any, default: D, *,
                  ttl: int | None = None) -> T | D: ...

    async def get(self, kc: KeyClass[T], ident: Any, default: Any = None, *,
                  ttl: int | None = None) -> Any:
        """:meth:`TieredCache.get <cachelab.tiered.TieredCache.get>` without blocking the loop:
        an L1 hit here, the rest in a worker thread."""
        if ttl is not None or kc.__class__ is not KeyClass:
            if kc.__class__ is not KeyClass:
                bad_key_class("AsyncTieredCache.get", kc)
            ttl = ttl_seconds(ttl)
        c = self.cache
        try:  # free unless it raises: the hit path pays nothing for the check below
            if self._reads_native(kc):
                found = await self._lookup(with_ttl(kc, ttl), [ident])
                return found.get(ident, default)
            l1 = c.l1
            if l1 is not None and kc.plain_l1:
                v = l1.get((kc.name, ident), 0)
                if v is not MISS:
                    c.l1_stats.hits += 1
                    return v
            return await self._run(functools.partial(c.get, kc, ident, default, ttl=ttl))
        except TypeError:
            unhashable_in(kc.name, (ident,), "AsyncTieredCache.get")  # raises it, if that was it
            raise

    async def get_many(self, kc: KeyClass[T], idents: Iterable[Hashable], *,
                       ttl: int | None = None) -> dict[Any, T]:
        """:meth:`TieredCache.get_many <cachelab.tiered.TieredCache.get_many>` in a worker."""
        if kc.__class__ is not KeyClass:
            bad_key_class("AsyncTieredCache.get_many", kc)
        idents = idents_list("AsyncTieredCache.get_many", kc.name, idents)
        try:
            if self._reads_native(kc):
                return await self._lookup(with_ttl(kc, ttl), idents)
            return await self._run(functools.partial(self.cache.get_many, kc, idents, ttl=ttl))
        except TypeError:
            unhashable_in(kc.name, idents, "AsyncTieredCache.get_many")  # if that was it
            raise

    async def put(self, kc: KeyClass[T], ident: Any, obj: T, ttl: int | None = None) -> None:
        """:meth:`TieredCache.put <cachelab.tiered.TieredCache.put>` in a worker."""
        await self._run(functools.partial(self.cache.put, kc, ident, obj, ttl))

    async def invalidate(self, kc: KeyClass[Any], ident: Any) -> None:
        """:meth:`TieredCache.invalidate <cachelab.tiered.TieredCache.invalidate>` in a worker."""
        await self._run(functools.partial(self.cache.invalidate, kc, ident))

    async def invalidate_namespace(self, namespace: str) -> int:
        """:meth:`TieredCache.invalidate_namespace
        <cachelab.tiered.TieredCache.invalidate_namespace>` in a worker."""
        return await self._run(functools.partial(self.cache.invalidate_namespace, namespace))

    def stats(self) -> dict[str, Any]:
        """The cache's :meth:`~cachelab.tiered.TieredCache.stats` (no I/O)."""
        return self.cache.stats()

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> Awaitable[None]:
        """Shuts the worker pool down (if it was made here): no new call starts, calls queued
        are cancelled, calls in flight finish. Takes effect at once; ``await acache.close()``
        also waits, without blocking the loop, until the pool's threads have finished. The
        wrapped cache is closed too (:meth:`TieredCache.close`: its replay of owed deletes
        stops after one last try, bounded by the tier's timeouts), in a thread of its own
        that the await also waits for; and the tier's asyncio connection (the native path's)
        is closed, the await ending once its socket is (a later native read opens another)."""
        if self._own:
            self._executor.shutdown(wait=False, cancel_futures=True)
        closing = threading.Thread(target=self.cache.close, name="cachelab-close", daemon=True)
        closing.start()
        client = None
        if self._native is not None:
            l2 = self._native.l2
            assert isinstance(l2, MemcachedTier)
            client = l2.take_async_client()
        return _Closing(self._executor if self._own else None, closing, client)

    async def __aenter__(self) -> AsyncTieredCache:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the native read path -----------------------------------------------------------------

    def _reads_native(self, kc: KeyClass) -> bool:
        """Whether a read of ``kc`` goes to memcached from the loop now: a tier that allows it,
        a class without a namespace (its version may need a read) and without a soft TTL (a
        stale value is claimed and reloaded: :mod:`cachelab.tiered.swr`, a worker's), a closed
        breaker and no owed deletes (a worker sends those first; a half-open breaker's trial is
        a worker's)."""
        lane = self._native
        return (lane is not None and kc.namespace is None and kc.soft_ttl is None
                and not lane.pending and lane.breaker.state == "closed")

    async def _lookup(self, kc: KeyClass, idents: list[Any]) -> dict:
        """:meth:`TieredCache._lookup` (without a request scope) with the L2 read awaited:
        L1, then :meth:`_fetch` for its misses, admitted to L1 as the synchronous path does
        (only if no write came in between)."""
        c = self.cache
        l1 = c.l1 if kc.l1 else None
        if l1 is None:
            return (await self._fetch(kc, list(dict.fromkeys(idents)), None))[0]
        name = kc.name
        out: dict[Any, Any] = {}
        need: list[Any] = []
        for i in idents:
            v = l1.get((name, i), 0)
            if v is MISS:
                need.append(i)
            else:
                out[i] = v
        c.l1_stats.hits += len(idents) - len(need)
        c.l1_stats.misses += len(need)
        if not need:
            return out
        need = list(dict.fromkeys(need))
        epoch = c._epoch
        born = [_monotonic()]
        objs, sizes = await self._fetch(kc, need, born)
        for i in need:  # in request order, as the synchronous path
            if i in objs:
                out[i] = objs[i]
        if objs:
            c._admit_l1(l1, kc, objs, sizes, 0, born[0], epoch)
        return out

    async def _fetch(self, kc: KeyClass, idents: list[Any],
                     born: list[float] | None) -> tuple[dict, dict]:
        """One awaited multi-get for ``idents`` (distinct, none in L1), decoded by the class's
        format as :meth:`TieredCache._fetch_leading` decodes it; the keys it lacks go to a
        worker: single flight and :func:`~cachelab.tiered.flight.fill` (leases, the loader,
        the store), or after an L2 error the loader alone (a fallback)."""
        c = self.cache
        lane = self._native
        assert lane is not None
        fmt = kc.format
        keys = c._keys.keys_of(kc, idents, 0)
        n = len(idents)
        objs: dict[Any, Any] = {}
        sizes: dict[Any, int] = {}
        st = c.l2_stats
        t0 = _now_ns()
        try:
            values, found, others, nbytes = await lane.l2.get_list_async(keys, fmt.own_header)
        except ServerError:
            l2_failed(lane)
            l2_ok = False
        else:
            st.record(_now_ns() - t0)
            lane.breaker.success()
            l2_ok = True
            hits = 0
            if found:
                hits, nbytes, corrupt = fmt.decode_list(idents, values, found, others, nbytes,
                                                        objs, sizes)
                if corrupt:
                    c.events.corrupt += corrupt
            st.calls += 1
            st.hits += hits
            st.misses += n - hits
            st.bytes_read += nbytes
        st.keys += n
        if len(objs) < n:
            missing = [x for x in range(n) if idents[x] not in objs]
            got, got_sizes = await self._run(functools.partial(
                _fill_missing, c, lane, kc, [idents[x] for x in missing],
                [keys[x] for x in missing], l2_ok, born))
            objs.update(got)
            sizes.update(got_sizes)
            if len(objs) > len(got):  # hits first, fills after: back to the order asked
                objs = {i: objs[i] for i in idents if i in objs}
        return objs, sizes

    # -- internals ----------------------------------------------------------------------------

    def _run(self, call: Callable[[], R]) -> Awaitable[R]:
        """``call()`` in a worker thread serving this loop (for async loaders), with the
        caller's context variables."""
        loop = asyncio.get_running_loop()
        ctx = (loop, self.loader_timeout)

        def work() -> R:
            serving.ctx = ctx
            try:
                return call()
            finally:
                serving.ctx = None

        return loop.run_in_executor(self._executor, contextvars.copy_context().run, work)


def _fill_missing(cache: TieredCache, lane: Lane, kc: KeyClass, idents: list[Any],
                  keys: list[str], l2_ok: bool,
                  born: list[float] | None) -> tuple[dict, dict]:
    """In a worker: what the synchronous path does with the keys its multi-get lacked (or all
    of them after an L2 error, ``l2_ok`` False: counted as fallbacks, loaded, not stored), one
    flight per key in this process."""

    def lead(kc: KeyClass, led: list[Any], led_keys: list[str]) -> tuple[dict, dict]:
        if not l2_ok:
            cache.events.fallbacks += len(led)
        filled = fill(lane, kc, led, dict(zip(led, led_keys)), l2_ok)
        return ({i: o for i, (o, _) in filled.items()},
                {i: w for i, (_, w) in filled.items()})

    return cache._flights.fetch(kc, idents, keys, lead, cache.events, born)


class _Closing:
    """What :meth:`AsyncTieredCache.close` returns: awaiting it waits for the pool's threads
    (in the loop's default executor); not awaiting it is fine (no coroutine is made until
    then)."""

    __slots__ = ("_client", "_closing", "_executor")

    def __init__(self, executor: concurrent.futures.Executor | None,
                 closing: threading.Thread, client: _core.AsyncClient | None = None) -> None:
        self._executor = executor
        self._closing = closing
        #: The native path's connection: closed by the await (else dropped with this object,
        #: its socket closing by itself).
        self._client = client

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> None:
        if self._executor is not None:
            await asyncio.to_thread(self._executor.shutdown, True)
        await asyncio.to_thread(self._closing.join)
        if self._client is not None:
            await self._client.close()
