"""Never harm the user's cache (issue 16, item 4), against real 64 MB memcached processes.

Before writing to a server it did not start, cachelab compares what it will write with the
server's free memory and item size limit and refuses with one line; during a run it watches
``evictions`` and stops when the server evicts; every key it wrote is deleted, also when the
run ends early. Each test checks what the user would check: the exit code, the line, and the
server's own ``stats`` and keys afterwards.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from cachelab.servers import PrivateMemcached
from clitools import InProcess, await_gets, gets_served, one_error_line

USER_ITEMS = 2_000
USER_VALUE = b"u" * 10_000


def _client(server: PrivateMemcached):  # noqa: ANN202 - pymemcache is a test dependency
    from pymemcache.client.base import Client
    host, port = server.address.rsplit(":", 1)
    return Client((host, int(port)), connect_timeout=2, timeout=5)


def _keys(server: PrivateMemcached) -> list[str]:
    """Every key the server holds (``lru_crawler metadump all``), bounded in time."""
    host, port = server.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"lru_crawler metadump all\r\n")
        buf = b""
        deadline = time.monotonic() + 10
        while not buf.endswith(b"END\r\n") and time.monotonic() < deadline:
            buf += s.recv(1 << 16)
    return [unquote(line.split(b" ", 1)[0][4:].decode()) for line in buf.splitlines()
            if line.startswith(b"key=")]


def _stat(server: PrivateMemcached, name: str) -> int:
    c = _client(server)
    try:
        return int(c.stats()[name.encode()])
    finally:
        c.close()


@pytest.fixture
def users_cache() -> Iterator[PrivateMemcached]:
    """A default-sized memcached (``-m 64``) holding 20 MB of the user's items."""
    with PrivateMemcached(memory_mb=64) as server:
        c = _client(server)
        for i in range(USER_ITEMS):
            c.set(f"user:{i}", USER_VALUE)
        c.close()
        yield server


def _untouched(server: PrivateMemcached) -> None:
    """The user's items are all there, none was evicted, and no cachelab key is left."""
    assert _stat(server, "evictions") == 0
    keys = _keys(server)
    assert [k for k in keys if not k.startswith("user:")] == []
    assert len(keys) == USER_ITEMS


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["replay", "{trace}"], "replay would write"),
        (["run", "--quick"], "run's replay step would write"),
        (["load", "--duration", "2", "--key-space", "200000", "--value-size", "1000"],
         "load would write"),
    ],
)
def test_a_run_that_does_not_fit_is_refused_before_writing(
        cli: InProcess, argv: list[str], words: str, users_cache: PrivateMemcached,
        tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    assert cli("trace", "synth", trace).returncode == 0
    before = _stat(users_cache, "total_items")
    p = cli(*[a.format(trace=trace) for a in argv], "--server", users_cache.address,
            "--out", tmp_path / "out")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert words in line and f"the memcached at {users_cache.address}" in line, line
    assert "free of 67.1 MB (-m 64)" in line and "needing" in line, line
    assert _stat(users_cache, "total_items") == before  # refused before a single write
    _untouched(users_cache)


def test_a_run_that_fits_leaves_nothing_and_evicts_nothing(
        cli: InProcess, users_cache: PrivateMemcached, tmp_path: Path) -> None:
    p = cli("profile", "--quick", "--server", users_cache.address, "--out", tmp_path / "p",
            "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["run"]["user_items_lost"] == 0
    _untouched(users_cache)


@pytest.mark.slow
def test_load_stops_when_the_server_starts_evicting(users_cache: PrivateMemcached,
                                                    tmp_path: Path) -> None:
    """The run fits when it starts; then the user's own writes fill the memory and the server
    evicts: load stops (exit 3, PARTIAL, the count named) and still deletes its keys."""
    out = tmp_path / "out"
    before = gets_served(users_cache.address)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "load", "--server", users_cache.address,
         "--duration", "20", "--key-space", "5000", "--value-size", "1000", "--out", str(out),
         "--format", "table"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await_gets(users_cache.address, before, proc)  # it fitted, and is measuring
        c = _client(users_cache)
        for i in range(USER_ITEMS, USER_ITEMS + 12_000):  # 120 MB more into 64 MB
            c.set(f"user:{i}", USER_VALUE)
        c.close()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a timeout: kill it, and close its pipes
            proc.kill()
            proc.communicate()
    assert proc.returncode == 3, stderr
    assert "stopped: the server evicted" in one_error_line(stderr)
    assert stdout.startswith("PARTIAL (")
    assert "stopped: the server evicted" in stdout.splitlines()[0]
    doc = json.loads((out / "load.json").read_text())
    assert doc["run"]["user_items_lost"] > 0
    assert doc["totals"]["duration_s"] < 15  # stopped, not run to the end
    assert [k for k in _keys(users_cache) if not k.startswith("user:")] == []


@pytest.mark.slow
def test_an_interrupted_profile_deletes_what_it_wrote(users_cache: PrivateMemcached,
                                                      tmp_path: Path) -> None:
    before = gets_served(users_cache.address)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "profile", "--server", users_cache.address,
         "--sizes", "1K,10K", "--samples", "200000", "--out", str(tmp_path / "p"),
         "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await_gets(users_cache.address, before + 100, proc)  # measuring, its keys written
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a timeout: kill it, and close its pipes
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    _untouched(users_cache)


def test_values_above_the_item_size_limit_are_refused_naming_it(
        cli: InProcess, tmp_path: Path) -> None:
    with PrivateMemcached(item_size_max="512k") as server:
        for argv, flag in ((["profile", "--sizes", "1K,1M"], "--sizes"),
                           (["load", "--duration", "1", "--value-size", "1000000"],
                            "--value-size")):
            p = cli(*argv, "--server", server.address, "--out", tmp_path / argv[0])
            assert p.returncode == 2, p.stderr
            line = one_error_line(p)
            assert "above the item size limit of the memcached at" in line, line
            assert "524,288 bytes (item_size_max, memcached -I 512k)" in line and flag in line
            assert _stat(server, "total_items") == 0


def test_the_eviction_watch_backs_off_from_a_server_that_does_not_answer(monkeypatch) -> None:  # noqa: ANN001
    """Each failed stats read waits out its timeout; reading again every half second would
    hold a run up for most of its time behind a half-open connection. The wait doubles after
    each failure and is back to ``every`` after a read that works."""
    from cachelab import capacity

    now = [0.0]
    answers: list[dict[str, str] | None] = []
    reads: list[float] = []

    def fake_stats(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        reads.append(now[0])
        return answers.pop(0) if answers else None

    monkeypatch.setattr(capacity.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(capacity, "stats_or_none", fake_stats)
    watch = capacity.EvictionWatch("127.0.0.1:1", 0, every=0.5)
    for t in [x / 10 for x in range(0, 200)]:   # a poll every 0.1 s for 20 s
        now[0] = t
        watch.poll()
    # failures at 0.5, then waits of 1, 2, 4, 8, 8 s after each
    assert reads == [0.5, 1.5, 3.5, 7.5, 15.5]
    answers[:] = [{"evictions": "0"}]
    now[0] = 23.5
    watch.poll()                  # works: the wait is `every` again
    now[0] = 24.0
    watch.poll()
    assert reads[-2:] == [23.5, 24.0]
