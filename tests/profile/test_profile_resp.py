"""``cachelab profile`` against a real redis-server (RESP): the cells measured, the keys gone
after (redis-py's DBSIZE and SCAN), the server's own ``commandstats`` (read by redis-py: a
third party) against the commands the profile says it sent, the ``maxmemory`` refusal before
anything is written, and the password never shown.

One password-protected server for the module (conftest's ``redis``), left empty by every
test. Runs are short; the assertions are on counts, never on speed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clitools import InProcess, one_error_line
from privateredis import PrivateRedis

#: A small profile: two sizes, two key counts, few samples.
SMALL = ["--quick", "--samples", "40", "--warmup", "3", "--sizes", "100,10K", "--keys", "1,5",
         "--no-plots", "--format", "table"]

#: The commands a profile sends over RESP, as the record names them and as commandstats does.
COMMANDS = {"GET": "get", "SET": "set", "MGET": "mget", "UNLINK": "unlink", "PING": "ping"}


def _calls(info: dict[str, Any]) -> dict[str, int]:
    return {mine: int(info[f"cmdstat_{theirs}"]["calls"]) if f"cmdstat_{theirs}" in info else 0
            for mine, theirs in COMMANDS.items()}


def _no_secret(password: str, text: str, out: Path) -> None:
    assert password not in text
    for f in out.rglob("*") if out.exists() else ():
        if f.is_file():
            assert password.encode() not in f.read_bytes(), f


def test_a_redis_profile_measures_every_cell_and_the_server_counts_what_it_sent(
    tmp_path: Path, redis: PrivateRedis, cli: InProcess
) -> None:
    c = redis.client()
    before = _calls(c.info("commandstats"))
    out = tmp_path / "out"
    proc = cli("profile", "--server", redis.url, *SMALL, "--out", out)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    heading = next(line for line in lines if " at 127.0.0.1:" in line)
    assert heading.startswith("redis 7") and "; resp protocol, 1 connection(s)" in heading
    assert any(line.startswith("loopback floor (PING on the measuring connection)")
               for line in lines), lines[:5]
    saved = json.loads((out / "profile.json").read_text())
    cells = {(x["op"], x["value_size"], x["keys"]): x for x in saved["cells"]}
    assert set(cells) == {("floor", 0, 0), ("get", 100, 1), ("get", 10_000, 1),
                          ("set", 100, 1), ("set", 10_000, 1), ("multiget", 1000, 1),
                          ("multiget", 1000, 5)}
    for cell in cells.values():
        assert cell["samples"] == 40, cell
        assert cell["errors"] == {} and cell["mismatches"] == 0 and cell["misses"] == 0, cell
    assert saved["client"]["floor_command"] == "PING"
    assert saved["run"]["leftover_keys"] == 0
    # every key written is gone: the server is empty again, nothing under the run's prefix
    assert c.dbsize() == 0
    assert list(c.scan_iter(match=saved["client"]["prefix"] + "*", count=1000)) == []
    # the server counted each command as often as the profile says it sent it
    after = _calls(c.info("commandstats"))
    sent = saved["client"]["commands"]
    assert {k: after[k] - before[k] for k in COMMANDS} == {k: sent.get(k, 0) for k in COMMANDS}
    # 43 rounds (3 warm-up): a timed and an untimed PING, a SET and a GET per size, and an
    # MGET per key count
    assert sent["PING"] == 2 * 43 and sent["MGET"] == 2 * 43 and sent["SET"] >= 2 * 43
    assert saved["server"]["calls"]["mget"] == sent["MGET"]
    assert "the commands the profile sent, each counted once" in proc.stdout
    assert saved["server"]["deltas"]["keyspace_hits"] >= 2 * 43
    _no_secret(redis.password or "", proc.stdout + proc.stderr, out)


def test_a_profile_that_would_pass_maxmemory_is_refused_before_writing(
    tmp_path: Path, redis: PrivateRedis, cli: InProcess
) -> None:
    c = redis.client()
    c.config_set("maxmemory", "4mb")
    sets = _calls(c.info("commandstats"))["SET"]
    try:
        proc = cli("profile", "--server", redis.url, *SMALL, "--sizes", "4M",
                   "--out", tmp_path / "out")
        assert proc.returncode == 2, proc.stderr
        err = one_error_line(proc.stderr)
        assert "maxmemory" in err and "--sizes" in err, err
        assert _calls(c.info("commandstats"))["SET"] == sets  # nothing written
        assert c.dbsize() == 0
        assert not (tmp_path / "out" / "profile.json").exists()
        _no_secret(redis.password or "", proc.stdout + proc.stderr, tmp_path / "out")
    finally:
        c.config_set("maxmemory", "0")


def test_protocol_meta_with_a_redis_url_is_one_line(tmp_path: Path, redis: PrivateRedis,
                                                     cli: InProcess) -> None:
    proc = cli("profile", "--server", redis.url, "--protocol", "meta", *SMALL,
               "--out", tmp_path / "out")
    assert proc.returncode == 2
    err = one_error_line(proc.stderr)
    assert "--protocol meta" in err and "--protocol resp" in err, err
    _no_secret(redis.password or "", proc.stdout + proc.stderr, tmp_path / "out")
