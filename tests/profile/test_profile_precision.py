"""Run length by precision for ``profile`` (``--precision``), ``scale`` and the study's
default, against a real memcached: a loose target stops before the cap, an impossible one runs
to it and says "precision NOT reached"; the JSON, table and report carry it; bad values exit 2
with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cachelab._core as _core
from cachelab.errors import UsageError
from cachelab.load.precision import precision_text
from cachelab.profile import LatencyProfile, ProfileSpec, profile
from cachelab.profile.pool import profile_pool
from cachelab.profile.precise import FIRST_BATCH, next_batch
from cachelab.run import DEFAULT_PRECISION, RunSpec
from cachelab.run.steps import profile_spec, scale_spec
from cachelab.scale import ScaleSpec, scale
from cachelab.servers import PrivateMemcached
from clitools import InProcess, one_error_line


def small(**kw: object) -> ProfileSpec:
    """One value size, no multi-get: the floor, a get and a set cell."""
    return ProfileSpec(**{"sizes": (10,), "key_counts": (), "warmup": 20, "seed": 1, **kw})


def test_a_loose_target_stops_before_the_cap(memcached: PrivateMemcached) -> None:
    cap = 50_000
    p = profile(small(samples=cap, precision=0.99), server=memcached.address)
    assert [c.op for c in p.cells] == ["floor", "get", "set"]
    for c in p.cells:
        # a 95 % interval at ±99 % of the p99 needs a few thousand samples at most, not 50,000
        assert FIRST_BATCH <= c.samples < cap, (c.op, c.samples)
        assert c.precision is not None and c.precision["reached"], (c.op, c.precision)
        assert c.precision["half_width"] <= 0.99
    assert p.precision is not None and p.precision["cap_samples"] == cap
    assert p.precision["batches"] >= 1 and not p.run["cancelled"] and not p.run["aborted"]
    assert p.run["leftover_keys"] == 0 and not p.problems()
    text = p.render()
    assert "NOT" not in text and "PARTIAL" not in text
    assert "precision: every cell's p99 reached (p99 within ±99 %, cap 50000" in text
    assert "p99 precision" in text


def test_an_impossible_target_runs_to_the_cap_and_says_so(memcached: PrivateMemcached,
                                                          tmp_path: Path) -> None:
    p = profile(small(samples=300, precision=0.0001), server=memcached.address)
    assert all(c.samples == 300 for c in p.cells)
    assert all(c.precision is not None and not c.precision["reached"] for c in p.cells)
    first = p.render().splitlines()[0]
    assert first.startswith("precision NOT reached in 3 of 3 cells (p99 within ±0.01 %, "
                            "cap 300 samples per cell, 1 batch(es))"), first
    assert "NOT ±" in p.render() or "NOT n/a" in p.render()
    p.write(tmp_path, plots=False)
    d = json.loads((tmp_path / "profile.json").read_text())
    assert d["precision"] == {"target": 0.0001, "percentile": "99", "cap_samples": 300,
                              "batches": 1}
    assert all(set(c["precision"]) == {"half_width", "reached"} for c in d["cells"])
    again = LatencyProfile.from_dict(d)
    assert [c.precision for c in again.cells] == [c.precision for c in p.cells]


def test_batches_add_up_to_the_cap(memcached: PrivateMemcached) -> None:
    cap = FIRST_BATCH + 300  # a second batch of the 300 left
    p = profile(small(samples=cap, precision=0.0001), server=memcached.address)
    assert p.precision is not None and p.precision["batches"] == 2
    for c in p.cells:
        assert c.samples == cap and _core.hist_summary(c.histogram)["count"] == cap, c.op
        assert not c.precision["reached"]
    assert p.run["leftover_keys"] == 0 and not p.problems()


@pytest.mark.parametrize(("n", "widest", "left", "want"), [
    (1000, None, 9000, 1000),      # no interval yet: double
    (1000, 0.10, 9000, 2000),      # 4× the samples predicted, at most twice so far
    (1000, 0.051, 9000, 250),      # nearly there: at least a quarter more
    (1000, 0.06, 9000, 528),       # ((0.06 / 0.05)² − 1) × 1.2 = 0.528 of the 1000
    (4000, 0.10, 500, 500),        # never past the cap
])
def test_thenext_batch_follows_the_half_width(n: int, widest: float | None, left: int,
                                               want: int) -> None:
    assert next_batch(n, widest, 0.05, left) == want


def test_a_profile_without_a_target_stores_no_precision(memcached: PrivateMemcached) -> None:
    d = profile(small(samples=50), server=memcached.address).to_dict()
    assert "precision" not in d and all("precision" not in c for c in d["cells"])


def test_a_scale_run_by_precision_stops_early_or_runs_to_its_cap(
        memcached: PrivateMemcached) -> None:
    base = {"points": [1, 2], "repeats": 1, "warmup": 0.25, "settle": 0.25, "window": 2.0,
            "interval": 0.25, "bootstrap": 0, "workload": {"key_space": 200}}
    loose = scale(ScaleSpec(**base, precision=0.99), server=memcached.address)
    for r in loose.runs:
        # On a quiet machine the p99 interval is within ±99 % and the run stops early once the
        # live check sees it (one interval past the settle), or at its window's end (a busy
        # machine delayed the check), never before the settle. A stall on a loaded machine can
        # widen the tail past ±99 %: then the run goes to its window and says so.
        p = r["precision"]
        # (no final interval when the thinned samples leave too few beyond the p99: "why" says)
        assert p["reached"] == (p["half_width"] is not None and p["half_width"] <= 0.99), p
        assert (p["half_width"] is None) == (p["why"] is not None), p
        stopped = p["stopped_at_s"]
        # (the window's end is 2.25 s; the live check comes up to an interval after it)
        assert stopped is None or 0.25 <= stopped < 2.25 + 0.25, p
        if stopped is not None and not p["reached"]:
            # The live check (samples taken as independent) saw the target; the final interval,
            # thinned for their dependence on a loaded machine, did not: the run says both.
            assert p["live_half_width"] <= 0.99, p
            assert "precision NOT reached: stopped after" in precision_text(p), p
        assert r["window_short"] is False
    assert all("precision" in row and row["precision"]["runs"] == 1 for row in loose.summary)
    assert [row["precision"]["runs_reached"] for row in loose.summary] == \
        [int(r["precision"]["reached"]) for r in loose.runs]
    assert "p99 ±, runs reached" in loose.render()
    tight = scale(ScaleSpec(**{**base, "window": 0.5}, precision=0.0001),
                  server=memcached.address)
    assert all(r["precision"]["stopped_at_s"] is None and not r["precision"]["reached"]
               for r in tight.runs)
    # In the headline, after the verdicts' lines (these short runs may fail latency checks).
    lines = tight.render().splitlines()
    head = lines[:next(i for i, line in enumerate(lines) if line.startswith("scale sweep: "))]
    # (found, not placed: a busy machine's saturated client adds its own line after it)
    [missed] = [line for line in head if line.startswith("precision NOT reached")]
    missed, fix = missed.split(" → ")
    assert missed == "precision NOT reached in 2 of 2 run(s) (p99 within ±0.01 %): N = 1, 2"
    assert fix.startswith("`--window "), fix
    assert all(line.startswith(("latencies INVALID", "1 of", "2 of", "precision NOT reached",
                                "scaling NOT measurable on this machine"))
               for line in head), head
    assert all(row["precision"]["runs_reached"] == 0 for row in tight.summary)


def test_the_study_runs_to_its_precision_by_default() -> None:
    spec = RunSpec()
    assert spec.precision == DEFAULT_PRECISION == 0.05
    assert profile_spec(spec).precision == 0.05 and scale_spec(spec).precision == 0.05
    assert profile_spec(RunSpec(quick=True, precision=None)).precision is None
    with pytest.raises(UsageError, match="precision must be a share"):
        RunSpec(precision=5).check()


def test_precision_is_refused_for_a_pool_profile() -> None:
    with pytest.raises(UsageError, match="--precision is for one server"):
        profile_pool(small(precision=0.05), ["127.0.0.1:1", "127.0.0.1:2"])


@pytest.mark.parametrize(("verb", "value", "needle"), [
    ("profile", "0.05", "below 1, give the % sign"), ("profile", "100%", "above 0 and below 100"),
    ("profile", "abc", "above 0 and below 100"), ("profile", "0", "above 0 and below 100"),
    ("scale", "0.5", "below 1, give the % sign"), ("run", "200%", "above 0 and below 100")])
def test_bad_precision_exits_2_with_one_line(cli: InProcess, verb: str, value: str, needle: str,
                                             tmp_path: Path) -> None:
    p = cli(verb, "--precision", value, "--server", "127.0.0.1:1", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p.stderr)
    assert "--precision" in line and needle in line
