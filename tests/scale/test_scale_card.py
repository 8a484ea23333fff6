"""A sweep's answer card (issue 31): the peak measured throughput with its interval and N, and
where throughput stops rising — the USL's Nmax with its interval, "not measured: no fit" with
why, or, when the load client saturated on this one box, that scaling is not measurable on
this machine and how to measure it. Fake runs through the sweep's own result builder: the
verdicts are chosen, not measured."""

from __future__ import annotations

import re
from pathlib import Path

from cachelab.answers import CERTIFIED, INDICATIVE, NOT_MEASURED, with_card
from cachelab.artifacts import Artifact
from cachelab.page.section import Context
from cachelab.scale.section import section
from cards import card_of, fake_sweep


def test_a_valid_sweep_s_card_is_certified_with_intervals() -> None:
    r = fake_sweep()
    text = with_card(r.render(), r.answers())
    assert text.splitlines()[0] == "answer:"
    card = card_of(text)
    value, mark = card["peak throughput"]
    assert re.fullmatch(r"4,832 replies/s at N = 10 \(95 % [\d,]+–[\d,]+\)", value), value
    assert mark == CERTIFIED
    value, mark = card["stops scaling at"]
    assert re.fullmatch(r"N ≈ 9\.9\d* \(95 % [\d.]+–[\d.]+\)", value), value
    assert mark == CERTIFIED


def test_a_client_saturated_on_one_box_is_named_not_fitted() -> None:
    r = fake_sweep(saturated_from=8)
    card = card_of(with_card(r.render(), r.answers()))
    value, mark = card["stops scaling at"]
    assert value.startswith("not measurable on this machine: the load client saturated at "
                            "N = 10, 12, 16, so the curve is the client's ceiling, not "
                            "memcached's"), value
    assert "`--ray`" in value and "client on another host" in value, value
    assert "N ≈" not in value  # the curve fitted to a saturated client is not the answer
    assert mark == f"{INDICATIVE} (client saturated)"
    assert card["peak throughput"][1] == f"{INDICATIVE} (INVALID: client saturated)"


def test_a_fit_to_a_saturated_client_is_marked_in_the_table_and_the_report(
        tmp_path: Path) -> None:
    # The card says scaling is not measurable; the table and the report agree: the fit
    # (still made, still in scale.json) is the client's ceiling, not memcached's Nmax.
    r = fake_sweep(saturated_from=8)
    assert r.fit is not None
    text = with_card(r.render(), r.answers())
    alarms = text.split("\nanswer:")[0].splitlines() + [
        line for line in text.split("what to trust:")[1].split("\n\n")[0].splitlines()]
    ceiling = [line for line in alarms if "scaling NOT measurable on this machine" in line]
    assert ceiling, text
    assert "the load client saturated at N = 10, 12, 16" in ceiling[0], ceiling
    assert "the USL fit's Nmax) is the client's ceiling" in ceiling[0]
    assert ceiling[0].split(" → ")[1].startswith(
        "measure with `--ray`"), ceiling
    body = r.render().splitlines()
    at = body.index(next(line for line in body if line.startswith("USL fit of ")))
    assert body[at - 1].startswith("the load client's ceiling, not memcached's"), body[at - 2:at]
    path = r.save(tmp_path / "scale.json")
    sec = section(Artifact(path=path, schema="cachelab.scale", kind="scale", data=r.to_dict()),
                  Context(scratch=tmp_path / "scratch"))
    assert any(f.startswith("Scaling NOT measurable on this machine: the load client saturated")
               for f in sec.findings), sec.findings
    peaks = [f for f in sec.findings if f.startswith("The USL fit")]
    assert peaks and all(f.startswith("The USL fit (the load client's ceiling, not "
                                      "memcached's) ") for f in peaks), peaks
    # A sweep whose client kept up says nothing of the kind.
    ok = fake_sweep()
    assert "NOT measurable" not in ok.render()
    assert "ceiling" not in ok.render()


def test_no_fit_is_stated_in_the_card_and_the_findings(tmp_path: Path) -> None:
    # One repeat, every run from N = 6 up stalled: 3 usable measurements, no fit.
    r = fake_sweep(repeats=1, bootstrap=0, stalled_from=6)
    assert r.fit is None
    card = card_of(with_card(r.render(), r.answers()))
    value, mark = card["stops scaling at"]
    assert value == "not measured: no fit — only 3 usable measurement(s)", value
    assert mark.startswith(f"{NOT_MEASURED} (the USL needs 6 at 3 or more loads"), mark
    assert card["peak throughput"][1] == f"{INDICATIVE} (one run at that N: no interval)"
    # The report's findings say it too (the plot is not silently missing).
    path = r.save(tmp_path / "scale.json")
    sec = section(Artifact(path=path, schema="cachelab.scale", kind="scale", data=r.to_dict()),
                  Context(scratch=tmp_path / "scratch"))
    assert any(f.startswith("No USL fit, so where throughput stops rising is not measured: "
                            "only 3 usable measurement(s)") for f in sec.findings), sec.findings
