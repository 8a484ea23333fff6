"""The USL fit's answer card (issue 31): α, β, Nmax and the peak throughput, each with the fit's
interval, *certified* when the fit converged and the interval is finite, else *indicative* with
why; and one wording for an Nmax interval without an upper end, in usl's and scale's tables and
the report's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cachelab.answers import CERTIFIED, INDICATIVE
from cachelab.usl import UslFit, fit_csv, fit_usl
from cachelab.usl.answers import NO_UPPER_BOUND
from cachelab.usl.section import fit_rows
from cards import card_of
from clitools import InProcess

DATA = Path(__file__).parents[1] / "data" / "usl"


def test_a_converged_fit_with_finite_intervals_is_certified(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = InProcess(capsys)("usl", DATA / "specsdm91.csv", "--format", "table",
                            "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    card = card_of(run.stdout)
    assert set(card) == {"contention α (σ)", "coherency β (κ)", "stops scaling at",
                         "peak throughput (fit)"}, card
    for question, (value, mark) in card.items():
        assert mark == CERTIFIED, (question, value, mark)
        assert re.search(r"\(95 % [\d.,]+–[\d.,]+\)", value), (question, value)
    assert card["stops scaling at"][0].startswith("N ≈ 96.5 (95 % "), card
    assert "e-0" not in run.stdout.split("\n\n")[0]  # the card: no exponent


def test_an_amdahl_fit_says_it_has_no_peak_and_is_indicative(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # raytracer: β at its bound 0, Nmax infinite.
    run = InProcess(capsys)("usl", DATA / "raytracer.csv", "--format", "table",
                            "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    card = card_of(run.stdout)
    value, mark = card["stops scaling at"]
    assert value.startswith("no peak: β = 0"), value
    assert mark.startswith(f"{INDICATIVE} ("), mark
    assert card["coherency β (κ)"][1].startswith(f"{INDICATIVE} (at its bound 0"), card
    assert card["contention α (σ)"][1] == CERTIFIED, card
    assert card["peak throughput (fit)"][1].startswith(INDICATIVE), card


def test_an_nmax_interval_without_an_upper_end_reads_the_same_everywhere(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Noisy near-Amdahl data: some bootstrap resamples have β = 0, so the upper end of
    # Nmax's interval is infinite (null once saved) — it used to read ∞ in usl's table and
    # — in scale's (the fit read back from JSON).
    ns = [1, 2, 3, 4, 6, 8, 10, 12]
    noise = [1.0, 0.97, 1.03, 0.98, 1.02, 0.99, 1.03, 0.97]
    xs = [1000 * n / (1 + 0.05 * (n - 1) + 0.0005 * n * (n - 1)) * e for n, e in zip(ns, noise)]
    csv = tmp_path / "near-amdahl.csv"
    csv.write_text("n,x\n" + "".join(f"{n},{x}\n" for n, x in zip(ns, xs)))
    run = InProcess(capsys)("usl", csv, "--bootstrap", "200", "--format", "table",
                            "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    value, mark = card_of(run.stdout)["stops scaling at"]
    assert value.endswith(f"–{NO_UPPER_BOUND})") and mark == f"{INDICATIVE} (β's interval " \
        "reaches 0)", (value, mark)
    fresh = fit_usl(ns, xs, bootstrap=200, seed=0)
    saved = UslFit.from_dict(fresh.to_dict())
    for fit in (fresh, saved):
        nmax = next(line for line in fit.render().splitlines() if line.startswith("Nmax"))
        assert nmax.endswith(f", {NO_UPPER_BOUND}]"), nmax
    row = next(r for r in fit_rows(fresh.to_dict()) if r[0].startswith("Nmax"))
    assert row[2].endswith(f", {NO_UPPER_BOUND}]"), row


def test_the_fit_s_summary_writes_no_exponent() -> None:
    # psa_cisco_mysql peaks above 10,000/s, with a β below 0.001: "peak X = 1.234e+04" and
    # "8.645e-05" before.
    text = fit_csv(DATA / "psa_cisco_mysql.csv", "concurrency", "throughput",
                   bootstrap=50).render()
    assert not re.search(r"\de[+-]\d", text), text
    assert re.search(r"^peak X = \d{2},\d{3}; ", text, re.M), text
