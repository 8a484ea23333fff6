"""AsyncTieredCache's native path: L1's misses read from memcached on the event loop through
the tier's asyncio client (``_core.AsyncClient``), one pipelined connection for every task."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from tiered_helpers import CountingTier, stop, wait_for

import cachelab._core as _core
from cachelab.tiered import (
    AsyncTieredCache,
    CircuitBreaker,
    LRUMemory,
    MemcachedTier,
    TieredCache,
)
from cachelab.tiered.memory import MISS


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A worker pool that counts the calls handed to it."""

    def __init__(self) -> None:
        super().__init__(4, thread_name_prefix="counted")
        self.calls = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        return super().submit(fn, *args, **kw)


def _server_stat(address: str, name: str) -> int:
    with _core.Client(address) as c:
        return int(c.stats()[name])


def _classes(cache: TieredCache, load: Callable[[list[Any]], dict]) -> dict[str, Any]:
    """Key classes in each stored format: pickled, raw binary bytes, zlib-compressed."""
    return {
        "pickled": cache.key_class("pickled", load, codec="pickle"),
        "raw": cache.key_class("raw", load, codec="raw"),
        "zlib": cache.key_class("zlib", load, codec="pickle", compression="zlib", threshold=0),
    }


def _value(name: str, i: int) -> Any:
    if name == "raw":
        return bytes(range(256)) * 3 + i.to_bytes(2, "big") + b"\r\nEND\r\n\0"
    return {"id": i, "body": "text " * (i % 7 + 1), "blob": bytes([i % 256]) * 40}


def test_native_reads_return_what_the_synchronous_path_returns(memcached) -> None:
    """Hits, misses and both mixed, for pickled, binary and compressed values: the native path
    answers what the synchronous one does, reads memcached without a worker for hits, and
    leaves the same values in L1."""

    def load(ids: list[int]) -> dict[int, Any]:  # knows the idents below 100
        return {i: _value(load.name, i) for i in ids if i < 100}  # type: ignore[attr-defined]

    writer = TieredCache(MemcachedTier(memcached.address), prefix="native-same")
    stored = _classes(writer, lambda ids: {})
    for name, kc in stored.items():
        for i in range(0, 40):
            writer.put(kc, i, _value(name, i))
    asks = {"hits": list(range(0, 40, 3)), "misses": [50, 51, 52, 150, 151],
            "mixed": [1, 2, 60, 3, 160, 61, 4]}

    def reader(l1: bool) -> TieredCache:
        return TieredCache(MemcachedTier(memcached.address),
                           LRUMemory(max_items=1000) if l1 else None, prefix="native-same")

    for name in stored:
        load.name = name  # type: ignore[attr-defined]
        for what, idents in asks.items():
            sync = reader(l1=True)
            expected = sync.get_many(_classes(sync, load)[name], idents)
            again = reader(l1=False)
            # the loader stored the misses below 100: ask again for the same L2 content
            expected_l2 = again.get_many(_classes(again, load)[name], idents)
            assert expected == expected_l2

            async def native(l1: bool, idents: list[int] = idents,
                             name: str = name) -> tuple[Any, ...]:
                cache = reader(l1)
                executor = CountingExecutor()
                acache = AsyncTieredCache(cache, executor=executor)
                kc = _classes(cache, load)[name]
                got = await acache.get_many(kc, idents)
                one = await acache.get(kc, idents[0])
                assert cache.l2._aclient is not None, "read through the asyncio client"
                l1_items = ({i: cache.l1.get((kc.name, i), 0) for i in got}
                            if cache.l1 is not None else {})
                await acache.close()
                executor.shutdown()
                return got, one, executor.calls, cache.stats(), l1_items

            for l1 in (False, True):
                got, one, calls, stats, l1_items = asyncio.run(native(l1))
                assert got == expected, (name, what, l1)
                assert list(got) == list(expected), "in the order the synchronous path answers"
                assert one == expected.get(idents[0])
                if what == "hits":
                    assert calls == 0, "L2 hits read without a worker"
                    assert stats["l2"]["hits"] == len(idents) + (0 if l1 else 1)
                if l1:
                    assert l1_items == got, "the values read fill L1"


def test_a_hundred_tasks_share_one_connection_and_get_their_own_values(memcached) -> None:
    writer = TieredCache(MemcachedTier(memcached.address), prefix="native-100")
    kc_w = writer.key_class("v", lambda ids: {})
    for i in range(500):
        writer.put(kc_w, i, f"value {i}")

    async def main() -> tuple[list[dict], float, int]:
        executor = CountingExecutor()
        cache = TieredCache(MemcachedTier(memcached.address), prefix="native-100")
        acache = AsyncTieredCache(cache, executor=executor)
        kc = cache.key_class("v", lambda ids: {})
        await acache.get(kc, 0)  # connected: the count below is of the tasks' sockets
        before = _server_stat(memcached.address, "total_connections")
        gaps: list[float] = []
        stop_ticker = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            for _ in range(10_000):  # bounded
                if stop_ticker.is_set():
                    return
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        tick = asyncio.create_task(ticker())
        results = await asyncio.gather(
            *(acache.get_many(kc, range(t * 5, t * 5 + 5)) for t in range(100)))
        stop_ticker.set()
        await tick
        opened = _server_stat(memcached.address, "total_connections") - before - 1  # ours
        await acache.close()
        executor.shutdown()
        assert executor.calls == 0, "all hits: no worker"
        return results, max(gaps, default=0.0), opened

    results, gap, opened = asyncio.run(main())
    for t, got in enumerate(results):
        assert got == {i: f"value {i}" for i in range(t * 5, t * 5 + 5)}, t
    assert opened == 0, "the hundred tasks opened no socket besides the tier's one"
    # The loop stays free: only a generous bound (a loaded machine stretches ticks).
    assert gap < 2.0, gap


def test_tiers_that_keep_the_worker_path() -> None:
    """A tier subclass that wraps its reads, and ``native=False``, read in workers."""
    wrapped = AsyncTieredCache(TieredCache(CountingTier("127.0.0.1:1"), prefix="p"))
    assert wrapped._native is None
    off = AsyncTieredCache(TieredCache(MemcachedTier("127.0.0.1:1"), prefix="p"), native=False)
    assert off._native is None
    on = AsyncTieredCache(TieredCache(MemcachedTier("127.0.0.1:1"), prefix="p"))
    assert on._native is not None


def test_a_stopped_server_ends_each_await_within_the_timeout_and_opens_the_breaker(
        fresh_memcached) -> None:
    """As on the synchronous path: each read's L2 wait ends at the tier's timeout, the
    failures count in the breaker (it opens) and the keys come from the loader."""
    timeout = 0.2

    def load(ids: list[int]) -> dict[int, str]:
        return {i: f"loaded {i}" for i in ids}

    async def main() -> tuple[list[dict], list[float], TieredCache]:
        cache = TieredCache(MemcachedTier(fresh_memcached.address, timeout=timeout),
                            prefix="native-stop", breaker=CircuitBreaker(3, reset_after=30))
        acache = AsyncTieredCache(cache)
        kc = cache.key_class("s", load)
        assert await acache.get_many(kc, [1, 2]) == {1: "loaded 1", 2: "loaded 2"}
        stop(fresh_memcached.pid)
        try:
            async def timed(t: int) -> tuple[dict, float]:
                t0 = time.perf_counter()
                got = await acache.get_many(kc, [t, t + 100])
                return got, time.perf_counter() - t0

            done = await asyncio.wait_for(asyncio.gather(*(timed(t) for t in range(10))), 20)
        finally:
            os.kill(fresh_memcached.pid, signal.SIGCONT)
        assert cache.l2._aclient is not None, "read through the asyncio client"
        # The breaker open: reads skip memcached (in a worker, as the synchronous path does).
        assert await acache.get_many(kc, [500]) == {500: "loaded 500"}
        assert cache.stats()["events"]["skipped"] >= 1
        await acache.close()
        return [g for g, _ in done], [s for _, s in done], cache

    got, took, cache = asyncio.run(main())
    assert got == [{t: f"loaded {t}", t + 100: f"loaded {t + 100}"} for t in range(10)]
    # Generous: 0.2 s of timeout, then a load in a worker; a loaded machine adds more.
    assert max(took) < 10 * timeout + 3, took
    stats = cache.stats()
    assert cache.breaker.state == "open", stats
    assert stats["events"]["fallbacks"] >= 2, stats
    assert stats["l2"]["errors"] >= 3, stats


#: The connections ``_clients`` asked on: closed, but memcached may list one a while longer.
_ASKERS: set[str] = set()


def _clients(address: str) -> set[str]:
    """The addresses of the connections memcached has open (``stats conns``), but those this
    function asked on. (Counting ``curr_connections`` was not enough: on a loaded machine
    memcached may not yet have seen an earlier connection's close — an earlier call's own
    connection too, which was once taken for a second native one.)"""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        me = "tcp:{}:{}".format(*s.getsockname()[:2])
        _ASKERS.add(me)
        s.sendall(b"stats conns\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
    stats = dict(line.split(" ", 2)[1:] for line in data.decode().splitlines()
                 if line.startswith("STAT "))
    return {v for k, v in stats.items() if k.endswith(":addr") and v not in _ASKERS
            and stats.get(k.replace(":addr", ":state")) != "conn_listening"}


def test_close_is_awaitable_and_closes_the_socket(fresh_memcached) -> None:
    address = fresh_memcached.address
    cache = TieredCache(MemcachedTier(address), prefix="native-close")
    kc = cache.key_class("c", lambda ids: dict.fromkeys(ids, 1))
    cache.put(kc, 1, 1)  # a hit for the native read: no worker (and its connection) involved
    before = _clients(address)

    async def main() -> set[str]:
        acache = AsyncTieredCache(cache)
        assert await acache.get_many(kc, [1]) == {1: 1}
        native = _clients(address) - before
        await acache.close()
        assert cache.l2._aclient is None
        return native

    native = asyncio.run(main())
    assert len(native) == 1, native  # the native path's one connection
    # Closed: gone from the server's list (which may see the close a moment later).
    wait_for(lambda: not (native & _clients(address)), "the native connection to close")


def test_a_write_between_read_and_admission_keeps_it_out_of_l1(memcached) -> None:
    """A write that lands while a native read is under way: the value read is returned but
    not admitted to L1 (the synchronous path's epoch check); without one it is."""
    writer = TieredCache(MemcachedTier(memcached.address), prefix="native-epoch")
    writer.put(writer.key_class("e", lambda ids: {}), 1, "old")

    async def read(race: bool) -> tuple[Any, Any]:
        cache = TieredCache(MemcachedTier(memcached.address), LRUMemory(max_items=100),
                            prefix="native-epoch")
        kc = cache.key_class("e", lambda ids: {})
        acache = AsyncTieredCache(cache)
        real = cache.l2.get_list_async

        async def racing(keys: list[str], strip: bytes | None = None) -> Any:
            got = await real(keys, strip)
            if race:
                cache._epoch += 1  # what a put that reached memcached meanwhile does
            return got

        cache.l2.get_list_async = racing  # type: ignore[method-assign]
        got = await acache.get(kc, 1)
        await acache.close()
        return got, cache.l1.get((kc.name, 1), 0)

    assert asyncio.run(read(race=False)) == ("old", "old")
    assert asyncio.run(read(race=True)) == ("old", MISS)
