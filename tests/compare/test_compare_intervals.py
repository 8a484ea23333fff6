"""The interval of a relative change of means: possible changes only, and the coverage a
95 % interval promises (simulated samples with known means)."""

from __future__ import annotations

import random

from cachelab.compare.stats import welch


def test_a_large_fall_in_a_noisy_metric_stays_above_minus_100_percent() -> None:
    # The shape of the seed's A/B: p99 over four rounds, 1.43 ms and noisy, then about
    # 195 µs. The difference over mean(a) gives [−174 %, +1 %]: an impossible lower end.
    a = [1430.0, 600.0, 2500.0, 1200.0]
    b = [190.0, 200.0, 185.0, 205.0]
    lo, hi = welch(a, b, 0.95)
    assert -1.0 <= lo <= 195.0 / 1432.5 - 1 <= hi
    # A steadier baseline: the fall is clear, and still above −100 %.
    lo, hi = welch([1430.0, 1380.0, 1500.0, 1410.0], b, 0.95)
    assert -1.0 < lo <= 195.0 / 1430.0 - 1 <= hi < 0


def test_coverage_of_the_ratio_of_means_is_near_the_level() -> None:
    rng = random.Random(11)
    trials, covered = 400, 0
    for _ in range(trials):
        a = [rng.gauss(100.0, 15.0) for _ in range(6)]
        b = [rng.gauss(70.0, 10.0) for _ in range(6)]
        ci = welch(a, b, 0.95)
        assert ci is not None
        covered += ci[0] <= 0.7 - 1 <= ci[1]
    # 95 % of 400 is 380 (binomial sd ~4.4).
    assert 366 <= covered <= 394, covered


def test_no_interval_when_the_baseline_mean_is_indistinguishable_from_zero() -> None:
    assert welch([0.0, 1.0, -1.0, 0.5], [3.0, 4.0, 5.0, 4.0], 0.95) is None
    assert welch([1.0], [2.0, 3.0], 0.95) is None
