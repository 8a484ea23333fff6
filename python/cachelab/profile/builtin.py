"""Built-in latency profiles, made from published tables.

``appengine-2017``: App Engine's dedicated memcache as measured by Khan Academy ("Profiling App
Engine Memcached", Ben Kraft, May 2017, appendix tables): get latency by value size (5th to
99.9th percentile, 10,000 samples per size) and multi-get latency of 1 KB values by key count
(50th to 99.9th percentile). The published points are kept verbatim under ``published``.

A table gives a few points of each distribution; the simulator needs the whole of it. Between
the points the quantile function is interpolated linearly in (log10(100 - p), log10 latency) —
straight lines on the inverted-percentile log-log plot the article draws. Beyond the first and
last points the nearest segment is extended, and the top is cut at p = 100 - 50/N: with N =
10,000 samples that is p99.995, as far as 10,000 samples reach. Values are placed at the
quantiles i/N, so an HdrHistogram reads each published percentile back to within its 0.1 %
precision.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import cachelab._core as _core
from cachelab.profile.cell import with_percentiles
from cachelab.profile.model import SCHEMA, SCHEMA_VERSION, LatencyProfile

SOURCE = (
    "Ben Kraft, \"Profiling App Engine Memcached\", Khan Academy engineering blog, May 2017, "
    "appendix tables"
)

# Fetch latency by size (ms), 10,000 samples per size.
APPENGINE_GET_PERCENTILES = (5, 25, 50, 75, 90, 95, 99, 99.9)
APPENGINE_GET_MS: dict[int, tuple[float, ...]] = {
    1: (1.38, 1.72, 2.34, 3.71, 4.66, 5.33, 10.56, 34.59),
    10: (1.35, 1.70, 2.29, 3.67, 4.60, 5.27, 9.93, 24.57),
    100: (1.36, 1.70, 2.28, 3.72, 4.66, 5.45, 11.35, 38.44),
    1_000: (1.41, 1.84, 2.71, 4.01, 4.83, 5.50, 9.47, 26.97),
    10_000: (1.47, 1.92, 2.69, 4.09, 4.92, 5.76, 11.83, 30.57),
    100_000: (2.33, 2.94, 3.77, 5.08, 6.00, 6.74, 12.11, 41.15),
    1_000_000: (8.29, 9.88, 11.16, 12.65, 14.22, 15.46, 21.09, 42.84),
}

# Multi-get latency of 1 KB values (ms), by key count, 10,000 samples each.
APPENGINE_MULTI_PERCENTILES = (50, 75, 90, 95, 99, 99.9)
APPENGINE_MULTI_MS: dict[int, tuple[float, ...]] = {
    1: (3.06, 4.30, 5.17, 6.01, 17.22, 92.18),
    3: (3.87, 4.66, 5.46, 6.60, 17.64, 234.90),
    5: (4.00, 4.77, 5.61, 6.77, 25.23, 225.22),
    10: (3.70, 5.02, 6.30, 7.64, 23.01, 70.10),
    100: (8.29, 9.94, 11.88, 14.12, 32.20, 108.81),
}

SAMPLES = 10_000


def quantile_function(
    points: Sequence[tuple[float, float]],
) -> Callable[[float], float]:
    """Q(p) through (percentile, value) points, linear in (log10(100 - p), log10 value)."""
    if len(points) < 2:
        raise ValueError("need at least two points")
    xs = [math.log10(100.0 - p) for p, _ in points]
    ys = [math.log10(v) for _, v in points]

    def q(p: float) -> float:
        x = math.log10(100.0 - p)
        # xs falls as p rises; find the segment, or the end segment to extend.
        i = 0
        while i < len(xs) - 2 and x < xs[i + 1]:
            i += 1
        x0, x1, y0, y1 = xs[i], xs[i + 1], ys[i], ys[i + 1]
        return 10 ** (y0 + (y1 - y0) * (x - x0) / (x1 - x0))

    return q


def sampled_ns(points: Sequence[tuple[float, float]], n: int = SAMPLES) -> list[int]:
    """n latencies (ns) placed at the quantiles i/n of the curve through ``points`` (ms)."""
    q = quantile_function(points)
    qs = [100.0 * i / n for i in range(1, n)] + [100.0 * (1 - 0.5 / n)]
    return [round(q(p) * 1e6) for p in qs]


def _cell(op: str, value_size: int, keys: int, pcts: Sequence[float], ms: Sequence[float]) -> dict:
    histogram = _core.hist_from_values(sampled_ns(list(zip(pcts, ms))))
    return {
        "op": op,
        "value_size": value_size,
        "keys": keys,
        "samples": SAMPLES,
        "histogram": histogram,
        "errors": {},
        "mismatches": 0,
        "misses": 0,
    }


def appengine_2017() -> LatencyProfile:
    """App Engine dedicated memcache, 2017, from the Khan Academy appendix tables."""
    cells = [
        _cell("get", size, 1, APPENGINE_GET_PERCENTILES, ms)
        for size, ms in APPENGINE_GET_MS.items()
    ] + [
        _cell("multiget", 1_000, keys, APPENGINE_MULTI_PERCENTILES, ms)
        for keys, ms in APPENGINE_MULTI_MS.items()
    ]
    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "name": "appengine-2017",
        "source": "published",
        "created": "2017-05-01",
        "server": {"address": None, "private": False, "version": "App Engine dedicated memcache"},
        "client": {"samples": SAMPLES},
        "environment": {},
        "run": {},
        "cells": cells,
        "published": {
            "source": SOURCE,
            "unit": "ms",
            "get_by_size": {
                "percentiles": list(APPENGINE_GET_PERCENTILES),
                "ms": {str(k): list(v) for k, v in APPENGINE_GET_MS.items()},
            },
            "multiget_1kb_by_keys": {
                "percentiles": list(APPENGINE_MULTI_PERCENTILES),
                "ms": {str(k): list(v) for k, v in APPENGINE_MULTI_MS.items()},
            },
            "method": "quantiles interpolated in (log10(100-p), log10 latency); "
            "end segments extended; values at quantiles i/N, N = 10,000",
        },
    }
    profile = LatencyProfile.from_dict(doc, "appengine-2017")
    profile.cells = [with_percentiles(c) for c in profile.cells]
    return profile


PROFILES: dict[str, Callable[[], LatencyProfile]] = {"appengine-2017": appengine_2017}
