"""The percentile a precision target is on (issue 31, "defaults that certify where they can"):
a spec field of profile, load and scale (``precision_percentile``), chosen by ``--quick`` so
that its samples can certify it, named in every record and line, and refused unless the
tables show it with an interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachelab.errors import UsageError
from cachelab.intervals import (
    MIN_TAIL,
    certifiable,
    highest_certifiable,
    ranks,
    samples_to_certify,
    tail_samples,
)
from cachelab.load import LoadSpec, load
from cachelab.load.precision import SHOWN, precision_text
from cachelab.profile import ProfileSpec, profile
from cachelab.profile.precise import first_batch, precision_line
from cachelab.profile.spec import SHOWN_PERCENTILES
from cachelab.run import RunSpec
from cachelab.run.steps import profile_spec, scale_spec
from cachelab.scale import ScaleSpec
from cachelab.scale.result import precision_missed
from cachelab.servers import PrivateMemcached
from clitools import InProcess, one_error_line


def test_the_arithmetic_a_p99_of_500_samples_cannot_be_certified() -> None:
    # 5 samples beyond it: the interval's top is the 499th of 500, the second-largest latency
    assert tail_samples(500, 99.0) == 5 and ranks(500, 99.0) == (490, 499)
    assert not certifiable(500, 99.0) and samples_to_certify(99.0) == 100 * MIN_TAIL
    # the p90 of 500 has MIN_TAIL beyond it, the p50 far more; 10,000 certify a p99
    assert certifiable(500, 90.0) and certifiable(500, 50.0) and certifiable(10_000, 99.0)
    assert highest_certifiable(500, SHOWN_PERCENTILES) == "90"
    assert highest_certifiable(10_000, SHOWN_PERCENTILES) == "99"


def _reachable(samples: int, percentile: str) -> bool:
    """Whether ``samples`` put enough beyond ``percentile`` for the interval machinery to give
    its interval with MIN_TAIL samples beyond it (computed here, not by the code under test)."""
    p = float(percentile)
    beyond = int(samples * (1 - p / 100) + 1e-9)
    r = ranks(samples, p)
    return r is not None and r[1] < samples and beyond >= MIN_TAIL


@pytest.mark.parametrize("spec", [
    ProfileSpec.quick(precision=0.05), profile_spec(RunSpec(quick=True)), ProfileSpec(),
    profile_spec(RunSpec()),
], ids=["profile --quick", "run --quick", "profile", "run"])
def test_every_profile_default_targets_a_percentile_its_samples_can_certify(
        spec: ProfileSpec) -> None:
    pct = spec.precision_percentile
    # the cap can certify it (a full run's p99: 10,000 put 100 beyond it)
    assert _reachable(spec.samples, pct), (pct, spec.samples)
    if spec.samples <= 5_000:  # a quick run's: its first batch alone
        assert _reachable(first_batch(spec.samples, pct), pct), (pct, spec.samples)


def test_quick_runs_target_the_median_and_full_runs_the_p99() -> None:
    assert ProfileSpec.quick().precision_percentile == "50"
    assert profile_spec(RunSpec(quick=True)).precision_percentile == "50"
    assert scale_spec(RunSpec(quick=True)).precision_percentile == "50"
    assert ProfileSpec().precision_percentile == "99"
    assert profile_spec(RunSpec()).precision_percentile == "99"
    assert scale_spec(RunSpec()).precision_percentile == "99"
    assert LoadSpec().precision_percentile == "99"
    # the quick profile's first batch is its 500 samples (a p50 needs no more to be certified)
    assert first_batch(ProfileSpec.quick(precision=0.05).samples, "50") == 500


def test_the_percentile_flows_to_the_profile_record_and_lines(
        memcached: PrivateMemcached) -> None:
    p = profile(ProfileSpec(sizes=(10,), key_counts=(), warmup=20, seed=1, samples=600,
                            precision=0.99, precision_percentile="90"),
                server=memcached.address)
    assert p.precision is not None and p.precision["percentile"] == "90"
    assert p.to_dict()["precision"]["percentile"] == "90"
    text = p.render()
    line = next(x for x in text.splitlines() if x.startswith("precision"))
    assert "p90 within ±99 %" in line and "p99" not in line, line
    assert any(x.startswith("p90 precision") for x in text.splitlines()), text
    # and a miss says which percentile it missed
    for c in p.cells:
        c.precision = {"half_width": 0.5, "reached": False}
    missed = precision_line({**p.precision, "target": 0.0001}, p.cells)
    assert missed is not None and missed.startswith("precision NOT reached in 3 of 3 cells "
                                                    "(p90 within ±0.01 %"), missed
    assert " → `--samples " in missed


def test_the_percentile_flows_to_the_load_record_and_line(memcached: PrivateMemcached) -> None:
    r = load(LoadSpec(duration=1.5, warmup=0.25, interval=0.25, key_space=200,
                      precision=0.0001, precision_percentile="90"),
             server=memcached.address)
    assert r.precision is not None and r.precision["percentile"] == "90"
    said = precision_text(r.precision)
    assert said is not None and "p90" in said and "p99" not in said, said
    assert said in r.render()


def test_the_percentile_flows_to_the_scale_line() -> None:
    runs = [{"n": 1, "precision": {"reached": False, "half_width": 0.2, "cap_s": 1.0}}]
    line = precision_missed({"precision": 0.05, "precision_percentile": "90", "window": 1.0},
                            runs)
    assert line is not None and line.startswith(
        "precision NOT reached in 1 of 1 run(s) (p90 within ±5 %): N = 1 → "), line
    # a scale.json from before the field: the p99
    old = precision_missed({"precision": 0.05, "window": 1.0}, runs)
    assert old is not None and "(p99 within ±5 %)" in old


@pytest.mark.parametrize("make", [
    lambda: ProfileSpec(precision_percentile="97").check(),
    lambda: ProfileSpec(precision_percentile="5").check(),
    lambda: ProfileSpec(precision_percentile=99).check(),  # type: ignore[arg-type]
    lambda: LoadSpec(precision_percentile="75").check(),
    lambda: ScaleSpec(precision_percentile="100").check(),
])
def test_a_percentile_the_tables_do_not_show_is_refused(make: object) -> None:
    with pytest.raises(UsageError, match="precision_percentile must be one of"):
        make()  # type: ignore[operator]


@pytest.mark.parametrize("verb", ["profile", "load", "scale"])
def test_a_bad_percentile_exits_2_naming_the_field(cli: InProcess, verb: str,
                                                  tmp_path: Path) -> None:
    p = cli(verb, "--precision", "5%", "--precision-percentile", "p42", "--server",
            "127.0.0.1:1", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p.stderr)
    assert "precision_percentile" in line and "'42'" in line, line
    shown = SHOWN_PERCENTILES if verb == "profile" else list(SHOWN)
    assert all(k in line for k in shown if float(k) >= 50), line


def test_a_good_percentile_is_taken_as_p_or_a_number(cli: InProcess, tmp_path: Path) -> None:
    # refused for the unreachable server (exit 3), not for the percentile
    p = cli("profile", "--precision", "5%", "--precision-percentile", "p99.9", "--server",
            "127.0.0.1:1", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
