"""``run``'s summary opens with one answer card gathered from its steps' results (issue 31):
each step's answers after its name, a failed or skipped step *not measured* with why, the
step table below; the card is kept in run.json (``steps[].answers``)."""

from __future__ import annotations

import json
from pathlib import Path

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, PREDICTED, Answer
from cachelab.run import RunSpec
from cachelab.run.result import RunResult, StepOutcome
from cachelab.run.steps import State, card
from cards import card_of, fake_sweep
from clitools import InProcess


def test_the_summary_opens_with_the_steps_answers() -> None:
    # The scale step's card, kept as the step keeps it; a profile that failed after its
    # answers (a certified one becomes indicative), a replay skipped.
    sweep = fake_sweep()
    st = State(out=Path("."), target=None, spec=RunSpec(), log=lambda _m: None)
    card(st, "scale", sweep)
    assert st.answers["scale"] == sweep.answers()
    profile = [Answer("get 1KB", "p50 50 µs (95 % 49–51 µs)", CERTIFIED)]
    result = RunResult(created="now", spec={}, server={}, steps=[
        StepOutcome("profile", "failed", error="server went away",
                    answers=[a.to_dict() for a in profile]),
        StepOutcome("scale", "ok", summary="peak", answers=[a.to_dict()
                                                            for a in st.answers["scale"]]),
        StepOutcome("replay", "skipped", error="no simulation result to pick a strategy from")])
    text = result.render()
    assert text.splitlines()[0] == "answer:", text
    got = card_of(text)
    assert got["profile: get 1KB"] == ("p50 50 µs (95 % 49–51 µs)",
                                       f"{INDICATIVE} (step failed: server went away)")
    peak, mark = got["scale: peak throughput"]
    assert peak.startswith("4,832 replies/s at N = 10 (95 % ") and mark == CERTIFIED
    assert got["scale: stops scaling at"][1] == CERTIFIED
    assert got["replay"] == ("not measured", f"{NOT_MEASURED} (skipped: no simulation result "
                             "to pick a strategy from)")
    # The step table follows the card.
    lines = text.splitlines()
    assert lines[lines.index("") + 1].startswith("step "), text


def test_an_unreachable_server_s_steps_are_not_measured_in_the_card_and_the_report(
        cli: InProcess, tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = cli("run", "--server", "127.0.0.1:1", "--steps", "profile,simulate",
            "--requests", "500", "--out", out, "--format", "table")
    assert p.returncode == 3, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("PARTIAL") and lines[1] == "answer:", p.stdout  # worst first
    value, mark = card_of(p.stdout)["profile"]
    assert value == "not measured" and mark.startswith(
        f"{NOT_MEASURED} (skipped: no memcached to measure: "), mark
    doc = json.loads((out / "run.json").read_text())
    steps = {s["name"]: s for s in doc["steps"]}
    assert steps["profile"]["answers"] == []  # no result, no card to keep
    # simulate ran on the published model: its card is predicted
    assert steps["simulate"]["status"] != "ok" or (
        steps["simulate"]["answers"]
        and all(a["trust"] == PREDICTED for a in steps["simulate"]["answers"])), steps
    html = (out / "report.html").read_text()
    first = html.index("<h2")
    assert html[first:].startswith('<h2 id="answer">Answer</h2>'), html[first:first + 200]
    assert '<span class="mark not-measured">not measured</span>' in html


def test_the_steps_verdicts_are_said_once_under_what_to_trust() -> None:
    # A scale step whose latencies were INVALID and whose precision was missed: its lines
    # (each with its fix) leave its summary for the headline and the block.
    invalid = "latencies INVALID (percentiles shown, not certified): client saturated at " \
        "N = 8 → run the client on more machines (`--ray`)"
    missed = "precision NOT reached in 2 of 16 run(s) (p99) → a wider `--precision` or " \
        "`--precision off`"
    peak = [Answer("peak throughput", "4,832 replies/s at N = 10", CERTIFIED)]
    result = RunResult(created="now", spec={}, server={}, steps=[
        StepOutcome("scale", "ok", summary=f"peak measured 4,832/s at N = 10; {invalid}; "
                    f"{missed}", answers=[a.to_dict() for a in peak],
                    caveats=[invalid, missed])])
    lines = result.render().splitlines()
    assert lines[0] == f"scale: {invalid}", lines  # the worst first
    assert lines[1] == "answer:" and lines[3] == "what to trust:", lines
    assert lines[4] == f"  scale: {missed}", lines
    row = next(line for line in lines if line.startswith("scale "))
    assert row.endswith("peak measured 4,832/s at N = 10"), row  # said once
    assert sum(missed in line for line in lines) == 1
