"""Request scope and prefetch: each key once per request, prefetches in one round trip."""

from __future__ import annotations

from tiered_helpers import Store, make

from cachelab import _core
from cachelab.servers import PrivateMemcached
from cachelab.tiered import LRUMemory


def server_stats(address: str) -> dict[str, int]:
    with _core.Client(address) as c:
        s = c.stats()
    return {k: int(s[k]) for k in ("cmd_get", "get_hits", "get_misses")}


def test_request_scope_fetches_each_key_once(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, tier = make(memcached.address, store)  # no L1: only the scope can dedup
    cache.get_many(kc, [1, 2, 3])  # fill memcached
    before = server_stats(memcached.address)
    tier.multigets.clear()
    with cache.request() as req:
        for _ in range(3):
            assert req.get(kc, 1)["n"] == 1
            assert req.get(kc, 2)["n"] == 2
        after = server_stats(memcached.address)
        assert req.get(kc, "nope") is None and req.get(kc, "nope") is None
    assert tier.multigets == [1, 1, 1]  # 1, 2 and "nope", once each
    assert after["get_hits"] - before["get_hits"] == 2
    assert after["cmd_get"] - before["cmd_get"] == 2
    assert store.calls[-1] == ["nope"] and sum(c == ["nope"] for c in store.calls) == 1


def test_prefetch_is_one_round_trip(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, tier = make(memcached.address, store, l1=LRUMemory(max_items=100))
    warm, _, _ = make(memcached.address, store, prefix=cache.prefix)
    warm.get_many(warm._classes["item"], range(20))  # in memcached, not in cache's L1
    cache.get(kc, 0)  # in L1
    tier.multigets.clear()
    before = server_stats(memcached.address)
    with cache.request() as req:
        assert req.prefetch(kc, range(20)) == 19
        got = [req.get(kc, i)["n"] for i in range(20)]
    after = server_stats(memcached.address)
    assert got == list(range(20))
    assert tier.multigets == [19]  # one multi-get of the 19 keys L1 lacked
    assert after["get_hits"] - before["get_hits"] == 19
    assert after["cmd_get"] - before["cmd_get"] == 19


def test_prefetch_tree_walks_to_depth(memcached: PrivateMemcached, store: Store) -> None:
    tree = {0: [1, 2], 1: [3, 4], 2: [5], 3: [6], 4: [], 5: [], 6: []}
    cache, kc, tier = make(memcached.address, store, l1=LRUMemory(max_items=100))
    cache.get(kc, 2)  # already in L1: left out of the multi-get
    tier.multigets.clear()
    with cache.request() as req:
        assert req.prefetch_tree(kc, 0, tree.__getitem__, depth=2) == 5  # 0, 1, 3, 4, 5
        before = len(tier.multigets)
        for i in (0, 1, 2, 3, 4, 5):
            req.get(kc, i)
        assert len(tier.multigets) == before  # all present
        req.get(kc, 6)  # depth 3: not prefetched
    assert tier.multigets[0] == 5 and tier.multigets[-1] == 1
