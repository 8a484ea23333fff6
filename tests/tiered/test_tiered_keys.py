"""Keys: hostile idents are encoded, never sent; hostile prefixes and names are rejected."""

from __future__ import annotations

import pytest
from tiered_helpers import Store

from cachelab import _core
from cachelab.errors import UsageError
from cachelab.servers import PrivateMemcached
from cachelab.tiered import MemcachedTier, TieredCache

HOSTILE = [
    "a b", "x\r\nflush_all", "get other", "\x00", "é", "k" * 300, b"\xff\xfe bytes",
    "#deadbeef", "", "tab\there",
]


def test_hostile_idents_are_encoded_not_sent(memcached: PrivateMemcached, store: Store) -> None:
    cache = TieredCache(MemcachedTier(memcached.address))
    kc = cache.key_class("h", lambda ids: {i: {"i": repr(i)} for i in ids})
    keys = set()
    canary = cache.key_class("canary", store.load)
    cache.get(canary, 1)
    for ident in HOSTILE:
        key = cache.key_for(kc, ident)
        _core.validate_key(key)
        assert len(key) <= 250 and not any(c.isspace() for c in key)
        keys.add(key)
        assert cache.get(kc, ident) == {"i": repr(ident)}
    assert len(keys) == len(HOSTILE)  # distinct idents, distinct keys
    loads = store.loaded_keys
    other = TieredCache(MemcachedTier(memcached.address), prefix=cache.prefix)
    assert other.get(other.key_class("canary", store.load), 1)["n"] == 1
    assert store.loaded_keys == loads  # nothing was flushed or overwritten


@pytest.mark.parametrize("prefix", ["has space", "x\r\n", "", "p" * 101])
def test_hostile_prefixes_and_names_are_rejected(prefix: str) -> None:
    with pytest.raises(UsageError):
        TieredCache(None, prefix=prefix)
    cache = TieredCache(None)
    with pytest.raises(UsageError):
        cache.key_class(prefix or "a b", lambda ids: {})
