"""The parts of replay's comparison that need no server: bootstrap intervals of measured
percentiles, the library's terms, and the counts they are paid by — the simulator's own."""

from __future__ import annotations

import numpy as np
import pytest

from cachelab import _core, replay
from cachelab.replay.calibrate import library_ns
from cachelab.replay.compare import nearest_rank, pct_intervals, term_counts

TERM_NAMES = [t for t, _ in replay.TERMS]


def test_measured_percentiles_carry_their_bootstrap_interval() -> None:
    x = np.random.default_rng(1).lognormal(0.0, 1.0, 1000)
    ci = pct_intervals(x, seed=0)
    for k, p in (("50", 50.0), ("90", 90.0), ("99", 99.0)):
        lo, hi = ci[k]
        assert lo <= nearest_rank(x, p) <= hi
    # Ten requests decide p99 of 1,000, hundreds decide p50: relative widths differ.
    width = {k: (ci[k][1] - ci[k][0]) / nearest_rank(x, float(k)) for k in ci}
    assert width["99"] > 2 * width["50"]
    assert pct_intervals(np.full(50, 3.0), seed=0)["99"] == (3.0, 3.0)


def test_library_terms_add_up() -> None:
    terms = {"request": 1000.0, "scope": 100.0, "l1_hit": 2000.0, "get": 30_000.0,
             "prefetch": 5000.0, "prefetch_walk": 10.0, "prefetch_key": 700.0,
             "prefetch_call": 9000.0}
    counts = {k: np.asarray(v) for k, v in {
        "scope": [3, 0], "l1_hit": [2, 0], "get": [1, 0], "prefetch": [1, 0],
        "walked": [5, 0], "prefetch_keys": [4, 0], "round_trips": [2, 0]}.items()}
    got = library_ns(terms, counts)
    assert list(got) == TERM_NAMES
    assert sum(v[0] for v in got.values()) == pytest.approx(
        1000 + 300 + 4000 + 30_000 + 5000 + 50 + 2800 + 9000)
    assert sum(v[1] for v in got.values()) == pytest.approx(1000)
    # Measured apart, a request's first L1 hit and first get cost more than the next ones.
    counts["l1_hit"], counts["get"] = np.asarray([3, 1]), np.asarray([2, 0])
    got = library_ns({**terms, "l1_first": 7000.0, "get_first": 50_000.0}, counts)
    assert list(got["l1_hit"]) == [7000 + 2 * 2000, 7000]
    assert list(got["get"]) == [50_000 + 30_000, 0]


def _tree_trace(touches: list[list[int]]) -> _core.RequestTrace:
    """Items 0..5 of 100 bytes; 0 is a topic with children 1, 2; 1 has child 3."""
    offsets = np.cumsum([0] + [len(t) for t in touches]).tolist()
    n = len(touches)
    return _core.RequestTrace(
        item_sizes=[100] * 6, child_offsets=[0, 2, 3, 3, 3, 3, 3], child_items=[1, 2, 3],
        time=[float(i) for i in range(n)], instance=[0] * n, route=[0] * n, base_ms=[10.0] * n,
        touch_offsets=offsets, touch_items=[i for t in touches for i in t])


FLAT = _core.LatencyModel(get=[(1, [1000.0, 1000.0])], multiget=[(1, [2000.0, 2000.0])])


def test_the_terms_are_paid_by_the_simulators_counts() -> None:
    # Request 0 trains: item 0 (the topic) is the fixed set. Request 1: topic 0 is an L1 hit
    # that prefetch_tree makes (in its own cost) and leaves in the request scope; it walks
    # 0, 1, 2, 3 and multi-gets 1, 2, 3, which are then scope hits, as is the repeat of 0;
    # 5 is a get. Request 2: 4 is a get, 5 a get too (no L1), 4 again a scope hit.
    t = _tree_trace([[0], [0, 1, 2, 3, 0, 5], [4, 5, 4]])
    costs = _core.request_costs(t, FLAT, "fixed:1+prefetch:depth=2", train=0.34)
    assert costs["request"] == [1, 2]
    assert costs["l1_hits"] == [1, 0] and costs["prefetch_topic_hit"] == [True, False]
    assert costs["prefetch_hits"] == [3, 0] and costs["lookups"] == [5, 2]
    got = {k: v.tolist() for k, v in term_counts(costs).items()}
    assert got == {"scope": [5, 1], "l1_hit": [0, 0], "get": [1, 2], "prefetch": [1, 0],
                   "walked": [4, 0], "prefetch_keys": [3, 0], "round_trips": [2, 2]}
    # Every touch is exactly one of: a scope hit, an L1 hit, a get.
    assert [s + h + g for s, h, g in zip(got["scope"], got["l1_hit"], got["get"])] == \
        costs["touches"]
    # The topic missing: it is one of the multi-get's keys, not an L1 hit.
    costs = _core.request_costs(t, FLAT, "prefetch-children", train=0.34)
    got = {k: v.tolist() for k, v in term_counts(costs).items()}
    assert costs["prefetch_topic_hit"] == [False, False]
    assert got["walked"] == [3, 0] and got["prefetch_keys"] == [3, 0]
    assert got["scope"] == [4, 1] and got["get"] == [2, 2]


def test_the_samplers_think_runs_from_the_last_read_and_a_batch_starts_with_a_primer(
        memcached) -> None:  # noqa: ANN001 - the shared private memcached fixture
    """The think time a sample draws is measured, like the application's, from the end of the
    last read; the first sample of a batch would follow the request's own tail instead, so an
    untimed read comes first."""
    import time

    from cachelab.profile import delete_tier_cells, tier_cells
    from cachelab.replay.driver import GapTier
    from cachelab.replay.sampler import Sampler

    shared = {"last": 0, "cpu": 0}
    tier = GapTier(memcached.address, timeout=2.0, shared=shared)
    cells = tier_cells(memcached.address, "cachelab:test-sampler", sizes=(100,), key_counts=(),
                       multi_value_size=100)
    try:
        reads: list[tuple[int, int]] = []   # (cpu at the read's start, cpu at the last end)
        real = tier.sample

        def counted(keys: list[str]) -> tuple[int, int]:
            reads.append((time.thread_time_ns(), shared["cpu"]))
            return real(keys)

        tier.sample = counted  # type: ignore[method-assign]
        tier.cpu_gaps = [300_000]  # every think is 300 µs of CPU
        sampler = Sampler(tier, cells, samples=6, requests=2, rng=np.random.default_rng(1))
        tier.sample([cells[0].keys[0]])                   # "the application's last read"
        reads.clear()
        sampler.after_request()
        # One untimed primer, then the 3 samples due after 1 of 2 requests.
        assert len(reads) == 4 and len(cells[0].latencies) == 3
        for start, last_end in reads[1:]:
            assert start - last_end >= 300_000      # a full think after the previous read
    finally:
        tier.close()
        delete_tier_cells(memcached.address, cells, 2.0)
