"""Hysteresis (issue 21, part 5): ``load --repeats N`` restarts the private memcached before
each repeat (a new pid), does not restart a user's server (and says so), keeps every repeat,
and flags RUNS DISAGREE when the repeats differ more than their intervals allow."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cachelab.errors import UsageError
from cachelab.load import LoadSpec, load
from cachelab.load.repeats import combined_validity, repeat_lines, spread, worst
from cachelab.servers import PrivateMemcached
from clitools import cachelab, one_error_line


def short(**kw: object) -> LoadSpec:
    return LoadSpec(**{"duration": 0.6, "warmup": 0.1, "interval": 0.2, "connections": 2,
                       "key_space": 200, **kw})


def test_repeats_restart_the_private_server_and_keep_every_repeat(tmp_path: Path) -> None:
    r = load(short(repeats=2))
    rep = r.repeats
    assert rep is not None and rep["restarted"] and rep["done"] == 2
    pids = [x["server_pid"] for x in rep["runs"]]
    assert all(pids) and pids[0] != pids[1], pids  # a fresh process each time
    assert "restarted before each repeat" in rep["server"]
    # every repeat kept whole; the one shown is the highest p99; one seed for both
    seeds = {x["result"]["spec"]["seed"] for x in rep["runs"]}
    assert len(seeds) == 1
    p99s = [x["metrics"]["p99"]["value"] for x in rep["runs"]]
    assert r.latency()["percentiles"]["99"] == max(p99s) == p99s[rep["shown"]]
    for key in ("throughput", "p50", "p99"):
        assert rep["comparison"][key]["status"] in ("agree", "disagree", "not compared")
    text = r.render()
    assert "repeats: 2" in text and str(pids[0]) in text and str(pids[1]) in text
    r.write(tmp_path, plots=False)
    saved = json.loads((tmp_path / "load.json").read_text())
    assert len(saved["repeats"]["runs"]) == 2 and saved["spec"]["repeats"] == 2
    assert saved["repeats"]["runs"][0]["result"]["schema"] == "cachelab.load"


def test_repeats_against_a_users_server_say_it_was_not_restarted(
        memcached: PrivateMemcached) -> None:
    r = load(short(repeats=2), server=memcached.address)
    rep = r.repeats
    assert rep is not None and not rep["restarted"]
    assert "NOT restarted" in rep["server"] and "NOT restarted" in r.render()
    assert {x["server_pid"] for x in rep["runs"]} == {memcached.pid}


def run(index: int, p99: float, p99_iv: tuple[float, float], tput: float = 10_000.0,
        tput_se: float = 100.0, verdict: str = "VALID") -> dict:
    """A synthetic repeat summary (as :func:`repeat_summary` makes them)."""
    lo, hi = p99_iv
    reasons = ["rate not held: …"] if verdict == "INVALID" else []
    return {"repeat": index, "server_pid": 100 + index, "restarted": True,
            "verdict": verdict, "reasons": reasons,
            "result": {"validity": {"verdict": verdict, "reasons": reasons,
                                    "throughput_reasons": reasons}},
            "metrics": {
                "throughput": {"value": tput, "se": tput_se,
                               "interval": [tput - 1.96 * tput_se, tput + 1.96 * tput_se]},
                "p50": {"value": 50_000, "interval": [49_000, 51_000],
                        "log_se": (math.log(51_000) - math.log(49_000)) / (2 * 1.959964)},
                "p99": {"value": p99, "interval": [lo, hi],
                        "log_se": (math.log(hi) - math.log(lo)) / (2 * 1.959964)}}}


def test_runs_whose_p99_intervals_are_far_apart_disagree() -> None:
    # p99 1 ms vs 2 ms, each ±~10 % (log-scale se 0.05): Cochran's Q = (ln 2)² / (2 × 0.05²)
    se = 0.05
    iv1 = (1e6 * math.exp(-1.959964 * se), 1e6 * math.exp(1.959964 * se))
    iv2 = (2e6 * math.exp(-1.959964 * se), 2e6 * math.exp(1.959964 * se))
    runs = [run(1, 1e6, iv1), run(2, 2e6, iv2)]
    c = spread(runs)
    assert c["p99"]["status"] == "disagree" and c["disagree"] == ["p99"]
    assert c["p99"]["q"] == pytest.approx(math.log(2) ** 2 / (2 * se ** 2), rel=1e-3)
    assert c["p99"]["p"] < 1e-10 and c["p99"]["i2"] > 0.95
    assert c["throughput"]["status"] == "agree" and c["p50"]["status"] == "agree"
    assert worst(runs) == 1
    v = combined_validity({"verdict": "VALID", "reasons": [], "checks": {}}, runs, c)
    assert v is not None and v["verdict"] == "INVALID"
    assert v["reasons"][0].startswith("RUNS DISAGREE: p99")
    assert v["checks"]["repeats"]["status"] == "fail"
    lines = repeat_lines({"runs": runs, "shown": 1, "server": "restarted", "comparison": c})
    assert any(line.strip().startswith("RUNS DISAGREE") for line in lines)


def test_runs_within_their_intervals_agree_and_an_invalid_repeat_is_named() -> None:
    # p99 1.00 ms [0.9, 1.1] vs 1.05 ms [0.95, 1.16]: overlapping, Q well below χ²₁'s 1 % point
    runs = [run(1, 1e6, (0.9e6, 1.1e6)), run(2, 1.05e6, (0.95e6, 1.16e6), tput=10_050,
                                               verdict="INVALID")]
    c = spread(runs)
    se1, se2 = (math.log(1.1 / 0.9) / 3.919928, math.log(1.16 / 0.95) / 3.919928)
    assert c["p99"]["q"] == pytest.approx(math.log(1.05) ** 2 / (se1 ** 2 + se2 ** 2), rel=1e-3)
    assert c["disagree"] == [] and c["p99"]["status"] == "agree" and c["p99"]["p"] > 0.4
    v = combined_validity({"verdict": "VALID", "reasons": [], "checks": {}}, runs, c)
    assert v is not None and v["verdict"] == "INVALID"
    assert v["reasons"] == ["repeat 2: rate not held: …"]
    # a repeat without a p99 interval: the p99 is not compared, and the table says why
    no_iv = run(3, 1e6, (0.9e6, 1.1e6))
    no_iv["metrics"]["p99"].update(interval=None, log_se=None)
    c = spread([runs[0], no_iv])
    assert c["p99"]["status"] == "not compared" and "repeat(s) 3" in c["p99"]["why"]


def test_bad_repeats_are_refused(tmp_path: Path) -> None:
    p = cachelab("load", "--repeats", "0", "--server", "127.0.0.1:1", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "--repeats" in one_error_line(p.stderr)
    with pytest.raises(UsageError, match="repeats must be a whole number from 1 to 100"):
        load(short(repeats=0))


def test_a_repeat_that_cannot_run_keeps_the_ones_done_and_says_partial(
        memcached: PrivateMemcached, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second repeat's server is gone: the first repeat is kept, and the result says
    PARTIAL and why, instead of losing everything to a traceback."""
    import cachelab.load.engine as engine
    from cachelab.errors import ServerUnreachable

    real = engine.measure
    calls = {"n": 0}

    def flaky(spec, target, **how):  # noqa: ANN001, ANN003, ANN202
        if spec.repeats == 1:
            calls["n"] += 1
            if calls["n"] == 2:
                raise ServerUnreachable("connect to 127.0.0.1:1: refused")
        return real(spec, target, **how)

    monkeypatch.setattr(engine, "measure", flaky)
    r = engine.load(short(repeats=3), server=memcached.address)
    assert r.repeats["done"] == 1 and len(r.repeats["runs"]) == 1
    assert "repeat 2 of 3 could not run" in r.run["aborted"]
    assert r.render().startswith("PARTIAL")
