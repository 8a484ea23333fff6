"""Profiles measured through a tier (cachelab.profiles.tier): the order samples were taken
in, kept as ranks."""

from __future__ import annotations

from pathlib import Path

from cachelab.profiles import TierCell, load_profile, rank_sequence, tier_profile


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

    from cachelab.profiles import spin_until
    from cachelab.profiles import tier as tier_module

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
