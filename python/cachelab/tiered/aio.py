"""The asyncio API: :class:`AsyncTieredCache`, and async loaders.

::

    cache = TieredCache(MemcachedTier("127.0.0.1:11211"), LRUMemory(max_bytes=64 << 20),
                        prefix="myapp")
    acache = AsyncTieredCache(cache)

    async def load_users(ids: list[int]) -> dict[int, User]: ...   # e.g. asyncpg

    users = acache.key_class("user", load_users)
    alice = await acache.get(users, 1)

How it avoids blocking the event loop: an L1 hit is answered on the loop (no I/O). Anything
else — memcached, leases, single flight — is the synchronous :class:`TieredCache` run in a
worker thread of a bounded pool (``max_workers``); the Rust client is driven from those
threads, one connection each (a native async client is future work). An async loader still
runs on the caller's event loop: the worker hands the coroutine to the loop
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
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar, overload

from cachelab.errors import UsageError
from cachelab.tiered.asyncbridge import serving
from cachelab.tiered.cache import TieredCache
from cachelab.tiered.checks import bad_key_class, idents_list, ttl_seconds
from cachelab.tiered.decorators import AsyncCached, AsyncCachedMany, cached, cached_many
from cachelab.tiered.keys import KeyClass
from cachelab.tiered.memory import MISS

__all__ = ["AsyncTieredCache"]

T = TypeVar("T")
D = TypeVar("D")
R = TypeVar("R")

class AsyncTieredCache:
    """The asyncio face of a :class:`~cachelab.tiered.TieredCache` (see the module docstring):
    ``await get / get_many / put / invalidate / invalidate_namespace``, async loaders, and the
    decorators for coroutine functions. ``executor``: your own (it is not shut down by
    :meth:`close`); else a pool of ``max_workers`` threads made here. ``loader_timeout``: the
    longest a worker waits for an async loader (then :class:`TimeoutError`, and the loader's
    task is cancelled)."""

    def __init__(self, cache: TieredCache, *, max_workers: int = 16,
                 loader_timeout: float = 30.0,
                 executor: concurrent.futures.Executor | None = None) -> None:
        if max_workers < 1 or loader_timeout <= 0:
            raise UsageError("max_workers must be >= 1 and loader_timeout > 0")
        self.cache = cache
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
        l1 = c.l1
        if l1 is not None and kc.plain_l1:
            v = l1.get((kc.name, ident), 0)
            if v is not MISS:
                c.l1_stats.hits += 1
                return v
        return await self._run(functools.partial(c.get, kc, ident, default, ttl=ttl))

    async def get_many(self, kc: KeyClass[T], idents: Iterable[Hashable], *,
                       ttl: int | None = None) -> dict[Any, T]:
        """:meth:`TieredCache.get_many <cachelab.tiered.TieredCache.get_many>` in a worker."""
        if kc.__class__ is not KeyClass:
            bad_key_class("AsyncTieredCache.get_many", kc)
        idents = idents_list("AsyncTieredCache.get_many", kc.name, idents)
        return await self._run(functools.partial(self.cache.get_many, kc, idents, ttl=ttl))

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
        that the await also waits for."""
        if self._own:
            self._executor.shutdown(wait=False, cancel_futures=True)
        closing = threading.Thread(target=self.cache.close, name="cachelab-close", daemon=True)
        closing.start()
        return _Closing(self._executor if self._own else None, closing)

    async def __aenter__(self) -> AsyncTieredCache:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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


class _Closing:
    """What :meth:`AsyncTieredCache.close` returns: awaiting it waits for the pool's threads
    (in the loop's default executor); not awaiting it is fine (no coroutine is made until
    then)."""

    __slots__ = ("_closing", "_executor")

    def __init__(self, executor: concurrent.futures.Executor | None,
                 closing: threading.Thread) -> None:
        self._executor = executor
        self._closing = closing

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> None:
        if self._executor is not None:
            await asyncio.to_thread(self._executor.shutdown, True)
        await asyncio.to_thread(self._closing.join)
