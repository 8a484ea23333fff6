"""Invalidation: no stale read after it, a fill racing it is not stored, versioned namespaces."""

from __future__ import annotations

from tiered_helpers import Store, make

from cachelab.servers import PrivateMemcached
from cachelab.tiered import LRUMemory, MemcachedTier, TieredCache


def test_no_stale_read_after_invalidation(memcached: PrivateMemcached, store: Store) -> None:
    a, akc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10))
    b, bkc, _ = make(memcached.address, store, prefix=a.prefix)
    assert a.get(akc, 4)["body"].startswith("body") and b.get(bkc, 4)["body"].startswith("body")
    store.write(4, "v2", 4)
    a.invalidate(akc, 4)
    assert a.get(akc, 4)["body"] == "v2"
    assert b.get(bkc, 4)["body"] == "v2"


def test_a_fill_racing_an_invalidation_is_not_stored(
    memcached: PrivateMemcached, store: Store
) -> None:
    """The loader reads v1; before it returns, the row changes and is invalidated. The fill
    must not land in memcached or L1 (the lease's CAS set fails), so the next read sees v2."""
    a, akc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10))
    writer, wkc, _ = make(memcached.address, store, prefix=a.prefix)

    def change_and_invalidate() -> None:
        store.before_return = None
        store.write(8, "v2", 8)
        writer.invalidate(wkc, 8)
        a.invalidate(akc, 8)  # the same process would also bump a's epoch

    store.before_return = change_and_invalidate
    assert a.get(akc, 8)["body"].startswith("body of 8")  # the read overlapped the write
    assert a.events.lease_lost == 1
    assert a.get(akc, 8)["body"] == "v2"
    fresh, fkc, _ = make(memcached.address, store, prefix=a.prefix)
    assert fresh.get(fkc, 8)["body"] == "v2"


def test_versioned_namespace(memcached: PrivateMemcached, store: Store) -> None:
    a = TieredCache(MemcachedTier(memcached.address), LRUMemory(max_items=10), ns_refresh=0)
    b = TieredCache(MemcachedTier(memcached.address), None, prefix=a.prefix, ns_refresh=0)
    akc = a.key_class("item", store.load, namespace="catalog")
    bkc = b.key_class("item", store.load, namespace="catalog")
    assert a.get(akc, 1)["n"] == 1 and b.get(bkc, 1)["n"] == 1
    old_key = a.key_for(akc, 1)
    store.write(1, "v2", 1)
    store.write(2, "v2", 2)
    b.invalidate_namespace("catalog")
    assert a.key_for(akc, 1) != old_key
    assert a.get(akc, 1)["body"] == "v2" and b.get(bkc, 1)["body"] == "v2"
