"""``cachelab run``: the whole study end to end on a private memcached; failing steps; exit
codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachelab.errors import UsageError
from cachelab.run import STEPS, RunSpec
from clitools import InProcess, cachelab


@pytest.mark.slow
@pytest.mark.timeout(1200)  # a loaded machine, beside the other tests: minutes
def test_quick_run_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = cachelab("run", "--quick", "--out", out, "--format", "json", "--seed", "1", timeout=1100)
    doc = json.loads(p.stdout)
    assert doc["schema"] == "cachelab.run"
    assert [s["name"] for s in doc["steps"]] == list(STEPS)
    status = {s["name"]: s for s in doc["steps"]}
    assert all(s["status"] == "ok" for n, s in status.items() if n != "replay"), doc["steps"]
    # replay's check compares the prediction with the real library: a miss (issue 19's prefetch
    # gap, on a noisy machine) is a failed step said with the numbers, and exit 0 all the same
    # (exit 1 only with --fail-on replay: tests/base/test_cli_voice.py).
    assert p.returncode == 0, p.stderr[-3000:]
    if status["replay"]["status"] != "ok":
        assert status["replay"]["status"] == "failed", status["replay"]
        assert status["replay"]["check"] == "replay", status["replay"]
        assert "predicted vs" in status["replay"]["error"], status["replay"]
        assert "run: prediction off by more than 15 %" in p.stderr, p.stderr[-3000:]
    assert doc["server"]["private"] and doc["server"]["version"]
    for sub, name in (("profile", "profile.json"), ("scale", "scale.json"),
                      ("simulate", "simulate.json"), ("simulate-appengine-2017", "simulate.json"),
                      ("tiers", "tiers.json"), ("replay", "replay.json")):
        assert (out / sub / name).is_file(), sub
    # simulate used the profile just measured as its model.
    sim = json.loads((out / "simulate" / "simulate.json").read_text())
    measured = json.loads((out / "profile" / "profile.json").read_text())
    assert sim["model"]["name"] == measured["name"]
    # the study runs to its precision target, and says how precise each number is
    # (on the p50, which the quick study's samples can certify)
    assert measured["precision"]["target"] == 0.05
    assert measured["precision"]["percentile"] == "50"
    assert all("reached" in c["precision"] for c in measured["cells"])
    scaled = json.loads((out / "scale" / "scale.json").read_text())
    assert scaled["spec"]["precision"] == 0.05 and all("precision" in r for r in scaled["runs"])
    assert scaled["spec"]["precision_percentile"] == "50"
    html = (out / "report.html").read_text()
    assert "p50 precision" in html and "p50 ±, runs reached" in html
    assert doc["report"] == str(out / "report.html")
    for section in ("s0-run", "-profile", "-scale", "-simulation", "-tiers", "-replay"):
        assert section in html
    # profile 3, scale 2 (its USL plot only with a fit: a busy machine can leave too few valid
    # points), two simulations 1 each, tiers 1 (replay has no plot).
    images = 7 + (scaled["fit"] is not None)
    assert html.count('<img alt="') == images
    assert html.count('src="data:image/svg+xml;base64,') == images
    assert json.loads((out / "run.json").read_text())["steps"] == doc["steps"]


def test_an_unreachable_server_fails_its_steps_and_the_rest_still_runs(
        cli: InProcess, tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = cli("run", "--server", "127.0.0.1:1", "--steps", "profile,simulate",
            "--requests", "500", "--out", out, "--format", "table")
    assert p.returncode == 3, p.stderr
    doc = json.loads((out / "run.json").read_text())
    status = {s["name"]: s for s in doc["steps"]}
    assert status["profile"]["status"] == "skipped" and status["profile"]["server_failure"]
    assert "no memcached to measure" in status["profile"]["error"]
    assert status["simulate"]["status"] == "ok"
    assert "reference model only" in status["simulate"]["summary"]
    assert (out / "simulate-appengine-2017" / "simulate.json").is_file()
    html = (out / "report.html").read_text()
    assert "no memcached to measure" in html and "-simulation" in html
    assert "profile" in p.stdout and "skipped" in p.stdout


def test_a_failing_step_is_reported_and_the_run_goes_on(cli: InProcess, tmp_path: Path) -> None:
    bad = tmp_path / "trace.jsonl"
    bad.write_text("{not json\n")
    out = tmp_path / "run"
    p = cli("run", "--steps", "simulate,replay", "--trace", bad, "--out", out,
            "--format", "json")
    # A malformed input is exit 2 (usage or input), one line naming it; the run went on.
    assert p.returncode == 2, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("cachelab: error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"cachelab: error: step simulate: {bad}")
    steps = {s["name"]: s for s in json.loads(p.stdout)["steps"]}
    assert steps["simulate"]["status"] == "failed" and steps["simulate"]["input_failure"]
    assert str(bad) in steps["simulate"]["error"]
    assert steps["replay"]["status"] == "skipped"
    assert (out / "report.html").is_file()


@pytest.mark.parametrize("args, expect", [
    (("--steps", "profile,nope"), "--steps"),
    (("--server", "nohost"), "not HOST:PORT"),
    (("--trace", "t.jsonl", "--requests", "100"), "not both"),
    (("--requests", "5"), "--requests: must be an integer from 100 to"),
])
def test_usage_errors_exit_2_with_one_line(
        cli: InProcess, tmp_path: Path, args: tuple, expect: str) -> None:
    p = cli("run", *args, "--out", tmp_path / "run")
    assert p.returncode == 2
    assert expect in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "run").exists()


def test_spec_checks() -> None:
    with pytest.raises(UsageError, match="unknown step"):
        RunSpec(steps=("profile", "x")).check()
    with pytest.raises(UsageError, match="no steps"):
        RunSpec(steps=()).check()
