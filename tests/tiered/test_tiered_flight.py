"""Stampedes: a key missed at once by two processes (leases) or two threads (single flight) is
loaded once."""

from __future__ import annotations

import threading
from typing import Any

from tiered_helpers import Store, make, wait_for

from cachelab.servers import PrivateMemcached


def test_two_processes_fill_a_key_once_with_leases(
    memcached: PrivateMemcached, store: Store
) -> None:
    """Two caches (as two processes would have) miss the same key at once: the lease winner
    loads it, the other waits for the winner's value instead of loading it again."""
    a, akc, _ = make(memcached.address, store, lease_wait=10.0)
    b, bkc, _ = make(memcached.address, store, prefix=a.prefix, lease_wait=10.0)
    loading, release = threading.Event(), threading.Event()

    def slow_load(idents: list[Any]) -> dict[Any, Any]:
        loading.set()
        release.wait(10)
        return store.load(idents)

    a._classes["item"] = akc = a._classes["item"].__class__(
        "item", slow_load, akc.format, akc.ttl, akc.l1, akc.namespace)
    got: dict[str, Any] = {}
    ta = threading.Thread(target=lambda: got.__setitem__("a", a.get(akc, 9)))
    ta.start()
    assert loading.wait(10)
    tb = threading.Thread(target=lambda: got.__setitem__("b", b.get(bkc, 9)))
    tb.start()
    wait_for(lambda: b.events.lease_waits == 1, "the second filler to see the lease")
    release.set()
    ta.join(10)
    tb.join(10)
    assert got["a"] == got["b"] and got["a"]["n"] == 9
    assert store.calls == [[9]]  # loaded once, by the winner
    assert a.events.lease_wins == 1 and b.events.lease_wins == 0
    assert b.events.lease_timeouts == 0


def test_threads_fill_a_key_once_with_single_flight(
    memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, _ = make(memcached.address, store)
    loading, release = threading.Event(), threading.Event()
    store.before_return = lambda: (loading.set(), release.wait(10))
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(kc, 3)))
               for _ in range(2)]
    threads[0].start()
    assert loading.wait(10)
    threads[1].start()
    wait_for(lambda: cache.events.singleflight_waits == 1, "the second thread to wait")
    release.set()
    for t in threads:
        t.join(10)
    assert [r["n"] for r in results] == [3, 3]
    assert store.calls == [[3]]
