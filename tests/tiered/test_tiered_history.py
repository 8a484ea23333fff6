"""The history checker (tests/tiered/tiered_history.py) over processes × threads with 0.5 ms of
network delay, and the two same-process races it found, made deterministic."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tiered_helpers import Store, make, wait_for
from tiered_history import SLACK, run_history

from cachelab.servers import PrivateMemcached
from cachelab.tiered import LRUMemory, MemcachedTier, TieredCache
from faultproxy import FaultProxy

#: CACHELAB_HISTORY_FULL=1: the issue's full run (4 processes × 8 threads × 30 s).
FULL = os.environ.get("CACHELAB_HISTORY_FULL") == "1"


def test_history_has_no_read_staler_than_the_stated_bound(
    memcached: PrivateMemcached, tmp_path: Path
) -> None:
    stated = TieredCache(MemcachedTier(memcached.address), LRUMemory(max_items=10),
                         prefix="x").staleness()
    bound = stated["cross_process_s"]
    assert bound is not None and bound > 0
    procs, threads, seconds = (4, 8, 30.0) if FULL else (2, 4, 3.0)
    with FaultProxy(memcached.address) as proxy:
        proxy.delay(0.0005)
        h = run_history(proxy.address, memcached.address, f"hist{os.getpid()}", tmp_path,
                        procs=procs, threads=threads, seconds=seconds)
    rep = h.check()
    print(rep.summary(bound + SLACK))
    assert not h.errors
    assert rep.reads > 1000 and rep.writes > 100  # it did run, and raced
    assert not rep.unknown
    assert rep.same_process == []
    assert rep.over(bound + SLACK) == []


def _held_loader(store: Store) -> tuple[threading.Event, threading.Event]:
    """Makes the store's loader stop before returning until ``release`` is set (once)."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        store.before_return = None
        entered.set()
        assert release.wait(5)

    store.before_return = hold
    return entered, release


def test_a_waiter_does_not_use_a_flight_that_predates_an_invalidate(
    memcached: PrivateMemcached, store: Store
) -> None:
    """The leader loads v1 and is held; a write + invalidate returns; a thread that reads
    after it must not get (or keep in L1) the leader's v1."""
    cache, kc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10, ttl=None))
    entered, release = _held_loader(store)
    got: dict[str, object] = {}
    leader = threading.Thread(target=lambda: got.update(leader=cache.get(kc, 5)["body"]))
    leader.start()
    assert entered.wait(5)
    store.write(5, "v2", 5)
    cache.invalidate(kc, 5)  # returned: every read from now on must see v2
    waiter = threading.Thread(target=lambda: got.update(waiter=cache.get(kc, 5)["body"]))
    waiter.start()
    wait_for(lambda: cache.events.singleflight_waits >= 1 or "waiter" in got, "the waiter")
    release.set()
    leader.join(5)
    waiter.join(5)
    assert got["leader"].startswith("body of 5")  # concurrent with the write: either is fine
    assert got["waiter"] == "v2"
    assert cache.get(kc, 5)["body"] == "v2"


def test_a_fill_racing_a_put_is_not_admitted(memcached: PrivateMemcached, store: Store) -> None:
    """A fill reads v1 and is held; a put of v2 returns; the fill must not replace v2 in L1
    (nor in memcached)."""
    cache, kc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10, ttl=None))
    entered, release = _held_loader(store)
    got: dict[str, object] = {}
    reader = threading.Thread(target=lambda: got.update(r=cache.get(kc, 6)["body"]))
    reader.start()
    assert entered.wait(5)
    new = {"id": "6", "body": "v2", "n": 6}
    store.write(6, "v2", 6)
    cache.put(kc, 6, new)
    release.set()
    reader.join(5)
    assert got["r"].startswith("body of 6")
    assert cache.get(kc, 6) == new
    other, okc, _ = make(memcached.address, store, prefix=cache.prefix)
    assert other.get(okc, 6) == new


def test_a_fill_without_a_lease_does_not_overwrite_a_put(
    memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, _ = make(memcached.address, store, leases=False)
    entered, release = _held_loader(store)
    reader = threading.Thread(target=lambda: cache.get(kc, 7))
    reader.start()
    assert entered.wait(5)
    new = {"id": "7", "body": "v2", "n": 7}
    cache.put(kc, 7, new)
    release.set()
    reader.join(5)
    assert cache.get(kc, 7) == new


def test_l1_ttl_counts_from_the_lookup_start(memcached: PrivateMemcached, store: Store) -> None:
    """A fill slower than the ttl is stored already expired: its value was read too long
    ago to be served as current."""
    cache, kc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10, ttl=0.05))
    store.before_return = lambda: __import__("time").sleep(0.1)
    cache.get(kc, 9)
    store.before_return = None
    n = len(store.calls)
    cache.get(kc, 9)
    assert cache.l1_stats.hits == 0
    assert len(store.calls) == n  # from memcached, not the loader


def test_staleness_is_stated(memcached: PrivateMemcached) -> None:
    tier = MemcachedTier(memcached.address)
    assert TieredCache(tier, LRUMemory(max_items=1))._l1.ttl == 1.0  # type: ignore[union-attr]
    s = TieredCache(tier, LRUMemory(max_items=1)).stats()["staleness"]
    assert s["cross_process_s"] == 1.0 and "none" in s["same_process"]
    assert TieredCache(tier, LRUMemory(max_items=1, ttl=None)).staleness()[
        "cross_process_s"] is None
    assert TieredCache(tier, None).staleness()["cross_process_s"] == 0.0
    assert TieredCache(tier, LRUMemory(max_items=1), leases=False).staleness()[
        "cross_process_s"] is None
