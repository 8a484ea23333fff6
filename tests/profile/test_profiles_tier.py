"""Profiles measured through a tier (cachelab.profile.tier): the order samples were taken
in, kept as ranks."""

from __future__ import annotations

from pathlib import Path

from cachelab.profile import TierCell, load_profile, rank_sequence, tier_profile


def test_rank_sequence_ranks_each_sample_within_its_cell_in_the_order_taken(
    tmp_path: Path,
) -> None:
    a = TierCell("get", 100, ["k"], latencies=[10, 30, 20, 40])
    b = TierCell("get", 1000, ["k"], latencies=[5, 5])
    # Taken as: a10 b5 a30 | a20 b5 a40 — mid-ranks: 10 is the lowest of four (1/8), 5 ties
    # both of b's samples (1/2), 30 the third (5/8), 20 the second (3/8), 40 the top (7/8).
    seq = rank_sequence([a, b], [[(0, 10), (1, 5), (0, 30)], [(0, 20), (1, 5), (0, 40)]])
    assert seq["ranks"] == [0.125, 0.5, 0.625, 0.375, 0.5, 0.875]
    assert seq["segments"] == [3, 3]
    # Kept in the profile, and read back.
    cells = [a, b]
    p = tier_profile(cells, address="x", version="1", client={}, started=0.0,
                     sequence=[[(0, 10), (1, 5), (0, 30)], [(0, 20), (1, 5), (0, 40)]])
    back = load_profile(p.save(tmp_path / "p.json"))
    assert back.sequence == p.sequence and back.sequence["ranks"] == seq["ranks"]
    # A steady climb is perfectly correlated from one sample to the next.
    c = TierCell("get", 1, ["k"], latencies=list(range(1, 101)))
    assert rank_sequence([c], [[(0, v) for v in range(1, 101)]])["lag1"] == 1.0



def test_spin_until_returns_at_or_after_its_deadline_on_either_clock() -> None:
    """Think time is spun to a deadline, so a loop slower or faster than the rate measured at
    start-up still ends on time (it ended 2x late in a replay on a busy machine)."""
    import time

    from cachelab.profile import spin_until
    from cachelab.profile import tier as tier_module

    for cpu, clock in ((True, time.thread_time_ns), (False, time.perf_counter_ns)):
        key = "cpu" if cpu else "wall"
        tier_module._spin_rate(cpu)
        saved = tier_module._SPIN_RATE[key]
        try:
            # A rate 10x too high (bursts far too long) and 10x too low (far too short).
            for wrong in (10.0, 0.1):
                tier_module._SPIN_RATE[key] = saved * wrong
                for ns in (3_000, 20_000, 200_000):
                    deadline = clock() + ns
                    spin_until(deadline, cpu=cpu)
                    assert clock() >= deadline
        finally:
            tier_module._SPIN_RATE[key] = saved
        past = clock() - 1_000_000
        spin_until(past, cpu=cpu)  # already passed: returns at once


def test_multi_get_cells_rotate_over_sets_of_values(memcached) -> None:
    """Multi-get cells read sets of keys in turn, as many sets as hold ``pool_bytes`` (so
    their values are not the same few, hot in the CPU's caches); what ``tier_cell_writes``
    says is what was written; a profile counts a multi-get's keys, not the pool's."""
    from cachelab import _core
    from cachelab.profile import delete_tier_cells, tier_cell_writes, tier_cells

    # 4 keys of 1,000 bytes a set, 20,000 bytes to hold: 5 sets, 20 keys.
    cells = tier_cells(memcached.address, "cachelab:test-rotate", sizes=(100,),
                       key_counts=(1, 4), multi_value_size=1000, pool_bytes=20_000)
    try:
        multi = [c for c in cells if c.op == "multiget"]
        assert [(c.width, c.stride, len(c.keys)) for c in multi] == [(1, 4, 20), (4, 4, 20)]
        assert sorted(tier_cell_writes((100,), (1, 4), 1000, 20_000)) == [(100, 4), (1000, 20)]
        with _core.Client(memcached.address, timeout=2.0) as c:
            assert len(c.get_multi(multi[1].keys)) == 20
        calls = [multi[1].next_keys() for _ in range(10)]
        assert all(len(k) == 4 for k in calls)
        assert len({tuple(k) for k in calls[:5]}) == 5 and calls[5:] == calls[:5]
        assert {k for ks in calls for k in ks} == set(multi[1].keys)
        assert [multi[0].next_keys() for _ in range(5)] == [k[:1] for k in calls[:5]]
        for c in multi:
            c.latencies = [1000, 2000]
        p = tier_profile(cells, address=memcached.address, version="x", client={}, started=0.0)
        assert sorted(c.keys for c in p.cells_of("multiget")) == [1, 4]
    finally:
        assert delete_tier_cells(memcached.address, cells, 2.0) == 0
