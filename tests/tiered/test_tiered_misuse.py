"""Misuse of ``cachelab.tiered`` at its boundary: a loader's result that is not a mapping,
something else than a key class, bad TTLs and idents — each a one-line error naming the
argument, what is allowed and what came; ``await acache.close()``. In process (no memcached)
except where memcached is the point."""

from __future__ import annotations

import asyncio
import datetime
import warnings
from typing import Any

import pytest

from cachelab.errors import UsageError
from cachelab.tiered import (
    AsyncTieredCache,
    LoaderKeysWarning,
    LRUMemory,
    MemcachedTier,
    TieredCache,
)


def _cache(l1: bool = True) -> TieredCache:
    return TieredCache(None, LRUMemory(max_items=100) if l1 else None)


@pytest.mark.parametrize(("returned", "shown", "hint"), [
    (None, "NoneType None", "returns {}"),
    ({1, 2}, "set {1, 2}", "return a dict"),
    ([10, 20], "list [10, 20]", "dict(zip(idents, values))"),
    ([(1, 10), (2, 20)], "list [(1, 10), (2, 20)]", "dict(pairs)"),
    ((x for x in [(1, 10)]), "generator <generator object", "return a dict"),
])
@pytest.mark.parametrize("many", [False, True])
def test_loader_result_must_be_a_mapping(returned: Any, shown: str, hint: str,
                                         many: bool) -> None:
    cache = _cache()

    def load_users(ids: list[int]) -> Any:
        return returned

    users = cache.key_class("user", load_users)
    with pytest.raises(TypeError) as e:
        if many:
            cache.get_many(users, [1, 2])
        else:
            cache.get(users, 1)
    msg = str(e.value)
    assert "load_users" in msg and "'user'" in msg
    assert "expected a mapping {ident: value}" in msg
    assert f"returned {shown}" in msg and hint in msg
    assert "\n" not in msg


def test_a_loader_keyed_by_another_type_is_warned_of_once(memcached) -> None:
    """Asked for [1, 2], a loader returns {"1": .., "2": ..}: every ident was a silent miss."""
    cache = TieredCache(MemcachedTier(memcached.address), None)

    def load_users(ids: list[int]) -> dict[str, Any]:
        return {str(i): {"id": i} for i in ids}

    users = cache.key_class("user", load_users)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")  # Python's own: each message once
        assert cache.get_many(users, [1, 2]) == {}
        assert cache.get(users, 3) is None  # the same message: not shown again
        assert cache.get(users, 4, "none") == "none"
        assert cache.get_many(users, [5, 6]) == {}
    msgs = [str(w.message) for w in seen if issubclass(w.category, LoaderKeysWarning)]
    assert len(msgs) == 1, msgs
    assert "load_users" in msgs[0] and "'user'" in msgs[0]
    assert "idents of type int and returned values under keys of type str" in msgs[0], msgs[0]
    assert "\n" not in msgs[0]
    # a loader that knows none of them (returns {}), or some of them, is not warned of
    partial = cache.key_class("partial", lambda ids: {ids[0]: 1, "x": 2})
    empty = cache.key_class("empty", lambda ids: {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get_many(partial, [7, 8]) == {7: 1}
        assert cache.get_many(empty, [7, 8]) == {}


def test_loader_result_checked_on_the_memcached_path_too(memcached) -> None:
    cache = TieredCache(MemcachedTier(memcached.address), None)

    @cache.cached_many(name="things")
    def things(ids: list[int]) -> Any:
        return [f"t{i}" for i in ids]

    with pytest.raises(TypeError, match=r"loader .*things of key class 'things' returned list"):
        things([1, 2])
    # a mapping subclass or any Mapping is fine
    ok = cache.key_class("ok", lambda ids: {i: i for i in ids})
    assert cache.get_many(ok, [1, 2]) == {1: 1, 2: 2}


def test_async_loader_result_checked() -> None:
    async def load_things(ids: list[int]) -> Any:
        return None

    async def main() -> None:
        acache = AsyncTieredCache(_cache())
        kc = acache.key_class("thing", load_things)
        with pytest.raises(TypeError, match=r"load_things of key class 'thing' returned "
                                             r"NoneType None: expected a mapping"):
            await acache.get(kc, 1)
        with pytest.raises(TypeError, match=r"AsyncTieredCache.get: kc must be a KeyClass .* "
                                            r"got str 'user'"):
            await acache.get("user", 1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="ttl must be whole seconds"):
            await acache.get(kc, 1, ttl="1")
        with pytest.raises(TypeError, match=r"AsyncTieredCache.get_many\(key class 'thing'\): "
                                            r"idents must be a list .* got the str 'ab'"):
            await acache.get_many(kc, "ab")
        await acache.close()

    asyncio.run(main())


@pytest.mark.parametrize("call", ["get", "get_many", "put", "invalidate"])
def test_key_class_argument_named(call: str) -> None:
    cache = _cache()

    @cache.cached()
    def square(x: int) -> int:
        return x * x

    args = {"get": ("user", 1), "get_many": ("user", [1]), "put": ("user", 1, 2),
            "invalidate": ("user", 1)}[call]
    with pytest.raises(TypeError, match=rf"TieredCache.{call}: kc must be a KeyClass made by "
                                        r"cache.key_class\(name, loader\), got str 'user'"):
        getattr(cache, call)(*args)
    with pytest.raises(TypeError, match=r"this is a cached function: pass its .key_class"):
        getattr(cache, call)(square, *args[1:])
    with cache.request() as req:  # the request scope's, where it has the call
        if hasattr(req, call):
            with pytest.raises(TypeError, match=rf"RequestScope.{call}: kc must be a KeyClass"):
                getattr(req, call)(*args)


def test_fractional_ttl_rounds_up() -> None:
    cache = _cache()
    for n, (ttl, seconds) in enumerate([(0.5, 1), (2.2, 3), (300.0, 300), (0, 0),
                                        (datetime.timedelta(milliseconds=1500), 2)]):
        kc = cache.key_class(f"k{n}", lambda ids: {i: i for i in ids}, ttl=ttl)
        assert kc.ttl == seconds  # never down: 0.5 -> 0 would mean "never expires"
        assert cache.get(kc, 1, ttl=ttl) == 1 and cache.get_many(kc, [2], ttl=ttl) == {2: 2}
        cache.put(kc, 3, 3, ttl=ttl)


def test_fractional_ttl_stored_in_memcached(memcached) -> None:
    cache = TieredCache(MemcachedTier(memcached.address), None)
    kc = cache.key_class("k", lambda ids: {i: i for i in ids}, ttl=0.5)
    cache.put(kc, 1, "one", ttl=0.5)  # was: TypeError 'float' object cannot be interpreted...
    assert cache.get(kc, 1) == "one"


@pytest.mark.parametrize(("ttl", "error", "text"), [
    ("60", TypeError, "ttl must be whole seconds .* got str '60'"),
    (True, TypeError, "ttl must be whole seconds .* got bool True"),
    ([1], TypeError, "got list"),
    (-1, UsageError, r"ttl must be 0 \(none\) to 30 days"),
    (31 * 86400, UsageError, r"ttl must be 0 \(none\) to 30 days"),
    (float("nan"), UsageError, "finite number of seconds, got nan"),
])
def test_bad_ttl_named(ttl: Any, error: type[Exception], text: str) -> None:
    cache = _cache()
    kc = cache.key_class("k", lambda ids: {i: i for i in ids})
    cache.get(kc, 1)  # in L1: the check does not depend on a miss
    for call in (lambda: cache.get(kc, 1, ttl=ttl), lambda: cache.get_many(kc, [1], ttl=ttl),
                 lambda: cache.put(kc, 1, 1, ttl=ttl),
                 lambda: cache.key_class("k2", lambda ids: {}, ttl=ttl)):
        with pytest.raises(error, match=text):
            call()


_UNHASHABLE_CALLS = {
    "TieredCache.get": lambda cache, kc: cache.get(kc, [1]),
    "TieredCache.get_many": lambda cache, kc: cache.get_many(kc, [2, [1]]),
    "TieredCache.put": lambda cache, kc: cache.put(kc, [1], "x"),
    "TieredCache.invalidate": lambda cache, kc: cache.invalidate(kc, [1]),
    "TieredCache.key_for": lambda cache, kc: cache.key_for(kc, [1]),
    "RequestScope.get": lambda cache, kc: cache.request().get(kc, [1]),
    "RequestScope.get_many": lambda cache, kc: cache.request().get_many(kc, [2, [1]]),
    "RequestScope.prefetch": lambda cache, kc: cache.request().prefetch(kc, [2, [1]]),
}


@pytest.mark.parametrize("l1", [True, False])
@pytest.mark.parametrize("where", list(_UNHASHABLE_CALLS))
def test_an_unhashable_ident_names_the_method_the_ident_and_its_type(
    where: str, l1: bool
) -> None:
    cache = _cache(l1)
    users = cache.key_class("user", lambda ids: {i: i for i in ids})
    text = (rf"^{where}: ident \[1\] \(list\) is not hashable: an ident is an int, str, .* "
            r"\(key class 'user'\)$")
    with pytest.raises(TypeError, match=text):
        _UNHASHABLE_CALLS[where](cache, users)


@pytest.mark.parametrize("l1", [True, False])
@pytest.mark.parametrize("native", [True, False])
def test_an_unhashable_ident_in_the_async_api_names_the_method(
    native: bool, l1: bool, memcached
) -> None:
    """AsyncTieredCache.get over memcached (its native read, or a worker's) said only Python's
    "unhashable type: 'list'"; get_many named no method. Nothing is sent first."""
    cache = TieredCache(MemcachedTier(memcached.address, timeout=5),
                        LRUMemory(max_items=100) if l1 else None, prefix="misuse-unhashable")
    users = cache.key_class("user", lambda ids: {i: i for i in ids})

    async def main() -> None:
        acache = AsyncTieredCache(cache, native=native)
        assert (acache._native is not None) is native
        for where, call in [("AsyncTieredCache.get", lambda: acache.get(users, [1])),
                            ("AsyncTieredCache.get_many",
                             lambda: acache.get_many(users, [2, [1]]))]:
            with pytest.raises(TypeError, match=(
                    rf"^{where}: ident \[1\] \(list\) is not hashable: an ident is an int, "
                    r"str, .* \(key class 'user'\)$")):
                await call()
        assert cache.l2_stats.calls == 0
        await acache.close()

    asyncio.run(main())


@pytest.mark.parametrize("l1", [True, False])
def test_bad_idents_name_the_key_class(l1: bool) -> None:
    cache = _cache(l1)
    users = cache.key_class("user", lambda ids: {i: i for i in ids})
    with pytest.raises(TypeError, match=r"get_many\(key class 'user'\): idents must be a list .* "
                                        r"got the str 'abc'; for one ident pass \[ident\]"):
        cache.get_many(users, "abc")
    with pytest.raises(TypeError, match=r"get_many\(key class 'user'\): .* got int 5"):
        cache.get_many(users, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"RequestScope.prefetch\(key class 'user'\): idents "
                                        r"must be a list"), cache.request() as req:
        req.prefetch(users, "ab")
    # an object whose text is its address would make a key no other process shares
    with pytest.raises(UsageError, match=r"key class 'user': ident <object object at .* has no "
                                         r"stable text"):
        cache.get(users, object())
    with pytest.raises(UsageError, match="has no stable text"):
        cache.get(users, (1, object()))


def test_async_close_is_awaitable() -> None:
    async def main() -> None:
        acache = AsyncTieredCache(_cache())
        kc = acache.key_class("k", lambda ids: {i: i for i in ids})
        assert await acache.get(kc, 1) == 1
        assert await acache.get(kc, 2) == 2
        await acache.close()
        with pytest.raises(RuntimeError):  # no new call starts once closed
            await acache.get(kc, 3)
        # a second close, awaited or not, is harmless; not awaiting it warns nothing
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            acache.close()
            await acache.close()
        async with AsyncTieredCache(_cache()) as other:
            kc2 = other.key_class("k", lambda ids: {i: -i for i in ids})
            assert await other.get(kc2, 4) == -4

    asyncio.run(main())
