"""What a profile measures (:class:`ProfileSpec`) and the private server it needs for that."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, fields
from typing import Any

import cachelab._core as _core
from cachelab.capacity import Writes
from cachelab.errors import UsageError
from cachelab.intervals import check_precision, check_precision_percentile
from cachelab.tables import PERCENTILES
from cachelab.tls import TlsOptions, core_tls
from cachelab.units import check_limit, limited, limits_of, pct_key

DEFAULT_SIZES = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
DEFAULT_KEY_COUNTS = (1, 3, 5, 10, 100)
DEFAULT_MULTI_VALUE_SIZE = 1_000
#: The range of each numeric field, ``{field: {"lo", "hi", "above", "unit"}}``: the engine's
#: (crates/profile/src/spec.rs, ``limits``), which checks them, and those of the fields only
#: Python checks (beside their field); the command line's flags read them. Those of ``sizes``
#: and ``key_counts`` hold for each item.
LIMITS: dict[str, dict[str, Any]] = dict(_core.PROFILE_LIMITS)
#: The largest value that fits memcached's largest item (-I 1024m) with its header.
MAX_VALUE_SIZE = int(LIMITS["sizes"]["hi"])
MAX_KEY_COUNT = int(LIMITS["key_counts"]["hi"])
#: The percentiles a precision target may be on: those the tables show with an interval.
SHOWN_PERCENTILES = tuple(pct_key(p) for p in PERCENTILES)
#: ``--quick``'s samples per cell, and with a precision target its cap: the median's 95 %
#: interval then spans ranks 228–272 of 500 (p45.6–p54.4) with 228 samples beyond it, so a
#: ±5 % target on the p50 is reachable by construction (cachelab.intervals, "which percentile
#: a sample count can certify"); a p99 would have 5 samples beyond it, its interval's top the
#: second-largest latency: never ±5 % but by luck. The p90 (50 beyond) is the highest 500
#: samples can certify, but on a loaded machine its interval was ±25–75 % wide (the latencies
#: spread out between p75 and p90): the p50 is the one ``--quick`` targets, the others are
#: shown with their intervals. A cell whose p50 is still wider goes on in batches up to
#: :data:`QUICK_PRECISION_CAP` samples.
QUICK_SAMPLES = 500
QUICK_PRECISION_CAP = 5_000
QUICK_PERCENTILE = "50"


@dataclass
class ProfileSpec:
    """What ``profile`` measures. Defaults are the seed experiment's: 10,000 samples each."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    key_counts: tuple[int, ...] = DEFAULT_KEY_COUNTS
    multi_value_size: int = DEFAULT_MULTI_VALUE_SIZE
    samples: int = 10_000
    warmup: int = 200
    concurrency: int = 1
    #: ``text`` or ``meta`` (memcached), or ``resp`` (Redis, Valkey: SET, GET, MGET, UNLINK;
    #: the floor PING).
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
    plain_port: int | None = limited(None, 1, 65535)
    #: New connections timed for the TLS cost table.
    tls_cost_connections: int = limited(200, 1, 100_000)
    #: Run length by precision: each cell is sampled until its p99's
    #: (``precision_percentile``'s) 95 % interval has a relative half-width at or below this
    #: (0.05: ±5 %), in batches; ``samples`` is then the cap per cell. None: every cell takes
    #: ``samples``. See the profile section of docs/load.md, "Run length by precision".
    precision: float | None = None
    #: The percentile ``precision`` targets (a key of the table's rows, from the median up:
    #: "50", "75", "90", "95", "99", "99.9"): p99 by default, whose interval 10,000 samples
    #: per cell can certify (100 beyond it); ``--quick`` targets the p50.
    precision_percentile: str = "99"

    @classmethod
    def quick(cls, **overrides: Any) -> ProfileSpec:
        """The same shape, small: 500 samples per cell after 20 warm-up samples; with a
        precision target, each cell's p50 to it, up to :data:`QUICK_PRECISION_CAP` samples."""
        samples = QUICK_SAMPLES if overrides.get("precision") is None else QUICK_PRECISION_CAP
        return cls(**{"samples": samples, "warmup": 20,
                      "precision_percentile": QUICK_PERCENTILE, **overrides})

    def check(self) -> None:
        """Raises UsageError naming the first bad field, the engine's ranges included."""
        if self.tls is not None:
            if not isinstance(self.tls, TlsOptions):
                raise UsageError("tls must be a TlsOptions (cachelab.tls) or None")
            self.tls.check()
        if self.plain_port is not None:
            if self.tls is None:
                raise UsageError("plain-port needs tls (the plain TCP listener to compare "
                                 "TLS with)")
            check_limit("plain_port", LIMITS["plain_port"], self.plain_port)
        check_precision(self.precision)
        check_precision_percentile(self.precision_percentile, SHOWN_PERCENTILES)
        check_limit("tls_cost_connections", LIMITS["tls_cost_connections"],
                    self.tls_cost_connections)
        _core.profile_check(self.to_core("127.0.0.1:1", seed=0))

    def to_core(self, address: str, *, seed: int, proxy: bool = False,
                **overrides: Any) -> dict[str, Any]:
        """The dict ``_core.profile_run`` takes, to measure the server at ``address`` (a
        ``proxy`` when it is one) with ``seed``: every field as it is (the engine reads those it
        has, and checks them), but those resolved here; ``overrides`` replace fields (a
        smaller measurement of the same server)."""
        core = {f.name: getattr(self, f.name) for f in fields(self)}
        core.update(address=address, sizes=list(self.sizes), key_counts=list(self.key_counts),
                    seed=seed, prefix=self.prefix or new_prefix(), tls=core_tls(self.tls),
                    proxy=proxy)
        if self.protocol == "resp":  # the engine's {"resp": login}; the caller adds the login
            core["protocol"] = {"resp": {}}
        core.update(overrides)
        return core


LIMITS.update(limits_of(ProfileSpec))


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
