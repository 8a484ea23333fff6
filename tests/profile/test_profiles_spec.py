"""What a profile measures (cachelab.profile.spec): ProfileSpec.check refuses what the engine
would, and the private server's item size fits the largest value."""

from __future__ import annotations

import math
import re

import pytest

import cachelab
from cachelab import _core
from cachelab.errors import UsageError
from cachelab.profile import ProfileSpec, item_size_for, profile
from cachelab.servers import PrivateMemcached

# -- ProfileSpec.check ------------------------------------------------------------------------

BAD_SPECS = [
    ({"protocol": "binary"}, "protocol"),
    ({"samples": 0}, "samples"),
    ({"samples": -5}, "samples"),
    ({"warmup": -1}, "warmup must be a whole number from 0 to 10000000, not -1"),
    ({"concurrency": 0}, "concurrency"),
    ({"concurrency": 1025}, "concurrency"),
    ({"sizes": (), "key_counts": ()}, "nothing to measure"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": -1.0}, "timeout"),
    ({"timeout": 3601}, "timeout"),
    ({"timeout": math.nan}, "timeout"),
    ({"timeout": math.inf}, "timeout"),
    ({"connect_timeout": 0}, "connect-timeout"),
    ({"give_up_after": 0}, "give-up-after"),
]


@pytest.mark.parametrize(("fields", "named"), BAD_SPECS, ids=[str(f) for f, _ in BAD_SPECS])
def test_check_refuses_bad_fields(fields: dict, named: str) -> None:
    with pytest.raises(UsageError, match=re.escape(named)):
        ProfileSpec(**fields).check()


def test_check_accepts_the_defaults_and_quick() -> None:
    ProfileSpec().check()
    quick = ProfileSpec.quick()
    quick.check()
    assert (quick.samples, quick.warmup) == (500, 20)
    assert ProfileSpec.quick(samples=7).samples == 7
    ProfileSpec(sizes=(), key_counts=(1,)).check()  # multi-get only
    ProfileSpec(sizes=(1,), key_counts=()).check()  # get and set only


ENGINE_REFUSES = [
    {"sizes": (0,)},
    {"key_counts": (0,)},
    {"sizes": (2**30 + 1,)},
    {"key_counts": (10_001,)},
]


@pytest.mark.parametrize("fields", ENGINE_REFUSES, ids=[str(f) for f in ENGINE_REFUSES])
def test_check_refuses_what_the_engine_refuses(
    memcached: PrivateMemcached, fields: dict
) -> None:
    """A spec check() lets through must not be refused later by the engine (by then a private
    server may have been started for it, or have failed to start with a misleading error)."""
    spec = ProfileSpec(samples=1, warmup=0, **fields)
    with pytest.raises(UsageError):
        profile(spec, server=memcached.address)  # the engine refuses it...
    with pytest.raises(UsageError):
        spec.check()  # ...so check() must too


# -- the private server's item size ---------------------------------------------------------------

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"sizes": (1, 1000, 1_000_000)}, None),  # the default sizes fit the default 1m
        ({"sizes": (MIB - 4096,)}, None),  # the largest that leaves room for the item header
        ({"sizes": (MIB - 4095,)}, "2m"),
        ({"sizes": (MIB,)}, "2m"),
        ({"sizes": (2 * MIB,)}, "4m"),
        ({"sizes": (3_000_000,)}, "4m"),
        ({"sizes": (1,), "multi_value_size": 2_000_000}, "2m"),  # multi-get values count too
        ({"sizes": (1,), "multi_value_size": 2_000_000, "key_counts": ()}, None),  # unless unused
    ],
)
def test_item_size_for(fields: dict, expected: str | None) -> None:
    assert item_size_for(ProfileSpec(**fields)) == expected


def _store(address: str, size: int) -> bool:
    with _core.Client(address, timeout=5) as c:
        key = f"cachelab-test:item-size:{size}"
        try:
            stored = c.set(key, b"x" * size)
        except cachelab.errors.ServerReplyError:  # SERVER_ERROR object too large for cache
            return False
        got = c.get(key)
        c.delete(key)
        return stored and got is not None and len(got) == size


def test_item_size_for_matches_what_memcached_stores(memcached: PrivateMemcached) -> None:
    # Values item_size_for says fit do fit a default server...
    fits = MIB - 4096
    assert item_size_for(ProfileSpec(sizes=(fits,))) is None
    assert _store(memcached.address, fits)
    # ...and a value it sizes a server for does not fit a default one, but fits that server.
    big = MIB
    item_size = item_size_for(ProfileSpec(sizes=(big,)))
    assert item_size is not None
    assert not _store(memcached.address, big)
    with PrivateMemcached(item_size_max=item_size) as server:
        assert _store(server.address, big)
