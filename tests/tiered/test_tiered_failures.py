"""Failure and recovery: memcached stopped and back, a hung server, a pending invalidation;
the circuit breaker in front of L2."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from tiered_helpers import Store, free_port, make, memcached_on, stop, wait_for

from cachelab import _core
from cachelab.servers import PrivateMemcached
from cachelab.tiered import CircuitBreaker, LRUMemory, MemcachedTier, TieredCache
from faultproxy import FaultProxy

#: Seconds allowed over a stated bound on a loaded 2-core machine.
SLACK = 1.0


class ManualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_memcached_stopped_mid_test_then_back(store: Store) -> None:
    port = free_port()
    clock = ManualClock()
    address = f"127.0.0.1:{port}"
    with memcached_on(port):
        cache, kc, _ = make(address, store, breaker=CircuitBreaker(2, 5.0, clock=clock))
        assert cache.get(kc, 1)["n"] == 1
    # stopped: every read falls back to the loader; the breaker opens after 2 failures
    for i in (2, 3, 4, 5):
        assert cache.get(kc, i)["n"] == i
    s = cache.stats()
    assert s["breaker"] == "open" and s["events"]["opened"] == 1
    assert s["events"]["fallbacks"] >= 2 and s["events"]["skipped"] >= 2
    assert s["l2"]["errors"] >= 2
    with memcached_on(port):
        assert cache.get(kc, 6)["n"] == 6  # still open: skipped, not tried
        assert cache.stats()["breaker"] == "open"
        clock.t += 5.0  # half-open: the next call is a trial
        assert cache.get(kc, 7)["n"] == 7
        assert cache.stats()["breaker"] == "closed"
        loads = store.loaded_keys
        other, okc, _ = make(address, store, prefix=cache.prefix)
        assert other.get(okc, 7)["n"] == 7 and store.loaded_keys == loads  # stored again


def test_hung_server_falls_back_within_the_timeout(
    fake_server: Callable[[str], Any], store: Store
) -> None:
    fake = fake_server("silent")
    cache = TieredCache(MemcachedTier(fake.address, timeout=0.05), None,
                        breaker=CircuitBreaker(1, 60.0))
    kc = cache.key_class("item", store.load)
    assert cache.get(kc, 1)["n"] == 1  # the timeout, then the loader
    assert cache.get(kc, 2)["n"] == 2  # breaker open: straight to the loader
    s = cache.stats()
    assert s["events"]["fallbacks"] == 2 and s["events"]["skipped"] == 1


def test_pending_invalidation_survives_a_hang(
    fresh_memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, _ = make(fresh_memcached.address, store, l1=LRUMemory(max_items=10),
                        breaker=CircuitBreaker(1, 0.01))
    cache.l2.timeout = 0.05  # type: ignore[union-attr]
    assert cache.get(kc, 1)["body"].startswith("body of 1")
    store.write(1, "new body", 1)
    stop(fresh_memcached.pid or 0)
    try:
        cache.invalidate(kc, 1)  # cannot reach memcached: kept pending
        assert cache.stats()["events"]["pending_invalidations"] == 1
    finally:
        os.kill(fresh_memcached.pid or 0, signal.SIGCONT)
    wait_for(lambda: cache.breaker.state != "open", "the breaker to allow a trial")
    assert cache.get(kc, 1)["body"] == "new body"
    # the delete that followed the failure is confirmed by a second one (lanes.Lane.flush)
    wait_for(lambda: cache.stats()["events"]["pending_invalidations"] == 0, "the confirmation")
    other, okc, _ = make(fresh_memcached.address, store, prefix=cache.prefix)
    assert other.get(okc, 1)["body"] == "new body"


def test_a_set_run_late_by_a_slow_server_is_deleted_again(
    memcached: PrivateMemcached, store: Store
) -> None:
    """A put whose set times out on a server that is only slow queues the key's delete; the
    set may still run after that delete went out, and after another process's newer put:
    memcached would serve the older value until the class TTL. A second delete follows
    ``lost_request_s`` after the loss, with no call from the cache."""
    with FaultProxy(memcached.address) as proxy:
        # (the breaker's retry after 0.2 s: the owed delete goes out before the held set)
        cache = TieredCache(MemcachedTier(proxy.address, timeout=0.25, connect_timeout=0.25),
                            None, prefix=f"late-set{time.monotonic_ns()}",
                            breaker=CircuitBreaker(3, 0.2))
        kc = cache.key_class("item", store.load)
        other = TieredCache(MemcachedTier(memcached.address), None, prefix=cache.prefix)
        okc = other.key_class("item", store.load)
        assert cache.get(kc, 1)["n"] == 1  # connected
        key = cache.key_for(kc, 7)
        settle = cache.staleness()["lost_request_s"]
        assert settle >= 2 * 0.5  # two request bounds at least: the hold below is one
        proxy.hold_next(key.encode(), settle / 2)
        lost = time.monotonic()
        cache.put(kc, 7, {"n": "old"})  # the set times out; its key's delete is owed
        assert cache.l2_stats.errors == 1 and cache.events.pending_invalidations == 1
        wait_for(lambda: cache.events.pending_invalidations == 0, "the owed delete")
        other.put(okc, 7, {"n": "new"})  # another process's newer write lands first
        with _core.Client(memcached.address, timeout=2.0) as raw:
            newer = raw.get(key)
            wait_for(lambda: raw.get(key) != newer, "the late set")  # the older value lands
            assert other.get(okc, 7) == {"n": "old"}  # served stale ...
            deadline = lost + settle + SLACK
            while raw.get(key) is not None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert raw.get(key) is None, f"older value still there {settle} + {SLACK} s after"
        assert other.get(okc, 7) == store.load([7])[7]  # ... until the second delete
        cache.close()
        other.close()
