"""Per-tier counters and latency histograms of a :class:`cachelab.tiered.TieredCache`.

L1 counts hits and misses only (timing every in-process hit would cost as much as the hit);
L2 and L3 also record each call's latency in nanoseconds, summarised through the HdrHistogram
of the Rust core (``cachelab._core.hist_from_values``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import cachelab._core as _core

__all__ = ["BreakerStats", "TierStats"]

_SUMMARY_PERCENTILES = (50.0, 90.0, 99.0, 99.9)
#: Latency samples kept per tier; later ones are counted but not recorded.
MAX_SAMPLES = 1_000_000


@dataclass
class TierStats:
    """What one tier did. ``calls`` are round trips (L2) or loader calls (L3); ``keys`` the
    keys they asked for; ``bytes_read`` / ``bytes_written`` stored (encoded) value bytes."""

    name: str
    hits: int = 0
    misses: int = 0
    calls: int = 0
    keys: int = 0
    errors: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    latencies_ns: list[int] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, ns: int) -> None:
        if len(self.latencies_ns) < MAX_SAMPLES:
            self.latencies_ns.append(ns)

    def add(self, **counts: int) -> None:
        with self._lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)

    def histogram(self) -> str | None:
        """The recorded latencies as an HdrHistogram (V2 compressed, base64), or None."""
        return _core.hist_from_values(list(self.latencies_ns)) if self.latencies_ns else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "hits": self.hits, "misses": self.misses, "calls": self.calls, "keys": self.keys,
            "errors": self.errors, "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
        }
        looked = self.hits + self.misses
        d["hit_ratio"] = self.hits / looked if looked else None
        h = self.histogram()
        if h is not None:
            values = _core.hist_percentiles(h, list(_SUMMARY_PERCENTILES))
            d["latency_ns"] = {format(p, "g"): v for p, v in zip(_SUMMARY_PERCENTILES, values)}
            d["histogram"] = h
        return d

    def reset(self) -> None:
        with self._lock:
            self.hits = self.misses = self.calls = self.keys = self.errors = 0
            self.bytes_read = self.bytes_written = 0
            self.latencies_ns = []


@dataclass
class BreakerStats:
    """Fallbacks: L2 calls skipped while the breaker was open, loader reads that replaced a
    failed L2 read, lease outcomes, values refused as corrupt, filled values not stored
    (over the item size limit, or not encodable), stale-while-revalidate's stale hits and
    reloads. Writes: ``write_errors`` (a set or delete that failed), ``writes_skipped`` (a put
    or invalidate not sent while the breaker was open), ``deletes_flushed`` (queued deletes
    that reached memcached)."""

    opened: int = 0
    skipped: int = 0
    fallbacks: int = 0
    lease_wins: int = 0
    lease_waits: int = 0
    lease_lost: int = 0
    lease_timeouts: int = 0
    lease_released: int = 0
    singleflight_waits: int = 0
    corrupt: int = 0
    pending_invalidations: int = 0
    write_errors: int = 0
    writes_skipped: int = 0
    deletes_flushed: int = 0
    #: Filled values over memcached's item size limit: returned, held by L1, not in memcached.
    oversize: int = 0
    #: Filled values the key class's codec cannot encode: returned, stored in no tier.
    unencodable: int = 0
    #: Stale-while-revalidate (key classes with ``soft_ttl``): stale values returned from
    #: memcached, reloads run by the caller that claimed a stale value, and reloads (or claims)
    #: that failed — the loader raised or memcached did — after which stale is served.
    stale_hits: int = 0
    revalidations: int = 0
    revalidation_errors: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)
