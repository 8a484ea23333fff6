"""``cachelab load --cluster`` against a real 3-master Redis Cluster (three OS redis-servers on
127.0.0.31-33 joined by ``redis-cli --cluster create``, one cluster for the module, stopped by
PID): each key sent to its hash slot's master (placement checked against redis-py's
``key_slot`` and ``CLUSTER SLOTS``), each master's GETs and MGETs as its own ``INFO
commandstats`` counts them (redis-py reads them: a third party), nothing left behind; slots
moved during a run (``CLUSTER SETSLOT … NODE``): the MOVED replies followed and counted; slots
being migrated: the ASKs followed; a master without room for its share of the keys named before
anything is written; and the contradictions refused in one line with exit 2.

Runs are short; the assertions are on counts, never on speed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from clitools import InProcess, one_error_line
from privateredis import PrivateRedisCluster

RUN_TIMEOUT = 60


def _load(tmp_path: Path, *args: str) -> list[str]:
    """The run's command line. Its timeouts are long (a busy machine keeps a master silent
    past the 300 ms member timeout now and then: a timeout on each connection, seen in CI):
    what is tested is where requests go, not how fast."""
    out = tmp_path / "out"
    return [sys.executable, "-m", "cachelab", "load", "--format", "table", "--out", str(out),
            "--no-plots", "--warmup", "0.5", "--interval", "0.5", "--connections", "4",
            "--threads", "2", "--timeout", "5", "--member-timeout", "5000", *args]


def _saved(tmp_path: Path) -> dict[str, Any]:
    return dict(json.loads((tmp_path / "out" / "load.json").read_text()))


def _counts(cluster: PrivateRedisCluster) -> list[tuple[int, int, int]]:
    """Each node's GET and MGET calls and keyspace hits so far, as redis-py reads INFO."""
    out = []
    for i in range(3):
        c = cluster.client(i)
        stats = c.info("commandstats")
        hits = int(c.info("stats")["keyspace_hits"])
        out.append((int(stats.get("cmdstat_get", {}).get("calls", 0)),
                    int(stats.get("cmdstat_mget", {}).get("calls", 0)), hits))
    return out


def _empty(cluster: PrivateRedisCluster) -> None:
    assert [cluster.client(i).dbsize() for i in range(3)] == [0, 0, 0]


def test_each_master_serves_its_slots_keys_and_counts_what_it_was_sent(
        cluster: PrivateRedisCluster, tmp_path: Path) -> None:
    before = _counts(cluster)
    proc = subprocess.run(
        _load(tmp_path, "--cluster", "--server", cluster.url, "--duration", "1.5",
              "--mix", "get=80,multiget=20", "--multiget-keys", "4", "--key-space", "2000"),
        capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = _counts(cluster)
    saved = _saved(tmp_path)
    members = saved["members"]
    assert [m["address"] for m in members] == cluster.addresses
    assert saved["pool"]["distribution"] == "cluster"
    assert saved["server"]["cluster"] == {"seed": cluster.addresses[0], "masters": 3}
    # Each master holds the keys whose slot it serves, as redis-py places them.
    owner = cluster.owners()
    prefix = saved["spec"]["prefix_used"]
    placed = Counter(owner[key_slot(f"{prefix}:{i}".encode())] for i in range(2000))
    assert [m["keys"] for m in members] == [placed[a] for a in cluster.addresses]
    assert all(m["keys"] > 0 for m in members)
    for m, b, a in zip(members, before, after):
        # Its GETs and its MGETs (one per slot of a multi-get's keys: no CROSSSLOT) are the
        # replies it gave; every key asked was found (prefilled), as its keyspace_hits say.
        assert m["errors"] == {}, m
        assert m["replies"] > 0 and m["replies"] == (a[0] - b[0]) + (a[1] - b[1]), (m, a, b)
        assert m["hits"] == a[2] - b[2] and m["misses"] == 0, m
        assert m["redirects"] == {"moved": 0, "ask": 0}
        assert m["server"]["deltas"]["keyspace_hits"] == m["hits"]
    assert saved["totals"]["errors"] == {}
    assert saved["totals"]["ops"]["multiget"] > 0
    assert saved["run"]["deleted_keys"] == 2000 and saved["run"]["leftover_keys"] == 0
    _empty(cluster)
    # The table has a row per master, and says none redirected.
    assert all(any(a in line for line in proc.stdout.splitlines()) for a in cluster.addresses)
    assert "cluster redirections: 0 MOVED, 0 ASK\n" in proc.stdout


def test_slots_moved_during_a_run_are_followed_and_counted(
        cluster: PrivateRedisCluster, tmp_path: Path) -> None:
    first = cluster.addresses[0]
    # A thousand slots of the first master's (about 120 of the run's 2,000 keys' slots).
    moved = cluster.slots_of(0)
    before = _counts(cluster)
    proc = subprocess.Popen(
        _load(tmp_path, "--cluster", "--server", cluster.url, "--duration", "3",
              "--mix", "get=100", "--no-prefill", "--key-space", "2000"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while _counts(cluster)[0][0] - before[0][0] < 100:
            assert proc.poll() is None and time.monotonic() < deadline, "no get was sent"
            time.sleep(0.02)
        cluster.move(moved, to=1)
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.move(moved, to=0)
    assert proc.returncode == 0, err
    saved = _saved(tmp_path)
    members = saved["members"]
    # (ASKs too, from the first master while the move was under way: IMPORTING/MIGRATING)
    r, r0 = saved["pool"]["redirects"], members[0]["redirects"]
    assert r == r0, (r, r0)
    assert (f"cluster redirections: {r['moved']} MOVED, {r['ask']} ASK; {first} "
            f"{r0['moved']} MOVED, {r0['ask']} ASK\n") in out
    # The first master answered MOVED for the slots it gave away (at least once per slot of
    # the run's keys there); the others none; none was left unfollowed.
    prefix = saved["spec"]["prefix_used"]
    slots_hit = {key_slot(f"{prefix}:{i}".encode()) for i in range(2000)} & set(moved)
    assert len(slots_hit) > 50
    assert members[0]["redirects"]["moved"] >= len(slots_hit), members[0]
    assert [m["redirects"] for m in members[1:]] == [{"moved": 0, "ask": 0}] * 2
    assert all(m["errors"] == {} for m in members), [m["errors"] for m in members]
    assert saved["totals"]["errors"] == {}
    # Every GET was answered: its first master's, or after the MOVED the new one's.
    after = _counts(cluster)
    assert [m["replies"] for m in members] == [a[0] - b[0] for a, b in zip(after, before)]
    _empty(cluster)


def test_a_slot_being_migrated_is_asked_of_its_new_master(
        cluster: PrivateRedisCluster, tmp_path: Path) -> None:
    slots = cluster.slots_of(2)
    # Migrating from the third master to the second: the third holds none of the run's keys
    # (no prefill, gets only), so it answers -ASK for each, and the second serves it after
    # ASKING.
    cluster.migrating(slots, source=2, target=1)
    before = _counts(cluster)
    try:
        proc = subprocess.run(
            _load(tmp_path, "--cluster", "--server", cluster.url, "--duration", "1",
                  "--mix", "get=100", "--no-prefill", "--key-space", "2000"),
            capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=tmp_path)
    finally:
        cluster.stable(slots, 1, 2)
    assert proc.returncode == 0, proc.stderr
    after = _counts(cluster)
    members = _saved(tmp_path)["members"]
    assert members[2]["redirects"]["ask"] > 0, members[2]
    assert [m["redirects"]["ask"] for m in members[:2]] == [0, 0]
    assert all(m["redirects"]["moved"] == 0 for m in members)
    assert all(m["errors"] == {} for m in members), [m["errors"] for m in members]
    # The second master's GETs include those asked after ASKING: what it counted itself.
    assert [m["replies"] for m in members] == [a[0] - b[0] for a, b in zip(after, before)]
    assert _saved(tmp_path)["pool"]["redirects"]["ask"] == members[2]["redirects"]["ask"]
    _empty(cluster)


def test_a_master_without_room_for_its_share_is_named_and_nothing_is_written(
        cluster: PrivateRedisCluster, tmp_path: Path) -> None:
    second = cluster.client(1)
    second.config_set("maxmemory", str(int(second.info("memory")["used_memory"]) + 100_000))
    try:
        proc = subprocess.run(
            _load(tmp_path, "--cluster", "--server", cluster.url, "--duration", "1",
                  "--mix", "get=90,set=10", "--key-space", "30000", "--value-size", "100"),
            capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=tmp_path)
    finally:
        second.config_set("maxmemory", "0")
    assert proc.returncode == 2
    line = one_error_line(proc.stderr)
    assert f"the server at {cluster.addresses[1]} has " in line, line
    _empty(cluster)


@pytest.mark.parametrize(("args", "says"), [
    (["--server", "redis://127.0.0.1:1", "--proxy", "127.0.0.1:2"], "not with --proxy"),
    (["--server", "redis://127.0.0.1:1", "--distribution", "modula"], "not with --distribution"),
    (["--server", "redis://127.0.0.1:1/3"], "only database 0"),
    ([], "needs a seed node"),
])
def test_contradictions_are_refused_in_one_line(cli: InProcess, args: list[str],
                                                says: str) -> None:
    proc = cli("load", "--cluster", *args, "--duration", "1")
    assert proc.returncode == 2
    assert says in one_error_line(proc)
