"""A superlinear start (α < 0) found behind a bounded fit, through fit_usl and through the
scale sweep's own fitting path; the published fits are left alone."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cachelab.scale import ScaleSpec
from cachelab.scale import sweep as sweep_module
from cachelab.usl import fit_csv, fit_usl

DATA = Path(__file__).parents[1] / "data" / "usl"
TRUTH = {"gamma": 1000.0, "alpha": -0.03, "beta": 0.0005}
LOADS = [1, 2, 4, 6, 8, 12, 16, 24, 32, 48]


def usl(n: float, gamma: float, alpha: float, beta: float) -> float:
    return gamma * n / (1 + alpha * (n - 1) + beta * n * (n - 1))


def noisy(seed: int, sd: float = 0.003) -> list[float]:
    """The true curve with seeded multiplicative noise of ``sd``."""
    rng = random.Random(seed)
    return [usl(n, **TRUTH) * (1 + rng.gauss(0, sd)) for n in LOADS]


def test_a_superlinear_start_is_found_and_described() -> None:
    f = fit_usl(LOADS, noisy(1), "bounded", bootstrap=0)
    # The bounded coefficients pin alpha at 0, as R usl does ...
    assert f.alpha == 0.0 and f.at_bound["alpha"]
    # ... and the unbounded check recovers the truth, with N× = -α/β and N* = sqrt((1-α)/β).
    s = f.superlinear
    assert s is not None
    lo, hi = s["ci"]["alpha"]
    assert lo <= TRUTH["alpha"] <= hi < 0
    assert s["n_cross"] == pytest.approx(0.03 / 0.0005, rel=0.1)
    c_lo, c_hi = s["n_cross_ci"]
    assert c_lo <= 60.0 <= c_hi
    assert s["n_star"] == pytest.approx((1.03 / 0.0005) ** 0.5, rel=0.05)
    # The finding is a warning of its own, and the summary says it.
    assert any(w["code"] == "superlinear" for w in f.warnings)
    text = f.render()
    assert "superlinear start" in text and "N× =" in text and "R²" not in text
    assert "residual standard error" in text


def test_the_interval_of_the_payback_load_covers_the_truth_and_linear_starts_pass() -> None:
    """Over simulated sweeps with throughput-proportional noise (as measured throughput has):
    the 95 % interval of N× covers the truth about 95 % of the time, and a start that is
    truly linear (α = 0) is called superlinear about 2.5 % of the time (one-sided)."""
    trials = 80
    covered = false_alarms = 0
    for seed in range(trials):
        s = fit_usl(LOADS, noisy(100 + seed, sd=0.01), "bounded", bootstrap=0).superlinear
        assert s is not None
        lo, hi = s["n_cross_ci"]
        covered += lo <= 60.0 <= hi
        rng = random.Random(5000 + seed)
        x = [usl(n, 1000.0, 0.0, 0.0004) * (1 + rng.gauss(0, 0.01)) for n in LOADS]
        false_alarms += fit_usl(LOADS, x, "bounded", bootstrap=0).superlinear is not None
    # Binomial tails: 95 % of 80 is 76 (sd ~2); 2.5 % of 80 is 2 (sd ~1.4).
    assert covered >= 70, covered
    assert false_alarms <= 7, false_alarms


@pytest.mark.parametrize("name, n, x", [
    ("raytracer.csv", "processors", "throughput"),
    ("specsdm91.csv", "load", "throughput"),
    ("psa_cisco_mysql.csv", "concurrency", "throughput"),
])
def test_sublinear_published_data_are_not_called_superlinear(name: str, n: str, x: str) -> None:
    f = fit_csv(DATA / name, n, x, method="bounded", bootstrap=0)
    assert f.superlinear is None
    assert not any(w["code"] == "superlinear" for w in f.warnings)


def test_the_scale_sweep_reports_a_superlinear_start(tmp_path: Path) -> None:
    """The sweep's own fitting path (``_result``) with synthetic runs: the finding reaches
    scale.json, the human summary and the report's findings."""
    spec = ScaleSpec(points=LOADS, repeats=1, bootstrap=0)
    runs = []
    for order, (n, x) in enumerate(zip(LOADS, noisy(3))):
        runs.append({"order": order, "n": n, "repeat": 0, "connections": n, "threads": 1,
                     "throughput": x, "replies": int(x * 3), "window_s": 3.0,
                     "steady_reached": True, "window_short": False, "errors": 0, "lost": 0,
                     "server_run_queue_wait_per_wall": None, "client_cpu_us_per_op": None,
                     "latency": {"histogram": None, "percentiles_ns": {}}})
    result = sweep_module._result(spec, runs, {"address": "synthetic"})
    assert result.fit is not None and result.fit["superlinear"] is not None
    assert result.fit["alpha"] == 0.0
    assert "superlinear start" in result.render()
    # The report: a finding, and the unbounded α and N× in the coefficient table.
    from cachelab.usl import section as usl_section
    assert any("start superlinearly" in f for f in usl_section.fit_findings(result.fit, "USL"))
    names = [row[0] for row in usl_section.fit_rows(result.fit)]
    assert any(name.startswith("N×") for name in names) and "R²" not in names
    result.write(tmp_path, plots=False)
    from cachelab.scale import read_scale_result
    back = read_scale_result(tmp_path)
    assert back.usl is not None and back.usl.superlinear is not None
    assert back.usl.superlinear["n_cross"] == pytest.approx(60.0, rel=0.1)


def test_no_claim_from_too_few_loads_or_a_fit_that_does_not_describe_the_points() -> None:
    # Three distinct loads (repeated): superlinear-looking, but too few to say.
    n = [1, 1, 2, 2, 3, 3]
    x = [usl(v, **TRUTH) for v in n]
    assert fit_usl(n, x, "bounded", bootstrap=0).superlinear is None
    # Enough loads, but noise of 40 %: the unbounded fit describes nothing.
    rng = random.Random(9)
    noisy_x = [usl(v, **TRUTH) * (1 + rng.gauss(0, 0.4)) for v in LOADS]
    assert fit_usl(LOADS, noisy_x, "bounded", bootstrap=0).superlinear is None
