"""``trace inspect`` numbers, checked by hand and by an independent computation."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from cachelab.traces import RequestTrace, inspect_path, inspect_request_trace, save_request_trace
from cachelab.traces.inspect import nearest_rank, render_inspection, zipf_alpha

CATALOG = [
    {"item": "t", "size": 10, "kind": "topic", "children": ["a", "b"]},
    {"item": "a", "size": 100, "kind": "video"},
    {"item": "b", "size": 1000, "kind": "video"},
    {"item": "c", "size": 5, "kind": "article"},
    {"item": "d", "size": 7, "kind": "article"},
    {"item": "e", "size": 3, "kind": "article"},
    {"item": "never", "size": 999_999, "kind": "article"},
]
#: (route, items): a has 9 touches, t 5, b 4, c 2, d 1, e 1 (six keys touched)
REQUESTS = [
    ("topic", ["t", "a", "b", "a"]),
    ("topic", ["t", "a", "b"]),
    ("video", ["a"]),
    ("video", ["a", "c", "a"]),
    ("home", ["t", "a", "b", "c", "d", "e", "t", "a", "b", "t"]),
    ("video", ["a"]),
]


@pytest.fixture
def trace() -> RequestTrace:
    reqs = [
        {"request": i, "time": float(i), "instance": i % 2, "route": route,
         "base_ms": 10.0 * (i + 1), "items": items}
        for i, (route, items) in enumerate(REQUESTS)
    ]
    return RequestTrace.from_records(CATALOG, reqs)


def test_counts_by_hand(trace: RequestTrace) -> None:
    d = inspect_request_trace(trace)
    assert d["requests"] == 6
    assert d["catalog_items"] == 7
    assert d["touches"] == 4 + 3 + 1 + 3 + 10 + 1 == 22
    assert d["first_touches"] == 3 + 3 + 1 + 2 + 6 + 1 == 16
    assert d["unique_keys_touched"] == 6
    assert d["working_set_bytes"] == 10 + 100 + 1000 + 5 + 7 + 3
    assert d["catalog_bytes"] == 1125 + 999_999
    # touches per request sorted: 1 1 3 3 4 10 -> nearest rank p50 = 3rd, p90 = 6th
    assert d["items_per_request"] == {"mean": round(22 / 6, 3), "p50": 3, "p90": 10, "p99": 10,
                                      "max": 10}
    # distinct per request sorted: 1 1 2 3 3 6
    assert d["distinct_items_per_request"]["p50"] == 2
    assert d["distinct_items_per_request"]["max"] == 6
    assert d["routes"] == {"video": {"requests": 3, "mean_items": round(5 / 3, 3)},
                           "topic": {"requests": 2, "mean_items": 3.5},
                           "home": {"requests": 1, "mean_items": 10.0}}
    assert list(d["routes"]) == ["video", "topic", "home"]  # most requests first
    assert d["item_kinds"]["article"] == {"items": 4, "bytes": 1_000_014, "touched": 3}
    assert d["instances"] == 2
    assert d["time"] == {"first_s": 0.0, "last_s": 5.0, "ordered": True}


def test_skew_against_an_independent_computation(trace: RequestTrace) -> None:
    d = inspect_request_trace(trace)
    counts = Counter(k for _, items in REQUESTS for k in items)
    freq = sorted(counts.values(), reverse=True)
    assert freq == [9, 5, 4, 2, 1, 1]
    # with fewer than 10 keys the log-spaced ranks are every rank 1..n: plain least squares
    slope, _ = statistics.linear_regression([math.log(r) for r in range(1, 7)],
                                            [math.log(f) for f in freq])
    assert d["zipf_alpha"] == pytest.approx(-slope, rel=1e-12)
    # top 1 % of 6 keys is one key: a, with 9 of 22 touches
    assert d["top1pct_share"] == pytest.approx(9 / 22)


def test_zipf_alpha_recovers_a_power_law() -> None:
    counts = np.floor(1e9 / np.arange(1, 20_001) ** 0.8)
    assert zipf_alpha(counts) == pytest.approx(0.8, abs=1e-3)
    assert zipf_alpha(np.array([5, 3])) is None


def test_nearest_rank() -> None:
    v = np.arange(1, 101)
    assert [nearest_rank(v, p) for p in (1, 50, 90, 99, 100)] == [1, 50, 90, 99, 100]
    assert nearest_rank(np.array([7]), 50) == 7


def test_inspect_path_and_render(tmp_path: Path, trace: RequestTrace) -> None:
    path = save_request_trace(trace, tmp_path / "t.parquet")
    d = inspect_path(path)
    assert d["schema"] == "cachelab.trace-inspect" and d["format"] == "parquet"
    assert d["touches"] == 22
    text = render_inspection(d)
    assert "unique keys touched" in text and "working set bytes" in text
    assert "video" in text and "p90 10" in text


def test_empty_trace(tmp_path: Path) -> None:
    d = inspect_request_trace(RequestTrace.from_records(CATALOG, []))
    assert d["requests"] == 0 and d["touches"] == 0 and d["zipf_alpha"] is None
    assert d["items_per_request"]["p50"] is None
    render_inspection({**d, "path": "x", "format": "jsonl", "schema": "s"})
