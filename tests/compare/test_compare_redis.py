"""``cachelab compare --server-cmd`` with redis-server command lines: each started as a
private redis-server on its own port with its own flags (``--io-threads``), every round a load
over RESP, the servers' io-threads recorded; over TLS (``--tls`` with each command's own
certificate: the A/B makes it listen on TLS alone), the rounds' load over TLS and a server whose
certificate the client does not trust named; and the one-line refusals of commands that do not
go together."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clitools import InProcess, one_error_line
from testcerts import ca, leaf

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


@pytest.mark.slow
def test_redis_commands_over_tls_run_every_round_over_tls(
        cli: InProcess, tmp_path: Path) -> None:
    authority = ca(tmp_path, "ca")
    cert, key = leaf(tmp_path, "server", authority, "IP:127.0.0.1,DNS:localhost")
    tls = f"--tls-cert-file {cert} --tls-key-file {key}"
    out = tmp_path / "ab"
    p = cli("compare", "--tls", "--cacert", authority[0],
            "--server-cmd", f"redis-server {tls}", "--server-cmd", f"redis-server {tls} --hz 50",
            "--repeats", "2", "--duration", "0.5", "--out", out, "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads((out / "compare.json").read_text())
    assert d["settings"]["transport"] == "tls"
    servers = d["settings"]["servers"]
    assert [s["transport"] for s in servers] == ["tls", "tls"]
    assert [s["io_threads"] for s in servers] == [1, 1]  # CONFIG GET answered over TLS
    for s in servers:  # TLS alone: the plain port closed
        argv = s["argv"]
        assert argv[argv.index("--port") + 1] == "0" and "--tls-port" in argv
    for r in sorted((out / "rounds").iterdir()):
        load_doc = json.loads((r / "load.json").read_text())
        assert load_doc["server"]["transport"] == "tls" and load_doc["all"]["errors"] == {}
        assert load_doc["server"]["deltas"]["total_commands_processed"] > 0
    # A server whose certificate the client does not trust is named (exit 3, one line).
    other = ca(tmp_path, "other")
    bad = cli("compare", "--tls", "--cacert", other[0], "--server-cmd", f"redis-server {tls}",
              "--server-cmd", f"redis-server {tls}", "--repeats", "2", "--duration", "0.5",
              "--out", tmp_path / "bad")
    assert bad.returncode == 3, bad.stderr
    assert "A server 'redis-server" in one_error_line(bad) and "did not start" in bad.stderr


def test_redis_commands_under_tls_need_their_certificate(
        cli: InProcess, tmp_path: Path) -> None:
    p = cli("compare", "--tls", "--server-cmd", "redis-server", "--server-cmd",
            "redis-server --io-threads 2", "--repeats", "2", "--duration", "0.5",
            "--out", tmp_path / "ab")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "--tls-cert-file FILE --tls-key-file FILE" in line, line
    assert not (tmp_path / "ab").exists()
