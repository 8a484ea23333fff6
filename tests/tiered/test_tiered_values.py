"""Faithful values: what a loader returns comes back with the same types from every tier
(property tests over nested containers), idents keyed with their type, L1 copies on request,
values over memcached's item size limit refused clearly, PymemcacheTier shared by threads."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymemcache.client.base import Client

from cachelab import _core
from cachelab.errors import UsageError
from cachelab.servers import PrivateMemcached
from cachelab.tiered import FixedMemory, LRUMemory, MemcachedTier, PymemcacheTier, TieredCache
from cachelab.tiered.backends import ITEM_OVERHEAD, ValueTooLarge
from cachelab.tiered.codecs import UnencodableValue, ValueFormat

# -- strategies -------------------------------------------------------------------------------

_offsets = st.builds(
    dt.timezone,
    st.timedeltas(min_value=dt.timedelta(hours=-23, minutes=-59),
                  max_value=dt.timedelta(hours=23, minutes=59)),
)
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_hashable_scalars = (
    st.none() | st.booleans() | st.integers(-(1 << 80), 1 << 80) | _text | st.binary(max_size=20)
    | st.uuids()
)
_scalars = (
    _hashable_scalars
    | st.floats(allow_nan=False)
    | st.datetimes()
    | st.datetimes(timezones=_offsets | st.timezones())
    | st.dates()
    | st.times()
    | st.times(timezones=_offsets)
    | st.timedeltas()
    | st.decimals(allow_nan=False)
)
_keys = _text | st.integers(-(1 << 40), 1 << 40) | st.tuples(st.integers(0, 9), _text)
_sets = st.sets(st.integers(-5, 5) | _text | st.binary(max_size=4), max_size=5)
VALUES = st.recursive(
    _scalars | _sets | _sets.map(frozenset),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_keys, inner, max_size=4)
    ),
    max_leaves=12,
)


def assert_same(got: Any, want: Any, path: str = "value") -> None:
    """``got`` is ``want`` in type and value, all the way down (``==`` alone would take a list
    for a tuple, 1 for 1.0, a naive datetime's repr for an aware one's)."""
    assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want), path
        for n, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{n}]")
    elif isinstance(want, dict):
        assert {(type(k), repr(k)) for k in got} == {(type(k), repr(k)) for k in want}, path
        for k in want:
            assert_same(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, (set, frozenset)):
        assert {(type(x), repr(x)) for x in got} == {(type(x), repr(x)) for x in want}, path
    else:
        assert repr(got) == repr(want), path


# -- round trips through each tier -------------------------------------------------------------

_serial = itertools.count()


class Setup:
    """A writer cache and a reader cache (same prefix, own L1s) over one kind of tier."""

    def __init__(self, kind: str, address: str) -> None:
        self.kind = kind
        self.address = address
        self.prefix = f"values{os.getpid()}x{next(_serial)}"
        self.values: dict[Any, Any] = {}
        self.calls = 0

    def load(self, idents: list[Any]) -> dict[Any, Any]:
        self.calls += 1
        return {i: self.values[i] for i in idents if i in self.values}

    def cache(self) -> TieredCache:
        l2: Any = None
        # Generous timeouts: a set timed out on a busy machine (0.25 s by default) is a write
        # skipped, and the reader then loads; this test is about the values.
        if "memcached" in self.kind:
            l2 = MemcachedTier(self.address, timeout=5.0, connect_timeout=5.0)
        elif "pymemcache" in self.kind:
            l2 = PymemcacheTier.connect(self.address, timeout=5.0, connect_timeout=5.0)
        l1 = LRUMemory(max_items=1000) if "l1" in self.kind else None
        return TieredCache(l2, l1, prefix=self.prefix)


@pytest.mark.parametrize("kind", ["l1", "memcached", "pymemcache", "l1+memcached"])
def test_values_round_trip_through_every_tier(kind: str, memcached: PrivateMemcached) -> None:
    s = Setup(kind, memcached.address)
    writer, reader = s.cache(), s.cache()
    wkc = writer.key_class("v", s.load)
    rkc = reader.key_class("v", s.load)
    counter = itertools.count()

    @settings(max_examples=60, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(value=VALUES, via_put=st.booleans())
    def check(value: Any, via_put: bool) -> None:
        ident = next(counter)
        if via_put:
            writer.put(wkc, ident, value)
        else:
            s.values[ident] = value
            assert_same(writer.get(wkc, ident), value)  # the fill
        assert_same(writer.get(wkc, ident), value)  # L1 (or L2 without L1)
        if writer.l2 is not None:
            calls = s.calls
            assert_same(reader.get_many(rkc, [ident])[ident], value)  # from memcached
            assert s.calls == calls, "the reader loaded instead of reading memcached"

    check()


def test_a_lease_waiter_reads_the_same_types(memcached: PrivateMemcached) -> None:
    """The value a lease waiter polls from memcached goes through the other decode path."""
    value = {"when": dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc), "pair": (1, "a"),
             "price": decimal.Decimal("9.90"), "tags": {"x"}, "id": uuid.UUID(int=7)}
    s = Setup("memcached", memcached.address)
    s.values["k"] = value
    a, b = s.cache(), s.cache()
    akc, bkc = a.key_class("v", s.load), b.key_class("v", s.load)
    release = threading.Event()
    entered = threading.Event()

    def slow(idents: list[Any]) -> dict[Any, Any]:
        entered.set()
        assert release.wait(5)
        return s.load(idents)

    object.__setattr__(akc, "loader", slow)
    t = threading.Thread(target=a.get, args=(akc, "k"))
    t.start()
    assert entered.wait(5)
    threading.Timer(0.05, release.set).start()
    got = b.get(bkc, "k")  # loses the lease, polls memcached for the winner's value
    t.join(5)
    assert_same(got, value)
    assert b.stats()["events"]["lease_waits"] == 1 and s.calls == 1


# -- values a codec cannot store ---------------------------------------------------------------


class Opaque:
    pass


def test_an_unencodable_value_is_refused_at_put_and_served_uncached_on_fill(
    memcached: PrivateMemcached, caplog: pytest.LogCaptureFixture,
) -> None:
    s = Setup("l1+memcached", memcached.address)
    cache = s.cache()
    kc = cache.key_class("v", s.load)
    with pytest.raises(UnencodableValue, match="Opaque") as err:
        cache.put(kc, "p", {"inner": [Opaque()]})
    assert isinstance(err.value, UsageError) and isinstance(err.value, TypeError)
    with pytest.raises(UsageError, match="surrogate"):
        cache.put(kc, "p", "\ud800")

    obj = Opaque()
    s.values["f"] = obj
    with caplog.at_level(logging.WARNING, "cachelab.tiered"):
        assert cache.get(kc, "f") is obj  # the read works: the loader's value
    assert "Opaque" in caplog.text
    assert cache.stats()["events"]["unencodable"] == 1
    assert _core.Client(memcached.address).get(cache.key_for(kc, "f")) in (None, b"")
    # Stored nowhere: the next read loads again (and counts again); the lease was released,
    # so another instance does not wait lease_wait for it.
    other = s.cache()
    okc = other.key_class("v", s.load)
    t0 = time.monotonic()
    assert other.get(okc, "f") is obj
    assert time.monotonic() - t0 < 0.25  # a waiter would poll until the lease expired
    assert cache.get(kc, "f") is obj and s.calls == 3
    assert cache.stats()["events"]["unencodable"] == 2


def test_subclasses_are_stored_as_their_base_type() -> None:
    import collections
    import enum

    class Colour(enum.IntEnum):
        RED = 1

    point = collections.namedtuple("point", "x y")
    fmt = ValueFormat("msgpack")
    got = fmt.decode(fmt.encode([Colour.RED, collections.OrderedDict(a=1), point(1, 2)]).data)
    assert_same(got, [1, {"a": 1}, (1, 2)])


# -- idents keyed with their type ------------------------------------------------------------

DISTINCT = [1, "1", None, "None", b"1", 1.5, "1.5", "i:1", "s:1", (1, "a"), ("1", "a"), (1,),
            ("1,s:a",), frozenset({1}), uuid.UUID(int=1), "", b"", ()]


def test_idents_of_different_types_have_different_keys(memcached: PrivateMemcached) -> None:
    s = Setup("memcached", memcached.address)
    for ident in DISTINCT:
        s.values[ident] = {"type": type(ident).__name__, "repr": repr(ident)}
    writer, reader = s.cache(), s.cache()
    wkc, rkc = writer.key_class("v", s.load), reader.key_class("v", s.load)
    keys = [writer.key_for(wkc, i) for i in DISTINCT]
    assert len(set(keys)) == len(DISTINCT)
    for k in keys:
        _core.validate_key(k)
    for ident in DISTINCT:
        assert writer.get(wkc, ident) == s.values[ident]
    calls = s.calls
    for ident in DISTINCT:  # each from its own memcached key
        assert reader.get(rkc, ident) == s.values[ident]
    assert s.calls == calls


def test_idents_python_treats_as_one_are_one_ident(memcached: PrivateMemcached) -> None:
    """1, 1.0, True and Decimal(1) are one dict key: one memcached key too, so invalidating
    one of them invalidates what the others read."""
    s = Setup("l1+memcached", memcached.address)
    cache = s.cache()
    kc = cache.key_class("v", s.load)
    assert len({cache.key_for(kc, i) for i in (1, 1.0, True, decimal.Decimal(1))}) == 1
    assert cache.key_for(kc, 2.0) == cache.key_for(kc, 2) != cache.key_for(kc, 2.5)
    s.values[1] = "old"
    assert cache.get(kc, 1.0) == "old"
    s.values[1] = "new"
    cache.invalidate(kc, 1)
    assert cache.get(kc, 1.0) == "new"
    fresh = s.cache()
    assert fresh.get(fresh.key_class("v", s.load), True) == "new"


def test_composite_idents_with_hostile_parts_are_hashed() -> None:
    cache = TieredCache(None, prefix="p")
    kc = cache.key_class("v", lambda ids: {})
    for ident in [("a b", 1), ("x\r\nflush_all",), (b"\xff", None), ("k" * 300,)]:
        key = cache.key_for(kc, ident)
        _core.validate_key(key)
        assert key.startswith("p:v:#") and len(key) < 250


# -- L1 copies -------------------------------------------------------------------------------


@pytest.mark.parametrize("make_l1", [
    lambda copy: LRUMemory(max_items=10, copy=copy),
    lambda copy: FixedMemory.from_keys("v", ["a"], copy=copy),
], ids=["lru", "fixed"])
def test_l1_copy_hands_out_copies(make_l1: Callable[[bool], Any]) -> None:
    loaded = {"a": {"tags": ["x"], "when": dt.date(2024, 1, 1)}}
    for copy in (False, True):
        cache = TieredCache(None, make_l1(copy))
        kc = cache.key_class("v", lambda ids: {i: loaded[i] for i in ids})
        first = cache.get(kc, "a")
        first["tags"].append("mutated by the caller")
        second = cache.get(kc, "a")
        if copy:
            assert second == {"tags": ["x"], "when": dt.date(2024, 1, 1)}
            assert second is not first and second is not cache.get(kc, "a")
        else:  # the documented default: one shared object
            assert second is first
        assert cache.stats()["l1"]["hits"] == (2 if copy else 1)
        loaded["a"] = {"tags": ["x"], "when": dt.date(2024, 1, 1)}


def test_l1_copy_also_copies_what_put_is_given() -> None:
    cache = TieredCache(None, LRUMemory(max_items=10, copy=True))
    kc = cache.key_class("v", lambda ids: {})
    obj = {"n": [1]}
    cache.put(kc, "a", obj)
    obj["n"].append(2)
    assert cache.get(kc, "a") == {"n": [1]}


# -- values over the item size limit --------------------------------------------------------


@pytest.fixture(scope="module")
def small_items() -> Iterator[PrivateMemcached]:
    """memcached with 512 KiB items (-I below slab_chunk_max's 512k default is refused)."""
    with PrivateMemcached(item_size_max="512k") as server:
        yield server


LIMIT = 512 * 1024


def blob(n: int) -> bytes:
    return os.urandom(n)  # incompressible


@pytest.mark.parametrize("tier", ["memcached", "pymemcache"])
def test_a_put_over_the_limit_is_refused_naming_size_and_limit(
    small_items: PrivateMemcached, tier: str,
) -> None:
    s = Setup(tier, small_items.address)
    cache = s.cache()
    kc = cache.key_class("b", s.load, codec="raw")
    key = cache.key_for(kc, "x")
    fits = LIMIT - ITEM_OVERHEAD - len(key) - 2  # 2: the value's header
    cache.put(kc, "x", blob(fits))  # the largest we accept: the server takes it
    assert len(_core.Client(small_items.address).get(key) or b"") == fits + 2
    with pytest.raises(ValueTooLarge, match=rf"{fits + 3} bytes.*{LIMIT} bytes") as err:
        cache.put(kc, "x", blob(fits + 1))
    assert isinstance(err.value, UsageError)
    assert cache.breaker.state == "closed" and cache.stats()["l2"]["errors"] == 0


@pytest.mark.parametrize("kind", ["memcached", "l1+memcached", "pymemcache"])
def test_a_fill_over_the_limit_is_served_counted_and_not_stored(
    small_items: PrivateMemcached, kind: str,
) -> None:
    s = Setup(kind, small_items.address)
    s.values["big"] = big = blob(LIMIT)
    cache = s.cache()
    kc = cache.key_class("b", s.load, codec="raw")
    assert cache.get(kc, "big") == big
    assert cache.stats()["events"]["oversize"] == 1
    assert cache.breaker.state == "closed" and cache.stats()["l2"]["errors"] == 0
    assert _core.Client(small_items.address).get(cache.key_for(kc, "big")) in (None, b"")
    assert cache.get(kc, "big") == big
    if "l1" in kind:  # held in process: not loaded again
        assert s.calls == 1 and cache.stats()["events"]["oversize"] == 1
    else:  # loaded every time, and counted every time
        assert s.calls == 2 and cache.stats()["events"]["oversize"] == 2
    other = s.cache()  # the lease was released: no lease_wait for the next process
    t0 = time.monotonic()
    assert other.get(other.key_class("b", s.load, codec="raw"), "big") == big
    assert time.monotonic() - t0 < 0.25  # a waiter would poll until the lease expired


def test_a_limit_the_server_enforces_first_is_handled_too(small_items: PrivateMemcached) -> None:
    """A tier told a larger limit than the server's: the server's refusal is a ValueTooLarge
    too, not an outage (no breaker failure)."""
    s = Setup("memcached", small_items.address)
    s.values["big"] = big = blob(LIMIT)
    cache = TieredCache(MemcachedTier(small_items.address, item_size_max=4 * LIMIT),
                        prefix=s.prefix)
    kc = cache.key_class("b", s.load, codec="raw")
    with pytest.raises(ValueTooLarge, match="refused"):
        cache.put(kc, "big", big)
    assert cache.get(kc, "big") == big
    assert cache.stats()["events"]["oversize"] == 1
    assert cache.breaker.state == "closed" and cache.stats()["l2"]["errors"] == 0
    small = TieredCache(MemcachedTier(small_items.address, item_size_max=1000), prefix=s.prefix)
    with pytest.raises(ValueTooLarge, match="1000 bytes"):
        small.put(small.key_class("b", s.load, codec="raw"), "y", blob(1000))


# -- PymemcacheTier from many threads ---------------------------------------------------------


@pytest.mark.parametrize("how", ["connect", "shared Client", "factory"])
def test_pymemcache_tier_is_safe_from_threads(memcached: PrivateMemcached, how: str) -> None:
    host, _, port = memcached.address.rpartition(":")
    if how == "connect":
        tier = PymemcacheTier.connect(memcached.address, timeout=2, connect_timeout=2)
    elif how == "shared Client":
        tier = PymemcacheTier(Client((host, int(port)), timeout=2, connect_timeout=2))
    else:
        tier = PymemcacheTier(factory=lambda: Client((host, int(port)), timeout=2,
                                                     connect_timeout=2))
    cache = TieredCache(tier, None, prefix=f"threads{os.getpid()}x{next(_serial)}")
    kc = cache.key_class("t", lambda ids: {i: {"id": i, "v": -1} for i in ids})
    errors: list[BaseException] = []
    ops = [0] * 8
    stop = time.monotonic() + 1.0

    def hammer(n: int) -> None:
        try:
            while time.monotonic() < stop and ops[n] < 200_000:
                i = (ops[n] * 7 + n) % 50
                if ops[n] % 5 == 0:
                    cache.put(kc, i, {"id": i, "v": n})
                elif ops[n] % 5 == 1:
                    got = cache.get_many(kc, range(50))
                    assert all(got[j]["id"] == j for j in range(50))
                else:
                    assert cache.get(kc, i)["id"] == i
                ops[n] += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    tier.close()
    assert not errors, errors[:3]
    assert all(n > 10 for n in ops), ops
    assert cache.stats()["l2"]["errors"] == 0 and cache.stats()["events"]["fallbacks"] == 0


def test_the_limit_is_read_once_and_only_for_values_that_could_exceed_it(
    small_items: PrivateMemcached,
) -> None:
    reads: list[int] = []

    class Counting(MemcachedTier):
        def _read_item_size_max(self) -> int:
            reads.append(1)
            return super()._read_item_size_max()

    s = Setup("memcached", small_items.address)
    cache = TieredCache(Counting(small_items.address), prefix=s.prefix)
    kc = cache.key_class("b", s.load, codec="raw")
    for i in range(20):
        cache.put(kc, i, b"x" * 100)  # fits any memcached (-I is at least 1k)
    assert reads == []
    for i in range(20):
        cache.put(kc, i, blob(10_000))
    assert reads == [1] and cache.l2.item_size_max() == LIMIT  # type: ignore[union-attr]


def test_a_failed_encode_leaves_the_codec_clean() -> None:
    fmt = ValueFormat("msgpack")
    with pytest.raises(UnencodableValue):
        fmt.encode({"a": [1, 2, Opaque()]})
    assert_same(fmt.decode(fmt.encode({"b": (1,)}).data), {"b": (1,)})
