"""``cachelab.tiered``: a read-through cache — in-process L1, memcached L2, your loader as L3 —
with request-scoped prefetch, per-class codecs and compression, stampede protection (single
flight and memcached leases), invalidation, a circuit breaker, and per-tier stats.

See ``docs/tiered.md`` and :mod:`cachelab.tiered.cache`.
"""

from __future__ import annotations

from cachelab.tiered.backends import Lease, MemcachedTier, PymemcacheTier, Tier
from cachelab.tiered.breaker import CircuitBreaker
from cachelab.tiered.cache import KeyClass, Loader, RequestScope, TieredCache
from cachelab.tiered.codecs import CODECS, COMPRESSORS, CorruptValue, ValueFormat
from cachelab.tiered.memory import MISS, FixedMemory, LRUMemory, Memory
from cachelab.tiered.stats import BreakerStats, TierStats

__all__ = [
    "CODECS",
    "COMPRESSORS",
    "MISS",
    "BreakerStats",
    "CircuitBreaker",
    "CorruptValue",
    "FixedMemory",
    "KeyClass",
    "LRUMemory",
    "Lease",
    "Loader",
    "MemcachedTier",
    "Memory",
    "PymemcacheTier",
    "RequestScope",
    "Tier",
    "TieredCache",
    "TierStats",
    "ValueFormat",
]
