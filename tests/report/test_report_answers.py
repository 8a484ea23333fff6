"""The report opens with the answers (issue 31): one table, above the findings, of every
section's answer card — question, value with its interval, trust mark styled by its kind and
why — a missing answer with its reason; the card of any result that has ``answers()``, or the
one a run kept for the step that wrote it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_report import parse

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, PREDICTED, Answer
from cachelab.artifacts import Artifact
from cachelab.report import render_report
from cachelab.report.answers import answers_of, recorded
from cachelab.tiers import TiersResult
from cachelab.usl import fit_csv
from cards import fake_sweep

DATA = Path(__file__).parents[1] / "data" / "usl"


def _answer_rows(html: str) -> list[list[str]]:
    start = html.index('<h2 id="answer">Answer</h2>')
    page = parse(html[start:html.index("</table>", start) + len("</table></div>")])
    return page.tables[0][1:]


def test_the_page_opens_with_the_answer_table(tmp_path: Path) -> None:
    fake_sweep().save(tmp_path / "valid" / "scale.json")
    fake_sweep(saturated_from=8).save(tmp_path / "saturated" / "scale.json")
    fake_sweep(repeats=1, bootstrap=0, stalled_from=6).save(tmp_path / "nofit" / "scale.json")
    fit_csv(DATA / "specsdm91.csv", "load", "throughput", bootstrap=100).save(
        tmp_path / "usl" / "usl.json")
    html = render_report([tmp_path]).html
    first = html.index("<h2")
    assert html[first:].startswith('<h2 id="answer">Answer</h2>'), html[first:first + 300]
    assert html.index('id="answer"') < html.index('id="findings"')
    rows = _answer_rows(html)
    # question (section), value, trust (why)
    by = {}
    for question, value, trust in rows:
        section = re.search(r"\((\w+)\)$", question)
        by.setdefault((question.rsplit(" (", 1)[0], section and section.group(1)), []).append(
            (value, trust))
    peaks = by[("peak throughput", "scale")]
    assert sum(t == CERTIFIED for _, t in peaks) == 1, peaks  # valid; saturated; one run
    stops = [v for v, _ in by[("stops scaling at", "scale")]]
    assert any(v.startswith("not measurable on this machine: the load client saturated")
               for v in stops)
    assert "not measured: no fit — only 3 usable measurement(s)" in stops
    nofit = next(t for v, t in by[("stops scaling at", "scale")] if v.startswith("not measured"))
    assert nofit.startswith(NOT_MEASURED) and "the USL needs 6" in nofit, nofit
    assert all(t == CERTIFIED for _, t in by[("stops scaling at", "usl")]), by
    # The marks are styled by their kind.
    for mark in (CERTIFIED, INDICATIVE, NOT_MEASURED):
        assert f'<span class="mark {mark.replace(" ", "-")}">{mark}</span>' in html, mark


def test_any_result_with_answers_is_picked_up_or_the_run_s_record_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A result that has answers() (here a tiers result given one) is read back and asked.
    tiers = TiersResult(created="now", spec={}, store="sqlite", server={}, rows=[]).to_dict()
    art = Artifact(path=tmp_path / "tiers" / "tiers.json", schema="cachelab.tiers",
                   kind="tiers", data=tiers)
    # (its own card, with no row measured: not measured, and why)
    own = answers_of(art, {})
    assert own and all(a.trust == NOT_MEASURED for a in own), own
    given = [Answer("read a record", "1 ms (95 % 0.9–1.1 ms)", CERTIFIED)]
    monkeypatch.setattr(TiersResult, "answers", lambda self: given, raising=False)
    assert answers_of(art, {}) == given
    # One that cannot be read back: the card the run kept for the step that wrote it.
    kept = [Answer("best strategy", "lru:100: p90 +3 %", PREDICTED)]
    run = Artifact(path=tmp_path / "run.json", schema="cachelab.run", kind="run", data={
        "steps": [{"name": "simulate", "status": "ok", "dir": "simulate",
                   "answers": [a.to_dict() for a in kept]},
                  {"name": "replay", "status": "skipped", "error": "no strategy"}]})
    sim = Artifact(path=tmp_path / "simulate" / "simulate.json", schema="cachelab.simulation",
                   kind="simulation", data={"mode": "unknown"})
    steps = recorded([run, sim])
    assert answers_of(sim, steps) == kept
    # The run's own section answers for the step that left nothing: not measured, why.
    assert answers_of(run, steps) == [Answer("replay", "not measured", NOT_MEASURED,
                                             "skipped: no strategy")]
