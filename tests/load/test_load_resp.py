"""``cachelab load`` against a real redis-server (RESP): closed and open loop, the server's own
counters (redis-py reads them: a third party) against what the run says it sent, the keys
deleted, the ``maxmemory`` refusal, a SIGSTOP'd server, and the password never shown.

One password-protected server for the module (conftest's ``redis``); the SIGSTOP case stops
a server of its own. Runs are short; the assertions are on counts and verdicts, not on speed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py

from cachelab.capacity import RESP_KEY_OVERHEAD, RespMemory, WontFit, Writes, jemalloc_size
from cachelab.proxies import PrivateTwemproxy
from clitools import InProcess, one_error_line
from privateredis import PrivateRedis, secret

RUN_TIMEOUT = 60


def _load(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "cachelab", "load", "--format", "table", "--out", str(out),
         "--no-plots", "--warmup", "0.5", "--interval", "0.5", *args],
        capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, out


def _saved(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "load.json").read_text()))


def _calls(info: dict[str, Any], command: str) -> int:
    stat = info.get(f"cmdstat_{command}")
    return int(stat["calls"]) if stat else 0


def _await_first_get(server: PrivateRedis, proc: subprocess.Popen[str]) -> None:
    """Waits until the run ``proc`` has a GET counted by ``server`` (its start-up and prefill
    are over); fails the test if it exits first or none comes within RUN_TIMEOUT."""
    c = server.client()
    deadline = time.monotonic() + RUN_TIMEOUT
    while _calls(c.info("commandstats"), "get") == 0:
        assert proc.poll() is None and time.monotonic() < deadline, "no get was sent"
        time.sleep(0.02)


#: The checks a run may fail on a machine shared with other work (this one: 2 CPUs, a CPU hog
#: beside the suite), as tests/load/test_load_validity.py allows for memcached: the client's
#: own (busy, late or batched sends, correlated latencies as both sides wait for CPUs) and a
#: rate or stationarity lost to the machine, never a check of the server or the protocol.
_MACHINE = {"client", "late", "arrivals", "independent", "stationary", "rate"}


def _verdict(lines: list[str], saved: dict[str, Any]) -> None:
    """The verdict's line says VALID; on a loaded machine, INVALID for its reasons only. (Found,
    not assumed first: a warning the run earned, e.g. no steady state, may come before it.)"""
    v = saved["validity"]
    said = next((line.strip() for line in lines
                 if line.strip().startswith(("VALID", "INVALID"))), None)
    if v["verdict"] == "VALID":
        assert said is not None and said.startswith("VALID: "), lines[:8]
        return
    failed = {c for c, x in v["checks"].items() if x["status"] == "fail"}
    assert failed <= _MACHINE, v["reasons"]
    if "stationary" in failed:
        # The machine's waits named when they were long enough to count as oversubscribed,
        # else the stall's own fix (a loaded machine's pause of a healthy server is one).
        fix = v["checks"]["stationary"]["fix"]
        assert fix.startswith(("quiet the machine (", "find what paused the client or "
                               "server")), v["checks"]
    assert said is not None and said.startswith("INVALID: "), lines[:8]


def _no_secret(password: str, proc: subprocess.CompletedProcess[str], out: Path) -> None:
    """The password is in no output and no file the run wrote."""
    assert password not in proc.stdout and password not in proc.stderr
    for f in out.rglob("*") if out.exists() else ():
        if f.is_file():
            assert password.encode() not in f.read_bytes(), f


def test_closed_loop_is_valid_and_the_servers_counters_match_the_run(
    tmp_path: Path, redis: PrivateRedis
) -> None:
    c = redis.client()
    before = c.info("commandstats")
    stats0 = c.info("stats")
    proc, out = _load(tmp_path, "--server", redis.url, "--duration", "2", "--connections", "1",
                      "--key-space", "500", "--ttl", "600",
                      "--mix", "get=70,multiget=10,set=15,delete=5", "--multiget-keys", "4")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    after = c.info("commandstats")
    stats1 = c.info("stats")
    saved = _saved(out)
    _verdict(lines, saved)
    assert saved["spec"]["protocol"] == "resp" and saved["server"]["protocol"] == "resp"
    assert saved["server"]["version"].startswith(("redis ", "valkey "))
    ops = saved["all"]["ops"]
    # The server's own counts of each command over the whole run = what the run sent:
    # the gets, multi-gets, sets (with the prefill's) and deletes it counted answered.
    assert _calls(after, "get") - _calls(before, "get") == ops["get"]
    assert _calls(after, "mget") - _calls(before, "mget") == ops["multiget"]
    prefilled = saved["run"]["prefilled_keys"]
    assert prefilled == 500
    assert _calls(after, "set") - _calls(before, "set") == ops["set"] + prefilled
    assert _calls(after, "del") - _calls(before, "del") == ops["delete"]
    # The clean-up: one UNLINK per key written; nothing of the run is left.
    assert _calls(after, "unlink") - _calls(before, "unlink") == saved["run"]["deleted_keys"]
    assert saved["run"]["leftover_keys"] == 0
    assert c.dbsize() == 0
    # Keyspace lookups: one per get, one per key of a multi-get, as the run counted them
    # (hits + misses), and the run's INFO deltas say the same.
    lookups = ((stats1["keyspace_hits"] - stats0["keyspace_hits"])
               + (stats1["keyspace_misses"] - stats0["keyspace_misses"]))
    keys = ops["get"] + 4 * ops["multiget"]
    assert lookups == keys
    deltas = saved["server"]["deltas"]
    assert deltas["keyspace_hits"] + deltas["keyspace_misses"] == keys
    assert deltas["evicted_keys"] == 0
    assert deltas["total_commands_processed"] >= saved["all"]["replies"]
    assert "used_cpu_user_s" in deltas and "connected_clients" in deltas
    # The table shows the server's line.
    assert any(line.startswith("server: commands +") and "keyspace_hits +" in line
               for line in lines), proc.stdout
    _no_secret(redis.password or "", proc, out)


def test_open_loop_is_valid_and_corrected(tmp_path: Path, redis: PrivateRedis) -> None:
    proc, out = _load(tmp_path, "--server", redis.url, "--rate", "1000", "--duration", "2",
                      "--key-space", "200")
    assert proc.returncode == 0, proc.stderr
    saved = _saved(out)
    _verdict(proc.stdout.splitlines(), saved)
    assert saved["mode"] == "open"
    assert saved["totals"]["corrected"]["count"] > 0
    assert saved["all"]["errors"] == {}
    assert redis.client().dbsize() == 0
    _no_secret(redis.password or "", proc, out)


def test_a_run_that_would_pass_maxmemory_is_refused_before_writing(
    tmp_path: Path, redis: PrivateRedis
) -> None:
    c = redis.client()
    c.config_set("maxmemory", "4mb")
    sets = _calls(c.info("commandstats"), "set")
    try:
        proc, out = _load(tmp_path, "--server", redis.url, "--duration", "1",
                          "--key-space", "20000", "--value-size", "1K")
        assert proc.returncode == 2, proc.stderr
        err = one_error_line(proc.stderr)
        assert "maxmemory" in err and "--key-space" in err, err
        assert _calls(c.info("commandstats"), "set") == sets  # nothing written
        assert c.dbsize() == 0
        assert not (out / "load.json").exists()
        _no_secret(redis.password or "", proc, out)
    finally:
        c.config_set("maxmemory", "0")


def test_a_wrong_password_is_one_line_without_it(tmp_path: Path, redis: PrivateRedis) -> None:
    wrong = secret()
    proc, out = _load(tmp_path, "--server", f"redis://:{wrong}@{redis.address}",
                      "--duration", "1")
    assert proc.returncode == 3, proc.stderr
    err = one_error_line(proc.stderr)
    assert "WRONGPASS" in err or "invalid password" in err, err
    _no_secret(wrong, proc, out)
    _no_secret(redis.password or "", proc, out)


def test_protocol_resp_alone_runs_a_private_redis_and_stops_it(tmp_path: Path) -> None:
    proc, out = _load(tmp_path, "--protocol", "resp", "--duration", "1", "--key-space", "200")
    assert proc.returncode == 0, proc.stderr
    saved = _saved(out)
    _verdict(proc.stdout.splitlines(), saved)
    server = saved["server"]
    assert server["private"] is True and server["protocol"] == "resp"
    assert Path(server["argv"][0]).name == "redis-server" and "--save" in server["argv"]
    assert server["version"].startswith("redis ")
    assert server["deltas"]["keyspace_hits"] > 0
    assert f"{server['version']} at {server['address']} (private)" in proc.stdout.splitlines()
    # Stopped at the end: its port answers no more.
    host, port = server["address"].rsplit(":", 1)
    with pytest.raises(redis_py.exceptions.ConnectionError):
        redis_py.Redis(host=host, port=int(port), socket_timeout=2).ping()


@pytest.mark.slow
def test_a_stopped_server_is_exit_3_with_the_stall_in_the_headline(tmp_path: Path) -> None:
    """A Redis SIGSTOP'd mid-run and left stopped: the run gives up on it (exit 3) and says
    so first, with the partial results saved. Plain host:port with --protocol resp."""
    with PrivateRedis() as server:
        assert server.pid is not None
        out = tmp_path / "out"
        proc = subprocess.Popen(
            [sys.executable, "-m", "cachelab", "load", "--server", server.address,
             "--protocol", "resp", "--format", "table", "--out", str(out), "--no-plots",
             "--warmup", "0.5", "--interval", "0.5", "--duration", "6", "--timeout", "0.3",
             "--give-up", "1.5", "--connections", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        _await_first_get(server, proc)
        time.sleep(1.0)
        os.kill(server.pid, signal.SIGSTOP)
        try:
            stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
        finally:
            os.kill(server.pid, signal.SIGCONT)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 3, stderr
    assert one_error_line(stderr).startswith("cachelab: error: "), stderr
    assert stdout.startswith("PARTIAL"), stdout
    saved = _saved(out)
    assert saved["run"]["aborted"], saved["run"]
    assert saved["stalls"] and "timeout" in saved["all"]["errors"], saved["all"]["errors"]
    assert any(line.startswith("stalls (") for line in stdout.splitlines()), stdout


@pytest.mark.slow
def test_keys_evicted_during_the_run_stop_it_and_are_named_first(
    tmp_path: Path, redis: PrivateRedis
) -> None:
    """The run fits below maxmemory when it starts; then another client (the user) fills the
    server, which evicts keys (allkeys-lru): the run stops itself, says so first and exits 3,
    and what it wrote is still deleted."""
    c = redis.client()
    c.config_set("maxmemory-policy", "allkeys-lru")
    c.config_set("maxmemory", "8mb")
    gets = _calls(c.info("commandstats"), "get")  # (earlier tests' too: the server is shared)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "load", "--server", redis.url, "--format", "table",
         "--out", str(out), "--no-plots", "--warmup", "0.5", "--interval", "0.5",
         "--duration", "20", "--key-space", "1000", "--rate", "500"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while _calls(c.info("commandstats"), "get") == gets:  # the run's first get
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        # The user's writes: 16 MiB into 8, until the run has stopped.
        value = b"u" * 65536
        for i in range(256):
            if proc.poll() is not None:
                break
            c.set(f"user-test:{i}", value)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
        evicted = int(c.info("stats")["evicted_keys"])
    finally:
        if proc.poll() is None:
            proc.kill()
        c.config_set("maxmemory", "0")
        c.config_set("maxmemory-policy", "noeviction")
        users = list(c.scan_iter("user-test:*"))
        if users:
            c.unlink(*users)
    assert "Traceback" not in stderr, stderr
    assert evicted > 0
    assert proc.returncode == 3, stderr
    assert "the server evicted" in one_error_line(stderr), stderr
    assert stdout.startswith("PARTIAL"), stdout
    saved = _saved(out)
    assert saved["run"]["aborted"].startswith("stopped: the server evicted")
    assert 0 < saved["run"]["user_items_lost"] <= evicted
    assert saved["run"]["leftover_keys"] == 0
    assert not list(c.scan_iter(f"{saved['spec']['prefix_used']}:*"))


def test_a_pool_of_redis_servers_spreads_the_keys_by_the_distribution(
    tmp_path: Path, redis: PrivateRedis
) -> None:
    """Two redis:// members (one login) as a client-side pool: each member's own counters
    (its GETs, MGETs and SETs) are the parts the run says it sent that member plus the
    prefill of the keys ketama puts there; both hold keys; nothing is left on either."""
    with PrivateRedis(password=redis.password) as other:
        servers = [redis, other]
        before = [s.client().info("commandstats") for s in servers]
        proc, out = _load(tmp_path, "--server", redis.url, "--server", other.url,
                          "--duration", "1", "--key-space", "300",
                          "--mix", "get=70,multiget=20,set=10")
        assert proc.returncode == 0, proc.stderr
        after = [s.client().info("commandstats") for s in servers]
        saved = _saved(out)
        assert [s.client().dbsize() for s in servers] == [0, 0]
    members = saved["members"]
    assert [m["address"] for m in members] == [s.address for s in servers]
    for m, b, a in zip(members, before, after):
        # Every part the run sent this member is one command the member ran.
        parts = sum(_calls(a, c) - _calls(b, c) for c in ("get", "mget", "set"))
        prefill = m["keys"]
        assert parts == m["sent"] + prefill, (m["address"], parts, m["sent"], prefill)
        assert m["server"]["deltas"]["keyspace_hits"] > 0
    assert sum(m["keys"] for m in members) == 300 and all(m["keys"] for m in members)
    _no_secret(redis.password or "", proc, out)


def test_through_twemproxy_in_redis_mode_each_server_behind_counts_its_share(
    tmp_path: Path,
) -> None:
    """twemproxy's ``redis: true`` in front of two redis-servers: the run sends RESP to the
    proxy alone, reads each server's INFO behind it, and deletes its keys through it. The
    servers' own counters (redis-py) show both took GETs, the table says what each counted,
    and nothing is left on either. With one key, one server answers no GET, and the headline
    says so. A database other than 0 is refused in one line (twemproxy closes the connection
    on SELECT)."""
    with PrivateRedis() as a, PrivateRedis() as b, \
            PrivateTwemproxy([a.address, b.address], redis=True) as proxy:
        servers = [a, b]
        before = [s.client().info("commandstats") for s in servers]
        # 1,000 keys: with 300, twemproxy's default hash left one server without keys in 1 of
        # 10 runs (cachelab.load.result.unused_notes).
        proc, out = _load(tmp_path, "--server", a.address, "--server", b.address,
                          "--proxy", proxy.address, "--protocol", "resp",
                          "--duration", "1", "--key-space", "1000", "--mix", "get=90,set=10")
        assert proc.returncode == 0, proc.stderr
        after = [s.client().info("commandstats") for s in servers]
        assert [s.client().dbsize() for s in servers] == [0, 0]
        (tmp_path / "one").mkdir()
        one, _ = _load(tmp_path / "one", "--server", a.address, "--server", b.address,
                       "--proxy", proxy.address, "--protocol", "resp", "--duration", "0.5",
                       "--key-space", "1")
        refused, _ = _load(tmp_path, "--server", f"redis://{a.address}/3", "--server",
                           f"redis://{b.address}/3", "--proxy", proxy.address)
    gets = [_calls(y, "get") - _calls(x, "get") for x, y in zip(before, after)]
    assert all(g > 0 for g in gets), gets
    lines = proc.stdout.splitlines()
    assert any(line.startswith(f"through the proxy at {proxy.address} to 2 redis ")
               for line in lines), lines[:12]
    head = next(i for i, line in enumerate(lines) if line.startswith("behind the proxy"))
    assert "INFO deltas" in lines[head] and lines[head + 1].split()[1:4] == [
        "commands", "hits", "misses"]
    rows = {line.split()[0]: line.split() for line in lines[head + 2:head + 4]}
    assert set(rows) == {a.address, b.address}
    assert all(int(r[1]) > 0 and int(r[2]) > 0 for r in rows.values()), rows
    behind = _saved(out)["behind"]
    assert [x["address"] for x in behind] == [a.address, b.address]
    assert refused.returncode == 2
    assert "redis_db" in one_error_line(refused.stderr)
    assert one.returncode == 0, one.stderr
    lines = one.stdout.splitlines()
    top = lines[:next(i for i, line in enumerate(lines) if line.startswith("through the proxy"))]
    unused = [line for line in top if line.startswith("SERVER UNUSED: server ")]
    assert len(unused) == 1 and "--key-space of 1000" in unused[0], top
    assert unused[0].split()[3] in {a.address, b.address}, unused


@pytest.mark.slow
def test_a_private_pool_of_redis_servers_takes_a_restart_drill(tmp_path: Path) -> None:
    """``--protocol resp --private-pool 3``: three private redis-servers, the second killed
    at 0.75 s and started again, empty, on its port 0.25 s later. The drill is done and
    recorded; the restarted member's INFO is read per process (two pids, one restart), its
    gets miss once it is back (its keys died with it: no persistence); the healthy members
    miss nothing, and their own keyspace_hits are the hits the run counted there."""
    proc, out = _load(tmp_path, "--protocol", "resp", "--private-pool", "3",
                      "--fail", "2@0.75:restart:0.25", "--member-retry", "0.2",
                      "--rate", "2000", "--connections", "3", "--duration", "2.5",
                      "--key-space", "600", "--mix", "get=90,set=10")
    assert proc.returncode == 0, proc.stderr
    saved = _saved(out)
    assert saved["spec"]["protocol"] == "resp" and saved["server"]["private"] is True
    assert "redis-server" in saved["server"]["argv"][0]
    done = [(d["action"], d["member"]) for d in saved["drill"]["done"]]
    members = saved["members"]
    failed = members[1]
    assert done == [("restart", failed["address"])] * 2, done
    restart = failed["server"]["restart"]
    assert restart is not None and restart["restarts"] == 1 and len(set(restart["pids"])) == 2
    assert failed["misses"] > 0 and failed["down"], failed
    for m in (members[0], members[2]):
        assert m["misses"] == 0 and m["errors"] == {} and m["server"]["restart"] is None, m
        assert m["server"]["deltas"]["keyspace_hits"] == m["hits"] > 0, m
    assert saved["run"]["leftover_keys"] == 0


def test_the_core_client_pipelines_sets_and_unlinks(redis: PrivateRedis) -> None:
    """``_core.RespClient.set_many`` (a Ray agent's prefill) and ``unlink_each`` (its
    driver's clean-up): one pipelined write each, as redis-py sees the keys."""
    import cachelab._core as _core

    keys = [f"cachelab-test:{secret()}:{i}" for i in range(300)]
    c = redis.client()
    before = c.info("commandstats")
    with _core.RespClient(redis.address, password=redis.password) as mine:
        stored = mine.set_many([(k, f"v{i}".encode()) for i, k in enumerate(keys)], 600)
        assert stored == 300
        assert [c.get(k) for k in keys[:3]] == [b"v0", b"v1", b"v2"]
        assert 0 < c.ttl(keys[0]) <= 600
        gone = mine.unlink_each([*keys[:299], "cachelab-test:never-written"])
    after = c.info("commandstats")
    assert gone == [True] * 299 + [False]
    assert _calls(after, "set") - _calls(before, "set") == 300
    assert _calls(after, "unlink") - _calls(before, "unlink") == 300
    assert c.delete(keys[299]) == 1 and c.exists(*keys) == 0


def test_jemalloc_size_classes() -> None:
    assert [jemalloc_size(n) for n in (1, 8, 9, 16, 17, 128, 129, 160, 161, 1004, 1025, 4097)] \
        == [8, 8, 16, 16, 32, 128, 160, 160, 192, 1024, 1280, 5120]


def test_the_room_check_names_what_redis_would_do() -> None:
    """In process: what does not fit below maxmemory is refused with the policy's
    consequence and the fix; no maxmemory (0) never evicts: it fits."""
    writes = Writes("load", "values", shrink="use fewer keys (--key-space)",
                    sizes_flag="--value-size").add(1000, 1000, key_len=24)
    need = 1000 * (32 + 1024 + RESP_KEY_OVERHEAD)  # (28 and 1004 bytes: jemalloc's classes)
    roomy = RespMemory("h:1", limit=10 * need, used=0, policy="allkeys-lru", evictions=0)
    assert roomy.check(writes) == need
    assert RespMemory("h:1", limit=0, used=10**12, policy="noeviction",
                      evictions=0).check(writes) == need
    for policy, says in (("allkeys-lru", "evict the user's keys (maxmemory-policy allkeys-lru)"),
                         ("noeviction", "refuse the run's writes (maxmemory-policy noeviction)")):
        tight = RespMemory("h:1", limit=need, used=need // 4, policy=policy, evictions=0)
        with pytest.raises(WontFit) as e:
            tight.check(writes)
        assert says in str(e.value) and "--key-space" in str(e.value) and "maxmemory" in str(
            e.value)


@pytest.mark.parametrize(("args", "message"), [
    (["tiers", "--server", "redis://:PW@127.0.0.1:1"],
     "this verb measures memcached only for now: a redis:// server is for cachelab load, "
     "profile, scale and run"),
    (["load", "--protocol", "text", "--server", "redis://:PW@127.0.0.1:1"],
     "--protocol text, but --server redis://:***@127.0.0.1:1 is a Redis URL"),
    # One --protocol vocabulary (text, meta, resp): each verb refuses what it does not speak.
    (["load", "--protocol", "meta"], "load speaks memcached's text protocol (meta is profile's)"),
    (["profile", "--protocol", "text", "--server", "redis://:PW@127.0.0.1:1"],
     "--protocol text, but --server redis://:***@127.0.0.1:1 is a Redis URL"),
    (["load", "--server", "redis://:PW@127.0.0.1:1/x"], 'database "x" is not a number'),
    (["load", "--protocol", "resp", "--private-pool", "2", "--server", "redis://:PW@127.0.0.1:1"],
     "--private-pool starts its own servers"),
    (["load", "--server", "redis://:PW@127.0.0.1:1", "--server", "127.0.0.1:2"],
     "give every server as a redis:// URL, or none"),
])
def test_redis_usage_errors_are_one_line_without_the_password(
        cli: InProcess, tmp_path: Path, args: list[str], message: str) -> None:
    password = secret()
    r = cli(*[a.replace("PW", password) for a in args], "--out", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    line = one_error_line(r)
    assert message in line, line
    assert password not in r.stdout + r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_open_loop_counts_a_sigstop_stall_from_the_intended_send_times(tmp_path: Path) -> None:
    """A Redis stopped for 1.5 s mid-run, then continued: the open loop's requests due
    meanwhile waited from their intended time (the corrected headline's max is the stall, the
    rate not held); the uncorrected figures would hide it. Exit 0: slow, not failed."""
    with PrivateRedis() as server:
        assert server.pid is not None
        out = tmp_path / "out"
        proc = subprocess.Popen(
            [sys.executable, "-m", "cachelab", "load", "--server", server.url, "--format",
             "table", "--out", str(out), "--no-plots", "--warmup", "0.5", "--interval", "0.5",
             "--rate", "2000", "--duration", "4", "--timeout", "5", "--max-outstanding", "50"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        _await_first_get(server, proc)
        time.sleep(1.5)
        os.kill(server.pid, signal.SIGSTOP)
        try:
            time.sleep(1.5)
        finally:
            os.kill(server.pid, signal.SIGCONT)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0, stderr
    assert "rate not held" in stderr, stderr
    row = next(line for line in stdout.splitlines() if line.startswith("corrected "))
    assert float(row.split()[-1]) / 1e6 >= 1.2, stdout  # its max: the stall
    saved = _saved(out)
    assert saved["schedule"]["held"] is False
    assert saved["totals"]["corrected"]["percentiles"]["99"] >= 0.5e9
    # Most requests due during the stop were sent after it (4 connections × 50 in flight):
    # quick from their send, slow from their intended time.
    p90 = {k: saved["totals"][k]["percentiles"]["90"] for k in ("corrected", "uncorrected")}
    assert p90["corrected"] > 5 * p90["uncorrected"], p90
    assert saved["run"]["leftover_keys"] == 0
