"""``cachelab compare --server-cmd``: live A/B of memcached command lines — interleaved rounds,
each server's run-queue wait, and one-line errors for commands that cannot be run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clitools import InProcess, one_error_line


def test_server_commands_run_interleaved_rounds(cli: InProcess, tmp_path: Path) -> None:
    out = tmp_path / "ab"
    p = cli("compare", "--server-cmd", "memcached -t 1", "--server-cmd", "memcached -t 2",
            "--repeats", "2", "--duration", "0.5", "--out", out, "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads((out / "compare.json").read_text())
    assert d["kind"] == "servers" and d["sources"] == ["memcached -t 1", "memcached -t 2"]
    argvs = [s["argv"] for s in d["settings"]["servers"]]
    for argv, threads in zip(argvs, ("1", "2")):
        assert argv[argv.index("-t") + 1] == threads
        assert argv[argv.index("-l") + 1] == "127.0.0.1" and argv[argv.index("-U") + 1] == "0"
    assert argvs[0][argvs[0].index("-p") + 1] != argvs[1][argvs[1].index("-p") + 1]
    # Interleaved: A B, then B A.
    assert [(r["server"], r["round"]) for r in d["settings"]["rounds"]] == [
        ("A", 1), ("B", 1), ("B", 2), ("A", 2)]
    rows = {x["metric"]: x for x in d["rows"]}
    assert {"throughput", "p50", "p99", "run-queue wait"} <= set(rows)
    for x in d["rows"]:
        # Two rounds give t = 12.7: a noisy baseline (run-queue wait near 0) may have no
        # bounded ratio interval, and then says so rather than print an impossible one.
        if x["ci_low"] is None:
            assert x["verdict"] == "no interval", x
            continue
        assert -1.0 <= x["ci_low"] <= x["relative"] <= x["ci_high"]
        if x["verdict"] in ("higher", "lower"):
            assert (x["ci_low"] > 0) == (x["verdict"] == "higher")
            assert x["ci_low"] > 0 or x["ci_high"] < 0
    # Run-queue wait comes from each round's server schedstat (the memcached's own pid).
    rounds = sorted((out / "rounds").iterdir())
    assert [r.name for r in rounds] == ["A-1", "A-2", "B-1", "B-2"]
    for r in rounds:
        load_doc = json.loads((r / "load.json").read_text())
        assert load_doc["server"]["schedstat"]["threads"] >= 1
    assert rows["run-queue wait"]["a"] == pytest.approx(sum(
        json.loads((out / "rounds" / f"A-{i}" / "load.json").read_text())["server"]["schedstat"]
        ["wait_per_wall"] for i in (1, 2)) / 2)


@pytest.mark.parametrize("cmd, code, expect", [
    ("chrt -f 50 sleep 1", 2, "does not end in a memcached invocation"),
    ("memcached -t 2 -p 11211", 2, "leave out -p"),
    ("memcached -l0.0.0.0", 2, "leave out -l0.0.0.0"),
    ("no-such-wrapper memcached", 2, "no-such-wrapper is not installed"),
    # A wrapper that fails (as chrt does without the privilege): one line, exit 3.
    ("false memcached -t 2", 3, "B server 'false memcached -t 2' did not start: exited with"),
])
def test_bad_server_commands_exit_with_one_line(cli: InProcess, tmp_path: Path, cmd: str, code: int,
                                                expect: str) -> None:
    p = cli("compare", "--server-cmd", "memcached -t 1", "--server-cmd", cmd,
            "--repeats", "2", "--duration", "0.5", "--out", tmp_path / "ab")
    assert p.returncode == code, p.stderr
    assert expect in one_error_line(p)
    assert not (tmp_path / "ab").exists()


def test_server_commands_and_results_do_not_mix(cli: InProcess, tmp_path: Path) -> None:
    p = cli("compare", "a.json", "--server-cmd", "memcached", "--server-cmd", "memcached")
    assert p.returncode == 2 and "not both" in one_error_line(p)
