"""``TieredCache`` against a real memcached and a real SQLite store: each tier in turn, loader
misses, no memcached at all, the multi-get read path and the inlined L1 hit path."""

from __future__ import annotations

import time

from tiered_helpers import CountingTier, Store, make

from cachelab import _core
from cachelab.servers import PrivateMemcached
from cachelab.tiered import LRUMemory, TieredCache
from cachelab.tiered.codecs import MAGIC


def test_l3_fill_then_l2_then_l1(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, tier = make(memcached.address, store, l1=LRUMemory(max_items=10))
    assert cache.get(kc, 7)["body"].startswith("body of 7")  # L3, stored in L2 and L1
    assert store.loaded_keys == 1
    raw = _core.Client(memcached.address).get(cache.key_for(kc, 7))
    assert raw is not None and raw[0] == MAGIC
    gets_before = len(tier.multigets)
    assert cache.get(kc, 7)["n"] == 7  # L1: no loader, no memcached
    assert len(tier.multigets) == gets_before and store.loaded_keys == 1
    assert cache.stats()["l1"]["hits"] == 1

    other, okc, otier = make(memcached.address, store, prefix=cache.prefix)  # no L1
    assert other.get(okc, 7)["n"] == 7  # L2
    assert store.loaded_keys == 1 and otier.multigets == [1]
    assert other.stats()["l2"]["hits"] == 1


def test_loader_misses_are_not_cached(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10))
    assert cache.get(kc, "absent", default="none") == "none"
    store.write("absent", "now here")
    assert cache.get(kc, "absent")["body"] == "now here"


def test_without_memcached(store: Store) -> None:
    cache = TieredCache(None, LRUMemory(max_items=5))
    kc = cache.key_class("item", store.load)
    assert cache.get(kc, 1)["n"] == 1 and cache.get(kc, 1)["n"] == 1
    assert store.calls == [[1]]


def test_a_multi_get_of_mixed_values(memcached: PrivateMemcached, store: Store) -> None:
    """Plain, compressed, corrupt, foreign, placeholder and missing values in one multi-get:
    each read right, the bad ones counted and loaded again."""
    cache = TieredCache(CountingTier(memcached.address), LRUMemory(max_items=100))
    kc = cache.key_class("mixed", store.load, compression="zlib", threshold=200)
    for i in range(8):
        cache.put(kc, i, {"id": str(i), "body": "x" * (20 if i % 2 else 400), "n": i})
    with _core.Client(memcached.address) as c:
        c.set(cache.key_for(kc, 2), bytes((MAGIC, 1)) + b"\xc1")  # msgpack never uses 0xc1
        c.set(cache.key_for(kc, 3), b"foreign")
        c.set(cache.key_for(kc, 4), b"")  # a lease placeholder
        c.delete(cache.key_for(kc, 5))
    cache.l1.clear()  # type: ignore[union-attr]
    got = cache.get_many(kc, range(8))
    assert list(got) == list(range(8))  # in the order asked
    for i in (0, 1, 6, 7):
        assert got[i] == {"id": str(i), "body": "x" * (20 if i % 2 else 400), "n": i}
    for i in (2, 3, 4, 5):
        assert got[i]["body"].startswith(f"body of {i}")  # from the store
    # 4 looks like a fill in progress (an empty value): loaded on its own after lease_wait
    assert store.calls == [[2, 3, 5], [4]]
    st = cache.stats()
    # 2 and 3 are refused twice: in the multi-get, then in the lease get before loading
    assert st["events"]["corrupt"] == 4 and st["l2"]["hits"] == 4 and st["l2"]["misses"] == 4
    assert cache.l1.items == 8  # type: ignore[union-attr]
    assert cache.get_many(kc, range(8)) == got and len(store.calls) == 2  # all from L1


def test_the_l1_hit_path_keeps_ttl_versions_and_recency(
    memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, tier = make(memcached.address, store, l1=LRUMemory(max_items=2, ttl=60))
    cache.get(kc, 1)
    cache.get(kc, 2)
    assert cache.get(kc, 1)["n"] == 1  # an entry with a TTL: through LRUMemory.get
    cache.get(kc, 3)  # evicts 2, the least recently used
    assert cache.l1.contains(("item", 1)) and not cache.l1.contains(("item", 2))  # type: ignore[union-attr]
    assert cache.stats()["l1"]["hits"] == 1

    plain, pkc, _ = make(memcached.address, store, l1=LRUMemory(max_items=2),
                         prefix=cache.prefix)
    plain.get(pkc, 1)
    plain.get(pkc, 2)
    assert plain.get(pkc, 1)["n"] == 1  # the inlined hit
    plain.get(pkc, 3)
    assert plain.l1.contains(("item", 1)) and not plain.l1.contains(("item", 2))  # type: ignore[union-attr]
    assert plain.stats()["l1"]["hits"] == 1
    plain.l1 = None  # the hit path follows the attribute
    before = len(store.calls)
    assert plain.get(pkc, 1)["n"] == 1 and plain.stats()["l1"]["hits"] == 1
    assert len(store.calls) == before  # from memcached


def test_a_put_held_up_after_its_set_does_not_outlive_a_later_put_elsewhere(
    memcached: PrivateMemcached, store: Store
) -> None:
    """B's put sets v1 in memcached, then its thread is held up (here 1.2 s, beside a CPU hog
    a scheduler's doing) while A's put of v2 lands and returns. B's L1 holds v1 for its ttl
    counted from B's put's *start*, so no read in B serves v1 later than A's write + ttl. (With
    the ttl counted from when v1 entered L1, a history over Redis at load 10 read it 0.3 s
    past the 1 s bound.)"""
    ttl = 1.0
    a, ka, _ = make(memcached.address, store, l1=LRUMemory(max_items=10, ttl=ttl))
    b, kb, tier = make(memcached.address, store, l1=LRUMemory(max_items=10, ttl=ttl),
                       prefix=a.prefix)
    held = 1.2
    real_set = tier.set

    def set_then_held(*args: object, **kw: object) -> bool:
        done = real_set(*args, **kw)  # type: ignore[arg-type]
        a.put(ka, 1, {"id": 1, "v": 2})  # A's later put lands and returns meanwhile
        wrote[0] = time.monotonic()
        time.sleep(held)
        return done

    wrote = [0.0]
    tier.set = set_then_held  # type: ignore[method-assign]
    b.put(kb, 1, {"id": 1, "v": 1})
    tier.set = real_set  # type: ignore[method-assign]
    assert time.monotonic() - wrote[0] >= held
    time.sleep(max(0.0, wrote[0] + ttl + 0.05 - time.monotonic()))
    assert b.get(kb, 1) == {"id": 1, "v": 2}  # v1 left B's L1 within A's write + ttl
    a.invalidate(ka, 1)
