"""``cachelab scale`` over RESP on fleets of real redis-servers: a client-side pool of two,
twemproxy in redis mode in front of the same two, and a 3-master Redis Cluster (OS
redis-servers joined by ``redis-cli --cluster create``, one for the module). Every point is a
load run; what the sweep says each member, server behind the proxy or master did is held
against the server's own ``INFO commandstats`` (read with redis-py: a third party), and no key
is left behind. ``--vary server-threads`` over RESP restarts a private redis-server with
``--io-threads N`` per point. Short sweeps (two points, 0.8 s a run); assertions on counts,
never speed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from clitools import InProcess, one_error_line
from privateredis import PrivateRedis, PrivateRedisCluster

#: A short sweep: two points, one run each, 0.8 s a run, GETs only (the prefill's SETs and
#: the clean-up's UNLINKs are the only other commands a run sends).
SHORT = ["--points", "1,2", "--repeats", "1", "--warmup", "0.2", "--settle", "0.2",
         "--window", "0.4", "--interval", "0.1", "--bootstrap", "0", "--key-space", "1000",
         "--mix", "get=100", "--no-plots", "--format", "table"]


def _gets(clients: list[Any]) -> list[int]:
    """Each server's GET calls so far, as redis-py reads ``INFO commandstats``."""
    return [int((c.info("commandstats").get("cmdstat_get") or {"calls": 0})["calls"])
            for c in clients]


def _saved(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "scale.json").read_text()))


def _member_rows(stdout: str, kind: str) -> dict[str, list[str]]:
    """The table's block of a row per member (or master), by address."""
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(f"each {kind}, every run"))
    rows = {}
    for line in lines[head + 2:]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return rows


def test_a_sweep_on_a_pool_of_redis_servers_counts_each_member_s_gets(
        pair: list[PrivateRedis], cli: InProcess, tmp_path: Path) -> None:
    clients = [s.client() for s in pair]
    before = _gets(clients)
    out = tmp_path / "pool"
    proc = cli("scale", *[x for s in pair for x in ("--server", s.address)], "--protocol",
               "resp", "--distribution", "ketama", *SHORT, "--out", out)
    assert proc.returncode == 0, proc.stderr
    after = _gets(clients)
    saved = _saved(out)
    addresses = [s.address for s in pair]
    assert saved["server"]["protocol"] == "resp"
    assert saved["server"]["pool"] == {"members": addresses, "distribution": "ketama"}
    assert [r["n"] for r in saved["runs"]] == [1, 2]
    for run in saved["runs"]:
        assert run["errors"] == 0 and run["throughput"] > 0
        assert [m["address"] for m in run["members"]] == addresses
        assert all(m["replies"] > 0 and m["errors"] == 0 and m["commands"] > 0
                   for m in run["members"]), (run["n"], run["window_s"], run["members"])
    # Each member's replies over the sweep are the GETs it ran, as it counted them.
    replies = [sum(run["members"][i]["replies"] for run in saved["runs"]) for i in range(2)]
    assert replies == [a - b for a, b in zip(after, before)]
    rows = _member_rows(proc.stdout, "member")
    assert [int(rows[a][1].replace(",", "")) for a in addresses] == replies
    line = next(x for x in proc.stdout.splitlines() if x.startswith("scale sweep: "))
    assert f"on a pool of 2 at {', '.join(addresses)}, resp protocol" in line
    assert [c.dbsize() for c in clients] == [0, 0]


def test_a_sweep_through_twemproxy_in_redis_mode_records_each_server_behind(
        pair: list[PrivateRedis], cli: InProcess, tmp_path: Path) -> None:
    try:
        find_nutcracker()
    except Exception as e:  # noqa: BLE001 - the reason is shown in the skip
        pytest.skip(f"no twemproxy: {e}")
    clients = [s.client() for s in pair]
    addresses = [s.address for s in pair]
    with PrivateTwemproxy(addresses, redis=True) as proxy:
        before = _gets(clients)
        out = tmp_path / "proxy"
        proc = cli("scale", "--proxy", proxy.address,
                   *[x for a in addresses for x in ("--server", f"redis://{a}")], *SHORT,
                   "--out", out)
        after = _gets(clients)
    assert proc.returncode == 0, proc.stderr
    saved = _saved(out)
    assert saved["server"]["proxy"] is True and saved["server"]["protocol"] == "resp"
    assert saved["server"]["behind"] == addresses
    gets = [a - b for a, b in zip(after, before)]
    assert all(g > 0 for g in gets), gets
    # Every GET of every run reached one server behind the proxy, which counted it as a
    # keyspace hit or miss; the sweep's GETs are all the servers' GET calls.
    for run in saved["runs"]:
        assert run["errors"] == 0 and run["throughput"] > 0
        looked = sum(b["deltas"]["keyspace_hits"] + b["deltas"]["keyspace_misses"]
                     for b in run["behind"])
        assert looked == run["ops"]["get"], run["behind"]
    assert sum(run["ops"]["get"] for run in saved["runs"]) == sum(gets)
    lines = proc.stdout.splitlines()
    assert any(f"through the proxy at {proxy.address} to 2 server(s) behind it, resp protocol"
               in line for line in lines)
    head = next(i for i, line in enumerate(lines) if line.startswith("behind the proxy"))
    assert "INFO deltas" in lines[head]
    assert [c.dbsize() for c in clients] == [0, 0]


def test_a_sweep_on_a_redis_cluster_sends_each_master_its_slots_gets(
        cluster: PrivateRedisCluster, cli: InProcess, tmp_path: Path) -> None:
    clients = [cluster.client(i) for i in range(3)]
    before = _gets(clients)
    out = tmp_path / "cluster"
    proc = cli("scale", "--cluster", "--server", cluster.url, *SHORT, "--out", out)
    assert proc.returncode == 0, proc.stderr
    after = _gets(clients)
    saved = _saved(out)
    masters = cluster.addresses
    assert saved["server"]["protocol"] == "resp"
    assert saved["server"]["cluster"]["masters"] == 3
    assert saved["server"]["cluster"]["members"] == masters
    for run in saved["runs"]:
        assert run["errors"] == 0 and run["throughput"] > 0
        assert [m["address"] for m in run["members"]] == masters
        assert all(m["replies"] > 0 and m["redirects"] == {"moved": 0, "ask": 0}
                   for m in run["members"])
    replies = [sum(run["members"][i]["replies"] for run in saved["runs"]) for i in range(3)]
    assert replies == [a - b for a, b in zip(after, before)]
    rows = _member_rows(proc.stdout, "master")
    assert [int(rows[a][1].replace(",", "")) for a in masters] == replies
    assert all(rows[a][-2:] == ["0", "0"] for a in masters)  # MOVED, ASK
    line = next(x for x in proc.stdout.splitlines() if x.startswith("scale sweep: "))
    assert f"on the Redis Cluster of 3 masters seeded at {masters[0]}, resp protocol" in line
    assert [c.dbsize() for c in clients] == [0, 0, 0]


def test_what_a_sweep_over_resp_cannot_do_is_refused_in_one_line(
        pair: list[PrivateRedis], cli: InProcess, tmp_path: Path) -> None:
    pool = [x for s in pair for x in ("--server", f"redis://{s.address}")]
    threads = cli("scale", *pool, "--vary", "server-threads", *SHORT, "--out", tmp_path / "a")
    assert threads.returncode == 2 and "server-threads" in one_error_line(threads)
    proxied = cli("scale", "--cluster", "--proxy", pair[0].address, *pool, *SHORT,
                  "--out", tmp_path / "b")
    assert proxied.returncode == 2 and "--proxy" in one_error_line(proxied)
    placed = cli("scale", "--cluster", *pool, "--distribution", "ketama", *SHORT,
                 "--out", tmp_path / "c")
    assert placed.returncode == 2 and "--distribution" in one_error_line(placed)


def test_vary_server_threads_over_resp_restarts_a_private_redis_with_n_io_threads(
        cli: InProcess, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = cli("scale", "--protocol", "resp", "--vary", "server-threads", *SHORT,
               "--connections", "2", "--out", out)
    assert done.returncode == 0, done.stderr
    saved = _saved(out)
    runs = sorted(saved["runs"], key=lambda r: r["n"])
    # Each point ran against a redis-server of its own, whose CONFIG GET said N io-threads.
    assert [(r["n"], r["io_threads"]) for r in runs] == [(1, 1), (2, 2)]
    assert all(r["replies"] > 0 and r["errors"] == 0 for r in runs)
    server = saved["server"]
    assert server["protocol"] == "resp" and server["private"] is True
    assert server["address"] == "private (restarted per point)"
    # The last point's command line: N = 2 I/O threads that read too.
    argv = server["argv"]
    assert argv[argv.index("--io-threads") + 1] == "2"
    assert argv[argv.index("--io-threads-do-reads") + 1] == "yes"
    assert any("I/O threads" in note for note in saved["limits"]), saved["limits"]
    assert "resp protocol" in done.stdout


def test_vary_server_threads_over_resp_needs_no_server(
        cli: InProcess, tmp_path: Path) -> None:
    done = cli("scale", "--server", "redis://127.0.0.1:1", "--vary", "server-threads", *SHORT,
               "--out", tmp_path / "out")
    assert done.returncode == 2
    assert "--io-threads N per point: give no --server" in one_error_line(done)
