"""The profile a simulation needs (issue 19, part 2): the cells its strategies issue on a trace,
and ``simulate --server`` measuring them on a real memcached; and why a strategy wins (part 4):
its predicted time split into cost terms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.profile import ProfileSpec
from cachelab.servers import PrivateMemcached
from cachelab.simulate import issued_cells, profile_spec_for
from cachelab.simulate.model import QUANTILE_POINTS, LatencyModel
from cachelab.simulate.terms import cost_terms, unit_costs
from cachelab.traces import RequestTrace
from clitools import InProcess, one_error_line

CHILDREN = 30


def _topic_trace(requests: int = 200) -> RequestTrace:
    """One topic of 30 children (5,000 and 2,000 bytes); every request touches the topic and
    its first five children."""
    catalog = [{"item": "T", "size": 5000, "kind": "topic",
                "children": [f"c{i}" for i in range(CHILDREN)]}]
    catalog += [{"item": f"c{i}", "size": 2000, "kind": "video"} for i in range(CHILDREN)]
    reqs = [{"request": n, "time": float(n), "instance": 0, "route": "topic", "base_ms": 50.0,
             "items": ["T"] + [f"c{i}" for i in range(5)]} for n in range(requests)]
    return RequestTrace.from_records(catalog, reqs)


def test_the_cells_are_what_the_strategies_issue() -> None:
    trace = _topic_trace()
    base = ProfileSpec()
    issued = issued_cells(trace, ["none", "prefetch-children"], base=base)
    # Without an in-process cache, each evaluated request (the second half) prefetches the
    # topic and all its children in one multi-get: 1 + 30 keys, 100 times.
    assert issued.multigets == {"prefetch-children": {
        "multigets": 100, "p50": 31.0, "p90": 31.0, "p99": 31.0, "max": CHILDREN + 1}}
    # Touched sizes: five children of 2,000 bytes for one topic of 5,000.
    assert issued.sizes == {"p50": 2000, "p90": 5000, "p99": 5000, "max": 5000}
    assert issued.added_key_counts == [31]
    assert issued.added_sizes == [2000, 5000]
    spec = profile_spec_for(base, issued)
    assert set(base.key_counts) | {31} == set(spec.key_counts)
    assert set(base.sizes) | {2000, 5000} == set(spec.sizes)
    assert spec.multi_value_size == 2000


def test_no_prefetch_adds_no_multiget_cells_and_near_cells_are_not_added() -> None:
    trace = _topic_trace()
    base = ProfileSpec(sizes=(1000, 1800, 4800), key_counts=(1, 30))
    issued = issued_cells(trace, ["none", "prefetch-children"], base=base)
    # 31 keys is within 15 % of the 30-key cell; 2,000 and 5,000 of 1,800 and 4,800.
    assert issued.added_key_counts == [] and issued.added_sizes == []
    plain = issued_cells(trace, ["none", "lru:10"], base=base)
    assert plain.multigets == {} and plain.multi_value_size is None
    assert profile_spec_for(base, plain).multi_value_size == base.multi_value_size


def test_the_largest_touched_size_is_a_cell_when_beyond_every_cell() -> None:
    """A value larger than every cell would be extrapolated (and a get's cost per byte grows
    above ~100 KB): the largest touched size is measured, at most what the server stores."""
    catalog = [{"item": "big", "size": 900_000, "kind": "video"},
               {"item": "small", "size": 2000, "kind": "video"}]
    reqs = [{"request": n, "time": float(n), "instance": 0, "route": "r", "base_ms": 50.0,
             "items": ["small"] * 9 + ["big"]} for n in range(100)]
    trace = RequestTrace.from_records(catalog, reqs)
    base = ProfileSpec(sizes=(100, 1000, 10_000), key_counts=())
    # The p99 of the touches is the big one itself: its cell is not added twice.
    issued = issued_cells(trace, ["none"], base=base)
    assert issued.sizes["max"] == 900_000
    assert 900_000 in issued.added_sizes and len(set(issued.added_sizes)) == len(
        issued.added_sizes)
    # The big item is 1 % of the touches: the p50 (2,000) is added, the p99 (~11,000) is near
    # the 10,000 cell, and the max joins them.
    rare = RequestTrace.from_records(catalog, [
        {**r, "items": ["small"] * 99 + ["big"]} for r in reqs])
    issued = issued_cells(rare, ["none"], base=base)
    assert issued.added_sizes == [2000, 900_000]
    capped = issued_cells(rare, ["none"], base=base, largest=500_000)
    assert capped.added_sizes == [2000, 500_000]
    # Within 15 % of the largest cell: extrapolation is short, the max is not added.
    near = issued_cells(rare, ["none"], base=ProfileSpec(sizes=(2000, 800_000), key_counts=()))
    assert near.sizes["max"] == 900_000 and max(near.added_sizes) < 800_000


def test_simulate_server_profiles_the_issued_cells_and_simulates_with_them(
        cli: InProcess, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    assert cli("trace", "synth", trace, "--requests", "3000").returncode == 0
    out = tmp_path / "sim"
    with PrivateMemcached() as server:
        p = cli("simulate", trace, "--server", server.address, "--quick", "--no-plots",
                "--out", out, "--format", "json")
        assert p.returncode == 0, p.stderr[-2000:]
        doc = json.loads(p.stdout)
        profile = json.loads((out / "profile" / "profile.json").read_text())
        assert doc["model"]["name"] == profile["name"]
        assert server.address in profile["name"]
        added = doc["cells_from_trace"]["added_key_counts"]
        assert added, doc["cells_from_trace"]
        counts = {c["keys"] for c in profile["cells"] if c["op"] == "multiget"}
        assert set(added) <= counts and {1, 3, 5, 10, 100} <= counts
        assert profile["client"]["multi_value_size"] == doc["cells_from_trace"]["multi_value_size"]
        # The trace file was read in parts, its cells chosen from its first requests.
        assert doc["trace"]["read"].startswith("in parts"), doc["trace"]
        assert doc["trace"]["cells_from"] == "the first 3,000 of 3,000 requests"
        # Everything profile wrote was deleted.
        assert profile["run"]["leftover_keys"] == 0
        with _core.Client(server.address) as c:
            stats = dict(c.stats())
        assert int(stats["curr_items"]) == 0 and int(stats["total_items"]) > 0


def test_a_long_trace_file_is_profiled_from_its_first_requests_and_simulated_in_parts(
        tmp_path: Path) -> None:
    """``measure_and_simulate_file`` chooses the cells from the first ``cells_from`` requests
    (the issued key counts of those alone), and simulates the whole file with the measured
    profile: the same result as the whole trace in memory with that profile."""
    from cachelab.profile import ProfileSpec
    from cachelab.simulate import (
        SimulateSpec,
        issued_cells,
        measure_and_simulate_file,
        simulate,
    )
    from cachelab.traces import SynthParams, load_request_trace
    from cachelab.traces.synth import synth_parts, write_synth

    path = tmp_path / "t.jsonl"
    params = SynthParams(requests=9000, seed=4)
    write_synth(params, path)
    spec = SimulateSpec(strategies=["none", "fixed:200+prefetch-children"], draws=2, seed=3)
    base = ProfileSpec.quick()
    with PrivateMemcached() as server:
        r = measure_and_simulate_file(path, spec, server.address, base=base, cells_from=4000)
    # (rounded up to a multiple of the parts' 4,096)
    assert r.trace["cells_from"] == "the first 4,096 of 9,000 requests"
    assert r.trace["requests"] == 9000 and r.trace["read"].startswith("in parts")
    first = next(iter(synth_parts(params, 4096).parts()))
    want = issued_cells(first, spec.strategies, base=base)
    assert r.extra["cells_from_trace"]["added_key_counts"] == want.added_key_counts
    again = simulate(load_request_trace(path), spec, profile=r.profile)
    assert r.model == again.model
    for a, b in zip(r.strategies, again.strategies):
        assert a["percentiles"] == b["percentiles"] and a["counts"] == b["counts"]


def test_simulate_server_usage_errors(cli: InProcess, tmp_path: Path) -> None:
    p = cli("simulate", "--server", "127.0.0.1:1", "--model", "appengine-2017x",
            "--out", tmp_path / "a")
    assert p.returncode == 2 and "--model and --server" in one_error_line(p)
    flat = tmp_path / "f.csv"
    flat.write_text("time,key,size\n1,a,10\n")
    p = cli("simulate", flat, "--server", "127.0.0.1:1", "--out", tmp_path / "b")
    assert p.returncode == 2 and "only for request traces" in one_error_line(p)
    # Refused before the trace is made or a cluster is reached.
    p = cli("simulate", "--server", "127.0.0.1:1", "--ray", "127.0.0.2:1",
            "--out", tmp_path / "c")
    assert p.returncode == 2 and "--server with --ray" in one_error_line(p)


def test_cost_terms_split_a_request_as_counted_by_hand() -> None:
    """Constant latencies (every quantile equal), one get cell (2,000 B: 1 ms) and multi-get
    cells at 1 and 31 keys (1 ms, 2.5 ms): a round trip costs 1 ms, a further key
    1.5 / 30 = 0.05 ms, a byte nothing; no draw strays from the medians."""
    flat = [1000.0] * QUANTILE_POINTS
    model = LatencyModel("constant", get=[(2000, flat)],
                         multiget=[(1, flat), (31, [2500.0] * QUANTILE_POINTS)])
    assert unit_costs(model) == {"round_trip_ms": 1.0, "key_ms": 0.05, "byte_ms": 0.0}
    catalog = [{"item": "T", "size": 2000, "kind": "topic",
                "children": [f"c{i}" for i in range(CHILDREN)]}]
    catalog += [{"item": f"c{i}", "size": 2000, "kind": "video"} for i in range(CHILDREN)]
    reqs = [{"request": n, "time": float(n), "instance": 0, "route": "topic", "base_ms": 50.0,
             "items": ["T"] + [f"c{i}" for i in range(5)]} for n in range(100)]
    trace = RequestTrace.from_records(catalog, reqs)
    none = cost_terms(trace, model, "none")
    # Six gets a request: 6 round trips, 6 ms.
    assert none["per_request"]["round_trips"] == 6.0
    assert none["ms"]["round_trips"]["mean"] == pytest.approx(6.0)
    assert none["total_ms"]["p99"] == pytest.approx(6.0)
    assert abs(none["ms"]["spread"]["mean"]) < 1e-9 and none["ms"]["keys"]["mean"] == 0
    pre = cost_terms(trace, model, "prefetch-children")
    # One multi-get of the topic and its 30 children: 1 round trip + 30 further keys.
    assert pre["per_request"]["round_trips"] == 1.0
    assert pre["per_request"]["multiget_keys"] == 31.0
    assert pre["ms"]["round_trips"]["mean"] == pytest.approx(1.0)
    assert pre["ms"]["keys"]["mean"] == pytest.approx(1.5)
    assert pre["total_ms"]["mean"] == pytest.approx(2.5)
    assert abs(pre["ms"]["spread"]["mean"]) < 1e-9
    assert pre["share"]["keys"] == pytest.approx(0.6)
