"""What a profile measures (:class:`ProfileSpec`) and the private server it needs for that."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from cachelab.capacity import Writes
from cachelab.errors import UsageError
from cachelab.intervals import check_precision
from cachelab.tls import TlsOptions

DEFAULT_SIZES = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
DEFAULT_KEY_COUNTS = (1, 3, 5, 10, 100)
DEFAULT_MULTI_VALUE_SIZE = 1_000
#: The largest value that fits memcached's largest item (-I 1024m) with its header.
MAX_VALUE_SIZE = 2**30 - 4096
MAX_KEY_COUNT = 10_000


@dataclass
class ProfileSpec:
    """What ``profile`` measures. Defaults are the seed experiment's: 10,000 samples each."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    key_counts: tuple[int, ...] = DEFAULT_KEY_COUNTS
    multi_value_size: int = DEFAULT_MULTI_VALUE_SIZE
    samples: int = 10_000
    warmup: int = 200
    concurrency: int = 1
    protocol: str = "text"
    timeout: float = 1.0
    connect_timeout: float = 2.0
    #: Give up when no request has succeeded for this long (the server is gone).
    give_up_after: float = 5.0
    seed: int | None = None
    #: Every key written starts with this; made unique per run when not given.
    prefix: str | None = None
    #: TLS to a memcached started with ``-Z`` (None: plain TCP). The cells and the floor are
    #: all measured over it, and a "TLS cost" table is added (see docs/profile section of
    #: docs/load.md, "TLS").
    tls: TlsOptions | None = None
    #: With ``tls``: the port of a plain (``notls:``) listener of the same server, so the TLS
    #: cost table can set TCP beside TLS; None reports TLS alone.
    plain_port: int | None = None
    #: New connections timed for the TLS cost table.
    tls_cost_connections: int = 200
    #: Run length by precision: each cell is sampled until its p99's 95 % interval has a
    #: relative half-width at or below this (0.05: ±5 %), in batches; ``samples`` is then
    #: the cap per cell. None: every cell takes ``samples``. See docs/profile.md (or the
    #: profile section of docs/load.md), "Run length by precision".
    precision: float | None = None

    @classmethod
    def quick(cls, **overrides: Any) -> ProfileSpec:
        """The same shape, small: 500 samples per cell after 20 warm-up samples."""
        return cls(**{"samples": 500, "warmup": 20, **overrides})

    def check(self) -> None:
        """Raises UsageError naming the first bad field."""
        if self.protocol not in ("text", "meta"):
            raise UsageError(f"protocol must be text or meta, not {self.protocol!r}")
        if self.samples < 1:
            raise UsageError("samples must be at least 1")
        if self.warmup < 0:
            raise UsageError("warm-up must be 0 or more")
        if not 1 <= self.concurrency <= 1024:
            raise UsageError("concurrency must be between 1 and 1024")
        if not self.sizes and not self.key_counts:
            raise UsageError("nothing to measure: give at least one size or key count")
        sizes = [*self.sizes, *([self.multi_value_size] if self.key_counts else [])]
        if any(not 1 <= s <= MAX_VALUE_SIZE for s in sizes):
            raise UsageError(
                f"value sizes must be between 1 byte and {MAX_VALUE_SIZE} bytes "
                "(memcached's 1 GiB item ceiling, less room for the item header)"
            )
        if any(not 1 <= k <= MAX_KEY_COUNT for k in self.key_counts):
            raise UsageError(f"key counts must be between 1 and {MAX_KEY_COUNT}")
        if self.tls is not None:
            if not isinstance(self.tls, TlsOptions):
                raise UsageError("tls must be a TlsOptions (cachelab.tls) or None")
            self.tls.check()
        if self.plain_port is not None and (self.tls is None or
                                            not 1 <= self.plain_port <= 65535):
            raise UsageError("plain-port needs tls, and must be a port from 1 to 65535")
        check_precision(self.precision)
        if not 1 <= self.tls_cost_connections <= 100_000:
            raise UsageError("tls-cost connections must be between 1 and 100000")
        for name in ("timeout", "connect_timeout", "give_up_after"):
            value = getattr(self, name)
            if not 0 < value <= 3600:
                raise UsageError(f"{name.replace('_', '-')} must be between 0 and 3600 seconds")


def new_prefix() -> str:
    """A key prefix unique to this run: ``cachelab:<12 hex digits>``."""
    return f"cachelab:{secrets.token_hex(6)}"


def item_size_mib(spec: ProfileSpec) -> int | None:
    """memcached's ``-I`` (MiB) for a private server when the largest value won't fit the
    default 1 MiB item; None when it does."""
    largest = max([*spec.sizes, spec.multi_value_size if spec.key_counts else 0])
    if largest + 4096 <= 1024 * 1024:
        return None
    mib = 1
    while mib * 1024 * 1024 < largest + 4096:
        mib *= 2
    return min(mib, 1024)


def item_size_for(spec: ProfileSpec) -> str | None:
    """``item_size_mib`` as memcached's ``-I`` argument (e.g. ``"2m"``)."""
    mib = item_size_mib(spec)
    return None if mib is None else f"{mib}m"


def memory_for(spec: ProfileSpec, memory_mb: int) -> int:
    """The private server's ``-m``: at least what was asked, and enough for the largest item
    (memcached refuses an ``-I`` above half its memory) for every connection at once."""
    mib = item_size_mib(spec) or 1
    return max(memory_mb, 2 * mib * (spec.concurrency + 1))


def profile_writes(spec: ProfileSpec) -> Writes:
    """What a profile run keeps in memcached at its peak: each connection holds one value of
    each size (its round's gets) beside the previous round's multi-get values, which the
    round's write batch deletes. Keys are ``<prefix>:g<size>:<worker>:<sequence>``."""
    key_len = len(spec.prefix or new_prefix()) + 24
    w = Writes("profile", "values", sizes_flag="measure smaller values with --sizes "
               "(and --multi-size for multi-gets)",
               shrink="measure fewer or smaller values (--sizes, --keys, --multi-size) or on "
               "fewer connections (--concurrency)")
    for size in spec.sizes:
        w.add(size, spec.concurrency, key_len)
    w.add(spec.multi_value_size, spec.concurrency * sum(spec.key_counts), key_len)
    return w
