"""What ``tiers`` measures: :class:`TiersSpec` and its checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cachelab.errors import UsageError
from cachelab.tiered.codecs import COMPRESSORS
from cachelab.units import check_limit, limited, limits_of

__all__ = ["CODECS", "LIMITS", "SHAPES", "SHAPE_TITLES", "TiersSpec"]

#: The two data shapes of the seed: one large record, and a list of small records.
SHAPES = ("record", "list")
#: How the tables and charts name them.
SHAPE_TITLES = {"record": "one ~60 KB record", "list": "a list of 1,000 small records"}
#: The serializations the benchmark may use.
CODECS = ("msgpack", "orjson", "pickle")


@dataclass
class TiersSpec:
    """What ``tiers`` measures."""

    #: Timed reads per method and shape.
    reads: int = limited(200, 1, 1_000_000)
    warmup: int = 10
    record_bytes: int = 60_000
    list_items: int = 1_000
    item_bytes: int = 100
    codec: str = "msgpack"
    compressions: tuple[str, ...] = ("zlib", "zstd", "lz4")
    dsn: str | None = None
    seed: int = 0
    timeout: float = 1.0

    @classmethod
    def quick(cls, **overrides: Any) -> TiersSpec:
        return cls(**{"reads": 40, "warmup": 5, **overrides})

    def check(self) -> None:
        check_limit("reads", LIMITS["reads"], self.reads)
        if self.warmup < 0:
            raise UsageError("warm-up must be 0 or more")
        if not 100 <= self.record_bytes <= 900_000:
            raise UsageError("record size must be 100 B to 900 KB (memcached's 1 MB item)")
        if not 1 <= self.list_items <= 5_000 or not 20 <= self.item_bytes <= 10_000:
            raise UsageError("list: 1-5,000 items of 20 B-10 KB")
        if self.codec not in CODECS:
            raise UsageError(f"codec must be msgpack, orjson or pickle, not {self.codec!r}")
        for c in self.compressions:
            if c not in COMPRESSORS or c == "none":
                raise UsageError(f"unknown compression {c!r}; choose from zlib, zstd, lz4")


#: The range of each numeric field written beside it (``--reads``' too).
LIMITS = limits_of(TiersSpec)
