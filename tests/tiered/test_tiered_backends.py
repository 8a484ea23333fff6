"""L2 tiers: the multi-get list aligned with the request (Rust client and the ``Tier`` default),
and ``PymemcacheTier`` beside ``MemcachedTier``."""

from __future__ import annotations

from pymemcache.client.base import Client
from tiered_helpers import CountingTier, Store

from cachelab import _core
from cachelab.servers import PrivateMemcached
from cachelab.tiered import MemcachedTier, PymemcacheTier, TieredCache
from cachelab.tiered.codecs import MAGIC


def test_get_multi_list_is_aligned_with_the_request(memcached: PrivateMemcached) -> None:
    head = bytes((MAGIC, 1))
    keys = [f"gml:{n}" for n in range(6)]
    with _core.Client(memcached.address) as c:
        c.set(keys[0], head + b"one")
        c.set(keys[2], b"foreign")
        c.set(keys[3], head)
        c.set(keys[5], b"")
        for k in (keys[1], keys[4]):
            c.delete(k)
        asked = [*keys, keys[0]]  # a repeated key gets its value at both places
        values, found, others, stripped = c.get_multi_list(asked, head)
        assert values == [b"one", None, b"foreign", b"", None, b"", b"one"]
        assert found == 5 and others == [2, 5] and stripped == 2 * len(head + b"one") + 2
        whole = c.get_multi_list(asked)
        assert whole[0] == [head + b"one", None, b"foreign", head, None, b"", head + b"one"]
        assert whole[2] == [0, 2, 3, 5, 6] and whole[3] == 0
    # The Tier default (through get_multi, as a subclass wrapping it sees) answers the same.
    counting = CountingTier(memcached.address)
    assert counting.get_list(keys, head) == MemcachedTier(memcached.address).get_list(keys, head)
    assert counting.multigets == [len(keys)]


def test_pymemcache_tier(memcached: PrivateMemcached, store: Store) -> None:
    host, port = memcached.address.rsplit(":", 1)
    client = Client((host, int(port)), connect_timeout=1, timeout=1)
    cache = TieredCache(PymemcacheTier(client), None)
    kc = cache.key_class("item", store.load, compression="zlib", threshold=10)
    assert cache.get(kc, 3)["n"] == 3
    assert cache.get_many(kc, [3, 4]) == {3: store.load([3])[3], 4: store.load([4])[4]}
    loads = len(store.calls)
    ours = TieredCache(MemcachedTier(memcached.address), None, prefix=cache.prefix)
    assert ours.get(ours.key_class("item", store.load), 4)["n"] == 4
    assert len(store.calls) == loads  # the Rust client reads what pymemcache wrote
    client.close()
