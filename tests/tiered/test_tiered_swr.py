"""Stale-while-revalidate (issue 32 item 6): a key class with ``soft_ttl`` serves a stale value
at once while one caller, across processes, reloads it; a failed reload keeps the stale value
until the hard ``ttl``; writes still win; L1 holds a value only while it is fresh.

Two caches on separate connections stand for two processes (the history checker,
test_tiered_history.py, runs real ones). Soft expiry is real time: values are made stale by
waiting past a 1 s ``soft_ttl`` (waits are lower bounds, so a busy machine cannot break them)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from tiered_helpers import held_loader, wait_for

from cachelab import _core
from cachelab.errors import UsageError
from cachelab.servers import PrivateMemcached
from cachelab.tiered import (
    AsyncTieredCache,
    LRUMemory,
    MemcachedTier,
    PymemcacheTier,
    TieredCache,
)
from cachelab.tiered.codecs import MAGIC, STAMP, Stamp, read_stamp

#: Seconds a value is fresh in these tests, and a wait that makes it stale.
SOFT = 1
PAST_SOFT = SOFT + 0.15


class Db:
    """The truth: a dict, and a loader over it that records its calls (and may be held or
    made to fail)."""

    def __init__(self) -> None:
        self.rows: dict[Any, str] = {i: f"v1 of {i}" for i in range(10)}
        self.calls: list[list[Any]] = []
        self.before_return: Callable[[], None] | None = None
        self.fail = False

    def load(self, idents: list[Any]) -> dict[Any, Any]:
        self.calls.append(list(idents))
        if self.fail:
            raise RuntimeError("the database is down")
        out = {i: self.rows[i] for i in idents if i in self.rows}
        if self.before_return is not None:
            self.before_return()
        return out


def _two(address: str, db: Db, prefix: str, *, ttl: int = 30, l1: Any = "default",
         lease_ttl: int = 5) -> tuple[tuple[TieredCache, Any], tuple[TieredCache, Any]]:
    """Two caches sharing memcached (each its own connection), each with the key class."""
    out = []
    for _ in range(2):
        memory = LRUMemory(max_items=100) if l1 == "default" else l1
        c = TieredCache(MemcachedTier(address), memory, prefix=prefix, lease_ttl=lease_ttl)
        out.append((c, c.key_class("row", db.load, ttl=ttl, soft_ttl=SOFT)))
    return out[0], out[1]


def test_a_stale_value_is_reloaded_once_while_another_process_gets_it_at_once(
    memcached: PrivateMemcached,
) -> None:
    db = Db()
    (a, ka), (b, kb) = _two(memcached.address, db, f"swr1{time.monotonic_ns()}")
    assert a.get(ka, 1) == "v1 of 1" and len(db.calls) == 1
    assert b.get(kb, 1) == "v1 of 1" and len(db.calls) == 1  # fresh: from memcached
    db.rows[1] = "v2 of 1"
    time.sleep(PAST_SOFT)
    entered, release = held_loader(db, timeout=10)
    got: dict[str, Any] = {}
    reloader = threading.Thread(target=lambda: got.update(b=b.get(kb, 1)))
    reloader.start()
    try:
        assert entered.wait(10)  # b claimed the stale value and is reloading it
        # a (another process) gets the stale value while b's loader is still held: no wait
        assert a.get(ka, 1) == "v1 of 1"
        assert a.get(ka, 1) == "v1 of 1"  # not held by L1: asked memcached again, still stale
        assert len(db.calls) == 2
    finally:
        release.set()
        reloader.join(10)
    assert got["b"] == "v2 of 1"  # the winner pays the load and gets the new value
    assert a.get(ka, 1) == "v2 of 1" and len(db.calls) == 2  # the reload is in memcached
    assert b.events.revalidations == 1 and b.events.revalidation_errors == 0
    assert a.events.stale_hits == 2 and a.events.revalidations == 0
    assert b.stats()["events"]["revalidations"] == 1


@pytest.mark.parametrize("l1", [True, False], ids=["l1", "no-l1"])
def test_threads_of_the_reloading_process_get_the_stale_value_at_once(
    memcached: PrivateMemcached, l1: bool,
) -> None:
    """Single flight hands the stale value to the reloader's own threads (they waited for the
    reload, as on a miss); a thread wanting another key of that fetch still waits for it."""
    db = Db()
    (a, ka), _ = _two(memcached.address, db, f"swr-own{time.monotonic_ns()}",
                      l1=LRUMemory(max_items=100) if l1 else None)
    assert a.get(ka, 1) == "v1 of 1" and len(db.calls) == 1
    db.rows[1] = "v2 of 1"
    time.sleep(PAST_SOFT)
    entered, release = held_loader(db, timeout=10)
    got: dict[str, Any] = {}
    reloader = threading.Thread(target=lambda: got.update(r=a.get_many(ka, [1, 2])))
    reloader.start()
    other = threading.Thread(target=lambda: got.update(other=a.get(ka, 2)))
    try:
        assert entered.wait(10)  # the reloader claimed key 1 and its loader is held
        stale = threading.Thread(target=lambda: got.update(stale=a.get(ka, 1)))
        stale.start()
        stale.join(5)
        assert not stale.is_alive(), "a thread of the reloading process waited for the reload"
        assert got["stale"] == "v1 of 1"
        other.start()  # key 2 was a miss in the reloader's fetch: it waits for that fill
    finally:
        release.set()
        reloader.join(10)
        if other.ident is not None:  # started
            other.join(10)
    assert got["r"] == {1: "v2 of 1", 2: "v1 of 2"}
    assert got["other"] == "v1 of 2"
    assert db.calls == [[1], [1], [2]]  # the first load, the reload, key 2: no other
    assert a.events.singleflight_waits == 2 and a.events.revalidations == 1
    assert a.get(ka, 1) == "v2 of 1" and len(db.calls) == 3


def test_many_stale_values_of_one_get_many_are_reloaded_in_one_loader_call(
    memcached: PrivateMemcached,
) -> None:
    db = Db()
    (a, ka), (b, kb) = _two(memcached.address, db, f"swr2{time.monotonic_ns()}", l1=None)
    assert len(a.get_many(ka, range(5))) == 5
    for i in range(5):
        db.rows[i] = f"v2 of {i}"
    time.sleep(PAST_SOFT)
    want = {i: f"v2 of {i}" for i in range(5)}
    got = b.get_many(kb, range(5))
    if got != want:
        # Only a claim that failed (a request to memcached timed out: a stalled machine) is
        # served stale rather than reloaded; the others are still reloaded in one call.
        assert b.events.revalidation_errors > 0, (got, b.events)
        assert all(v in (f"v1 of {i}", f"v2 of {i}") for i, v in got.items()), got
        return
    assert db.calls[1:] == [[0, 1, 2, 3, 4]] and b.events.revalidations == 5
    # The other process reads the reloads (stored as b's get_many returned, or a moment
    # later on a busy machine: until then it is served the stale value) and loads nothing.
    deadline = time.monotonic() + 5.0
    while (seen := a.get_many(ka, range(5))) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == want and len(db.calls) == 2, (seen, db.calls)


@pytest.mark.slow
def test_a_failed_reload_serves_stale_until_the_hard_ttl_then_loads(
    memcached: PrivateMemcached,
) -> None:
    """soft_ttl 1 s, ttl 5 s, a claim lapses after lease_ttl (1 s): the loader fails while the
    value is stale; it is served stale, tried again once the claim lapsed, and once memcached
    has dropped it (the hard ttl; memcached's clock may drop it up to 1 s early) the next read
    is a miss that loads."""
    db = Db()
    (a, ka), _ = _two(memcached.address, db, f"swr3{time.monotonic_ns()}", ttl=5, l1=None,
                      lease_ttl=1)
    a.get(ka, 1)
    filled = time.monotonic()
    db.rows[1] = "v2 of 1"
    db.fail = True
    time.sleep(PAST_SOFT)
    assert a.get(ka, 1) == "v1 of 1"  # the reload failed: stale, no error raised
    assert a.events.revalidation_errors == 1 and len(db.calls) == 2
    assert a.get(ka, 1) == "v1 of 1" and len(db.calls) == 2  # claimed: nobody tries yet
    # Once the claim lapses (lease_ttl), a reader tries again (within the hard ttl).
    wait_for(lambda: a.get(ka, 1) == "v1 of 1" and len(db.calls) == 3, "a second try")
    assert a.events.revalidation_errors == 2 and a.events.stale_hits >= 3
    # Gone at the hard ttl (memcached's clock ticks in seconds: allow one more), then a miss.
    key = a.key_for(ka, 1)
    with _core.Client(memcached.address) as c:
        wait_for(lambda: key.encode() not in c.get_multi([key]), "the hard expiry")
    assert time.monotonic() - filled < 5 + 1  # ttl, a busy machine
    db.fail = False
    wins = a.events.lease_wins
    assert a.get(ka, 1) == "v2 of 1"
    assert a.events.lease_wins == wins + 1 and a.events.revalidations == 2  # a fill


def test_an_invalidate_during_a_reload_wins(memcached: PrivateMemcached) -> None:
    """b reloads a stale value (its loader read v2 and is held); a writes v3 and invalidates:
    b's reload must not be stored over that, and a read after the invalidate gets v3 (no L1:
    b's own would hold the v2 it loaded for its ttl, as for any value)."""
    db = Db()
    (a, ka), (b, kb) = _two(memcached.address, db, f"swr4{time.monotonic_ns()}", l1=None)
    a.get(ka, 1)
    db.rows[1] = "v2 of 1"
    time.sleep(PAST_SOFT)
    entered, release = held_loader(db, timeout=10)
    reloader = threading.Thread(target=lambda: b.get(kb, 1))
    reloader.start()
    try:
        assert entered.wait(10)
        db.rows[1] = "v3 of 1"
        a.invalidate(ka, 1)
    finally:
        release.set()
        reloader.join(10)
    assert b.events.lease_lost == 1  # its CAS set failed: the invalidate changed the item
    assert a.get(ka, 1) == "v3 of 1" and b.get(kb, 1) == "v3 of 1"


def test_a_put_in_the_stale_window_is_read_at_once(memcached: PrivateMemcached) -> None:
    db = Db()
    (a, ka), (b, kb) = _two(memcached.address, db, f"swr5{time.monotonic_ns()}")
    b.get(kb, 1)
    time.sleep(PAST_SOFT)
    db.rows[1] = "v2 of 1"
    a.put(ka, 1, "v2 of 1")
    assert b.get(kb, 1) == "v2 of 1"  # b's L1 entry ended at the soft expiry; the put is fresh
    assert b.events.stale_hits == 0 and b.events.revalidations == 0 and len(db.calls) == 1


def test_l1_holds_a_value_only_until_its_soft_expiry(memcached: PrivateMemcached) -> None:
    """An L1 without a ttl of its own keeps values until evicted: a soft_ttl class's value is
    still dropped at its soft expiry, so the read goes to memcached and revalidates it."""
    db = Db()
    (a, ka), _ = _two(memcached.address, db, f"swr6{time.monotonic_ns()}",
                      l1=LRUMemory(max_items=100, ttl=None))
    a.get(ka, 1)
    assert a.get(ka, 1) == "v1 of 1" and a.l1_stats.hits == 1
    db.rows[1] = "v2 of 1"
    time.sleep(PAST_SOFT)
    assert a.get(ka, 1) == "v2 of 1" and a.events.revalidations == 1
    assert a.get(ka, 1) == "v2 of 1" and a.l1_stats.hits == 2  # the reload is held again


def test_a_value_without_a_stamp_is_fresh_until_memcached_drops_it(
    memcached: PrivateMemcached,
) -> None:
    """A value stored before the class had a soft_ttl (no stamp) is read as fresh."""
    db = Db()
    prefix = f"swr7{time.monotonic_ns()}"
    old = TieredCache(MemcachedTier(memcached.address), None, prefix=prefix)
    old.put(old.key_class("row", db.load, ttl=30), 1, "old")
    (a, ka), _ = _two(memcached.address, db, prefix, l1=None)
    time.sleep(PAST_SOFT)
    assert a.get(ka, 1) == "old" and a.events.stale_hits == 0 and db.calls == []


def test_through_the_decorators_and_stated(memcached: PrivateMemcached) -> None:
    cache = TieredCache(MemcachedTier(memcached.address), LRUMemory(max_items=10),
                        prefix=f"swr8{time.monotonic_ns()}")

    @cache.cached(name="profile", ttl=300, soft_ttl=60)
    def profile(user_id: int) -> str:
        return f"profile {user_id}"

    @cache.cached_many(name="rows", ttl=120, soft_ttl=100)
    def rows(ids: list[int]) -> dict[int, str]:
        return {i: f"row {i}" for i in ids}

    assert profile(1) == "profile 1" and rows([1]) == {1: "row 1"}
    assert profile.key_class.soft_ttl == 60 and "soft_ttl=60" in repr(profile.key_class)
    stated = cache.staleness()
    assert stated["stale_serve"] == {"profile": 240, "rows": 20}
    assert stated["stale_serve_s"] == 240.0 and "stale-while-revalidate" in stated["why"]
    plain = TieredCache(MemcachedTier(memcached.address), LRUMemory(max_items=1), prefix="p")
    plain.key_class("row", Db().load)
    assert plain.staleness()["stale_serve_s"] == 0.0 and plain.staleness()["stale_serve"] == {}


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"soft_ttl": 60}, UsageError, r"soft_ttl must be less than ttl.*soft_ttl=60, ttl=60"),
    ({"soft_ttl": 90}, UsageError, r"soft_ttl must be less than ttl.*soft_ttl=90"),
    ({"soft_ttl": 0}, UsageError, r"soft_ttl must be at least 1 s"),
    ({"soft_ttl": -5}, UsageError, r"soft_ttl must be 0 \(none\) to 30 days.*-5"),
    ({"soft_ttl": "30"}, TypeError, r"soft_ttl must be whole seconds.*got str '30'"),
    ({"soft_ttl": True}, TypeError, r"soft_ttl must be whole seconds.*got bool True"),
    ({"soft_ttl": 30, "ttl": 0}, UsageError, r"soft_ttl needs a hard ttl"),
])
def test_misuse_is_named(memcached: PrivateMemcached, options: dict[str, Any],
                         error: type[Exception], message: str) -> None:
    cache = TieredCache(MemcachedTier(memcached.address), None, prefix="misuse")
    with pytest.raises(error, match=message):
        cache.key_class("row", Db().load, **{"ttl": 60, **options})
    assert "row" not in cache._classes


@pytest.mark.parametrize("make", [
    lambda address: TieredCache(None, LRUMemory(max_items=1)),
    lambda address: TieredCache(MemcachedTier(address), None, prefix="p", leases=False),
    lambda address: TieredCache(PymemcacheTier.connect(address), None, prefix="p"),
])
def test_soft_ttl_needs_leases(memcached: PrivateMemcached,
                               make: Callable[[str], TieredCache]) -> None:
    cache = make(memcached.address)
    with pytest.raises(UsageError, match=r"key class 'row': soft_ttl needs memcached with "
                                         r"leases"):
        cache.key_class("row", Db().load, ttl=60, soft_ttl=30)
    cache.key_class("row", Db().load, ttl=60)  # without it: fine


@pytest.mark.parametrize(("codec", "compression"), [("msgpack", "none"), ("orjson", "zstd"),
                                                    ("raw", "none")])
def test_the_stamp_travels_with_the_value(memcached: PrivateMemcached, codec: str,
                                          compression: str) -> None:
    """On the server a value is the stamp (0xCC, flags, soft and hard expiry as Unix times)
    then the usual header; the client flags stay the format byte; every codec and compression
    reads through it."""
    value: Any = b"x" * 3000 if codec == "raw" else {"text": "lorem ipsum " * 300}
    cache = TieredCache(MemcachedTier(memcached.address), None,
                        prefix=f"swr9{time.monotonic_ns()}")
    kc = cache.key_class("row", lambda ids: {i: value for i in ids}, codec=codec,
                         compression=compression, ttl=300, soft_ttl=60)
    before = time.time()
    cache.put(kc, 1, value)
    key = cache.key_for(kc, 1)
    with _core.Client(memcached.address) as c:
        status, flags, data = c.meta_get(key, "v f")
    stamp, rest = read_stamp(data)
    assert status == "VA" and data[0] == STAMP and rest[0] == MAGIC
    assert stamp is not None and not stamp.revalidating
    assert before + 60 <= stamp.soft_at <= time.time() + 60
    assert stamp.hard_at - stamp.soft_at == pytest.approx(240)
    assert f"f{rest[1]}" in flags.split()
    assert (rest[1] >> 4 != 0) == (compression != "none")
    other = TieredCache(MemcachedTier(memcached.address), None, prefix=cache.prefix)
    okc = other.key_class("row", Db().load, codec=codec, ttl=300, soft_ttl=60)
    assert other.get(okc, 1) == value and other.get_many(okc, [1]) == {1: value}


def test_a_stamped_value_that_does_not_decode_is_a_miss(memcached: PrivateMemcached) -> None:
    db = Db()
    cache = TieredCache(MemcachedTier(memcached.address), None,
                        prefix=f"swr10{time.monotonic_ns()}")
    kc = cache.key_class("row", db.load, ttl=300, soft_ttl=60)
    now = time.time()
    with _core.Client(memcached.address) as c:
        for i, body in ((1, bytes((MAGIC, 1)) + b"\xc1"), (2, b"junk")):  # msgpack's unused byte
            c.set(cache.key_for(kc, i), Stamp(now + 60, now + 300).pack(body), flags=1,
                  exptime=300)
    assert cache.get_many(kc, [1, 2]) == {1: "v1 of 1", 2: "v1 of 2"}
    assert cache.events.corrupt >= 2 and db.calls == [[1, 2]]  # (the lease get reads it too)


def test_a_stale_value_the_loader_no_longer_knows_is_gone(memcached: PrivateMemcached) -> None:
    """Its reload finds nothing: not found (the default), deleted from memcached, and the
    loader is not asked again for it in the same call."""
    db = Db()
    (a, ka), (b, kb) = _two(memcached.address, db, f"swr11{time.monotonic_ns()}", l1=None)
    assert a.get_many(ka, [1, 2]) == {1: "v1 of 1", 2: "v1 of 2"}
    del db.rows[1]
    time.sleep(PAST_SOFT)
    assert b.get(kb, 1, "none") == "none" and db.calls[1:] == [[1]]
    with _core.Client(memcached.address) as c:
        assert c.get_multi([b.key_for(kb, 1)]) == {}
    assert a.get(ka, 1, "none") == "none" and db.calls[2:] == [[1]]  # a miss: loaded again


def test_the_asyncio_cache_reloads_a_stale_value_too(memcached: PrivateMemcached) -> None:
    """AsyncTieredCache reads memcached from the loop for most classes (its native path); a
    class with a soft TTL is read in a worker, where a stale value is claimed and reloaded."""
    db = Db()
    (a, ka), _ = _two(memcached.address, db, f"swr-aio{time.monotonic_ns()}")
    acache = AsyncTieredCache(a)

    async def reads() -> list[Any]:
        try:
            first = await acache.get(ka, 1)
            db.rows[1] = "v2 of 1"
            await asyncio.sleep(PAST_SOFT)
            return [first, await acache.get(ka, 1), await acache.get(ka, 1)]
        finally:
            await acache.close()

    assert asyncio.run(reads()) == ["v1 of 1", "v2 of 1", "v2 of 1"]
    assert len(db.calls) == 2 and a.events.revalidations == 1, (db.calls, a.events)
