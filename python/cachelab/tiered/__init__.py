"""``cachelab.tiered``: a read-through cache — in-process L1, memcached L2, your loader as L3 —
with request-scoped prefetch, per-class codecs and compression, stampede protection (single
flight and memcached leases), invalidation, a circuit breaker, and per-tier stats.

See ``docs/tiered.md`` and :mod:`cachelab.tiered.cache`. The modules, from the bottom up:

* :mod:`~cachelab.tiered.memory` — L1, in process (:class:`LRUMemory`, :class:`FixedMemory`);
* :mod:`~cachelab.tiered.backends` — L2, memcached (:class:`MemcachedTier`,
  :class:`PymemcacheTier`);
* :mod:`~cachelab.tiered.redis` — L2 on Redis or Valkey (:class:`RedisTier`, over redis-py:
  ``cachelab[redis]``), and :mod:`~cachelab.tiered.tracking` (:class:`RedisTracking`: other
  processes' L1 told of writes through ``CLIENT TRACKING``);
* :mod:`~cachelab.tiered.pool` — L2 over a memcached pool (:class:`MemcachedPool`: each key on
  the member ``cachelab.pool.distribution`` picks) or a pool of Redis servers
  (:class:`RedisPool`); a Redis Cluster is a :class:`RedisTier` too (``RedisTier.cluster``);
* :mod:`~cachelab.tiered.codecs` — how values are stored (:class:`ValueFormat`);
* :mod:`~cachelab.tiered.breaker`, :mod:`~cachelab.tiered.stats` — the circuit breaker in
  front of L2, and the counters;
* :mod:`~cachelab.tiered.keys` — key classes, memcached keys, namespace versions;
* :mod:`~cachelab.tiered.flight` — stampede protection: single flight and leases;
* :mod:`~cachelab.tiered.swr` — stale-while-revalidate (a key class's ``soft_ttl``);
* :mod:`~cachelab.tiered.lanes` — one memcached server as the cache sees it: its breaker and
  its queue of owed deletes (one per pool member);
* :mod:`~cachelab.tiered.scope` — the request scope (:class:`RequestScope`);
* :mod:`~cachelab.tiered.cache` — :class:`TieredCache`, which composes them;
* :mod:`~cachelab.tiered.decorators` — ``@cache.cached`` and ``@cache.cached_many``;
* :mod:`~cachelab.tiered.aio` — :class:`AsyncTieredCache`, the asyncio API.
"""

from __future__ import annotations

from cachelab.tiered.aio import AsyncTieredCache
from cachelab.tiered.backends import Lease, MemcachedTier, PymemcacheTier, Tier, ValueTooLarge
from cachelab.tiered.breaker import CircuitBreaker
from cachelab.tiered.cache import KeyClass, Loader, RequestScope, TieredCache
from cachelab.tiered.checks import LoaderKeysWarning
from cachelab.tiered.codecs import (
    CODECS,
    COMPRESSORS,
    CorruptValue,
    UnencodableValue,
    ValueFormat,
)
from cachelab.tiered.decorators import AsyncCached, AsyncCachedMany, Cached, CachedMany
from cachelab.tiered.keys import RandomPrefixWarning
from cachelab.tiered.memory import MISS, FixedMemory, LRUMemory, Memory
from cachelab.tiered.pool import MemcachedPool, RedisPool
from cachelab.tiered.redis import RedisTier
from cachelab.tiered.stats import BreakerStats, TierStats
from cachelab.tiered.tracking import RedisTracking

__all__ = [
    "CODECS",
    "COMPRESSORS",
    "MISS",
    "AsyncCached",
    "AsyncCachedMany",
    "AsyncTieredCache",
    "BreakerStats",
    "Cached",
    "CachedMany",
    "CircuitBreaker",
    "CorruptValue",
    "FixedMemory",
    "KeyClass",
    "LRUMemory",
    "Lease",
    "Loader",
    "LoaderKeysWarning",
    "MemcachedPool",
    "MemcachedTier",
    "Memory",
    "PymemcacheTier",
    "RandomPrefixWarning",
    "RedisPool",
    "RedisTier",
    "RedisTracking",
    "RequestScope",
    "Tier",
    "TieredCache",
    "TierStats",
    "UnencodableValue",
    "ValueFormat",
    "ValueTooLarge",
]
