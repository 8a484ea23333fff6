"""Request-level simulation from Python: the latency model, invariants through the binding,
the seed's qualitative result, and the simulate verb's artifacts and errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from cachelab import _core
from cachelab.errors import InputError, UsageError
from cachelab.profile import load_profile
from cachelab.simulate import SimulateSpec, band_at, default_strategies, simulate
from cachelab.simulate.model import latency_model
from cachelab.simulate.request import order_warnings
from cachelab.traces import RequestTrace, SynthParams, synthesize
from clitools import InProcess, one_error_line

# -- the latency model ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def appengine() -> tuple:
    profile = load_profile("appengine-2017")
    return profile, latency_model(profile).to_core()


def test_model_of_a_profile_without_gets_is_refused() -> None:
    profile = load_profile("appengine-2017")
    profile.cells = profile.cells_of("multiget")
    with pytest.raises(InputError, match="no get cells"):
        latency_model(profile)


def test_a_rank_sequence_makes_a_requests_calls_move_together(appengine: tuple) -> None:
    # A profile whose samples came in two long stretches, fast then slow: with the sequence,
    # a request's calls are all fast or all slow, so the spread of request totals is wider
    # than with independent draws, while each call's distribution is the same.
    profile, _ = appengine
    rng = np.random.default_rng(3)
    ranks = [*rng.uniform(0, 0.5, 500).round(5).tolist(), *rng.uniform(0.5, 1, 500).round(5)]
    profile.sequence = {"ranks": ranks, "segments": [500, 500], "lag1": None}
    with_seq = latency_model(profile)
    assert with_seq.draws == "sequence" and with_seq.describe()["sequence"]["ranks"] == 1000
    independent = latency_model(profile, sequence=False)
    # pages of ~ 20 calls each: the default shape's API calls make 3
    trace = synthesize(SynthParams.preset("heavy-pages", requests=2000, seed=5))
    a = _costs(trace, with_seq.to_core(), "none")["added_ms"]
    b = _costs(trace, independent.to_core(), "none")["added_ms"]
    assert np.percentile(a, 99) > 1.2 * np.percentile(b, 99)
    assert np.percentile(a, 10) < np.percentile(b, 10)
    # The means agree within sampling noise: the same per-call distribution.
    assert a.mean() == pytest.approx(b.mean(), rel=0.1)


# -- invariants through the binding ---------------------------------------------------------


@pytest.fixture(scope="module")
def small_trace() -> RequestTrace:
    return synthesize(SynthParams(requests=3000, seed=5))


def _costs(trace: RequestTrace, model: _core.LatencyModel, strategy: str) -> dict:
    out = _core.request_costs(trace.to_core(), model, strategy, train=0.5, seed=11, draw=0)
    return {k: np.asarray(v) for k, v in out.items()}


def test_no_cache_costs_every_request_at_least_as_much_as_any_l1(
    small_trace: RequestTrace, appengine: tuple
) -> None:
    _, model = appengine
    none = _costs(small_trace, model, "none")
    for s in ("lru:50", "lru:200KB", "fixed:100", "fixed:100+lru:50"):
        other = _costs(small_trace, model, s)
        assert np.array_equal(other["request"], none["request"])
        assert np.all(other["added_ms"] <= none["added_ms"] + 1e-9), s
        assert np.all(other["round_trips"] <= none["round_trips"]), s
    # ... and the comparison can fail: an L1 saves time on some request.
    assert np.any(_costs(small_trace, model, "fixed:100")["added_ms"] < none["added_ms"])


def test_prefetch_never_takes_more_round_trips_than_no_cache(
    small_trace: RequestTrace, appengine: tuple
) -> None:
    _, model = appengine
    none = _costs(small_trace, model, "none")
    for s in ("prefetch-children", "prefetch:depth=3"):
        rt = _costs(small_trace, model, s)["round_trips"]
        assert np.all(rt <= none["round_trips"]), s
        assert np.any(rt < none["round_trips"]), s


def test_unlimited_lru_on_one_instance_misses_each_item_once(appengine: tuple) -> None:
    trace = synthesize(SynthParams(requests=2000, seed=9, instances=1))
    _, model = appengine
    costs = _core.request_costs(trace.to_core(), model, f"lru:{trace.n_items}", train=0.0,
                                seed=1, draw=0)
    distinct = len(np.unique(trace.touch_items))
    assert sum(costs["round_trips"]) == distinct


# -- simulate() and the seed's result -------------------------------------------------------


def test_simulate_is_seeded_and_reports_every_strategy(small_trace: RequestTrace) -> None:
    spec = SimulateSpec(strategies=("none", "lru:100", "fixed:100"), draws=3, seed=4)
    a = simulate(small_trace, spec).to_dict()
    b = simulate(small_trace, spec).to_dict()
    c = simulate(small_trace, SimulateSpec(strategies=spec.strategies, draws=3, seed=5)).to_dict()
    assert a["strategies"] == b["strategies"]
    assert a["strategies"] != c["strategies"]
    assert [s["strategy"] for s in a["strategies"]] == list(spec.strategies)
    routes = {r["route"] for s in a["strategies"] for r in s["routes"]}
    assert routes <= set(small_trace.route_names)
    for s in a["strategies"]:
        for band in s["percentiles"]:
            assert band["low"] <= band["median"] <= band["high"]


def test_the_seeds_qualitative_result_holds_on_the_synthetic_default() -> None:
    """Khan Academy: a fixed hot set beats an LRU of the same size at p90, and prefetching a
    topic's descendants in one multi-get cuts the tail further."""
    trace = synthesize(SynthParams.quick())
    n = default_strategies(trace.n_items)[1].split(":")[1]
    result = simulate(trace, SimulateSpec(
        strategies=(f"lru:{n}", f"fixed:{n}", f"fixed:{n}+prefetch:depth=2"), draws=3))

    def p(strategy: str, pct: float) -> float:
        s = result.by_name(strategy)
        return next(b["median"] for b in s["percentiles"] if b["percentile"] == pct)

    assert p(f"fixed:{n}", 90) < p(f"lru:{n}", 90)
    assert p(f"fixed:{n}+prefetch:depth=2", 90) < p(f"fixed:{n}", 90)
    assert p(f"fixed:{n}+prefetch:depth=2", 99) < p(f"fixed:{n}", 99)


def test_bad_specs_are_usage_errors(small_trace: RequestTrace) -> None:
    for bad, match in (
        (SimulateSpec(strategies=("lru",)), "lru"),
        (SimulateSpec(strategies=("fifo:10",)), "fifo"),
        (SimulateSpec(train=1.0), "train"),
        (SimulateSpec(draws=0), "draws"),
    ):
        with pytest.raises(UsageError, match=match):
            simulate(small_trace, bad)


# -- the CLI --------------------------------------------------------------------------------




def test_the_result_writes_every_artifact_and_renders_its_tables(tmp_path: Path) -> None:
    trace = synthesize(SynthParams(requests=2000, seed=3))
    result = simulate(trace, SimulateSpec(strategies=("none", "fixed:50"), draws=2))
    written = result.write(tmp_path / "o")
    assert sorted(p.name for p in written) == ["simulate-routes.csv", "simulate.csv",
                                               "simulate.json", "simulate.png", "simulate.svg"]
    assert json.loads((tmp_path / "o" / "simulate.json").read_text()) == result.to_dict()
    with (tmp_path / "o" / "simulate.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["strategy"] for r in rows] == ["none", "fixed:50"]
    p90 = band_at(result.by_name("fixed:50"), "percentiles", "percentile", 90.0)
    assert float(rows[1]["p90"]) == p90["median"] and float(rows[1]["p90_low"]) == p90["low"]
    text = result.render()
    assert text.startswith("Added latency per request") and "fixed:50" in text
    assert "Which requests hurt most under fixed:50" in text
    assert [p.suffix for p in result.write(tmp_path / "p", plots=False)] == [".json", ".csv",
                                                                             ".csv"]


def test_cli_on_a_saved_trace_writes_every_artifact(cli: InProcess, tmp_path: Path) -> None:
    p = cli("trace", "synth", "--requests", "3000", "t.jsonl", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = cli("simulate", "t.jsonl", "--strategies", "none,lru:100,fixed:100+prefetch-children",
            "--draws", "2", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["schema"] == "cachelab.simulation" and result["mode"] == "request"
    assert [s["strategy"] for s in result["strategies"]] == [
        "none", "lru:100", "fixed:100+prefetch-children"]
    assert json.loads((tmp_path / "o" / "simulate.json").read_text()) == result
    rows = (tmp_path / "o" / "simulate.csv").read_text().splitlines()
    assert rows[0].startswith("strategy,p50,p50_low,p50_high") and len(rows) == 4
    assert (tmp_path / "o" / "simulate-routes.csv").stat().st_size > 0
    for ext in ("png", "svg"):
        assert (tmp_path / "o" / f"simulate.{ext}").stat().st_size > 1000


def test_cli_table_on_the_default_trace(cli: InProcess, tmp_path: Path) -> None:
    p = cli("simulate", "--quick", "--requests", "2000", "--format", "table", "--no-plots",
            "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("answer:")  # the card, then the tables
    assert "\n\nAdded latency per request" in p.stdout
    assert "Which requests hurt most" in p.stdout
    assert not (tmp_path / "o" / "simulate.png").exists()
    assert "sample order" not in p.stdout.splitlines()[0]


def test_cli_says_when_draws_follow_a_profiles_sample_order(cli: InProcess, tmp_path: Path) -> None:
    profile = load_profile("appengine-2017")
    profile.sequence = {"ranks": [0.1, 0.9, 0.5], "segments": [3], "lag1": None}
    profile.save(tmp_path / "seq.json")
    p = cli("simulate", "--quick", "--requests", "500", "--model", "seq.json", "--format",
            "json", "--no-plots", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    model = json.loads(p.stdout)["model"]
    assert model["draws"] == "sequence" and model["sequence"]["ranks"] == 3
    p = cli("simulate", "--quick", "--requests", "500", "--model", "seq.json", "--format",
            "table", "--no-plots", "--out", "o2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    title = next(line for line in p.stdout.splitlines() if line.startswith("Added latency"))
    assert "follow the profile's sample order" in title


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--strategies", "lru:0"], "lru"),
        (["--strategies", "random:5"], "random"),
        (["--train", "1"], "--train"),
        (["--policies", "lru"], "--policies"),
        (["--model", "no-such-profile"], "no-such-profile"),
    ],
)
def test_cli_bad_options_end_in_one_line(
        cli: InProcess, tmp_path: Path, args: list[str], needle: str) -> None:
    p = cli("simulate", "--quick", "--requests", "500", *args, "--out", "o", cwd=tmp_path)
    assert p.returncode == 2
    assert needle in one_error_line(p)


def test_cli_malformed_trace_names_file_and_line(cli: InProcess, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"schema": "cachelab.request-trace", "version": 1, "generator": null}\n'
        '{"item": "a", "size": 10, "kind": "video"}\n'
        '{"request": 0, "time": 0.0, "instance": 0, "route": "r", "base_ms": 5.0, '
        '"items": ["a", "nope"]}\n'
    )
    p = cli("simulate", "bad.jsonl", "--out", "o", cwd=tmp_path)
    assert p.returncode == 2
    line = one_error_line(p)
    assert "bad.jsonl" in line and "line 3" in line and "nope" in line
    assert not (tmp_path / "o" / "simulate.json").exists()


def test_prefetch_needs_a_model_with_multigets(cli: InProcess, tmp_path: Path) -> None:
    profile = load_profile("appengine-2017")
    profile.cells = profile.cells_of("get")
    path = profile.save(tmp_path / "gets-only.json")
    p = cli("simulate", "--quick", "--requests", "500", "--model", path,
            "--strategies", "prefetch-children", "--out", "o", cwd=tmp_path)
    assert p.returncode == 2
    assert "multi-get" in one_error_line(p)


def test_a_trace_out_of_time_order_is_simulated_by_time_with_a_warning(
        cli: InProcess, tmp_path: Path) -> None:
    trace = tmp_path / "unordered.jsonl"
    requests = [(0, 0.0, ["a", "b"]), (1, 1.0, ["a"]), (2, 3.0, ["b"]), (3, 2.0, ["a", "b"])]
    trace.write_text("\n".join([
        '{"schema": "cachelab.request-trace", "version": 1, "generator": null}',
        '{"item": "a", "size": 10, "kind": "video"}',
        '{"item": "b", "size": 20, "kind": "video"}',
        *(json.dumps({"request": r, "time": t, "instance": 0, "route": "r", "base_ms": 5.0,
                      "items": items}) for r, t, items in requests),
    ]) + "\n")
    p = cli("simulate", "unordered.jsonl", "--strategies", "none,lru:1", "--draws", "1",
            "--format", "json", "--no-plots", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    warnings = json.loads(p.stdout)["warnings"]
    assert len(warnings) == 1
    assert "not in time order" in warnings[0] and "request 3 at 2 s after 3 s" in warnings[0]
    assert f"cachelab: warning: {warnings[0]}" in p.stderr.splitlines()
    # Simulated by time: requests 0 and 1 train (lru:1 then holds a), then request 3 (a hits,
    # b misses) and request 2 (b hits): 1 get. In file order it would be 3 (2: b misses;
    # 3: a and b miss).
    assert json.loads(p.stdout)["strategies"][1]["counts"]["gets"] == 1


def test_a_trace_in_time_order_has_no_warning(small_trace: RequestTrace) -> None:
    assert order_warnings(small_trace) == []
