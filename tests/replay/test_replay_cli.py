"""``cachelab replay`` on the command line: its flags, its artifacts, its exit codes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cachelab import traces
from cachelab.cli import run as cli
from cachelab.servers import PrivateMemcached

SMALL_SITE = dict(domains=2, subjects_per_domain=2.0, topics_per_subject=3.0,
                  tutorials_per_topic=3.0, items_per_tutorial=4.0, instances=3)


@pytest.fixture(scope="module")
def trace() -> traces.RequestTrace:
    return traces.synthesize(traces.SynthParams(requests=400, **SMALL_SITE))


def test_cli(memcached: PrivateMemcached, trace, tmp_path: Path,
             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    traces.save_request_trace(trace, path)
    out = tmp_path / "out"
    code = cli(["replay", str(path), "--strategy", "none,fixed:5", "--profile-samples", "50",
                "--calibration-reps", "10", "--slices", "2", "--draws", "1", "--server",
                memcached.address, "--out", str(out), "--format", "json"])
    assert code in (0, 1)  # 1: a prediction missed by more than 15 % (reported, not a crash)
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "cachelab.replay" and doc["schema_version"] == 2
    assert len(doc["strategies"]) == 2 and doc["load_average"]["before"]
    assert doc["trace"]["source"] == str(path) and doc["server"]["private"] is False
    assert (out / "replay.json").exists()
    with (out / "replay.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and {"library_ms", "predicted_library_ms", "model_ms"} <= set(rows[0])
    assert cli(["replay", "--strategy", "fixed:5+lru:5"]) == 2
    assert cli(["replay", "--calibration-reps", "0", "--strategy", "none"]) == 2
    assert cli(["replay", "--requests", "5", "--strategy", "none"]) == 2
