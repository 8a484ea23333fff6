"""``cachelab compare --server-cmd`` with redis-server command lines: each started as a
private redis-server on its own port with its own flags (``--io-threads``), every round a load
over RESP, the servers' io-threads recorded; and the one-line refusals of commands that do not
go together."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clitools import InProcess, one_error_line

if shutil.which("redis-server") is None:
    pytest.skip("redis-server is not installed", allow_module_level=True)


@pytest.mark.slow
def test_redis_commands_run_interleaved_rounds_over_resp(cli: InProcess, tmp_path: Path) -> None:
    out = tmp_path / "ab"
    p = cli("compare", "--server-cmd", "redis-server", "--server-cmd",
            "redis-server --io-threads 2", "--repeats", "2", "--duration", "0.5",
            "--out", out, "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads((out / "compare.json").read_text())
    servers = d["settings"]["servers"]
    assert [s["protocol"] for s in servers] == ["resp", "resp"]
    assert [s["io_threads"] for s in servers] == [1, 2]
    assert all(s["version"].startswith("redis ") for s in servers)
    assert servers[1]["argv"][-2:] == ["--io-threads", "2"]
    assert [(r["server"], r["round"]) for r in d["settings"]["rounds"]] == [
        ("A", 1), ("B", 1), ("B", 2), ("A", 2)]
    assert all(r["throughput"] > 0 for r in d["settings"]["rounds"])
    for r in sorted((out / "rounds").iterdir()):
        load_doc = json.loads((r / "load.json").read_text())
        assert load_doc["spec"]["protocol"] == "resp" and load_doc["all"]["errors"] == {}
        # the server counted the run's commands (INFO's deltas): it was the Redis driven
        assert load_doc["server"]["deltas"]["total_commands_processed"] > 0


@pytest.mark.parametrize("a, b, expect", [
    ("memcached -t 1", "redis-server", "every --server-cmd speaks one protocol"),
    ("redis-server", "redis-server --port 7000", "leave out --port"),
    ("redis-server", "no-such-wrapper redis-server", "no-such-wrapper is not installed"),
])
def test_redis_commands_that_do_not_go_together_are_one_line(
        cli: InProcess, tmp_path: Path, a: str, b: str, expect: str) -> None:
    p = cli("compare", "--server-cmd", a, "--server-cmd", b, "--repeats", "2",
            "--duration", "0.5", "--out", tmp_path / "ab")
    assert p.returncode == 2, p.stderr
    assert expect in one_error_line(p)
    assert not (tmp_path / "ab").exists()
