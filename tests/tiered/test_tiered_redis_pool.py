"""A client-side pool of Redis servers as L2 (``RedisPool``: ``MemcachedPool``'s routing,
lanes and breakers, each member a ``RedisTier``), on two private redis-servers (the ``pair``
fixture): keys and their lease keys land on the member the distribution picks (asked of each
member directly), multi-key calls split per member, one member stopped: its keys from the
loader, the other still served, its owed deletes replayed once it answers, and the history
checker's puts and invalidates, and its outage scenario, over the pool. Every test deletes
what it wrote (never a flush)."""

from __future__ import annotations

import os
import signal
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from tiered_helpers import Store, stop, wait_for
from tiered_history import run_history, run_outage

from cachelab import pool as cpool
from cachelab.errors import UsageError
from cachelab.tiered import CircuitBreaker, LRUMemory, MemcachedPool, RedisPool, TieredCache
from cachelab.tiered.redis import LEASE_SUFFIX
from privateredis import PrivateRedis


@pytest.fixture
def prefix(request: pytest.FixtureRequest, pair: list[PrivateRedis]) -> Iterator[str]:
    """A prefix of this test's own; every key under it is deleted afterwards, on each member."""
    p = f"r{os.getpid()}-{request.node.name[:24]}-{zlib.crc32(request.node.name.encode()):x}"
    yield p
    for server in pair:
        c = server.client()
        keys = list(c.scan_iter(match=f"{p}*", count=1000))
        if keys:
            c.unlink(*keys)
        c.close()


def _addresses(pair: list[PrivateRedis]) -> list[str]:
    return [s.address for s in pair]


def test_keys_and_their_leases_land_on_the_member_the_distribution_picks(
    pair: list[PrivateRedis], prefix: str
) -> None:
    pool = RedisPool(_addresses(pair), timeout=1.0, connect_timeout=1.0)
    ketama = cpool.distribution("ketama", pool.servers)
    keys = [f"{prefix}:{i}" for i in range(40)]
    for k in keys:
        assert pool.set(k, k.encode(), 0, 60)
    clients = [s.client() for s in pair]
    for k in keys:
        home = ketama.server_for(k)
        assert pool.member_of(k) == home
        assert clients[home].get(k) == k.encode() and clients[1 - home].get(k) is None
    assert {pool.member_of(k) for k in keys} == {0, 1}
    values, found, _, _ = pool.get_list([*keys, f"{prefix}:absent"])
    assert found == 40 and values[:40] == [k.encode() for k in keys]
    k = keys[0]
    lease = pool.lease_get(f"{k}x", 5)
    assert lease.win
    home = pool.member_of(f"{k}x")
    assert clients[home].get(f"{k}x" + LEASE_SUFFIX) is not None
    assert clients[1 - home].get(f"{k}x" + LEASE_SUFFIX) is None
    assert pool.lease_set(f"{k}x", b"filled", 0, 60, lease.cas)
    pool.delete_many([*keys, f"{k}x"])
    assert all(c.exists(*keys, f"{k}x") == 0 for c in clients)
    for c in clients:
        c.close()
    pool.close()


def test_the_stated_bound_is_memcached_pools(pair: list[PrivateRedis]) -> None:
    pool = RedisPool(_addresses(pair), timeout=0.1, connect_timeout=0.1, password="p w@/",
                     db=1)
    assert "p w@/" not in repr(pool) and "p w@/" not in repr(pool.members[0])
    bound = pool.request_bound_s()
    assert bound == pool.members[0].request_bound_s() == 0.4  # connect, AUTH, SELECT, request
    stated = TieredCache(pool, LRUMemory(max_items=10), prefix="x",
                         breaker=CircuitBreaker(3, 0.5)).staleness()
    assert stated["owed_delivery_s"] == round(0.5 + 3 * 2 * bound, 3)
    assert "Redis" in stated["after_outage"]
    mc = TieredCache(MemcachedPool(_addresses(pair), timeout=0.1, connect_timeout=0.1),
                     LRUMemory(max_items=10), prefix="x", breaker=CircuitBreaker(3, 0.5))
    assert mc.staleness()["owed_delivery_s"] == round(0.5 + 3 * 2 * 0.2, 3)  # same formula
    with pytest.raises(UsageError, match="db"):
        RedisPool(_addresses(pair), db=-1)
    pool.close()


def test_one_stopped_member_sends_only_its_keys_to_the_loader(
    pair: list[PrivateRedis], prefix: str, store: Store
) -> None:
    pool = RedisPool(_addresses(pair), timeout=0.1, connect_timeout=0.1)
    cache = TieredCache(pool, None, prefix=prefix, breaker=CircuitBreaker(2, 0.3))
    kc = cache.key_class("item", store.load)
    idents = list(range(30))
    home = {i: pool.member_of(cache.key_for(kc, i)) for i in idents}
    assert set(home.values()) == {0, 1}
    for i in idents:
        cache.get(kc, i)
    pid = pair[0].pid
    assert pid is not None
    stop(pid)
    store.calls.clear()
    try:
        for i in idents * 2:
            assert cache.get(kc, i)["body"].startswith(f"body of {i}")
        loaded = [i for call in store.calls for i in call]
        assert loaded and all(home[i] == 0 for i in loaded)  # member 1 still served
        members = cache.stats()["pool"]["members"]
        assert members[0]["state"] != "closed" and members[1]["state"] == "closed"
        store.write(next(i for i in idents if home[i] == 0), "v2", 1)
        written = next(i for i in idents if home[i] == 0)
        cache.put(kc, written, store.load([written])[written])  # queued: its member is down
        assert cache.events.pending_invalidations >= 1
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: cache.events.pending_invalidations == 0, "the owed deletes")
    assert cache.get(kc, written)["body"] == "v2"
    cache.close()
    pool.close()


def test_history_over_a_redis_pool_has_no_read_staler_than_the_stated_bound(
    pair: list[PrivateRedis], tmp_path: Path, prefix: str
) -> None:
    pool = RedisPool(_addresses(pair))
    bound = TieredCache(pool, LRUMemory(max_items=10), prefix="x").staleness()["cross_process_s"]
    pool.close()
    assert bound is not None and bound > 0
    h = run_history(_addresses(pair), tmp_path / "db.sqlite", prefix, tmp_path, procs=2,
                    threads=3, seconds=2.0, redis_pool=True)
    h.judge(bound)


@pytest.mark.slow
def test_history_over_a_stopped_member_is_bounded_after_it_answers_again(
    pair: list[PrivateRedis], tmp_path: Path, prefix: str
) -> None:
    """The history checker's ``pool`` scenario over Redis: the member holding keys 0 and 1
    stopped while the writer (that member's breaker open) puts one and invalidates the other
    and then stays idle: no read of an older value later than the stated after-outage bound
    after it answers again."""
    pids = [s.pid for s in pair]
    assert None not in pids
    out = run_outage("pool", _addresses(pair), pids, tmp_path, prefix,  # type: ignore[arg-type]
                     redis_pool=True)
    out.judge("pool")
