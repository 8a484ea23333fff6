"""Which strategies replay builds, read by the simulator's own parser (``_core.Strategy``), and
the fixed set it pins: the simulator's (``_core.fixed_set``), the set its runs use."""

from __future__ import annotations

import numpy as np
import pytest

from cachelab import _core, replay, traces
from cachelab.errors import UsageError


@pytest.mark.parametrize(("spec", "canonical", "l1", "parts"), [
    ("none", "none", "none", (None, None, None, None, 0)),
    ("lru:415", "lru:415", "lru", (None, None, 415, None, 0)),
    ("LRU:64m", "lru:64MB", "lru", (None, None, None, 64_000_000, 0)),
    ("lru:64MiB+prefetch:depth=2", "lru:64MiB+prefetch:depth=2", "lru",
     (None, None, None, 64 * 2**20, 2)),
    ("lru:20000B+prefetch:depth=2", "lru:20KB+prefetch:depth=2", "lru",
     (None, None, None, 20_000, 2)),
    ("prefetch-children + fixed:5000", "fixed:5000+prefetch-children", "fixed",
     (5000, None, None, None, 1)),
    ("fixed:1.5K", "fixed:1500B", "fixed", (None, 1500, None, None, 0)),
    ("fixed:1500B+prefetch:depth=1", "fixed:1500B+prefetch-children", "fixed",
     (None, 1500, None, None, 1)),
    ("prefetch:depth=3", "prefetch:depth=3", "none", (None, None, None, None, 3)),
])
def test_strategies_are_read_by_the_simulator(spec: str, canonical: str, l1: str,
                                              parts: tuple) -> None:
    s = replay.parse(spec)
    assert str(s) == canonical == _core.parse_strategy(spec)
    assert s.l1 == l1
    assert (s.fixed_items, s.fixed_bytes, s.lru_items, s.lru_bytes, s.prefetch_depth) == parts
    assert s == _core.Strategy(canonical) and hash(s) == hash(_core.Strategy(canonical))
    assert repr(s) == f"Strategy('{canonical}')"
    replay.ReplaySpec(strategies=(spec,)).check()


@pytest.mark.parametrize(("bad", "why"), [
    ("fixed:5+lru:5", "one L1 per strategy"),
    ("lru:64MB+fixed:1KB+prefetch-children", "one L1 per strategy"),
    ("bogus", "unknown component"),
    ("lru:0", "at least 1 item"),
    ("lru:0MB", "at least 1 byte"),
    ("lru:1.5", "not a whole number of bytes"),
    ("prefetch:depth=0", "depth must be"),
    ("none+lru:5", "cannot be combined"),
    ("", "empty"),
])
def test_unsupported_strategies_are_usage_errors(bad: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        replay.parse(bad)
    with pytest.raises(UsageError, match=why):
        replay.ReplaySpec(strategies=(bad,)).check()


def test_bad_calibration_reps_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        replay.ReplaySpec(calibration_reps=1).check()


def test_default_strategies_are_all_replayable() -> None:
    assert replay.default_strategies(8306) == [
        "none", "lru:415", "fixed:415", "fixed:415+prefetch-children"]
    for s in replay.default_strategies(100):
        replay.parse(s)


def _ranking(trace: traces.RequestTrace, train: float) -> list[int]:
    """Items by how many training requests touch them, most first, ties by index: the rule of
    docs/simulation.md, computed plainly (the reference the simulator's set is checked by)."""
    n = len(trace)
    order = np.lexsort((np.arange(n), trace.time))
    counts = np.zeros(trace.n_items, dtype=np.int64)
    for r in order[:int(np.floor(train * n))]:
        counts[np.unique(trace.touches(int(r)))] += 1
    items = np.flatnonzero(counts > 0)
    return items[np.lexsort((items, -counts[items]))].tolist()


def _take(ranking: list[int], sizes: np.ndarray, s: _core.Strategy) -> list[int]:
    if s.fixed_items is not None:
        return ranking[:s.fixed_items]
    left, out = s.fixed_bytes, []
    for i in ranking:
        if sizes[i] <= left:
            left -= int(sizes[i])
            out.append(i)
    return out


def test_the_fixed_set_is_the_simulators() -> None:
    trace = traces.synthesize(traces.SynthParams(requests=300, seed=4))
    core = trace.to_core()
    sizes = np.asarray(trace.item_sizes)
    flat = _core.LatencyModel(get=[(1, [1.0, 1.0])], multiget=[])
    for train in (0.2, 0.5):
        ranking = _ranking(trace, train)
        counts = np.bincount(np.concatenate(
            [np.unique(trace.touches(int(r))) for r in
             np.lexsort((np.arange(len(trace)), trace.time))[:int(train * len(trace))]]),
            minlength=trace.n_items)
        assert any(counts[a] == counts[b] for a, b in zip(ranking, ranking[1:]))  # ties
        # Byte capacities that skip items: the largest ranked item does not fit in 60 %.
        big = int(sizes[ranking].max())
        for spec in ("fixed:1", "fixed:40", "fixed:100000", "fixed:64KB",
                     f"fixed:{big * 6 // 10}B", f"fixed:{int(sizes.sum())}B"):
            s = replay.parse(spec)
            fixed = _core.fixed_set(core, spec, train=train)
            assert fixed == _take(ranking, sizes, s), spec
            # It is the set the simulator's runs use: a request's L1 hits are exactly its
            # distinct touches in the set.
            costs = _core.request_costs(core, flat, spec, train=train)
            pinned = set(fixed)
            assert costs["l1_hits"] == [len(pinned.intersection(trace.touches(r).tolist()))
                                        for r in costs["request"]], spec
        assert _core.fixed_set(core, "lru:40+prefetch-children", train=train) is None
    # A byte capacity skips what no longer fits and takes smaller items after it.
    tiny = _core.RequestTrace(
        item_sizes=[100, 300, 50, 200, 250], child_offsets=[], child_items=[],
        time=[0.0, 1.0, 2.0, 3.0, 4.0], instance=[0] * 5, route=[0] * 5, base_ms=[1.0] * 5,
        touch_offsets=[0, 4, 6, 9, 9, 10], touch_items=[3, 4, 0, 0, 3, 1, 4, 1, 3, 2])
    assert _core.fixed_set(tiny, "fixed:2", train=0.8) == [3, 1]  # 1 and 4 tie: 1 first
    assert _core.fixed_set(tiny, "fixed:450B", train=0.8) == [3, 4]
    assert _core.fixed_set(tiny, "fixed:120B", train=0.8) == [0]
    with pytest.raises(UsageError, match="training window"):
        _core.fixed_set(tiny, "fixed:2", train=0.1)


def test_prefetch_walks_are_the_simulators() -> None:
    trace = traces.synthesize(traces.SynthParams(requests=50, seed=2))
    core = trace.to_core()
    topics = [i for i in range(trace.n_items) if len(trace.children(i))]
    for depth in (1, 2):
        walks = core.descendants(topics, depth)
        for t, got in zip(topics, walks):
            # Level by level, children in catalog order, each item once, the topic left out.
            seen, frontier, want = {t}, [t], []
            for _ in range(depth):
                nxt = [c for p in frontier for c in trace.children(p).tolist()
                       if c not in seen and not seen.add(c)]
                want += nxt
                frontier = nxt
            assert got == want
    with pytest.raises(UsageError):
        core.descendants([trace.n_items], 1)
