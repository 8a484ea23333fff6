"""``cachelab compare``: per-percentile changes with bootstrap intervals, verdicts only when the
interval allows one, and refusals for results that cannot be compared."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cachelab import _core, traces
from cachelab.compare import compare
from cachelab.compare.stats import boot_percentile
from cachelab.errors import UsageError
from cachelab.profile import ProfileSpec, profile
from cachelab.report import render_report
from cachelab.simulate import SimulateSpec, simulate
from cachelab.usl import fit_csv
from clitools import InProcess


def profile_doc(cells: dict[tuple[str, int], list[int]], protocol: str = "text") -> dict:
    """A latency profile (schema v1) whose cells hold exactly the given latencies (ns)."""
    return {
        "schema": "cachelab.latency-profile", "schema_version": 1, "name": "test",
        "source": "measured", "created": "2025-01-01T00:00:00Z", "unit": "ns",
        "server": {"address": "127.0.0.1:1"}, "client": {"protocol": protocol, "concurrency": 1},
        "environment": {}, "run": {},
        "cells": [{"op": op, "value_size": size, "keys": 1, "samples": len(v),
                   "histogram": _core.hist_from_values(v), "errors": {}, "mismatches": 0,
                   "misses": 0, "percentiles": {}} for (op, size), v in cells.items()],
    }


def write(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def lognormal(n: int, median_ns: float, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in median_ns * np.exp(0.4 * rng.standard_normal(n))]


def test_a_known_shift_is_found_and_no_shift_is_not(tmp_path: Path) -> None:
    base = lognormal(5000, 100_000, seed=1)
    a = write(tmp_path / "a.json", profile_doc({("get", 100): base, ("get", 1000): base}))
    b = write(tmp_path / "b.json", profile_doc({
        ("get", 100): [int(v * 1.5) for v in lognormal(5000, 100_000, seed=2)],
        ("get", 1000): lognormal(5000, 100_000, seed=3),  # same distribution, new draws
    }))
    r = compare([a, b], seed=7)
    rows = {(x["item"], x["metric"]): x for x in r.rows}
    shifted = rows[("get 100B", "p50")]
    assert shifted["verdict"] == "higher" and shifted["direction"] == "worse"
    assert shifted["ci_low"] < 0.5 < shifted["ci_high"]
    assert 0.4 < shifted["relative"] < 0.6
    same = rows[("get 1KB", "p50")]
    assert same["verdict"] == "no clear difference"
    assert same["ci_low"] < 0 < same["ci_high"]
    # 5000 samples leave 5 beyond p99.9: no verdict there.
    assert rows[("get 100B", "p99.9")]["verdict"] == "too few samples"
    assert rows[("get 100B", "p99")]["verdict"] == "higher"


def test_beta_bootstrap_matches_resampling_the_values() -> None:
    """The order-statistic shortcut gives the same spread as resampling the raw values."""
    values = lognormal(2000, 50_000, seed=4)
    hist = _core.hist_from_values(values)
    rng = np.random.default_rng(5)
    arr = np.asarray(values)
    for q in (50.0, 90.0, 99.0):
        fast = boot_percentile(hist, len(values), q, rng, 4000)
        k = int(np.ceil(q / 100 * len(values)))
        brute = np.sort(rng.choice(arr, size=(4000, len(values)), replace=True), axis=1)[:, k - 1]
        assert np.std(fast) == pytest.approx(np.std(brute), rel=0.15)
        assert np.median(fast) == pytest.approx(np.median(brute), rel=0.01)


def test_two_measured_profiles(cli: InProcess, tmp_path: Path, memcached) -> None:  # noqa: ANN001
    spec = ProfileSpec.quick(sizes=(100, 1000), key_counts=(1, 5), samples=300, seed=1)
    for name in ("a", "b"):
        profile(spec, server=memcached.address).write(tmp_path / name, plots=False)
    p = cli("compare", tmp_path / "a", tmp_path / "b", "--out", tmp_path / "cmp",
            "--format", "json", "--resamples", "500")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "cachelab.compare" and doc["kind"] == "profile"
    items = {r["item"] for r in doc["rows"]}
    assert items == {"floor", "get 100B", "get 1KB", "set 100B", "set 1KB", "multiget 1 key",
                     "multiget 5 keys"}
    for r in doc["rows"]:
        assert r["ci_low"] <= r["ci_high"]
        assert r["verdict"] in ("higher", "lower", "no clear difference", "too few samples")
    for f in ("compare.json", "compare.csv", "compare.png", "compare.svg"):
        assert (tmp_path / "cmp" / f).stat().st_size > 100
    # The report renders the comparison too.
    rep = render_report([tmp_path / "cmp"])
    assert [s.kind for s in rep.sections] == ["compare"] and rep.sections[0].figures == 1


def test_simulations_with_two_models_on_one_trace(tmp_path: Path) -> None:
    trace = traces.synthesize(traces.SynthParams(requests=2000))
    paths = []
    for model in ("appengine-2017", str(write(tmp_path / "m.json", profile_doc({
            ("get", s): lognormal(500, 300_000, seed=s) for s in (10, 1000, 100_000)})))):
        r = simulate(trace, SimulateSpec(model=model, draws=2, strategies=("none", "lru:100")))
        paths.append(r.save(tmp_path / f"sim{len(paths)}" / "simulate.json"))
    r = compare(paths)
    hit = [x for x in r.rows if x["metric"] == "hit ratio"]
    assert {x["item"] for x in hit} == {"none", "lru:100"}
    assert all(x["verdict"] == "same" for x in hit)  # hit ratios do not depend on the model
    assert any(x["metric"] == "p90 increase" for x in r.rows)


def test_refuses_different_kinds_and_settings(cli: InProcess, tmp_path: Path) -> None:
    vals = lognormal(500, 100_000, seed=1)
    a = write(tmp_path / "a" / "profile.json", profile_doc({("get", 100): vals}))
    meta = write(tmp_path / "m" / "profile.json", profile_doc({("get", 100): vals}, "meta"))
    with pytest.raises(UsageError, match="different protocol"):
        compare([a, meta])
    r = compare([a, meta], allow_different=True)
    assert r.warnings[0].startswith("incompatible latency profiles: different protocol")
    other = write(tmp_path / "o" / "profile.json", profile_doc({("get", 999): vals}))
    with pytest.raises(UsageError, match="no measured cell in common"):
        compare([a, other])
    usl_csv = Path(__file__).parents[1] / "data" / "usl" / "raytracer.csv"
    usl = fit_csv(usl_csv, "processors", "throughput", bootstrap=0).save(
        tmp_path / "u" / "usl.json")
    p = cli("compare", a, usl, "--out", tmp_path / "x")
    assert p.returncode == 2
    assert "cannot compare results of different kinds" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    for args, expect in (((a,), "at least two results"),
                         ((a, tmp_path / "nowhere"), "no such file or directory"),
                         ((a, tmp_path), "holds 3 results")):
        p = cli("compare", *args, "--out", tmp_path / "x")
        assert p.returncode == 2, p.stderr
        assert expect in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


TRACES = Path(__file__).parents[1] / "data" / "traces"


def test_flat_simulations_compare_exact_miss_ratios(cli: InProcess, tmp_path: Path) -> None:
    bin_trace = TRACES / "cloudPhysicsIO.oracleGeneral.bin"
    a, b = tmp_path / "a", tmp_path / "b"
    for out, policies, extra in ((a, "lru,fifo", ["--mrc"]), (b, "lru,s3fifo", ["--mrc"])):
        p = cli("simulate", bin_trace, "--policies", policies, "--sizes", "500,5000",
                *extra, "--no-plots", "--out", out, "--format", "json")
        assert p.returncode == 0, p.stderr
    r = compare([a, b])
    doc_a = json.loads((a / "simulate.json").read_text())
    by_run = {(x["policy"], x["capacity"]): x for x in doc_a["results"]}
    runs = [x for x in r.rows if not x["item"].startswith("LRU curve")]
    # Only the policy both ran (lru) is compared, at both sizes, miss and byte miss ratio.
    assert {x["item"].split(" @ ")[0] for x in runs} == {"lru"}
    assert len(runs) == 4
    for x in runs:
        policy, cap = x["item"].split(" @ ")
        want = by_run[(policy, int(cap.split()[0].replace(",", "")))]
        assert x["a"] == want[x["metric"].replace(" ", "_")]
        assert x["verdict"] == "same"  # the same deterministic simulation
    curve = [x for x in r.rows if x["item"].startswith("LRU curve")]
    assert 2 <= len(curve) <= 10 and all(x["verdict"] == "same" for x in curve)

    # A different trace is refused; with --allow-different the exact difference is reported
    # with a verdict (no sampling error to hide behind).
    c = tmp_path / "c"
    p = cli("simulate", TRACES / "zipf_1.0.txt", "--policies", "lru", "--sizes", "500,5000",
            "--no-plots", "--out", c, "--format", "json")
    assert p.returncode == 0, p.stderr
    with pytest.raises(UsageError, match="different trace"):
        compare([a, c])
    r = compare([a, c], allow_different=True)
    assert r.warnings and all(x["verdict"] in ("higher", "lower", "same") for x in r.rows
                              if not x["item"].startswith("LRU curve"))

    # A SHARDS-sampled curve gets numbers but no verdict.
    d = tmp_path / "d"
    p = cli("simulate", bin_trace, "--policies", "lru", "--sizes", "500", "--mrc",
            "--shards", "0.1", "--no-plots", "--out", d, "--format", "json")
    assert p.returncode == 0, p.stderr
    r = compare([a, d])
    sampled = [x for x in r.rows if x["item"].startswith("LRU curve")]
    assert sampled and all(x["verdict"] == "no interval" for x in sampled)
    assert any("SHARDS" in w for w in r.warnings)

    # Flat and request-level simulations do not mix.
    req = simulate(traces.synthesize(traces.SynthParams(requests=500)),
                   SimulateSpec(draws=1, strategies=("none",)))
    path = req.save(tmp_path / "req" / "simulate.json")
    with pytest.raises(UsageError, match="flat .* request-level"):
        compare([a, path])


def tiers_doc(rows: dict[tuple[str, str], list[int]], store: str = "sqlite") -> dict:
    """A tiers result (schema v1) whose rows hold exactly the given read times (ns)."""
    return {
        "schema": "cachelab.tiers", "schema_version": 1, "created": "2025-01-01T00:00:00Z",
        "spec": {"record_bytes": 60_000, "list_items": 1000, "item_bytes": 100,
                 "codec": "msgpack"},
        "store": store, "server": {}, "findings": [], "environment": {},
        "rows": [{"shape": shape, "method": method, "reads": len(v),
                  "histogram": _core.hist_from_values(v), "cpu_mean_us": 10.0,
                  "wall_p50_us": float(np.median(v)) / 1000,
                  "wall_p90_us": float(np.percentile(v, 90)) / 1000,
                  "stored_bytes": 60_000} for (shape, method), v in rows.items()],
    }


def test_tiers_results_compare_read_times(tmp_path: Path) -> None:
    same = lognormal(2000, 100_000, seed=3)
    a = write(tmp_path / "a" / "tiers.json", tiers_doc({
        ("record", "memcached raw"): same,
        ("record", "store"): lognormal(2000, 150_000, seed=4),
        ("list", "store"): lognormal(2000, 1_000_000, seed=5)}))
    b = write(tmp_path / "b" / "tiers.json", tiers_doc({
        ("record", "memcached raw"): lognormal(2000, 100_000, seed=6),
        ("record", "store"): lognormal(2000, 300_000, seed=7)}))
    r = compare([a, b])
    items = {x["item"] for x in r.rows}
    assert items == {"record / memcached raw", "record / store"}  # only rows both have
    store = {x["metric"]: x for x in r.rows if x["item"] == "record / store"}
    assert store["p50"]["verdict"] == "higher" and store["p50"]["direction"] == "worse"
    assert 0.7 < store["p50"]["relative"] < 1.3  # twice as slow, give or take the sampling
    raw = {x["metric"]: x for x in r.rows if x["item"] == "record / memcached raw"}
    assert raw["p50"]["verdict"] == "no clear difference"
    assert raw["stored bytes"]["verdict"] == "same"
    pg = write(tmp_path / "pg" / "tiers.json", tiers_doc({("record", "store"): same},
                                                         store="postgresql"))
    with pytest.raises(UsageError, match="different store"):
        compare([a, pg])
