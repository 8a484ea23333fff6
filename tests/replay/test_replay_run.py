"""``cachelab replay`` end to end on a private memcached: the real tiered cache mirrors the
simulator (hit ratios and round trips agree exactly, round trips request by request), the
prediction's terms are computed and reported, the per-strategy profile is measured through the
tiered cache's L2 call, and nothing is left in memcached. Latency agreement is a measurement
(recorded in benches/runs and docs/tiered.md), not asserted here."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import signal
import time

import numpy as np
import pytest

from cachelab import _core, profile, replay, traces
from cachelab.errors import UsageError
from cachelab.replay.calibrate import Calibrator
from cachelab.replay.compare import shuffled_sums
from cachelab.replay.driver import Driver, Workload, clock
from cachelab.replay.result import CSV_COLUMNS
from cachelab.servers import PrivateMemcached, ServerOptions, serve
from cachelab.simulate import latency_model

SMALL_SITE = dict(domains=2, subjects_per_domain=2.0, topics_per_subject=3.0,
                  tutorials_per_topic=3.0, items_per_tutorial=4.0, instances=3)
TERM_NAMES = [t for t, _ in replay.TERMS]


def _items(address: str) -> int:
    return int(_core.Client(address).stats()["curr_items"])


@pytest.fixture(scope="module")
def trace() -> traces.RequestTrace:
    return traces.synthesize(traces.SynthParams(requests=400, **SMALL_SITE))


@pytest.fixture(scope="module")
def result(memcached: PrivateMemcached, trace) -> tuple[replay.ReplayResult, int, int]:
    before = _items(memcached.address)
    n = 10
    spec = replay.ReplaySpec(
        strategies=("none", f"lru:{n}", f"fixed:{n}", f"fixed:{n}+prefetch-children",
                    "lru:20000B+prefetch:depth=2"),
        profile_samples=50, profile_warmup=2, draws=2, calibration_reps=10, slices=2)
    r = replay.replay(trace, spec, server=memcached.address)
    return r, before, _items(memcached.address)


def test_replay_mirrors_the_simulator(result) -> None:
    r, before, after = result
    assert [s["strategy"] for s in r.strategies] == [
        _core.parse_strategy(s) for s in r.spec["strategies"]]
    for s in r.strategies:
        c = s["checks"]
        assert c["hit_ratio"]["measured"] == pytest.approx(c["hit_ratio"]["predicted"], abs=1e-9)
        assert c["round_trips_per_request"]["measured"] == pytest.approx(
            c["round_trips_per_request"]["predicted"], abs=1e-9)
        assert c["round_trips_differ_in_requests"] == 0
        assert c["loader_keys"] == 0 and c["errors"] == 0
        for block in ("added_ms", "increase", "memcached_ms", "library_ms"):
            assert set(s[block]) == {"50", "90", "99"}
        # The verdict is on the added ms (the increase is reported beside it).
        worst = max(abs(v["error"]) for v in s["added_ms"].values())
        assert s["worst_error"] == pytest.approx(worst)
        assert s["within_tolerance"] == (worst <= replay.TOLERANCE)
    assert after == before  # catalog, profile keys: all deleted


def test_each_term_is_measured_counted_and_reported(result, trace) -> None:
    r, _, _ = result
    n_eval = r.trace["evaluated"]
    order = np.lexsort((np.arange(len(trace)), trace.time))
    evaluated = order[len(trace) - n_eval:]
    touches = np.mean([len(trace.touches(int(i))) for i in evaluated])
    for s in r.strategies:
        t = s["terms"]
        unit, per, mean = t["unit_us"], t["per_request"], t["mean_ms"]
        assert unit["request"] > 0 and unit["scope"] > 0 and unit["get"] > 0
        has_l1 = not s["strategy"].startswith("none")
        assert (unit["l1_hit"] > 0) == has_l1
        # Every touch is exactly one of: a scope hit, an L1 hit, a get.
        assert per["scope"] + per["l1_hit"] + per["get"] == pytest.approx(touches)
        prefetch = "prefetch" in s["strategy"]
        assert ("prefetch_walk" in unit) == prefetch
        assert (per["prefetch"] > 0) == prefetch
        # Round trips = single gets + one multi-get per prefetch that sent keys.
        assert per["round_trips"] >= per["get"]
        assert mean["total"] == pytest.approx(sum(v for k, v in mean.items() if k != "total"))
        # A request's first get costs get_first, each further one get: the mean lies between.
        lo, hi = sorted((unit["get_first"], unit["get"]))
        assert lo * per["get"] / 1000 * (1 - 1e-9) <= mean["get"] <= hi * per["get"] / 1000 * (
            1 + 1e-9)
        assert s["think_us"]["calls"] > 0
        for k, m in s["memcached_ms"].items():
            assert m["calls_shuffled"] >= 0
            assert s["added_ms"][k]["predicted"] > m["predicted"]  # the library terms add
    text = r.render()
    assert text == replay.render(r)
    for name in (*TERM_NAMES, "Checks", "shuffled", "load average", "95% CI"):
        assert name in text


def test_each_strategy_has_its_own_profile_through_the_tier(result) -> None:
    r, _, _ = result
    for s in r.strategies:
        p = profile.LatencyProfile.from_dict(r.profile[s["strategy"]]["latency_profile"])
        assert p.client["via"] == "python" and p.client["mode"] == "interleaved"
        assert p.client["think_ns"]["n"] > 0 and p.client["think_cpu"] is True
        ops = {c.op for c in p.cells if c.samples > 0}
        assert ops == ({"get", "multiget"} if "prefetch" in s["strategy"] else {"get"})
        assert all(c.samples == 50 and c.misses == 0 and not c.errors for c in p.cells)
        latency_model(p)  # usable by simulate as is


def test_the_profile_keeps_its_sample_order_and_the_prediction_follows_it(result) -> None:
    r, _, _ = result
    for s in r.strategies:
        p = profile.LatencyProfile.from_dict(r.profile[s["strategy"]]["latency_profile"])
        seq = p.sequence
        n = sum(c.samples for c in p.cells)
        # Every sample taken during the evaluation, in order: one segment per slice.
        assert len(seq["ranks"]) == n and sum(seq["segments"]) == n
        assert len(seq["segments"]) == 2
        assert all(0 < u < 1 for u in seq["ranks"])
        m = latency_model(p)
        assert m.draws == "sequence" and m.to_core().sequence_length == n
        assert latency_model(p, sequence=False).to_core().sequence_length == 0
        assert s["draws"]["used"] == "sequence"
        # The other prediction (independent draws) is reported next to it.
        alt = s["alternative"]
        assert set(alt) == {"50", "90", "99"}
        assert all(alt[k]["memcached_ms"] > 0 for k in alt)
    assert "independent draws the errors would be" in r.render()


def test_calibration_between_requests_is_kept_out_of_think_time(
        memcached: PrivateMemcached, trace) -> None:
    """Interleaved calibration requests run between an application's reads; the next read's
    think time must be the application's own pause, not the calibration's."""
    shared = {"last": 0, "cpu": 0}
    d = Driver(Workload.of(trace), memcached.address, "cachelab:test-calibration", "none", None,
               1.0, shared)
    cal = Calibrator(d, np.random.default_rng(0))
    cache, kc = next(iter(d.caches.values()))
    try:
        d.tier.recording = True
        cache.get(kc, 0)  # an application read: the think-time clock starts at its end
        ended = shared["last"]
        pause = 50_000_000
        time.sleep(pause / 1e9)
        n = len(d.tier.gaps)
        # The calibration's steps, timed here: its time is at least from the first one's start
        # to the last one's end.
        steps: list[int] = []
        step = cal.step

        def timed_step() -> None:
            steps.append(clock())
            step()
            steps.append(clock())

        cal.step = timed_step  # type: ignore[method-assign]
        before = clock()
        cal.aside(2 * cal.per_round)
        assert len(d.tier.gaps) == n  # the calibration's own reads are not the application's
        assert all(len(v) == 2 for v in cal.raw.values())  # every kind ran, twice
        cache.get(kc, 1)
        after = clock()
        assert len(d.tier.gaps) == n + 1
        # The pause is think time; the calibration's time (its reads included) is not. Bounds
        # from this test's own clock, not the sleep's length (a loaded machine oversleeps):
        # at least the pause taken before the calibration, at most the whole time from the
        # first read's end to the second's, less the calibration's.
        gap = d.tier.gaps[-1]
        assert pause <= before - ended <= gap, (gap, before - ended)
        assert gap <= (after - ended) - (steps[-1] - steps[0]), (gap, after - ended, steps)
    finally:
        d.tier.close()
        with _core.Client(memcached.address) as c:
            for i in range(trace.n_items):
                c.delete(f"cachelab:test-calibration:item:{i}")


def test_profile_via_tier(memcached: PrivateMemcached) -> None:
    before = _items(memcached.address)
    p = profile.profile_via_tier(memcached.address, sizes=(10, 5000), key_counts=(1, 4),
                                  multi_value_size=300, samples=30, warmup=2,
                                  think_ns=[0, 20_000], think_cpu=True, seed=3)
    assert [(c.op, c.value_size, c.keys, c.samples) for c in p.cells] == [
        ("get", 10, 1, 30), ("get", 5000, 1, 30), ("multiget", 300, 1, 30),
        ("multiget", 300, 4, 30)]
    assert all(c.misses == 0 and not c.errors for c in p.cells)
    assert p.client["via"] == "python" and p.client["think_cpu"] is True
    assert p.client["think_ns"]["n"] == 2 and p.client["think_ns"]["mean"] == 10_000.0
    assert _items(memcached.address) == before
    model = latency_model(p)
    assert [s for s, _ in model.get] == [10, 5000] and [k for k, _ in model.multiget] == [1, 4]
    with pytest.raises(UsageError):
        profile.profile_via_tier(memcached.address, sizes=(), key_counts=())
    with pytest.raises(UsageError):
        profile.profile_via_tier(memcached.address, sizes=(10,), think_ns=[-1])


def test_the_result_writes_every_artifact(result, tmp_path) -> None:
    r, _, _ = result
    paths = r.write(tmp_path / "out")
    assert [p.name for p in paths] == ["replay.json", "replay.csv"]
    assert json.loads(paths[0].read_text()) == json.loads(json.dumps(r.to_dict()))
    with paths[1].open() as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 1 + 3 * len(r.strategies)


def test_without_a_server_replay_starts_its_own(trace) -> None:
    spec = replay.ReplaySpec(strategies=("fixed:10",), profile_samples=50, profile_warmup=1,
                             draws=1, calibration_reps=10, slices=1)
    r = replay.replay(trace, spec, server_options=ServerOptions(threads=2))
    assert r.server["private"] is True and "-t" in r.server["argv"]
    i = r.server["argv"].index("-m")
    assert int(r.server["argv"][i + 1]) >= 64  # at least what the catalog needs
    assert r.server["argv"][r.server["argv"].index("-t") + 1] == "2"  # as told
    assert r.strategies[0]["checks"]["round_trips_differ_in_requests"] == 0
    # Untold, one worker thread (every strategy meets the same server thread), where the
    # other verbs' private servers have 4.
    r = replay.replay(trace, spec, server_options=ServerOptions())
    assert r.server["argv"][r.server["argv"].index("-t") + 1] == str(replay.SERVER_THREADS) == "1"
    with serve(None, ServerOptions()) as target:
        argv = target.facts["argv"]
        assert argv[argv.index("-t") + 1] == "4"


def test_a_busy_machine_is_measured_and_said(result) -> None:
    r, _, _ = result
    m = r.machine
    assert m is not None and m["cores"] and m["seconds"] > 0
    assert m["others_cores"] >= 0 and m["busy"] is (m["others_cores"] > 0.5
                                                     or m["steal_cores"] > 0.5)
    busy = dataclasses.replace(r, machine={**m, "others_cores": 1.2, "busy": True})
    assert busy.busy() is not None and "1.20 of" in busy.busy()
    text = busy.render()
    if busy.failure() is None:
        assert "MACHINE BUSY: other processes used 1.20 of" in text
    else:
        assert busy.failure().endswith("the comparison is unreliable")
        assert busy.failure() in text
    quiet = dataclasses.replace(r, machine={**m, "others_cores": 0.1, "steal_cores": 0.0,
                                            "busy": False})
    assert quiet.busy() is None and "MACHINE BUSY" not in quiet.render()


def test_a_read_that_fails_mid_request_leaves_its_calls_paired(
        fresh_memcached: PrivateMemcached, trace) -> None:
    """A request whose L2 read times out (its server stopped) keeps latencies and kinds of
    the reads that succeeded, one to one — the pairing the shuffled comparison deals from
    (an unpaired list raised ``IndexError`` in ``run``'s replay step on a loaded machine)."""
    shared = {"last": 0, "cpu": 0}
    d = Driver(Workload.of(trace), fresh_memcached.address, "cachelab:test-failed-read",
               "none", None, 0.3, shared)
    work = d.work
    many = [r for r in range(len(trace)) if len(work.touches[r]) > 1]
    first, stopped = many[0], many[1]
    try:
        d.run(first)  # misses, filled: the fills' writes are not reads
        os.kill(fresh_memcached.pid, signal.SIGSTOP)
        try:
            d.run(stopped)
        finally:
            os.kill(fresh_memcached.pid, signal.SIGCONT)
    finally:
        d.tier.close()
    assert d.tier.failures >= 1
    for r in (first, stopped):
        latencies, multi = d.calls[r]
        assert len(latencies) == len(multi), r
    assert len(d.calls[first][0]) == len(work.touches[first])  # "none": a read per touch
    assert len(d.calls[stopped][0]) < len(work.touches[stopped])
    sums = shuffled_sums(d.calls, np.asarray([first, stopped]), seed=0)
    assert len(sums) == 2 and sums.sum() > 0
