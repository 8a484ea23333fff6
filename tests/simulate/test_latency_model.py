"""The latency model through the binding: the published App Engine points read back (or, where
the published cells are out of order, their monotone fit, computed here from its definition),
interpolation between cells, linear extrapolation beyond the largest by a hand-computed slope,
and the model of a profile measured on a real memcached, monotone in key count, size and u."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from cachelab import _core
from cachelab.profile import ProfileSpec, load_profile, profile
from cachelab.servers import PrivateMemcached
from cachelab.simulate.model import latency_model


def monotone_fit(values: list[float]) -> list[float]:
    """The least-squares non-decreasing fit with equal weights, by its closed form (not the
    pool-adjacent-violators loop the model uses): at i, the max over a <= i of the min over
    b >= i of the mean of values[a..b]."""
    n = len(values)
    return [max(min(sum(values[a:b + 1]) / (b - a + 1) for b in range(i, n))
                for a in range(i + 1)) for i in range(n)]


@pytest.fixture(scope="module")
def appengine() -> tuple:
    p = load_profile("appengine-2017")
    return p, latency_model(p).to_core()


def test_published_appengine_points_read_back_or_are_fitted_monotone(appengine: tuple) -> None:
    """At each published percentile, the model's values at the published sizes (key counts)
    are the published ones where they are in order, and otherwise their least-squares
    monotone fit on the log of latency (pooled runs: the geometric mean)."""
    p, model = appengine
    tables = ((p.published["get_by_size"], model.draw_get),
              (p.published["multiget_1kb_by_keys"], model.draw_multiget))
    pooled = 0
    for table, draw in tables:
        sizes = sorted(table["ms"], key=int)
        for i, pct in enumerate(table["percentiles"]):
            column = [table["ms"][s][i] for s in sizes]
            want = [math.exp(v) for v in monotone_fit([math.log(v) for v in column])]
            pooled += want != column
            for s, w in zip(sizes, want):
                assert draw(int(s), pct / 100.0) / 1000.0 == pytest.approx(w, rel=0.01), (s, pct)
    # The published tables are out of order at some percentiles (e.g. 3-key multi-gets are
    # slower at p99.9 than 10-key ones): the fit is exercised, not only the identity.
    assert pooled >= 5
    assert model.adjusted[0] > 0 and model.adjusted[1] > 0


def test_between_cells_it_interpolates_on_a_log_scale(appengine: tuple) -> None:
    _, model = appengine
    sizes = sorted(model.get_sizes)
    for lo, hi in pairwise(sizes):
        mid = int(math.sqrt(lo * hi))  # halfway on a log scale
        for u in (0.1, 0.5, 0.9):
            a, b, m = model.draw_get(lo, u), model.draw_get(hi, u), model.draw_get(mid, u)
            assert a <= m <= b
            t = (math.log(mid) - math.log(lo)) / (math.log(hi) - math.log(lo))
            assert m == pytest.approx(math.exp((1 - t) * math.log(a) + t * math.log(b)), rel=1e-6)


def test_beyond_the_largest_cell_it_is_linear_in_size_and_never_cheaper(appengine: tuple) -> None:
    _, model = appengine
    for draw, top in ((model.draw_get, max(model.get_sizes)),
                      (model.draw_multiget, max(model.multiget_counts))):
        for u in (0.0, 0.3, 0.5, 0.9, 0.99, 1.0):
            at = [draw(top + d * top, u) for d in range(4)]
            assert at[1] >= at[0]
            steps = [b - a for a, b in pairwise(at)]
            assert steps[0] == pytest.approx(steps[1], rel=1e-6, abs=1e-6)
            assert steps[1] == pytest.approx(steps[2], rel=1e-6, abs=1e-6)


def test_extrapolation_by_a_hand_computed_per_key_slope() -> None:
    # Multi-gets of 1 and 10 keys, quantiles at p = 0, 0.5, 1. Per-key slopes:
    # (190 - 100) / 9 = 10, (290 - 200) / 9 = 10 and (580 - 400) / 9 = 20 µs per key.
    model = _core.LatencyModel(get=[(1, [50.0, 60.0])],
                               multiget=[(1, [100.0, 200.0, 400.0]), (10, [190.0, 290.0, 580.0])])
    # 30 keys, 20 past the largest cell.
    assert model.draw_multiget(30, 0.0) == pytest.approx(190.0 + 20 * 10.0, rel=1e-12)
    assert model.draw_multiget(30, 0.5) == pytest.approx(290.0 + 20 * 10.0, rel=1e-12)
    assert model.draw_multiget(30, 1.0) == pytest.approx(580.0 + 20 * 20.0, rel=1e-12)
    # Between two probabilities: the 10-key row read on the log of latency (the geometric
    # mean of 290 and 580 half-way), the slope read linearly (15 µs per key).
    assert model.draw_multiget(30, 0.75) == pytest.approx(math.sqrt(290.0 * 580.0) + 20 * 15.0,
                                                          rel=1e-12)
    # The measured cells themselves are unchanged; one get size: no slope, so it stays.
    assert model.draw_multiget(10, 0.5) == pytest.approx(290.0, rel=1e-12)
    assert model.draw_get(10**6, 1.0) == pytest.approx(60.0, rel=1e-12)
    assert model.adjusted == (0, 0)


def test_the_model_of_a_real_profile_is_monotone_and_exact_at_cells_in_order(
    memcached: PrivateMemcached,
) -> None:
    spec = ProfileSpec(sizes=(100, 300_000), key_counts=(1, 30, 200), samples=400, warmup=20,
                       seed=3)
    p = profile(spec, server=memcached.address)
    assert not p.problems()
    model = latency_model(p, sequence=False).to_core()
    us = [i / 200 for i in range(201)]
    counts = [0, 1, 2, 5, 29, 30, 31, 100, 199, 200, 201, 400, 10_000]
    sizes = [0, 1, 100, 101, 10_000, 299_999, 300_000, 300_001, 10**6, 10**9]
    for u in us:
        for draw, ks in ((model.draw_multiget, counts), (model.draw_get, sizes)):
            values = [draw(k, u) for k in ks]
            assert all(a <= b for a, b in pairwise(values)), (u, values)
    for draw, ks in ((model.draw_multiget, counts), (model.draw_get, sizes)):
        for k in ks:
            values = [draw(k, u) for u in us]
            assert all(a <= b for a, b in pairwise(values)), (k, values)
    # At a percentile where the measured cells are in order, each cell reads back exactly.
    checked = 0
    for op, draw in (("multiget", model.draw_multiget), ("get", model.draw_get)):
        cells = sorted(p.cells_of(op), key=lambda c: (c.keys, c.value_size))
        for pct in (10.0, 50.0, 90.0, 99.0):
            column = [c.at([pct])[0] / 1000.0 for c in cells]
            if all(a <= b for a, b in pairwise(column)):
                for c, want in zip(cells, column):
                    k = c.keys if op == "multiget" else c.value_size
                    assert draw(k, pct / 100.0) == pytest.approx(want, rel=1e-9), (op, k, pct)
                checked += 1
    assert checked >= 2  # at p10 and p50, 1, 30 and 200 keys (100 B, 300 KB) are far apart
