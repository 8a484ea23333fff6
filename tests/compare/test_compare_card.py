"""A comparison's answer card (issue 31): each compared metric's change with its interval,
certified only when both results are certified and the interval excludes no change; "no
detectable change" when it spans it. Sweeps made from chosen runs (tests/cards.py), compared
through the CLI as a user would."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cachelab.answers import CERTIFIED, INDICATIVE
from cards import card_of, fake_sweep
from clitools import InProcess

POINTS = [1, 2, 4, 8, 12]


def _compare(tmp_path: Path, capsys: pytest.CaptureFixture[str], b_scale: float,
             b_saturated_from: int | None = None) -> dict[str, tuple[str, str]]:
    fake_sweep(points=POINTS, repeats=3, bootstrap=0).save(tmp_path / "a" / "scale.json")
    fake_sweep(points=POINTS, repeats=3, bootstrap=0, scale=b_scale,
               saturated_from=b_saturated_from).save(tmp_path / "b" / "scale.json")
    run = InProcess(capsys)("compare", tmp_path / "a", tmp_path / "b", "--format", "table",
                            "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    return card_of(run.stdout)


def test_a_clear_change_between_certified_sweeps_is_certified(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    card = _compare(tmp_path, capsys, b_scale=1.2)
    assert set(card) == {f"N = {n} throughput" for n in POINTS}, card
    value, mark = card["N = 8 throughput"]
    assert re.fullmatch(r"\+20\.0 % \(95 % \+[\d.]+ % to \+[\d.]+ %\): [\d,]+/s → [\d,]+/s",
                        value), value
    assert mark == CERTIFIED
    assert all(m == CERTIFIED for _, m in card.values()), card


def test_no_change_is_said_and_a_saturated_side_is_not_certified(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # B: the same throughputs, its client saturated from N = 8 (where its peak is).
    card = _compare(tmp_path, capsys, b_scale=1.0, b_saturated_from=8)
    value, mark = card["N = 8 throughput"]
    assert value.startswith("no detectable change: +0.0 % (95 % -"), value
    assert mark == f"{INDICATIVE} (B: INVALID: client saturated)", mark
