"""Merging load agents' outcomes (cachelab.load.merge): counts add, histograms merge without
loss, and the result reads as an ordinary load run. Real engine runs, no Ray."""

from __future__ import annotations

import pytest

import cachelab._core as _core
from cachelab.load import LoadSpec, result_from_outcome
from cachelab.load.engine import down_seconds
from cachelab.load.merge import merge_outcomes
from cachelab.load.timeline import liveness
from pools import loopback_pool


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


def test_pool_members_add_up_over_agents_and_their_episodes_keep_their_agent() -> None:
    """Two real runs on the same two-member pool merged as agents 0 and 3: each member's
    counts are the sums, its histogram the lossless merge, its key count the runs' own."""
    with loopback_pool(("127.0.0.2", "127.0.0.3")) as pool:
        addresses = [s.address for s in pool]
        runs = []
        for seed in (1, 2):
            spec = LoadSpec(connections=1, duration=None, requests=400, warmup=0.0,
                            key_space=100, seed=seed, servers=addresses)
            runs.append(_core.load_run(spec.to_core(addresses, "poolmerge"),
                                       _core.LoadProgress()))
    # A down episode each, as an agent's engine reports one (real ones need a stopped member;
    # tests/ray/test_load_agents_pool.py makes them).
    runs[0]["members"][1]["down"] = [{"start_s": 0.5, "end_s": 1.5, "failures": 2,
                                      "connections": 1, "open": False}]
    runs[1]["members"][1]["down"] = [{"start_s": 0.25, "end_s": 1.0, "failures": 2,
                                      "connections": 1, "open": False}]
    m = merge_outcomes(runs, rate=None, agents=[0, 3])
    assert [x["address"] for x in m["members"]] == addresses and m["behind"] == []
    for i, member in enumerate(m["members"]):
        parts = [r["members"][i] for r in runs]
        for k in ("sent", "replies", "hits", "misses", "lost"):
            assert member[k] == sum(p[k] for p in parts), k
        assert member["sent"] > 0 and member["keys"] == parts[0]["keys"] == parts[1]["keys"]
        assert member["latency"]["count"] == sum(p["latency"]["count"] for p in parts)
        assert member["latency"]["max"] == max(p["latency"]["max"] for p in parts)
    assert sum(x["replies"] for x in m["members"]) == m["all"]["replies"] == 800
    assert [(e["agent"], e["start_s"]) for e in m["members"][1]["down"]] == [(3, 0.25), (0, 0.5)]
    # Overlapping episodes from two agents: the member was down from 0.25 s to 1.5 s.
    assert down_seconds(m["members"][1]["down"]) == pytest.approx(1.25)
    assert down_seconds([]) == 0.0


def test_a_sliver_without_replies_is_not_dead_time() -> None:
    """The tail of a merged run: every agent closes a last interval of a few ms after its
    last reply. It is not time the server did not answer; a whole empty interval is."""
    def iv(index: int, replies: int, duration: float) -> dict:
        return {"index": index, "warmup": False, "replies": replies, "duration_s": duration}

    live = liveness([iv(0, 500, 0.5), iv(1, 0, 0.5), iv(2, 480, 0.5), iv(3, 0, 0.003)])
    assert live["dead_intervals"] == [1] and live["dead_s"] == 0.5
    assert live["live_s"] == pytest.approx(1.003)
