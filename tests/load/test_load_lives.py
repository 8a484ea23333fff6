"""A server's counters over a run, per process (cachelab.load.lives): reads of a real
memcached killed and started again on its port are never subtracted across the two
processes, and the eviction watch keeps the last read of each process."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

import cachelab._core as _core
from cachelab.capacity import EvictionWatch
from cachelab.errors import ServerError
from cachelab.load import server_deltas, server_side
from cachelab.load.lives import merged_reads
from cachelab.load.snapshots import Poller
from cachelab.servers import PrivateMemcached, find_memcached, read_stats, restarted


def _gets(address: str, n: int) -> None:
    with _core.Client(address, timeout=2.0, connect_timeout=2.0) as c:
        for i in range(n):
            c.get(f"cachelab-lives-test:{i}")


def _wait_answering(address: str) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            read_stats(address, timeout=0.5)
            return
        except ServerError:
            assert time.monotonic() < deadline, f"{address} did not come back"
            time.sleep(0.02)


Restarts = tuple[PrivateMemcached, list[subprocess.Popen[bytes]]]


@pytest.fixture
def restart() -> Iterator[Restarts]:
    """A memcached, and a list that the test's restarts (on its port) are added to."""
    first = PrivateMemcached(threads=1).start()
    later: list[subprocess.Popen[bytes]] = []
    try:
        yield first, later
    finally:
        first.stop()
        for p in later:
            p.kill()
            p.wait(5)


def _restart(first: PrivateMemcached, later: list[subprocess.Popen[bytes]]) -> None:
    assert first.pid is not None and first.port is not None
    os.kill(first.pid, signal.SIGKILL)
    first.stop()
    later.append(subprocess.Popen(
        [find_memcached(), "-l", "127.0.0.1", "-p", str(first.port), "-U", "0", "-u", "root",
         "-t", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    _wait_answering(first.address)


def test_stats_of_two_processes_are_never_subtracted(restart: Restarts) -> None:
    first, later = restart
    address = first.address
    _gets(address, 300)  # the old process has counted more than the new one will
    before = read_stats(address)
    _gets(address, 200)
    sample = read_stats(address)  # the old process's last read
    _restart(first, later)
    _gets(address, 50)
    after = read_stats(address)
    assert restarted(before, after) and not restarted(before, sample)
    assert before["pid"] != after["pid"]

    # Only before and after: the new process's counters, said to be the new life's only.
    deltas, what = server_side(before, after)
    assert what is not None and what["counted"] == "the new life only"
    assert what["pids"] == [int(before["pid"]), int(after["pid"])]
    assert deltas["cmd_get"] == int(after["cmd_get"]) >= 50
    assert deltas == server_deltas(before, after)
    assert all(v >= 0 for v in deltas.values() if not isinstance(v, dict))
    assert what["lives"][0]["deltas"] is None

    # With a read of the old process during the run: both lives counted, and summed.
    deltas, what = server_side(before, after, [sample])
    assert what is not None and what["counted"] == "per life"
    old, new = (life["deltas"] for life in what["lives"])
    assert old["cmd_get"] == int(sample["cmd_get"]) - int(before["cmd_get"]) >= 200
    assert new["cmd_get"] == int(after["cmd_get"])
    assert deltas["cmd_get"] == old["cmd_get"] + new["cmd_get"]
    assert deltas["rusage_user_s"] >= 0 and deltas["rusage_system_s"] >= 0

    # One process throughout: the plain difference, no restart.
    again = read_stats(address)
    deltas, what = server_side(after, again)
    assert what is None and deltas["cmd_get"] == int(again["cmd_get"]) - int(after["cmd_get"])


def test_the_eviction_watch_keeps_the_last_read_of_each_process(restart: Restarts) -> None:
    first, later = restart
    watch = EvictionWatch(first.address, 0, every=0.0)
    watch.poll(force=True)
    _gets(first.address, 20)
    watch.poll(force=True)
    old_pid = first.pid
    _restart(first, later)
    watch.poll(force=True)
    assert [s["pid"] for s in watch.lives] == [str(old_pid), str(later[0].pid)]
    assert int(watch.lives[0]["cmd_get"]) >= 20
    assert watch.evicted == 0


def test_the_poll_behind_a_proxy_keeps_the_last_read_of_each_process(
        restart: Restarts) -> None:
    """The poll of the servers behind a proxy (load/snapshots.Poller) is a source of reads
    per life too: merged with the eviction watch's, a server restarted mid-run is counted
    per life, not as its new life only."""
    first, later = restart
    old_pid = first.pid
    core = {"timeout": 1.0, "connect_timeout": 1.0, "tls": None, "interval": 1.0}
    before = read_stats(first.address)
    with Poller([first.address], core, period=0.02) as poller:
        _gets(first.address, 30)
        deadline = time.monotonic() + 10
        while int(poller.lives()[first.address][-1].get("cmd_get", 0)) < 30:
            assert time.monotonic() < deadline, "the poll never read the gets"
            time.sleep(0.02)
        _restart(first, later)
        _gets(first.address, 5)
        while len(poller.lives()[first.address]) < 2:
            assert time.monotonic() < deadline, "the poll never read the new process"
            time.sleep(0.02)
    after = read_stats(first.address)
    reads = poller.lives()[first.address]
    assert [s["pid"] for s in reads][:1] == [str(old_pid)]
    deltas, what = server_side(before, after, merged_reads(poller.lives())[first.address])
    assert what is not None and what["counted"] == "per life", what
    assert deltas["cmd_get"] >= 35
