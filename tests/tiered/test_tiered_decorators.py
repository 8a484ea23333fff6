"""``@cache.cached`` / ``@cache.cached_many``, per-call TTL, the random-prefix warning — on a
real memcached."""

from __future__ import annotations

import socket
import threading
import warnings
from typing import Any

import pytest
from tiered_helpers import Store

from cachelab import _core
from cachelab.errors import UsageError
from cachelab.tiered import (
    LRUMemory,
    MemcachedTier,
    RandomPrefixWarning,
    TieredCache,
)


def _cache(address: str, l1: bool = True, prefix: str = "deco") -> TieredCache:
    return TieredCache(MemcachedTier(address), LRUMemory(max_items=100) if l1 else None,
                       prefix=prefix)


def test_cached_binds_arguments_so_equivalent_calls_share_one_key(fresh_memcached) -> None:
    cache = _cache(fresh_memcached.address)
    calls: list[tuple] = []

    @cache.cached(ttl=60)
    def profile(user_id: int, lang: str = "en", *, full: bool = False) -> dict:
        calls.append((user_id, lang, full))
        return {"id": user_id, "lang": lang, "full": full}

    first = profile(1)
    assert first == {"id": 1, "lang": "en", "full": False}
    # positional, keyword and explicit defaults: the same arguments once bound
    assert profile(user_id=1) == first and profile(1, "en") == first
    assert profile(1, lang="en", full=False) == first
    assert calls == [(1, "en", False)]
    assert profile(1, "fr") == {"id": 1, "lang": "fr", "full": False}
    assert len(calls) == 2
    # another process's cache (no L1), same prefix: the value is in memcached under one key
    other = _cache(fresh_memcached.address, l1=False)

    @other.cached(name=profile.key_class.name)
    def profile2(user_id: int, lang: str = "en", *, full: bool = False) -> dict:
        raise AssertionError("must come from memcached")

    assert profile2(1) == first
    assert profile.ident(1) == profile.ident(user_id=1, lang="en", full=False)
    with pytest.raises(TypeError):
        profile(1, 2, 3)  # does not bind


def test_cached_single_argument_ident_and_readable_key(fresh_memcached) -> None:
    cache = _cache(fresh_memcached.address)

    @cache.cached()
    def square(x: int) -> int:
        return x * x

    assert square(7) == 49 and square.ident(7) == 7
    assert cache.key_for(square.key_class, 7).endswith(":7")
    assert _core.Client(fresh_memcached.address).get_multi(
        [cache.key_for(square.key_class, 7)]) != {}


def test_invalidate_and_refresh(fresh_memcached) -> None:
    cache = _cache(fresh_memcached.address)
    db = {1: "a"}
    calls = []

    @cache.cached()
    def name(i: int) -> str:
        calls.append(i)
        return db[i]

    assert name(1) == "a"
    db[1] = "b"
    assert name(1) == "a"  # cached
    name.invalidate(i=1)
    assert name(1) == "b" and len(calls) == 2
    db[1] = "c"
    assert name.refresh(1) == "c" and len(calls) == 3
    assert name(1) == "c" and len(calls) == 3
    # memcached was updated too: a cache without L1 reads the refreshed value
    other = _cache(fresh_memcached.address, l1=False)
    assert other.get(other.key_class(name.key_class.name, lambda ids: {}), 1) == "c"


def test_custom_key_and_unhashable_arguments(fresh_memcached) -> None:
    cache = _cache(fresh_memcached.address)

    class Repo:
        def __init__(self) -> None:
            self.calls = 0

        def find(self, user_id: int) -> dict:
            self.calls += 1
            return {"id": user_id}

    repo = Repo()

    @cache.cached(key=lambda r, user_id: user_id)
    def find(r: Repo, user_id: int) -> dict:
        return r.find(user_id)

    assert find(repo, 5) == {"id": 5} and find(Repo(), 5) == {"id": 5}
    assert repo.calls == 1 and find.ident(repo, 5) == 5

    @cache.cached()
    def total(xs: list) -> int:
        return sum(xs)

    with pytest.raises(TypeError):
        total([1, 2])


def test_cached_single_flight_across_threads(fresh_memcached) -> None:
    cache = _cache(fresh_memcached.address)
    calls = []
    gate = threading.Event()

    @cache.cached()
    def slow(i: int) -> int:
        calls.append(i)
        gate.wait(5)
        return i + 1

    out: list[int] = []
    threads = [threading.Thread(target=lambda: out.append(slow(3))) for _ in range(8)]
    for t in threads:
        t.start()
    threading.Timer(0.2, gate.set).start()
    for t in threads:
        t.join(10)
    assert out == [4] * 8 and calls == [3]


def test_cached_many_one_multiget_and_only_the_misses(fresh_memcached, store: Store) -> None:
    cache = _cache(fresh_memcached.address)
    tier = cache.l2
    gets: list[int] = []
    orig = tier.get_list

    def counting(keys: list[str], strip: Any = None) -> Any:
        gets.append(len(keys))
        return orig(keys, strip)

    tier.get_list = counting  # type: ignore[method-assign]

    @cache.cached_many(ttl=60)
    def rows(ids: list[int]) -> dict[int, dict]:
        return store.load(ids)

    assert rows([1, 2]) == store.load([1, 2])
    store.calls.clear()
    gets.clear()
    got = rows([1, 2, 3, 4, 999])
    assert set(got) == {1, 2, 3, 4}  # 999 is not in the store: left out, not cached
    assert store.calls == [[3, 4, 999]] and gets == [3]  # L1 had 1, 2; one multi-get
    rows.invalidate(3)
    store.calls.clear()
    assert rows.refresh([3, 4]) == store.load([3, 4])
    assert store.calls[0] == [3, 4]


def test_async_function_needs_the_async_cache(fresh_memcached) -> None:
    cache = _cache(fresh_memcached.address)

    async def f(x: int) -> int:
        return x

    with pytest.raises(UsageError, match="AsyncTieredCache"):
        cache.cached()(f)


def test_per_call_ttl_on_put_and_get(fresh_memcached) -> None:
    cache = _cache(fresh_memcached.address, l1=False)
    kc = cache.key_class("t", lambda ids: {i: f"v{i}" for i in ids}, ttl=3600)
    core = _core.Client(fresh_memcached.address)

    def ttl_of(ident: Any) -> int:
        key = cache.key_for(kc, ident)
        # meta get with the t flag: the item's remaining TTL in seconds
        line = _mg_ttl(fresh_memcached.address, key)
        return int(line.split(" t")[1].split()[0])

    cache.put(kc, "a", "A", ttl=5)
    cache.put(kc, "b", "B")
    assert 0 < ttl_of("a") <= 5 and ttl_of("b") > 3000
    assert cache.get(kc, "c", ttl=7) == "vc" and 0 < ttl_of("c") <= 7
    assert cache.get_many(kc, ["d", "e"], ttl=9) == {"d": "vd", "e": "ve"}
    assert 0 < ttl_of("d") <= 9 and 0 < ttl_of("e") <= 9
    assert cache.get(kc, "f") == "vf" and ttl_of("f") > 3000  # the class's TTL otherwise
    with pytest.raises(UsageError):
        cache.put(kc, "g", "G", ttl=-1)
    assert core.get_multi([cache.key_for(kc, "g")]) == {}


def _mg_ttl(address: str, key: str) -> str:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as s:
        s.sendall(f"mg {key} t\r\n".encode())
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            assert chunk, "connection closed"
            buf += chunk
    line = buf.split(b"\r\n")[0].decode()
    assert line.startswith("HD "), line
    return line


def test_random_prefix_warning() -> None:
    with pytest.warns(RandomPrefixWarning, match="prefix") as rec:
        TieredCache(MemcachedTier("127.0.0.1:1"))
    assert len(rec) == 1 and rec[0].filename == __file__  # stacklevel: the caller's line
    with warnings.catch_warnings(record=True) as quiet:
        warnings.simplefilter("always")
        TieredCache(None, LRUMemory(max_items=10))  # no L2: nothing to share
        TieredCache(MemcachedTier("127.0.0.1:1"), prefix="myapp")
    assert [w for w in quiet if issubclass(w.category, RandomPrefixWarning)] == []
