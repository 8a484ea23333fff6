"""A scalability sweep's plan: :class:`ScaleSpec` — what N is (``vary``), the points, repeats,
the measuring window and the workload — with its checks, each run's load spec and the
interleaved run order."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from cachelab.errors import UsageError
from cachelab.intervals import check_precision, check_precision_percentile
from cachelab.load import LoadSpec
from cachelab.load.precision import SHOWN
from cachelab.tls import TlsOptions
from cachelab.units import check_limit, limited, limits_of

__all__ = ["LIMITS", "VARY", "ScaleSpec"]

VARY = ("connections", "threads", "server-threads", "agents")


@dataclass
class ScaleSpec:
    """A sweep. The workload fields are those of :class:`cachelab.load.LoadSpec`
    (``workload``), except connections/threads, which the sweep sets."""

    vary: str = "connections"
    points: list[int] = field(default_factory=lambda: [1, 2, 4, 6, 8, 12, 16, 24, 32])
    repeats: int = limited(3, 1, 100)
    warmup: float = 1.0
    #: Extra seconds after the warm-up in which the steady state may start.
    settle: float = limited(1.0, 0.0, 3600.0, unit="seconds")
    #: Seconds measured from the steady-state start (whole intervals).
    window: float = limited(3.0, 0.0, 3600.0, above=True, unit="seconds")
    interval: float = 0.5
    connections_per_thread: int = 1
    #: Client connections when ``vary`` is ``server-threads``.
    client_connections: int = 16
    #: Connections of each load agent when ``vary`` is ``agents`` (a Ray cluster).
    connections_per_agent: int = 1
    method: str = "bounded"
    #: Fit the runs whose load verdict is INVALID too (by default they are left out of the
    #: USL fit, each named with its reason in the notes).
    keep_invalid: bool = False
    bootstrap: int = 1000
    seed: int = 0
    workload: dict[str, Any] = field(default_factory=dict)
    #: TLS to the server (None: plain TCP); every run of the sweep connects with it.
    tls: TlsOptions | None = None
    #: Run length by precision: each run stops once its p99's (``precision_percentile``'s)
    #: 95 % interval is within this share of it (``load --precision``), capped by its
    #: ``settle + window``; the point is then measured from the steady-state start to the
    #: run's end. None: fixed windows.
    precision: float | None = None
    #: The percentile ``precision`` targets (``load --precision-percentile``): p99 by default;
    #: the p50 for ``quick``, whose runs of 0.75 s left the p99's interval wider than ±5 % in
    #: every run of a loaded 2-core machine, and the p50's in 2 of 12
    #: (benches/runs/2026-11-29-quick-precision.md).
    precision_percentile: str = "99"
    #: On a machine with few CPUs, pin a private memcached and the load client (this
    #: process) to separate CPUs for the sweep (:mod:`cachelab.scale.pinning`); False:
    #: ``--no-pin``, they share every CPU.
    pin: bool = True

    @classmethod
    def quick(cls, **overrides: Any) -> ScaleSpec:
        """Six points, two repeats, 1.5 s per run: about 20 s against a local memcached; a
        precision target on the p50."""
        base: dict[str, Any] = {"points": [1, 2, 3, 4, 6, 8], "repeats": 2, "warmup": 0.25,
                                "settle": 0.5, "window": 0.75, "interval": 0.25,
                                "bootstrap": 500, "client_connections": 8,
                                "precision_percentile": "50",
                                "workload": {"key_space": 1000}}
        if overrides.get("vary") == "server-threads":
            base["points"] = [1, 2, 3, 4, 5, 6]
        return cls(**{**base, **overrides})

    def check(self) -> None:
        """Raises UsageError naming the first bad field."""
        if self.vary not in VARY:
            raise UsageError(f"vary must be one of {', '.join(VARY)}, not {self.vary!r}")
        if not self.points or any(not isinstance(p, int) or p < 1 for p in self.points):
            raise UsageError(f"points must be whole numbers >= 1, not {self.points!r}")
        if len(set(self.points)) != len(self.points):
            raise UsageError(f"points must not repeat: {self.points!r} (use repeats)")
        for name, limit in LIMITS.items():
            check_limit(name, limit, getattr(self, name))
        for name in ("warmup", "interval"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise UsageError(f"{name} must be a number of seconds >= 0, not {v!r}")
        if self.window < self.interval or self.interval <= 0:
            raise UsageError("window must be at least one interval, and interval above 0")
        check_precision(self.precision)
        check_precision_percentile(self.precision_percentile, list(SHOWN))
        if self.precision is not None and self.vary == "agents":
            raise UsageError("precision is for runs from this machine: the agents' histograms "
                             "are merged only at the end (leave out --precision or "
                             "--vary agents)")
        limit = 64 if self.vary != "connections" else 4096
        if max(self.points) > limit:
            raise UsageError(f"{self.vary}: at most {limit}, not {max(self.points)}")
        bad = {"connections", "threads", "duration", "requests", "warmup", "interval"} & set(
            self.workload)
        if bad:
            raise UsageError(f"workload must not set {', '.join(sorted(bad))}: the sweep does")

    def run_spec(self, n: int) -> LoadSpec:
        """The load spec of one run at N = n."""
        if self.vary == "connections":
            conns, threads = n, 1
        elif self.vary == "threads":
            conns, threads = n * self.connections_per_thread, n
        elif self.vary == "agents":
            conns, threads = n * self.connections_per_agent, 1
        else:
            conns, threads = self.client_connections, 1
        spec = LoadSpec(**{**self.workload, "connections": conns, "threads": threads,
                                   "warmup": self.warmup, "duration": self.settle + self.window,
                                   "interval": self.interval, "tls": self.tls,
                                   "precision": self.precision,
                                   "precision_percentile": self.precision_percentile,
                                   "precision_after": self.settle,
                                   "seed": self.seed if self.seed is not None else 0})
        spec.check()
        return spec

    def order(self) -> list[tuple[int, int]]:
        """(repeat, N) in run order: interleaved, alternately ascending and descending."""
        pts = sorted(self.points)
        out = []
        for r in range(self.repeats):
            out += [(r, n) for n in (pts if r % 2 == 0 else pts[::-1])]
        return out


#: The range of each field only the sweep checks (the workload's are the load engine's).
LIMITS = limits_of(ScaleSpec)
