"""Failure and recovery: memcached stopped and back, a hung server, a pending invalidation;
the circuit breaker in front of L2."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

from tiered_helpers import Store, free_port, make, memcached_on, stop, wait_for

from cachelab.servers import PrivateMemcached
from cachelab.tiered import CircuitBreaker, LRUMemory, MemcachedTier, TieredCache


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
