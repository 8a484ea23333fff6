"""``cachelab compare`` names a partial result as such — on its ``A = …`` line, in a note, in
``compare.json`` and in the report — with how far it really got; complete ones are not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cachelab.cli import run as cli
from cachelab.servers import PrivateMemcached
from partial_runs import interrupted_profile, sigint_when_busy


def compare(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, list[str]]:
    code = cli(["compare", *map(str, args), "--no-plots", "--format", "table"])
    return code, capsys.readouterr().out.splitlines()


def test_a_partial_profile_is_named_partial_with_its_real_counts(
        memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = interrupted_profile(memcached.address, tmp_path / "cut")
    assert cli(["profile", "--server", memcached.address, "--samples", "300", "--warmup", "0",
                "--sizes", "1,1K", "--keys", "1,10", "--no-plots", "--format", "json", "--out",
                str(tmp_path / "whole")]) == 0
    capsys.readouterr()
    kept = sorted(c["samples"] for c in doc["cells"])
    counts = f"{kept[0]:,}" if kept[0] == kept[-1] else f"{kept[0]:,}\u2013{kept[-1]:,}"
    out = tmp_path / "cmp"

    code, lines = compare(capsys, tmp_path / "whole", tmp_path / "cut", "--out", out)
    assert code == 0
    # (after the answer card, whose marks name B's partial too)
    a_line = next(line for line in lines if line.startswith("A = "))
    b_line = lines[lines.index(a_line) + 1]
    assert any(line.endswith("(B: PARTIAL)") for line in lines), lines
    assert a_line == "A = whole/profile.json", a_line
    assert re.fullmatch(r"B = cut/profile\.json \u2014 PARTIAL \(interrupted after [\d.]+ m?s; "
                        rf"samples per cell: {counts} of 1,000,000 asked\)", b_line), b_line
    note = b_line.split(" \u2014 ", 1)[1]
    # said once, under "what to trust:" (and on stderr)
    said = f"B is {note}: it stopped before the end, so it covers less than was asked"
    block = lines.index("what to trust:")
    assert f"  warning: {said}" in lines[block:], lines
    assert not any(line.endswith(said) for line in lines[:block]), lines
    saved = json.loads((out / "compare.json").read_text())
    assert saved["partial"] == {"B": note}

    assert cli(["report", str(out), "--out", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert f"B = cut/profile.json \u2014 {note}" in page.replace("&#x27;", "'")


def test_complete_results_get_no_partial_mark(memcached: PrivateMemcached, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b"):
        assert cli(["profile", "--server", memcached.address, "--samples", "100", "--warmup",
                    "0", "--sizes", "1", "--keys", "1", "--no-plots", "--format", "json",
                    "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    code, lines = compare(capsys, tmp_path / "a", tmp_path / "b", "--out", tmp_path / "cmp")
    assert code == 0
    assert not any("PARTIAL" in line for line in lines), lines
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["partial"] == {}


@pytest.mark.slow
def test_an_interrupted_load_is_named_partial_with_its_replies(
        memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--server", memcached.address, "--warmup", "0", "--no-prefill", "--no-plots",
              "--format", "json"]
    p = sigint_when_busy(["load", "--duration", "60", *common, "--out", tmp_path / "cut"],
                         memcached.address, gets=3000, cwd=tmp_path)
    assert p.returncode == 130, p.stderr
    replies = json.loads((tmp_path / "cut" / "load.json").read_text())["all"]["replies"]
    assert cli(["load", "--duration", "2", *common, "--out", str(tmp_path / "whole")]) == 0
    capsys.readouterr()
    code, lines = compare(capsys, tmp_path / "cut", tmp_path / "whole", "--out", tmp_path / "c")
    assert code == 0
    at = next(i for i, line in enumerate(lines) if line.startswith("A = "))  # after the card
    assert re.fullmatch(r"A = cut/load\.json \u2014 PARTIAL \(interrupted after [\d.]+ m?s; "
                        rf"{replies:,} replies; 60 s asked\)", lines[at]), lines[at]
    assert lines[at + 1] == "B = whole/load.json"
