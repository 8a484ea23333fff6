"""``cachelab load`` on a pool of real memcached servers (127.0.0.2, .3, .4): what each member
was sent is what its own ``stats`` counted, multi-gets are split into one get per member,
keys sit where :func:`cachelab.pool.distribution` (golden-checked against pylibmc and
pymemcache) puts them, and a member stopped with SIGSTOP is marked down while the others go
on. Every run is bounded in requests or seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

import cachelab._core as _core
from cachelab.load import LoadSpec, load
from cachelab.pool import DISTRIBUTIONS, distribution
from cachelab.servers import PrivateMemcached
from clitools import InProcess, await_gets, gets_served, one_error_line
from pools import loopback_pool

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
RUN_TIMEOUT = 60


@pytest.fixture(scope="module")
def pool() -> Iterator[list[PrivateMemcached]]:
    with loopback_pool(threads=2) as servers:
        yield servers


def _addresses(pool: list[PrivateMemcached]) -> list[str]:
    return [s.address for s in pool]


def _delta(member: dict[str, Any], name: str) -> int:
    return int(member["server"]["deltas"][name])


def test_each_members_counts_are_its_own_stats_and_multigets_are_one_get_per_member(
    pool: list[PrivateMemcached],
) -> None:
    # Ten keys of equal length (indices 0-9), all prefilled: only multi-gets of 10 keys are
    # sent, so a member's bytes read are 5 per get ("get" and CRLF) plus 1 + the key length
    # per key — one get per member and multi-get, not one per key.
    spec = LoadSpec(connections=2, pipeline=4, mix={"multiget": 1}, multiget_keys=10,
                    key_space=10, duration=None, requests=3000, warmup=0, interval=0.2,
                    seed=7, timeout=5.0, member_timeout=5.0)  # no failure on a busy machine
    r = load(spec, server=_addresses(pool))
    assert r.members is not None and len(r.members) == 3
    key_len = len(r.spec["prefix_used"]) + 2  # "<prefix>:<digit>"
    # The run's prefix is random, so a member may own none of the ten keys ((2/3)^10, about
    # 1.7 % per member): it is then sent nothing and counts nothing.
    assert sum(m["sent"] > 0 for m in r.members) >= 2
    for m in r.members:
        assert m["sent"] == m["replies"] and not m["errors"] and not m["lost"]
        if m["sent"] == 0:
            assert _delta(m, "cmd_get") == _delta(m, "get_hits") == m["hits"] == 0
            continue
        assert m["hits"] == _delta(m, "get_hits") and m["misses"] == _delta(m, "get_misses") == 0
        assert m["hits"] == _delta(m, "cmd_get")  # keys asked of this member
        gets = (_delta(m, "bytes_read") - m["hits"] * (1 + key_len)) / 5
        # Besides the gets, the server read the "after" snapshot's own "version" and "stats"
        # lines (16 bytes) and any stats read during the run (their number depends on how long
        # a busy machine took): a few gets' worth, far from one get per key (hits).
        assert abs(gets - m["sent"]) <= 25, (gets, m["sent"], m["hits"])
    # A get carries all of the member's keys of the multi-get, not one: ten keys over three
    # members, so some member owns several and is asked for more keys than it is sent gets.
    assert any(m["hits"] > 1.5 * m["sent"] > 0 for m in r.members)
    # Each multi-get touched every member holding one of its keys, once: 3000 multi-gets of
    # 10 keys over 3 members are at most 9000 gets, and more than 3000.
    assert r.all["ops"]["multiget"] == 3000 < sum(m["sent"] for m in r.members) <= 9000
    assert sum(m["hits"] for m in r.members) == r.all["hits"] == 30000
    assert r.pool is not None and r.pool["distribution"] == "ketama"


def test_keys_are_stored_on_the_member_the_distribution_names(
    pool: list[PrivateMemcached],
) -> None:
    """After the prefill, every member is asked for every key of the run: each key is on
    the one member ``cachelab.pool.distribution`` names, and on no other."""
    found: list[set[str]] = []

    def on_progress(p: Any) -> None:
        if p.total and not found:  # measuring: the prefill is done, no key set or deleted
            prefix = next(k for k in _keys_on(pool[0]) if k.startswith("cachelab:"))
            keys = [f"{prefix.rsplit(':', 1)[0]}:{i}" for i in range(600)]
            for s in pool:
                with _core.Client(s.address) as c:
                    found.append({k.decode() for k in c.get_multi(keys)})

    spec = LoadSpec(connections=2, mix={"get": 1}, key_space=600, duration=1.0, warmup=0,
                    distribution="rendezvous", seed=3, interval=0.2)
    r = load(spec, server=_addresses(pool), on_progress=on_progress)
    prefix = r.spec["prefix_used"]
    assert len(found) == 3
    assert sorted(int(k.rsplit(":", 1)[1]) for keys in found for k in keys) == list(range(600))
    where = distribution("rendezvous", _addresses(pool))
    for member, keys in enumerate(found):
        assert keys and all(k.startswith(prefix + ":") for k in keys)
        assert {where.server_for(k) for k in keys} == {member}
    assert [m["keys"] for m in r.members or []] == [len(k) for k in found]
    assert r.run["deleted_keys"] == 600 and r.run["leftover_keys"] == 0


def _keys_on(server: PrivateMemcached) -> list[str]:
    """Keys ``server`` holds, from ``lru_crawler metadump all`` (not exact while items move
    between LRU segments: used only to learn the run's prefix)."""
    import socket

    host, port = server.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"lru_crawler metadump all\r\n")
        data = b""
        deadline = time.monotonic() + 5
        while not data.endswith(b"END\r\n") and time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return [unquote(field[4:]) for line in data.decode().splitlines()
            for field in line.split() if field.startswith("key=")]


@pytest.mark.slow
def test_a_stopped_member_is_marked_down_and_the_others_go_on(
    tmp_path: Path, pool: list[PrivateMemcached],
) -> None:
    """A member stopped for 3 s is marked down; the others answer everything. Timeouts of 1 s
    (request and member health): a live member's server, or the client, not run for that
    long on a loaded machine is a real timeout, and then what is checked of that member is
    that its errors are timeouts the run's own run-queue waits account for."""
    stopped = pool[2]
    out = tmp_path / "out"
    rate, seconds, timeout = 1500, 6.0, 1.0
    args = [*[a for s in pool for a in ("--server", s.address)],
            "--rate", rate, "--max-outstanding", "1000", "--connections", "2",
            "--duration", seconds, "--warmup", "0", "--interval", "0.5", "--key-space", "300",
            "--timeout", timeout, "--member-timeout", int(timeout * 1000),
            "--member-retry", "1", "--member-failure-limit", "2",
            "--format", "table", "--no-plots", "--out", out]
    pid = stopped.pid
    assert pid is not None
    before = gets_served(stopped.address)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "load", *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        # Once the run is measuring (its start-up and prefill over: seconds on a busy machine),
        # the member stops answering for 3 s of the 6.
        await_gets(stopped.address, before, proc)
        os.kill(pid, signal.SIGSTOP)
        paused = time.monotonic()
        try:
            time.sleep(3.0)
        finally:
            os.kill(pid, signal.SIGCONT)
            paused = time.monotonic() - paused  # (a loaded machine oversleeps)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in stderr, stderr
    # problems (errors, a member down), said on stderr; exit 0: no --fail-on asked
    assert proc.returncode == 0, stderr
    assert "found problems" in stderr and "members down" in stderr, stderr
    saved = json.loads((out / "load.json").read_text())
    members = saved["members"]
    down = members[2]
    assert down["down"], down
    assert down["errors"].get("member_down", 0) > 0 and down["errors"].get("timeout", 0) >= 1
    # Down from its first timeout (a timeout after the first request sent to it once stopped)
    # until it answers again (the retry after the stop's end, and a timeout if that retry came
    # while it was stopped). The test's own `paused` also counts the signals' delivery and the
    # time until the client next sent to it: 3 ms more than down_s + timeout beside a CPU hog,
    # so 0.25 s of slack below.
    assert paused - timeout - 0.25 <= down["down_s"] <= paused + 1 + timeout + 0.5, (
        paused, down["down"])
    assert saved["all"]["errors"]["member_down"] == sum(
        m["errors"].get("member_down", 0) for m in members)
    elapsed = saved["run"]["elapsed_s"]
    for m in members[:2]:  # the others answered everything, at their share of the rate
        if m["errors"]:  # unless a loaded machine did not run their server, or the client
            assert set(m["errors"]) <= {"timeout", "member_down"} and m["errors"].get(
                "timeout"), m
            waited = ((m["server"]["schedstat"] or {}).get("run_queue_wait_s", 0.0)
                      + saved["client"]["run_queue_wait_s"])
            assert waited >= timeout, (m, saved["client"])
            continue
        share = m["keys"] / 300
        assert not m["lost"] and not m["down"], m
        assert m["replies"] >= 0.85 * rate * share * elapsed, (m["replies"], share, elapsed)
    assert f"MEMBER DOWN: {stopped.address} was marked down" in stdout
    assert "member_down" in stdout and "members down" in stderr.replace("_", " ")
    assert any(line.startswith(stopped.address) and "×" in line for line in stdout.splitlines())


def test_a_bad_servers_file_line_exits_2_naming_the_file_and_line(
        cli: InProcess, tmp_path: Path) -> None:
    f = tmp_path / "pool.txt"
    f.write_text("# the pool\n127.0.0.2:11211\n127.0.0.3:port\n")
    p = cli("load", "--servers-file", f, "--duration", "1", cwd=tmp_path)
    assert p.returncode == 2
    assert f"{f}:3:" in one_error_line(p)


def test_an_unknown_distribution_exits_2_listing_the_known_ones(
        cli: InProcess, tmp_path: Path) -> None:
    p = cli("load", "--server", "127.0.0.2:1", "--server", "127.0.0.3:1",
            "--distribution", "consistent", cwd=tmp_path)
    assert p.returncode == 2
    line = one_error_line(p)
    assert "consistent" in line and all(d in line for d in DISTRIBUTIONS)


def test_a_pool_of_one_has_the_single_server_result_shape(
    cli: InProcess, tmp_path: Path, pool: list[PrivateMemcached],
) -> None:
    f = tmp_path / "one.txt"
    f.write_text(f"{pool[0].address}\n")
    common = ("--requests", "500", "--warmup", "0", "--key-space", "50", "--format", "json",
              "--no-plots")
    single = cli("load", "--server", pool[0].address, *common, "--out", tmp_path / "a",
                 cwd=tmp_path)
    one = cli("load", "--servers-file", f, *common, "--out", tmp_path / "b", cwd=tmp_path)
    assert single.returncode == one.returncode == 0, (single.stderr, one.stderr)
    a, b = json.loads(single.stdout), json.loads(one.stdout)
    assert "members" not in a and "pool" not in a
    assert _shape(a) == _shape(b)
    assert b["all"]["replies"] == 500 and b["server"]["address"] == pool[0].address


def _shape(d: Any) -> Any:
    """Keys and nesting, without values (maps of stats and errors are left out, and so are
    the validity checks' details and the percentile intervals, whose fields depend on each
    run's own verdicts: a range is None when withheld, a thinning only when one passed)."""
    if isinstance(d, dict):
        return {k: _shape(v) for k, v in d.items()
                if k not in ("stats_before", "stats_after", "environment", "errors", "checks",
                             "intervals")}
    return type(d).__name__


def test_a_pool_member_is_host_port_and_a_pool_needs_distinct_members() -> None:
    with pytest.raises(Exception, match="listed twice"):
        _core.load_check(LoadSpec(servers=["127.0.0.2:1", "127.0.0.2:1"]).to_core(
            ["127.0.0.2:1", "127.0.0.2:1"], "x"))
    with pytest.raises(Exception, match="only ketama and the twemproxy kinds honour them"):
        LoadSpec(servers=["127.0.0.2:1:2", "127.0.0.3:1"], distribution="modula").check()
