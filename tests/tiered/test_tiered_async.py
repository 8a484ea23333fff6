"""``AsyncTieredCache``: async loaders on the caller's loop, the loop never blocked, single
flight under asyncio concurrency, the async decorators — on a real memcached. Plain tests
driving ``asyncio.run`` (no pytest-asyncio)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

import pytest

from cachelab.errors import UsageError
from cachelab.tiered import AsyncTieredCache, LRUMemory, MemcachedTier, TieredCache


def _acache(address: str, *, l1: bool = True, prefix: str = "aio", **kw: Any) -> AsyncTieredCache:
    return AsyncTieredCache(
        TieredCache(MemcachedTier(address), LRUMemory(max_items=1000) if l1 else None,
                    prefix=prefix), **kw)


async def _ticks_while(work: Awaitable[Any]) -> tuple[Any, list[float]]:
    """Runs ``work`` while a task ticks every 10 ms; its result and the ticks' times
    (``time.perf_counter``)."""
    ticks: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        for _ in range(1000):  # bounded: 10 s at most
            ticks.append(time.perf_counter())
            if stop.is_set():
                return
            await asyncio.sleep(0.01)

    t = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    try:
        result = await work
    finally:
        stop.set()
        await t
    return result, ticks


def _ticked_during(ticks: list[float], spans: list[tuple[float, float]]) -> bool:
    """Whether the loop ticked inside every span: a loop blocked for a span (a loader run
    on it, or a blocking wait for one) ticks in none of it. What a busy machine cannot fake,
    unlike a longest gap between ticks (100 ms seen at load 10 with the loop free)."""
    return bool(spans) and all(any(a < x < b for x in ticks) for a, b in spans)


def test_slow_async_loader_does_not_block_the_loop(fresh_memcached) -> None:
    loop_of_loader: list[Any] = []

    spans: list[tuple[float, float]] = []

    async def load(ids: list[int]) -> dict[int, str]:
        loop_of_loader.append(asyncio.get_running_loop())
        t = time.perf_counter()
        await asyncio.sleep(0.2)  # a 200 ms database call
        spans.append((t, time.perf_counter()))
        return {i: f"user {i}" for i in ids}

    async def main() -> None:
        acache = _acache(fresh_memcached.address)
        users = acache.key_class("user", load)
        t0 = time.perf_counter()
        got, ticks = await _ticks_while(acache.get(users, 1))
        assert got == "user 1" and time.perf_counter() - t0 >= 0.2
        assert _ticked_during(ticks, spans), (spans, ticks)
        assert loop_of_loader == [asyncio.get_running_loop()]  # on the caller's loop
        # the second read is an L1 hit answered on the loop; memcached has it too
        assert await acache.get(users, 1) == "user 1" and len(loop_of_loader) == 1
        assert await acache.get_many(users, [1, 2, 3]) == {i: f"user {i}" for i in (1, 2, 3)}
        acache.close()

    asyncio.run(main())


def test_a_synchronous_slow_loader_does_not_block_the_loop_either(fresh_memcached) -> None:
    spans: list[tuple[float, float]] = []

    def load(ids: list[int]) -> dict[int, int]:
        t = time.perf_counter()
        time.sleep(0.2)  # a blocking driver: runs in a worker thread
        spans.append((t, time.perf_counter()))
        return {i: i for i in ids}

    async def main() -> None:
        acache = _acache(fresh_memcached.address, l1=False)
        kc = acache.key_class("n", load)
        got, ticks = await _ticks_while(acache.get_many(kc, [1, 2]))
        assert got == {1: 1, 2: 2}
        assert _ticked_during(ticks, spans), (spans, ticks)
        acache.close()

    asyncio.run(main())


def test_concurrent_gets_of_one_key_load_once(fresh_memcached) -> None:
    calls: list[list[int]] = []

    spans: list[tuple[float, float]] = []

    async def load(ids: list[int]) -> dict[int, dict]:
        calls.append(list(ids))
        t = time.perf_counter()
        await asyncio.sleep(0.1)
        spans.append((t, time.perf_counter()))
        return {i: {"id": i} for i in ids}

    async def main() -> None:
        acache = _acache(fresh_memcached.address)
        kc = acache.key_class("item", load)
        got, ticks = await _ticks_while(
            asyncio.gather(*(acache.get(kc, 7) for _ in range(100))))
        assert got == [{"id": 7}] * 100
        assert calls == [[7]]
        assert _ticked_during(ticks, spans), (spans, ticks)
        # without L1 (every get goes to a worker): still one load per key
        b = _acache(fresh_memcached.address, l1=False, prefix="aio-b", max_workers=4)
        kb = b.key_class("item", load)
        calls.clear()
        got = await asyncio.gather(*(b.get(kb, 8) for _ in range(100)))
        assert got == [{"id": 8}] * 100 and calls == [[8]]
        acache.close()
        b.close()

    asyncio.run(main())


def test_writes_invalidation_ttl_and_errors(fresh_memcached) -> None:
    db = {1: "a"}

    async def load(ids: list[int]) -> dict[int, str]:
        if 666 in ids:
            raise LookupError("db down")
        return {i: db[i] for i in ids if i in db}

    async def main() -> None:
        async with _acache(fresh_memcached.address) as acache:
            kc = acache.key_class("w", load)
            assert await acache.get(kc, 1) == "a"
            db[1] = "b"
            assert await acache.get(kc, 1) == "a"
            await acache.invalidate(kc, 1)
            assert await acache.get(kc, 1) == "b"
            await acache.put(kc, 2, "put", ttl=30)
            assert await acache.get(kc, 2) == "put"
            assert await acache.get(kc, 3, "absent") == "absent"
            with pytest.raises(LookupError, match="db down"):
                await acache.get(kc, 666)
            ns = await acache.invalidate_namespace("space")
            assert isinstance(ns, int)
            assert acache.stats()["l3"]["calls"] >= 3
            # another cache (no L1) sees the put in memcached
            other = TieredCache(MemcachedTier(fresh_memcached.address), prefix="aio")
            assert other.get(other.key_class("w", lambda ids: {}), 2) == "put"

    asyncio.run(main())


def test_loader_timeout(fresh_memcached) -> None:
    async def stuck(ids: list[int]) -> dict[int, int]:
        await asyncio.sleep(10)
        return {}

    async def main() -> None:
        acache = _acache(fresh_memcached.address, loader_timeout=0.2)
        kc = acache.key_class("stuck", stuck)
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError, match="loader_timeout"):
            await acache.get(kc, 1)
        assert time.perf_counter() - t0 < 2
        acache.close()

    asyncio.run(main())


def test_async_loader_through_the_sync_api(fresh_memcached) -> None:
    """The report's "argument of type 'coroutine' is not iterable": from synchronous code an
    async loader now works; from the loop's own thread it is refused, clearly."""

    async def load(ids: list[int]) -> dict[int, int]:
        await asyncio.sleep(0)
        return {i: i * 10 for i in ids}

    cache = TieredCache(MemcachedTier(fresh_memcached.address), prefix="aio-sync")
    kc = cache.key_class("x", load)
    assert cache.get(kc, 4) == 40

    async def from_the_loop() -> None:
        with pytest.raises(UsageError, match="AsyncTieredCache"):
            cache.get(kc, 5)

    asyncio.run(from_the_loop())


def test_async_decorators(fresh_memcached) -> None:
    calls: list[Any] = []

    async def main() -> None:
        acache = _acache(fresh_memcached.address)

        @acache.cached(ttl=60)
        async def profile(user_id: int, lang: str = "en") -> dict:
            calls.append((user_id, lang))
            await asyncio.sleep(0.05)
            return {"id": user_id, "lang": lang}

        @acache.cached_many()
        async def many(ids: list[int]) -> dict[int, int]:
            calls.append(list(ids))
            return {i: -i for i in ids}

        spans: list[tuple[float, float]] = []

        @acache.cached()
        def blocking(x: int) -> int:  # a synchronous function: run in a worker
            t = time.perf_counter()
            time.sleep(0.1)
            spans.append((t, time.perf_counter()))
            return x + 1

        got = await asyncio.gather(*(profile(1) for _ in range(20)), profile(user_id=1))
        assert got == [{"id": 1, "lang": "en"}] * 21 and calls == [(1, "en")]
        await profile.invalidate(1)
        assert await profile.refresh(1, "en") == {"id": 1, "lang": "en"} and len(calls) == 2
        assert await many([1, 2]) == {1: -1, 2: -2}
        assert await many([2, 3]) == {2: -2, 3: -3} and calls[-1] == [3]
        result, ticks = await _ticks_while(blocking(1))
        assert result == 2 and _ticked_during(ticks, spans), (spans, ticks)
        acache.close()

    asyncio.run(main())

