"""``@cache.cached`` / ``@cache.cached_many`` on instance methods, classmethods and
staticmethods (the descriptor protocol), sync and async — on a real memcached (one per
session; each cache has a random prefix)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cachelab.errors import UsageError
from cachelab.tiered import AsyncTieredCache, LRUMemory, MemcachedTier, TieredCache


def _cache(address: str, l1: bool = True, prefix: str | None = None) -> TieredCache:
    return TieredCache(MemcachedTier(address), LRUMemory(max_items=100) if l1 else None,
                       prefix=prefix)


def test_method_leaves_self_out_of_the_key_and_shares_it_with_a_plain_function(memcached) -> None:
    cache = _cache(memcached.address)
    calls: list[tuple[Any, int]] = []

    class Repo:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        @cache.cached(ttl=60)
        def item(self, item_id: int) -> str:
            calls.append((self, item_id))
            return f"item {item_id}"

    a, b = Repo("a"), Repo("b")
    assert a.item(5) == "item 5"
    assert calls == [(a, 5)]  # the loader got the instance
    # another instance, keywords, the class with the instance first: one key, no reload
    assert b.item(5) == "item 5" and a.item(item_id=5) == "item 5"
    assert Repo.item(b, 5) == "item 5"
    assert len(calls) == 1
    assert a.item.ident(5) == 5 == Repo.item.ident(a, 5)
    assert a.item.key_class is Repo.item.key_class
    # the key is the one a plain function under the same name makes: another process (no
    # L1, same prefix) reads it from memcached with a plain function
    other = _cache(memcached.address, l1=False, prefix=cache.prefix)

    @other.cached(name=Repo.item.key_class.name)
    def item(item_id: int) -> str:
        raise AssertionError("must come from memcached")

    assert item.ident(5) == a.item.ident(5)
    assert other.key_for(item.key_class, 5) == cache.key_for(a.item.key_class, 5)
    assert item(5) == "item 5"


def test_bound_invalidate_and_refresh(memcached) -> None:
    cache = _cache(memcached.address)
    db = {1: "v1"}
    loads: list[int] = []

    class Repo:
        @cache.cached()
        def get(self, i: int) -> str:
            loads.append(i)
            return db[i]

    r = Repo()
    assert r.get(1) == "v1"
    db[1] = "v2"
    assert r.get(1) == "v1"  # cached
    r.get.invalidate(1)
    assert r.get(1) == "v2" and loads == [1, 1]
    db[1] = "v3"
    assert r.get.refresh(1) == "v3" and loads == [1, 1, 1]
    db[1] = "v4"
    Repo.get.invalidate(r, 1)  # through the class: the instance first, as the call takes it
    assert r.get(1) == "v4"


def test_classmethods_and_staticmethods_in_either_order(memcached) -> None:
    cache = _cache(memcached.address)
    seen: list[Any] = []

    class Conf:
        @classmethod
        @cache.cached()
        def outer_cm(cls, name: str) -> str:
            seen.append(cls)
            return f"cm {name}"

        @cache.cached()
        @classmethod
        def inner_cm(cls, name: str) -> str:
            seen.append(cls)
            return f"cm2 {name}"

        @staticmethod
        @cache.cached()
        def outer_sm(x: int) -> int:
            return x + 1

        @cache.cached()
        @staticmethod
        def inner_sm(x: int) -> int:
            return x + 2

    c = Conf()
    assert Conf.outer_cm("a") == "cm a" == c.outer_cm("a")
    assert Conf.inner_cm("b") == "cm2 b" == c.inner_cm("b")
    assert seen == [Conf, Conf]  # once each, with the class
    assert Conf.outer_cm.ident("a") == "a" and c.inner_cm.ident("b") == "b"
    assert Conf.outer_sm(1) == 2 == c.outer_sm(1) and Conf.inner_sm(1) == 3 == c.inner_sm(1)
    assert c.inner_sm.ident(1) == 1
    Conf.inner_cm.invalidate("b")
    assert c.inner_cm("b") == "cm2 b" and seen == [Conf, Conf, Conf]


def test_key_may_keep_the_instance(memcached) -> None:
    cache = _cache(memcached.address)

    class Tenant:
        def __init__(self, name: str) -> None:
            self.name = name

        @cache.cached(key=lambda self, i: (self.name, i))
        def setting(self, i: int) -> str:
            return f"{self.name}:{i}"

    assert Tenant("x").setting(1) == "x:1" and Tenant("y").setting(1) == "y:1"
    assert Tenant("x").setting.ident(1) == ("x", 1)

    class Repo:  # issue 32: this raised "<lambda>() missing 1 required positional argument"
        @cache.cached(key=lambda self, i: i)
        def item(self, i: int) -> int:
            return i * 2

    assert Repo().item(5) == 10 and Repo().item.ident(5) == 5


def test_cached_many_method(memcached) -> None:
    cache = _cache(memcached.address)
    batches: list[tuple[Any, list[int]]] = []

    class Users:
        @cache.cached_many()
        def many(self, ids: list[int]) -> dict[int, str]:
            batches.append((self, list(ids)))
            return {i: f"u{i}" for i in ids if i < 100}

    u = Users()
    assert u.many([1, 2, 100]) == {1: "u1", 2: "u2"}
    assert Users.many(u, [2, 3]) == {2: "u2", 3: "u3"}
    assert batches == [(u, [1, 2, 100]), (u, [3])]
    u.many.invalidate(1)
    assert u.many([1, 2]) == {1: "u1", 2: "u2"} and batches[-1] == (u, [1])
    assert u.many.refresh([2]) == {2: "u2"} and batches[-1] == (u, [2])
    with pytest.raises(UsageError, match="only through the method"):
        cache.get_many(Users.many.key_class, [7])  # no instance to give the loader


def test_async_methods(memcached) -> None:
    async def main() -> None:
        acache = AsyncTieredCache(_cache(memcached.address))
        loads: list[Any] = []

        class Repo:
            @acache.cached()
            async def item(self, i: int) -> str:
                await asyncio.sleep(0)
                loads.append((self, i))
                return f"item {i}"

            @acache.cached_many()
            async def many(self, ids: list[int]) -> dict[int, str]:
                await asyncio.sleep(0)
                loads.append((self, tuple(ids)))
                return {i: f"m{i}" for i in ids}

            @acache.cached_many()
            def sync_many(self, ids: list[int]) -> dict[int, str]:  # run in a worker
                return {i: f"s{i}:{type(self).__name__}" for i in ids}

        r = Repo()
        assert await r.sync_many([4]) == {4: "s4:Repo"}
        assert await r.item(1) == "item 1" and await Repo.item(r, 1) == "item 1"
        assert r.item.ident(1) == 1
        assert await r.many([1, 2]) == {1: "m1", 2: "m2"}
        assert loads == [(r, 1), (r, (1, 2))]
        await r.item.invalidate(1)
        await r.many.invalidate(2)
        assert await r.item(1) == "item 1" and await r.many([1, 2]) == {1: "m1", 2: "m2"}
        assert loads[2:] == [(r, 1), (r, (2,))]
        assert await r.item.refresh(1) == "item 1" and len(loads) == 5
        await acache.close()

    asyncio.run(main())
