"""Merging load agents' outcomes (cachelab.load.merge): counts add, histograms merge without
loss, and the result reads as an ordinary load run. Real engine runs, no Ray."""

from __future__ import annotations

import pytest

import cachelab._core as _core
from cachelab.load import LoadSpec, result_from_outcome
from cachelab.load.merge import merge_outcomes
from cachelab.load.timeline import liveness


@pytest.fixture(scope="module")
def outcomes(memcached) -> list[dict]:
    runs = []
    for seed in (1, 2):
        spec = LoadSpec(connections=2, rate=1500.0, duration=0.8, warmup=0.2, interval=0.2,
                        key_space=100, seed=seed)
        runs.append(_core.load_run(spec.to_core(memcached.address, f"merge{seed}"),
                                   _core.LoadProgress()))
    return runs


def test_counts_add_and_histograms_merge_losslessly(outcomes) -> None:
    a, b = outcomes
    m = merge_outcomes(outcomes, rate=3000.0)
    for scope in ("all", "measured"):
        for tag in ("corrected", "uncorrected"):
            assert m[scope][tag]["count"] == a[scope][tag]["count"] + b[scope][tag]["count"]
            assert m[scope][tag]["max"] == max(a[scope][tag]["max"], b[scope][tag]["max"])
            p50s = sorted((a[scope][tag]["percentiles"]["50"], b[scope][tag]["percentiles"]["50"]))
            assert p50s[0] <= m[scope][tag]["percentiles"]["50"] <= p50s[1]
        assert m[scope]["replies"] == a[scope]["replies"] + b[scope]["replies"]
        for op in ("get", "set"):
            assert m[scope]["ops"][op] == a[scope]["ops"][op] + b[scope]["ops"][op]
    assert len(m["intervals"]) == max(len(a["intervals"]), len(b["intervals"]))
    assert sum(iv["sent"] for iv in m["intervals"]) == a["all"]["sent"] + b["all"]["sent"]
    assert m["schedule"]["target_rate"] == 3000.0


def test_a_run_merged_with_itself_keeps_its_percentiles(outcomes) -> None:
    a = outcomes[0]
    m = merge_outcomes([a, a], rate=1500.0)
    for tag in ("corrected", "uncorrected"):
        assert m["all"][tag]["count"] == 2 * a["all"][tag]["count"]
        assert m["all"][tag]["percentiles"] == a["all"][tag]["percentiles"]
        assert m["all"][tag]["mean"] == pytest.approx(a["all"][tag]["mean"], rel=1e-9)


def test_the_merge_becomes_an_ordinary_result(outcomes, memcached) -> None:
    spec = LoadSpec(connections=4, rate=3000.0, duration=0.8, warmup=0.2, interval=0.2,
                    key_space=100, seed=1)
    core = spec.to_core(memcached.address, "merged")
    r = result_from_outcome(merge_outcomes(outcomes, rate=3000.0), spec, core,
                            address=memcached.address, server_facts={}, started=0.0)
    assert r.totals["replies"] == sum(o["measured"]["replies"] for o in outcomes)
    assert r.schedule["target_rate"] == 3000.0 and "held" in r.schedule
    assert "agents" not in r.to_dict()
    assert "measured:" in r.render()


def test_a_sliver_without_replies_is_not_dead_time() -> None:
    """The tail of a merged run: every agent closes a last interval of a few ms after its
    last reply. It is not time the server did not answer; a whole empty interval is."""
    def iv(index: int, replies: int, duration: float) -> dict:
        return {"index": index, "warmup": False, "replies": replies, "duration_s": duration}

    live = liveness([iv(0, 500, 0.5), iv(1, 0, 0.5), iv(2, 480, 0.5), iv(3, 0, 0.003)])
    assert live["dead_intervals"] == [1] and live["dead_s"] == 0.5
    assert live["live_s"] == pytest.approx(1.003)
