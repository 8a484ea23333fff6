"""A sweep cut short keeps the runs it finished: the server killed mid-sweep (exit 3) or
Ctrl-C (exit 130) writes scale.json and scale.csv with them, marked partial, the table's first
line says PARTIAL with the runs kept, and the report and compare say so too."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

import cachelab.scale as scale
from cachelab.cli import run as cli
from cachelab.errors import Interrupted
from cachelab.servers import PrivateMemcached
from partial_runs import Background, error_lines, kill

#: A small sweep: 3 points, 2 repeats, quick runs (about 1.5 s each).
SWEEP = ["scale", "--quick", "--points", "1,2,3", "--no-plots"]


def kept(out: Path) -> tuple[dict, list[dict[str, str]]]:
    doc = json.loads((out / "scale.json").read_text())
    with (out / "scale.csv").open() as f:
        return doc, list(csv.DictReader(f))


@pytest.mark.slow
def test_a_sweep_whose_server_is_killed_keeps_the_runs_done(tmp_path: Path) -> None:
    out = tmp_path / "cut"
    with PrivateMemcached(threads=2) as server:
        run = Background([*SWEEP, "--server", server.address, "--format", "table", "--out", out],
                         cwd=tmp_path)
        run.wait_for_line("scale: 2/6 ")
        kill(server)
        p = run.finish()
    assert p.returncode == 3, p.stderr
    (err,) = error_lines(p.stderr)
    # Refused at a run's start, or gone during one (that run gave up on it).
    assert re.match(r"cachelab: error: (the server failed at N = \d|the run at N = \d stopped: "
                    "the server went away)", err), err
    doc, rows = kept(out)
    n = len(doc["runs"])
    assert 2 <= n < 6 and len(rows) == n
    assert doc["run"]["aborted"] == err.removeprefix("cachelab: error: ")
    assert doc["run"]["cancelled"] is False
    first = p.stdout.splitlines()[0]
    assert first.startswith("PARTIAL (gave up after "), first
    assert first.endswith(f"; runs measured: {n} of 6 asked)"), first
    assert f"wrote {out}" in p.stdout

    assert cli(["report", str(out), "--out", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert re.search(r"Scalability: N = connections</a>: PARTIAL \(gave up after [^<]*; runs "
                     rf"measured: {n} of 6 asked\)", page)


@pytest.mark.slow
def test_ctrl_c_on_a_private_server_keeps_the_runs_done(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    out = tmp_path / "cut"
    run = Background([*SWEEP, "--format", "json", "--out", out], cwd=tmp_path)
    run.wait_for_line("scale: 2/6 ")
    run.signal()
    p = run.finish()
    assert p.returncode == 130, p.stderr
    assert error_lines(p.stderr) == [f"cachelab: error: interrupted; partial results saved in "
                                     f"{out}"]
    doc, rows = kept(out)
    n = len(doc["runs"])
    assert 2 <= n < 6 and len(rows) == n and json.loads(p.stdout)["runs"] == doc["runs"]
    assert doc["run"]["cancelled"] is True and doc["server"]["private"] is True
    first = scale.read_scale_result(out).render().splitlines()[0]
    assert first.startswith("PARTIAL (interrupted after "), first
    assert first.endswith(f"; runs measured: {n} of 6 asked)"), first

    shutil.copytree(out, tmp_path / "again")
    assert cli(["compare", str(out), str(tmp_path / "again"), "--no-plots", "--format",
                "table", "--out", str(tmp_path / "cmp")]) == 0
    a_line = next(line for line in capsys.readouterr().out.splitlines()
                  if line.startswith("A = "))  # after the answer card
    assert a_line.startswith("A = cut/scale.json \u2014 PARTIAL (interrupted after "), a_line
    assert a_line.endswith(f"; runs measured: {n} of 6 asked)"), a_line


def test_ctrl_c_in_the_progress_callback_raises_with_the_runs_done(
        memcached: PrivateMemcached) -> None:
    def stop_after_two(done: int, _total: int, _n: int, _point: dict) -> None:
        if done == 2:
            raise KeyboardInterrupt

    spec = scale.ScaleSpec.quick(points=[1, 2, 3], repeats=1, bootstrap=0)
    try:
        scale.scale(spec, server=memcached.address, on_run=stop_after_two)
    except Interrupted as e:
        partial = e.partial
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C went through: nothing was kept")
    else:
        pytest.fail("the sweep was not interrupted")
    assert [r["n"] for r in partial.runs] == [1, 2]
    assert [row["n"] for row in partial.summary] == [1, 2]
    assert partial.run["cancelled"] is True and partial.fit is None
