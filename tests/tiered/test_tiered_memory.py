"""L1: ``LRUMemory`` bounds and TTL, ``FixedMemory`` pins."""

from __future__ import annotations

import time

from tiered_helpers import Store, make

from cachelab.servers import PrivateMemcached
from cachelab.tiered import FixedMemory, LRUMemory


def test_lru_memory_is_bounded_by_bytes_and_items() -> None:
    m = LRUMemory(max_bytes=100)
    for i in range(5):
        m.put(("c", i), i, 30)
    assert m.items == 3 and m.bytes == 90
    assert m.contains(("c", 4)) and not m.contains(("c", 0)) and not m.contains(("c", 1))
    m.put(("c", "big"), "x", 101)  # heavier than the whole budget: not admitted
    assert not m.contains(("c", "big"))
    m2 = LRUMemory(max_items=2)
    m2.put(("c", 1), 1, 1)
    m2.put(("c", 2), 2, 1)
    assert m2.contains(("c", 1))  # 1 becomes the most recent
    m2.put(("c", 3), 3, 1)
    assert m2.contains(("c", 1)) and not m2.contains(("c", 2))


def test_fixed_memory_holds_only_its_pins(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, tier = make(memcached.address, store, l1=FixedMemory.from_keys("item", [1, 2]))
    for i in (1, 2, 3):
        cache.get(kc, i)
    calls = len(tier.multigets)
    cache.get(kc, 1)
    cache.get(kc, 2)
    assert len(tier.multigets) == calls  # pinned: in process
    cache.get(kc, 3)
    assert len(tier.multigets) == calls + 1  # not pinned: memcached again


def test_l1_ttl_bounds_staleness(store: Store) -> None:
    m = LRUMemory(max_items=10, ttl=1e-9)
    m.put(("c", 1), "v", 1)
    time.sleep(0.001)  # past the (nanosecond) TTL; not a timing assertion
    assert not m.contains(("c", 1))
