"""How values are stored: codecs and compressors round trip, the header and client flags on
the server, foreign and pickled values refused."""

from __future__ import annotations

from typing import Any

import pytest
from tiered_helpers import Store, make

from cachelab import _core
from cachelab.errors import UsageError
from cachelab.servers import PrivateMemcached
from cachelab.tiered import MemcachedTier, TieredCache, ValueFormat
from cachelab.tiered.codecs import MAGIC, CorruptValue

SMALL = {"id": 1, "tags": ["a", "b"], "score": 0.5, "ok": True, "none": None}
LARGE = {"text": "lorem ipsum dolor " * 400, "list": list(range(300))}


@pytest.mark.parametrize("codec", ["msgpack", "orjson", "pickle"])
@pytest.mark.parametrize("compression", ["none", "zlib", "zstd", "lz4"])
@pytest.mark.parametrize("obj", [SMALL, LARGE], ids=["small", "large"])
def test_codec_round_trips(codec: str, compression: str, obj: Any) -> None:
    fmt = ValueFormat(codec, compression, threshold=1024)
    enc = fmt.encode(obj)
    assert enc.data[0] == MAGIC and enc.data[1] == enc.flags
    compressed = enc.flags >> 4
    assert compressed == (0 if compression == "none" or obj is SMALL else enc.flags >> 4)
    if compression != "none" and obj is LARGE:
        assert compressed != 0 and len(enc.data) < enc.plain_size
    assert fmt.decode(enc.data) == obj


def test_raw_codec_and_flags_on_the_server(memcached: PrivateMemcached, store: Store) -> None:
    cache = TieredCache(MemcachedTier(memcached.address))
    blobs = cache.key_class("blob", lambda ids: {i: b"\x00\r\n" * 2000 for i in ids},
                            codec="raw", compression="zstd", threshold=100)
    assert cache.get(blobs, "b") == b"\x00\r\n" * 2000
    status, flags, value = _core.Client(memcached.address).meta_get(
        cache.key_for(blobs, "b"), "v f")
    assert status == "VA" and value is not None and len(value) < 6000
    assert f"f{value[1]}" in flags.split() and value[1] == (2 << 4 | 0)  # zstd, raw


def test_foreign_and_pickled_values_are_refused() -> None:
    with pytest.raises(CorruptValue):
        ValueFormat("msgpack").decode(b"plain bytes someone else wrote")
    pickled = ValueFormat("pickle").encode({"a": 1}).data
    with pytest.raises(CorruptValue, match="pickle"):
        ValueFormat("msgpack").decode(pickled)
    with pytest.raises(UsageError):
        ValueFormat("yaml")
    with pytest.raises(UsageError):
        ValueFormat("raw").encode({"not": "bytes"})


def test_a_foreign_value_under_our_key_reads_as_a_miss(
    memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, _ = make(memcached.address, store)
    _core.Client(memcached.address).set(cache.key_for(kc, 5), b"not ours")
    assert cache.get(kc, 5)["n"] == 5
    assert cache.stats()["events"]["corrupt"] >= 1
    loads = store.loaded_keys
    fresh, fkc, _ = make(memcached.address, store, prefix=cache.prefix)
    assert fresh.get(fkc, 5)["n"] == 5 and store.loaded_keys == loads  # overwritten with ours
