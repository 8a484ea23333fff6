"""A study cut short keeps what it measured: the step under way writes its verb's partial
result (here scale's runs done), run.json says PARTIAL and why, the report is written from
what there is, and the exit code and its one stderr line say what happened."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cachelab.servers import PrivateMemcached
from partial_runs import Background, error_lines, kill

#: A quick study of the scale step (fixed windows: a run is about 1.5 s) and the tiers step.
STUDY = ["run", "--quick", "--precision", "off", "--format", "table"]


def partial_items(page: str) -> list[str]:
    """The "Partial results" list at the top of the report: the sections' titles and notes."""
    m = re.search(r'<h2 id="partial">Partial results</h2><ul class="err">(.*?)</ul>', page, re.S)
    return [re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li>(.*?)</li>", m[1])] if m else []


@pytest.mark.slow
def test_a_study_whose_server_is_killed_keeps_the_scale_runs_done(tmp_path: Path) -> None:
    out = tmp_path / "study"
    with PrivateMemcached(threads=2) as server:
        run = Background([*STUDY, "--steps", "scale,tiers", "--server", server.address,
                          "--out", out], cwd=tmp_path)
        run.wait_for_line("scale: 2/6 ")
        kill(server)
        p = run.finish()
    assert p.returncode == 3, p.stderr
    (err,) = error_lines(p.stderr)
    assert err.startswith("cachelab: error: step scale: scale gave up: "), err
    assert err.endswith(f"; the results measured are saved in {out}"), err
    doc = json.loads((out / "run.json").read_text())
    assert doc["aborted"].startswith("step scale: scale gave up: ")
    scaled = json.loads((out / "scale" / "scale.json").read_text())
    n = len(scaled["runs"])
    assert 2 <= n < 6 and scaled["run"]["aborted"]
    first = p.stdout.splitlines()[0]
    assert first.startswith("PARTIAL (gave up after "), first
    assert first.endswith("; steps finished: 0 of 2 asked; failed on the server: scale, tiers)")
    items = partial_items((out / "report.html").read_text())
    assert len(items) == 2 and items[0].startswith("The run: PARTIAL (gave up after "), items
    assert items[1].startswith("Scalability: N = connections: PARTIAL (gave up after ")
    assert items[1].endswith(f"; runs measured: {n} of 6 asked)"), items


@pytest.mark.slow
def test_ctrl_c_in_the_scale_step_keeps_its_runs_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "study"
    run = Background([*STUDY, "--steps", "scale", "--out", out], cwd=tmp_path)
    run.wait_for_line("scale: 1/6 ")
    run.signal()
    p = run.finish()
    assert p.returncode == 130, p.stderr
    assert error_lines(p.stderr) == [f"cachelab: error: interrupted; partial results saved in "
                                     f"{out}"]
    scaled = json.loads((out / "scale" / "scale.json").read_text())
    n = len(scaled["runs"])
    assert 1 <= n < 6 and scaled["run"]["cancelled"] is True
    assert p.stdout.splitlines()[0].startswith("PARTIAL (interrupted after ")
    items = partial_items((out / "report.html").read_text())
    assert items[0].startswith("The run: PARTIAL (interrupted after "), items
    assert items[1].startswith("Scalability: N = connections: PARTIAL (interrupted after ")
    assert items[1].endswith(f"; runs measured: {n} of 6 asked)"), items
