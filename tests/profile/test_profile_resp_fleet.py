"""``cachelab profile`` over RESP on fleets of real redis-servers: a client-side pool of two
(each member profiled in rounds, over RESP), twemproxy in redis mode in front of the same
two, and a 3-master Redis Cluster (each master as a pool member, its keys under a hash tag
of its own slots). What the profile says it sent is held against each server's own ``INFO
commandstats`` (read with redis-py: a third party), and no key is left behind (DBSIZE). One
pair of servers and one cluster for the module; short runs; assertions on counts, never on
speed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from clitools import InProcess, one_error_line
from privateredis import PrivateRedis, PrivateRedisCluster

#: A small profile: two sizes, two key counts, few samples.
SMALL = ["--quick", "--samples", "30", "--warmup", "2", "--sizes", "100,10K", "--keys", "1,5",
         "--no-plots", "--format", "table"]

#: The commands a profile sends over RESP, as the record names them and as commandstats does.
COMMANDS = {"GET": "get", "SET": "set", "MGET": "mget", "UNLINK": "unlink", "PING": "ping"}


def _calls(server: PrivateRedis) -> dict[str, int]:
    info = server.client().info("commandstats")
    return {mine: int(info[f"cmdstat_{theirs}"]["calls"]) if f"cmdstat_{theirs}" in info else 0
            for mine, theirs in COMMANDS.items()}


def _moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in COMMANDS}


def _no_keys(pair: list[PrivateRedis]) -> None:
    assert [s.client().dbsize() for s in pair] == [0, 0]


def test_a_pool_of_redis_servers_is_profiled_member_by_member_over_resp(
        pair: list[PrivateRedis], cli: InProcess, tmp_path: Path) -> None:
    before = [_calls(s) for s in pair]
    out = tmp_path / "pool"
    proc = cli("profile", *[x for s in pair for x in ("--server", f"redis://{s.address}")],
               "--rounds", "2", *SMALL, "--out", out)
    assert proc.returncode == 0, proc.stderr
    moved = [_moved(b, _calls(s)) for b, s in zip(before, pair)]
    pool = json.loads((out / "profile-pool.json").read_text())
    addresses = [s.address for s in pair]
    assert [m["address"] for m in pool["members"]] == addresses
    assert {c["op"] for c in pool["pool"]} == {"floor", "get", "set"}
    for m, counted in zip(pool["members"], moved):
        saved: dict[str, Any] = json.loads((out / m["profile"] / "profile.json").read_text())
        assert saved["server"]["protocol"] == "resp" and saved["client"]["protocol"] == "resp"
        assert saved["client"]["floor_command"] == "PING"
        for cell in saved["cells"]:  # two rounds of 15 samples each, merged
            assert cell["samples"] == 30 and cell["errors"] == {} and cell["misses"] == 0
        # What the member's two rounds sent, added up, is what the member itself counted.
        sent = saved["client"]["commands"]
        assert counted == {k: sent.get(k, 0) for k in COMMANDS}, (m["address"], counted, sent)
        assert saved["server"]["calls"]["mget"] == sent["MGET"] > 0
        assert saved["run"]["leftover_keys"] == 0
    lines = proc.stdout.splitlines()
    head = lines.index("each member's own INFO over its rounds:")
    said = [line for line in lines[head + 1:] if "commandstats" in line]
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in said] == addresses
    assert all("the commands the profile sent, each counted once" in line for line in said)
    _no_keys(pair)


def test_through_twemproxy_in_redis_mode_the_servers_behind_count_what_was_sent(
        pair: list[PrivateRedis], cli: InProcess, tmp_path: Path) -> None:
    try:
        find_nutcracker()
    except Exception as e:  # noqa: BLE001 - the reason is shown in the skip
        pytest.skip(f"no twemproxy: {e}")
    addresses = [s.address for s in pair]
    with PrivateTwemproxy(addresses, redis=True) as proxy:
        before = [_calls(s) for s in pair]
        out = tmp_path / "proxy"
        proc = cli("profile", "--proxy", proxy.address,
                   *[x for a in addresses for x in ("--server", a)], "--protocol", "resp",
                   *SMALL, "--out", out)
        moved = [_moved(b, _calls(s)) for b, s in zip(before, pair)]
        refused = cli("profile", "--proxy", proxy.address,
                      *[x for a in addresses for x in ("--server", f"redis://{a}/2")], *SMALL,
                      "--out", tmp_path / "db")
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((out / "profile.json").read_text())
    assert saved["server"]["proxy"] is True and saved["server"]["protocol"] == "resp"
    assert saved["server"]["version"].startswith("redis 7")
    # the floor is a GET of a key never written, which crosses the proxy (PING would not)
    assert saved["client"]["floor_command"] == "GET-miss"
    floor = next(c for c in saved["cells"] if c["op"] == "floor")
    assert floor["samples"] == 30 and floor["errors"] == {}
    for cell in saved["cells"]:
        assert cell["samples"] == 30 and cell["errors"] == {} and cell["mismatches"] == 0
    sent = saved["client"]["commands"]
    total = {k: sum(m[k] for m in moved) for k in COMMANDS}
    # Every single-key command reached one server behind the proxy; PING none (not sent).
    for k in ("GET", "SET", "UNLINK"):
        assert total[k] == sent.get(k, 0), (k, total, sent)
    assert total["PING"] == 0 and "PING" not in sent
    # An MGET is split by the proxy into one per server holding some of its keys.
    assert sent["MGET"] <= total["MGET"] <= 2 * sent["MGET"], (total, sent)
    # Both servers took GETs, and each row behind says what it counted.
    assert all(m["GET"] > 0 for m in moved), moved
    behind = saved["behind"]
    assert [b["address"] for b in behind] == addresses
    assert [b["server"]["calls"]["get"] for b in behind] == [m["GET"] for m in moved]
    assert saved["server"]["calls"]["get"] == sent["GET"]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("redis 7") and f"through the proxy at {proxy.address}" in line
               for line in lines), lines[:4]
    assert any(line.startswith("floor (GET-miss: a GET of a key never written, through the "
                               "proxy") for line in lines), lines[:5]
    assert any(line.startswith("the 2 servers' commandstats behind the proxy, added up:")
               and "each counted once" in line for line in lines)
    assert any(line.startswith("behind the proxy") and "INFO deltas" in line for line in lines)
    assert saved["run"]["leftover_keys"] == 0
    _no_keys(pair)
    assert refused.returncode == 2 and "redis_db" in one_error_line(refused)


def _node_calls(cluster: PrivateRedisCluster, i: int) -> dict[str, int]:
    info = cluster.client(i).info("commandstats")
    return {mine: int(info[f"cmdstat_{theirs}"]["calls"]) if f"cmdstat_{theirs}" in info else 0
            for mine, theirs in COMMANDS.items()}


def test_a_redis_cluster_is_profiled_master_by_master_under_hash_tags(
        cluster: PrivateRedisCluster, cli: InProcess, tmp_path: Path) -> None:
    before = [_node_calls(cluster, i) for i in range(3)]
    out = tmp_path / "cluster"
    proc = cli("profile", "--cluster", "--server", cluster.url, "--rounds", "1", *SMALL,
               "--out", out)
    assert proc.returncode == 0, proc.stderr
    moved = [_moved(b, _node_calls(cluster, i)) for i, b in enumerate(before)]
    pool = json.loads((out / "profile-pool.json").read_text())
    masters = cluster.addresses
    assert pool["distribution"] == "cluster"
    assert [m["address"] for m in pool["members"]] == masters
    assert abs(sum(m["share"] for m in pool["members"]) - 1) < 1e-9
    # Each master's prefix carries a hash tag whose slot it serves, as redis-py hashes it
    # and CLUSTER SLOTS places it.
    owner = cluster.owners()
    assert [owner[key_slot(p.encode())] for p in pool["cluster"]["prefixes"]] == masters
    for m, counted in zip(pool["members"], moved):
        saved: dict[str, Any] = json.loads((out / m["profile"] / "profile.json").read_text())
        for cell in saved["cells"]:  # no MOVED, no CROSSSLOT: every MGET on one master
            assert cell["samples"] == 30 and cell["errors"] == {} and cell["misses"] == 0, cell
        sent = saved["client"]["commands"]
        # Every command of a master's profile went to it, and it counted each once.
        assert counted == {k: sent.get(k, 0) for k in COMMANDS}, (m["address"], counted, sent)
        assert sent["MGET"] > 0
    assert proc.stdout.splitlines()[0].startswith("Redis Cluster of 3 masters (seed ")
    assert [cluster.client(i).dbsize() for i in range(3)] == [0, 0, 0]


def test_what_a_cluster_profile_cannot_do_is_refused_in_one_line(
        cli: InProcess, tmp_path: Path) -> None:
    seed = ["--server", "redis://127.0.0.1:7000"]
    lone = cli("profile", "--cluster", *SMALL, "--out", tmp_path / "a")
    assert lone.returncode == 2 and "seed node" in one_error_line(lone)
    proxied = cli("profile", "--cluster", "--proxy", "127.0.0.1:22121", *seed, *SMALL,
                  "--out", tmp_path / "b")
    assert proxied.returncode == 2 and "--proxy" in one_error_line(proxied)
    db = cli("profile", "--cluster", "--server", "redis://127.0.0.1:7000/2", *SMALL,
             "--out", tmp_path / "c")
    assert db.returncode == 2 and "database 0" in one_error_line(db)
