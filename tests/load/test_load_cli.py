"""``cachelab load`` on the command line: artifacts, exit codes, failure modes."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cachelab.servers import PrivateMemcached
from clitools import InProcess, await_gets, cachelab, gets_served, one_error_line
from fakes import FakeServer

RUN_TIMEOUT = 60


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--connections", "0"], "--connections: must be an integer from 1 to 4096, got 0"),
        (["--connections", "5000"], "4096"),
        (["--rate", "9e6"], "--rate: must be a number above 0 and at most 5000000, got 9e6"),
        (["--duration", "7200"], "3600"),
        (["--mix", "get=1,put=2"], "unknown operation 'put'"),
        (["--key-dist", "pareto"], "key distribution"),
        (["--value-size", "uniform:10"], "uniform:MIN:MAX"),
        (["--duration", "1", "--requests", "10"], "not both"),
        (["--prefix", "has space"], "key prefix"),
        (["--threads", "3", "--connections", "2"], "each thread needs"),
        (["--spec", "/nonexistent.toml"], "no such file"),
        (["--busy-poll", "2000"], "--busy-poll: must be an integer from 0 to 1000, got 2000"),
        (["--busy-poll", "-1"], "--busy-poll: must be an integer from 0 to 1000, got -1"),
        (["--spin-us", "1001"], "--spin-us: must be an integer from 0 to 1000, got 1001"),
        (["--send-batch", "0"], "--send-batch: must be an integer from 1 to 1024, got 0"),
        (["--pipeline", "4", "--send-batch", "5"],
         "send-batch must be at most the pipeline depth (4), not 5"),
        (["--rate", "100", "--send-batch", "2"], "send-batch is for the closed loop only"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    cli: InProcess, args: list[str], needle: str, tmp_path: Path, memcached: PrivateMemcached
) -> None:
    p = cli("load", *args, "--server", memcached.address, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert needle in one_error_line(p.stderr)


@pytest.mark.slow
def test_run_writes_every_artifact(tmp_path: Path, memcached: PrivateMemcached) -> None:
    out = tmp_path / "out"
    p = cachelab("load", "--server", memcached.address, "--duration", "2", "--warmup", "0.5",
                 "--interval", "0.5", "--mix", "get=80,set=20", "--key-space", "300",
                 "--out", out, "--format", "json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["schema"] == "cachelab.load" and result["schema_version"] == 2
    assert result == json.loads((out / "load.json").read_text())
    assert result["all"]["hits"] == result["server"]["deltas"]["get_hits"]
    with (out / "load.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(result["intervals"])
    assert sum(int(r["replies"]) for r in rows) == result["all"]["replies"]
    hlog = (out / "load.hlog").read_text().splitlines()
    assert hlog[0] == "#[Histogram log format version 1.3]"
    assert sum(line.startswith("Tag=uncorrected,") for line in hlog) == len(rows)
    assert (out / "load-latency.png").stat().st_size > 0
    assert (out / "load-latency.svg").stat().st_size > 0


def test_table_output(cli: InProcess, tmp_path: Path, memcached: PrivateMemcached) -> None:
    p = cli("load", "--server", memcached.address, "--rate", "500", "--duration", "1",
            "--warmup", "0", "--no-plots", "--out", tmp_path / "o", "--format", "table",
            "--busy-poll", "300", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "open loop" in p.stdout and "corrected" in p.stdout
    result = json.loads((tmp_path / "o" / "load.json").read_text())
    # Held, or (a machine too busy to keep even 500/s) said not to be, here and on stderr.
    if result["schedule"]["held"]:
        assert "target rate 500/s held" in p.stdout
    else:
        assert "target rate 500/s NOT held" in p.stdout and "rate not held" in p.stderr
    assert "busy polling: " in p.stdout
    assert result["spec"]["busy_poll_us"] == 300
    assert 0 < result["client"]["busy_caught"] <= result["client"]["busy_polls"]


def test_send_batch_makes_every_write_carry_a_batch(
    cli: InProcess, tmp_path: Path, memcached: PrivateMemcached
) -> None:
    p = cli("load", "--server", memcached.address, "--connections", "2", "--pipeline", "8",
            "--send-batch", "4", "--requests", "2000", "--warmup", "0", "--no-plots",
            "--out", tmp_path / "o", "--format", "table", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "requests per write (send batch 4)" in p.stdout
    result = json.loads((tmp_path / "o" / "load.json").read_text())
    assert result["spec"]["send_batch"] == 4
    c, sent = result["client"], result["all"]["sent"]
    assert sent == 2000 == result["all"]["replies"]
    # 1,000 requests a connection, in writes of at least 4 (one more a connection, should
    # the kernel take a write in two parts).
    assert 0 < c["writes"] <= sent // 4 + 2
    assert c["requests_per_write"] == pytest.approx(sent / c["writes"], abs=1e-3)


def test_spinning_to_sends_is_reported_as_pacing(
    cli: InProcess, tmp_path: Path, memcached: PrivateMemcached
) -> None:
    """--spin-us: the open loop's threads wait awake for sends due within the window; that
    time is in load.json (``client.spins``, ``pacing_s``) and on its own table line, and is
    not the client's work (its busy share leaves it out)."""
    p = cli("load", "--server", memcached.address, "--connections", "2", "--rate", "1000",
            "--duration", "1", "--warmup", "0.2", "--spin-us", "500", "--no-plots",
            "--out", tmp_path / "o", "--format", "table", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    result = json.loads((tmp_path / "o" / "load.json").read_text())
    c = result["client"]
    assert result["spec"]["spin_us"] == 500
    assert c["spins"] > 0 and 0 < c["pacing_s"] <= c["cpu_user_s"] + c["cpu_system_s"] + 0.05
    line = next(x for x in p.stdout.splitlines() if x.startswith("pacing: "))
    assert f"({c['spins']} waits; --spin-us 500)" in line
    # The requests the spin wrote itself, and those it left to their connection.
    assert c["spin_sends"] + c["spin_fallbacks"] > 0, c
    sent = next(x for x in p.stdout.splitlines() if x.startswith("sent by the spin"))
    assert sent == (f"sent by the spin at their due time: {c['spin_sends']} request(s); left "
                    f"to their connection (a write that would block, or the connection came "
                    f"first): {c['spin_fallbacks']}")
    # Without it, no pacing at all.
    q = cli("load", "--server", memcached.address, "--connections", "2", "--rate", "1000",
            "--duration", "0.5", "--warmup", "0", "--no-plots", "--out", tmp_path / "p",
            "--format", "json", cwd=tmp_path)
    assert q.returncode == 0, q.stderr
    plain = json.loads((tmp_path / "p" / "load.json").read_text())["client"]
    assert (plain["spins"], plain["spin_sends"], plain["spin_fallbacks"]) == (0, 0, 0)


def test_silent_server_exits_3_without_hanging(
    cli: InProcess, tmp_path: Path, fake_server: Callable[[str], FakeServer]
) -> None:
    fake = fake_server("silent")
    started = time.monotonic()
    p = cli("load", "--server", fake.address, "--timeout", "0.3", "--duration", "1",
            "--out", tmp_path / "o", cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    assert "no reply" in one_error_line(p.stderr)
    assert time.monotonic() - started < RUN_TIMEOUT


@pytest.mark.slow
def test_ctrl_c_saves_partial_results(tmp_path: Path,
                                      fresh_memcached: PrivateMemcached) -> None:
    # A server of its own: the GETs awaited before the SIGINT are this run's, never another
    # test's on a shared server (which once sent the SIGINT while the CLI was still starting:
    # exit 130 with nothing to save, as it should be, but not what this test checks).
    memcached = fresh_memcached
    out = tmp_path / "o"
    before = gets_served(memcached.address)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "load", "--server", memcached.address,
         "--duration", "60", "--warmup", "0", "--mix", "get=50,set=50", "--no-prefill",
         "--out", str(out), "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        await_gets(memcached.address, before + 200, proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert (out / "load.json").exists(), stderr
    saved = json.loads((out / "load.json").read_text())
    assert saved["run"]["cancelled"] is True
    assert saved["all"]["replies"] > 0
    assert saved["run"]["leftover_keys"] == 0 and saved["run"]["deleted_keys"] > 0
    assert json.loads(stdout)["all"]["replies"] == saved["all"]["replies"]
