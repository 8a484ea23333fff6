"""A replay cut short keeps the slices every strategy finished, compared with the prediction
for the same requests: the server killed mid-replay (exit 3: the tiered cache went on to its
loader before, and the comparison crashed) or Ctrl-C (exit 130) writes replay.json and
replay.csv marked partial, and the table's first line says PARTIAL with what was kept."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from cachelab import traces
from cachelab.cli import run as cli
from cachelab.servers import PrivateMemcached
from partial_runs import Background, error_lines, kill

SMALL_SITE = dict(domains=2, subjects_per_domain=2.0, topics_per_subject=3.0,
                  tutorials_per_topic=3.0, items_per_tutorial=4.0, instances=3)
#: 2,000 evaluated requests in 4 slices: a slice takes long enough to be stopped in.
REQUESTS, SLICES = 4_000, 4


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay-partial") / "t.jsonl"
    traces.save_request_trace(traces.synthesize(traces.SynthParams(requests=REQUESTS,
                                                                   **SMALL_SITE)), path)
    return path


def replay_args(trace_file: Path, out: Path, *server: str) -> list[object]:
    return ["replay", trace_file, "--strategy", "none,fixed:5", "--profile-samples", "200",
            "--calibration-reps", "20", "--slices", SLICES, "--draws", "1", *server,
            "--format", "table", "--out", out]


def assert_kept(p, out: Path, why: str) -> dict:
    """replay.json and replay.csv hold the slices done, and the headline says so."""
    doc = json.loads((out / "replay.json").read_text())
    slices = doc["run"]["slices"]
    assert 1 <= slices["done"] < SLICES == slices["asked"], slices
    evaluated = doc["trace"]["evaluated"]
    assert evaluated == slices["done"] * REQUESTS // 2 // SLICES
    assert doc["trace"]["evaluated_asked"] == REQUESTS // 2
    assert [s["strategy"] for s in doc["strategies"]] == ["none", "fixed:5"]
    with (out / "replay.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 6
    first = p.stdout.splitlines()[0]
    assert first.startswith(f"PARTIAL ({why} after "), first
    assert first.endswith(f"; requests replayed: {evaluated:,} of {REQUESTS // 2:,} asked, "
                          f"{slices['done']} of {SLICES} slices)"), first
    assert f"({evaluated:,} evaluated requests on " in p.stdout
    return doc


@pytest.mark.slow
def test_a_replay_whose_server_is_killed_keeps_the_slices_done(trace_file: Path,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "cut"
    with PrivateMemcached(threads=1) as server:
        run = Background(replay_args(trace_file, out, "--server", server.address),
                         cwd=tmp_path)
        run.wait_for_line(f"slice 2/{SLICES}")
        kill(server)
        p = run.finish()
    assert p.returncode == 3, p.stderr
    (err,) = error_lines(p.stderr)
    assert re.match(rf"cachelab: error: the server failed in slice [234] of {SLICES}: ", err), err
    doc = assert_kept(p, out, "gave up")
    assert doc["run"]["aborted"] == err.removeprefix("cachelab: error: ")


@pytest.mark.slow
def test_ctrl_c_on_a_private_server_keeps_the_slices_done(trace_file: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "cut"
    run = Background(replay_args(trace_file, out), cwd=tmp_path)
    run.wait_for_line(f"slice 2/{SLICES}")
    run.signal()
    p = run.finish()
    assert p.returncode == 130, p.stderr
    assert error_lines(p.stderr) == [f"cachelab: error: interrupted; partial results saved in "
                                     f"{out}"]
    doc = assert_kept(p, out, "interrupted")
    assert doc["run"]["cancelled"] is True and doc["server"]["private"] is True
    assert cli(["report", str(out), "--out", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert re.search(r"Replay: the tiered cache on a real memcached vs the simulation</a>: "
                     r"PARTIAL \(interrupted after [^<]*; requests replayed: ", page)
