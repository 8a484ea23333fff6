"""``load --ray`` and ``scale --ray --vary agents`` over RESP: two load agents on the Ray tests'
cluster (two raylets on this machine, 127.0.0.2-3: tests/ray/conftest.py) driving a real
redis-server with a password, a client-side pool of two, and a real 3-master Redis Cluster
(three OS redis-servers joined by ``redis-cli --cluster create``), and through twemproxy in
redis mode: the merged counts of every command are what each server's own ``INFO
commandstats`` counted (redis-py reads them: a third party), each cluster master's share by
redis-py's ``key_slot``, nothing left behind, and the password in no output or file.

In tests/ray, so grouped with the Ray tests (xdist group ``ray``: one worker) and ``slow`` by
tests/conftest.py. Runs are short; the assertions are on counts, never on speed."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray is not installed (pip install 'cachelab[ray]')", allow_module_level=True)

from redis.crc import key_slot  # noqa: E402

from cachelab.load import LoadSpec, run  # noqa: E402
from cachelab.load.keyspace import delete_key_space  # noqa: E402
from cachelab.load.keyspace import key_slot as our_key_slot  # noqa: E402
from cachelab.proxies import PrivateTwemproxy, find_nutcracker  # noqa: E402
from cachelab.raycluster import RayOptions  # noqa: E402
from cachelab.resp import RespLogin  # noqa: E402
from cachelab.scale import ScaleSpec  # noqa: E402
from cachelab.scale import run as scale_run  # noqa: E402
from cachelab.target import Target  # noqa: E402
from clitools import cachelab as cli  # noqa: E402
from rayaddrs import HEAD_IP  # noqa: E402


@pytest.fixture(scope="module")
def ray_address(ray_cluster: Any) -> str:
    """The Ray tests' cluster (tests/ray/conftest.py: two raylets on 127.0.0.2-3, this process
    the driver)."""
    return str(ray_cluster.address)


def _ray(address: str, agents: int = 2) -> RayOptions:
    return RayOptions(address=address, agents=agents, node_ip=HEAD_IP, ready_timeout=30.0)


def _calls(stats: dict[str, Any], command: str) -> int:
    stat = stats.get(f"cmdstat_{command}")
    return int(stat["calls"]) if stat else 0


def _commands(client: Any) -> dict[str, int]:
    stats = client.info("commandstats")
    return {c: _calls(stats, c) for c in ("get", "set", "mget", "unlink")}


def _moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in before}


#: A short open-loop run from two agents: every command a load sends over RESP.
SPEC = LoadSpec(connections=4, rate=1500.0, duration=1.0, warmup=0.25, interval=0.25,
                key_space=400, mix={"get": 0.7, "set": 0.2, "multiget": 0.1}, multiget_keys=3,
                seed=7, timeout=5.0, member_timeout=5.0)


def test_two_agents_on_one_redis_send_what_its_commandstats_counted(ray_address, redis) -> None:
    c = redis.client()
    before = _commands(c)
    r = run(SPEC, Target(servers=(redis.url,), ray=_ray(ray_address)))
    moved = _moved(before, _commands(c))
    agents = r.agents["list"]
    assert [a["status"] for a in agents if a["status"] == "lost"] == []
    assert len(agents) == 2 and all(a["replies"] > 0 for a in agents)
    ops = r.all["ops"]
    assert r.spec["protocol"] == "resp" and r.server["version"].startswith(("redis ", "valkey "))
    # Each command as the server counted it: the agents' merged counts, the agents' prefill
    # (their stripes of the key space) and the driver's clean-up (one UNLINK per key).
    assert moved["get"] == ops["get"] > 0 and moved["mget"] == ops["multiget"] > 0
    assert r.run["prefilled_keys"] == 400
    assert moved["set"] == ops["set"] + 400
    assert r.run["deleted_keys"] == 400 and r.run["leftover_keys"] == 0
    assert moved["unlink"] == 400
    assert r.all["errors"] == {} and r.all["replies"] == sum(a["replies"] for a in agents)
    # The server's side: the agents' INFO reads merged (the earliest before, the latest after).
    assert r.server["deltas"]["keyspace_misses"] == 0  # prefilled, nothing deleted mid-run
    assert r.server["deltas"]["keyspace_hits"] >= ops["get"]
    assert c.dbsize() == 0
    assert redis.password not in json.dumps(r.to_dict())


def test_the_cli_on_ray_drives_a_pool_of_two_and_each_member_counts_its_part(
        ray_address, pair, tmp_path: Path) -> None:
    clients = [s.client() for s in pair]
    before = [_commands(c) for c in clients]
    done = cli("load", "--ray", ray_address, "--ray-node-ip", HEAD_IP, "--agents", "2",
               *[x for s in pair for x in ("--server", f"redis://{s.address}")],
               "--rate", "1500", "--connections", "4", "--duration", "1", "--warmup", "0.25",
               "--interval", "0.25", "--key-space", "400", "--mix", "get=80,set=20",
               "--timeout", "5", "--no-plots", "--format", "table", "--out", tmp_path / "out")
    # Measured (0), or 1 only because a busy machine kept the agents from holding the rate.
    assert done.returncode == 0 or (done.returncode == 1 and "rate not held" in done.stderr), \
        done.stderr
    assert "agents: 2" in done.stdout
    doc = json.loads((tmp_path / "out" / "load.json").read_text())
    assert doc["server"]["protocol"] == "resp"
    assert [m["address"] for m in doc["members"]] == [s.address for s in pair]
    # A timeout only where the agents' threads waited for a CPU (as in
    # test_load_agents_pool.py; 4 of 5 s were seen at load 12): its request may have run.
    waited = doc["client"]["run_queue_wait_s"]
    for m, c, b in zip(doc["members"], clients, before):
        moved = _moved(b, _commands(c))
        lost = m["errors"].get("timeout", 0)
        assert set(m["errors"]) <= ({"timeout"} if waited >= 0.8 else set()), (m, waited)
        # What the agents sent this member is what its own commandstats counted, and the
        # driver's INFO reads (after the prefill, after the agents) saw the same commands.
        assert m["sent"] >= m["replies"] > 0 and m["sent"] <= m["replies"] + lost, m
        ran = moved["get"] + (moved["set"] - m["keys"])
        assert m["replies"] <= ran <= m["replies"] + lost, (m, moved)
        hits = m["server"]["deltas"]["keyspace_hits"]
        assert m["hits"] <= hits <= m["hits"] + lost and m["misses"] == 0, m
        assert moved["unlink"] == m["keys"]
        assert c.dbsize() == 0
    assert sum(m["keys"] for m in doc["members"]) == 400


try:
    find_nutcracker()
    _NO_PROXY = ""
except Exception as e:  # noqa: BLE001 - the reason is shown in the skip
    _NO_PROXY = f"no twemproxy: {e}"


@pytest.mark.skipif(bool(_NO_PROXY), reason=_NO_PROXY)
def test_two_agents_through_twemproxy_in_redis_mode(ray_address, pair) -> None:
    """The agents send to twemproxy (redis mode), which spreads the keys; the driver reads
    each server behind it: their GETs and SETs added up are the agents' merged counts (plus
    the prefill, sent through the proxy too), and the clean-up's UNLINKs reach every key."""
    clients = [s.client() for s in pair]
    before = [_commands(c) for c in clients]
    with PrivateTwemproxy([s.address for s in pair], redis=True) as proxy:
        r = run(dataclasses.replace(SPEC, mix={"get": 0.8, "set": 0.2}, key_space=1000),
                Target(servers=tuple(s.address for s in pair), proxy=proxy.address,
                       resp=RespLogin(), ray=_ray(ray_address)))
    moved = [_moved(b, _commands(c)) for b, c in zip(before, clients)]
    assert r.behind is not None and [b["address"] for b in r.behind] == [s.address for s in pair]
    assert r.all["errors"] == {}
    assert sum(m["get"] for m in moved) == r.all["ops"]["get"] > 0
    assert sum(m["set"] for m in moved) == r.all["ops"]["set"] + 1000
    assert sum(m["unlink"] for m in moved) == 1000 and all(m["get"] > 0 for m in moved)
    # The driver's INFO reads of each server behind: its keyspace lookups are its GETs.
    for b, m in zip(r.behind, moved):
        d = b["server"]["deltas"]
        assert d["keyspace_hits"] + d["keyspace_misses"] == m["get"], (d, m)
    assert [c.dbsize() for c in clients] == [0, 0]


def test_two_agents_on_a_cluster_route_by_slot_and_each_master_counts_its_part(
        ray_address, cluster) -> None:
    clients = [cluster.client(i) for i in range(3)]
    before = [_commands(c) for c in clients]
    spec = LoadSpec(**{**SPEC.__dict__, "mix": {"get": 0.8, "multiget": 0.2},
                       "multiget_keys": 4, "key_space": 600})
    r = run(spec, Target(servers=(cluster.url,), cluster=True, ray=_ray(ray_address)))
    assert r.members is not None and [m["address"] for m in r.members] == cluster.addresses
    assert r.pool is not None and r.pool["distribution"] == "cluster"
    assert r.pool["redirects"] == {"moved": 0, "ask": 0}
    # Each master holds the keys whose slot it serves, as redis-py places them; ours agrees.
    owner = cluster.owners()
    prefix = r.spec["prefix_used"]
    keys = [f"{prefix}:{i}" for i in range(600)]
    assert all(our_key_slot(k) == key_slot(k.encode()) for k in keys)
    placed = Counter(owner[key_slot(k.encode())] for k in keys)
    assert [m["keys"] for m in r.members] == [placed[a] for a in cluster.addresses]
    for m, c, b in zip(r.members, clients, before):
        moved = _moved(b, _commands(c))
        # Its GETs and MGETs (one per slot of a multi-get's keys: no CROSSSLOT) are the
        # replies both agents got from it; the prefill's SETs and the clean-up's UNLINKs
        # are one per key it holds.
        assert m["errors"] == {} and m["replies"] == moved["get"] + moved["mget"] > 0, (m, moved)
        assert moved["set"] == moved["unlink"] == m["keys"]
        assert m["redirects"] == {"moved": 0, "ask": 0}
        assert m["server"]["deltas"]["keyspace_hits"] == m["hits"]
        assert c.dbsize() == 0
    assert r.run["leftover_keys"] == 0


#: GETs only, no prefill: each master answers for the slots it serves, or redirects.
GETS = LoadSpec(connections=4, rate=3000.0, duration=3.0, warmup=0.25, interval=0.25,
                key_space=2000, mix={"get": 1.0}, prefill=False, seed=9, timeout=5.0,
                member_timeout=5.0)


def test_slots_moved_during_a_ray_run_are_followed_by_each_agent_and_summed(
        ray_address, cluster) -> None:
    """1,000 slots of the first master's moved to the second once both agents are sending:
    each agent learns the move from its own MOVEDs (its own slot table); the merged count is
    the sum of the agents', all on the first master; every GET is answered, each master's
    replies its own GET calls."""
    slots = cluster.slots_of(0)
    clients = [cluster.client(i) for i in range(3)]
    before = [_commands(c) for c in clients]
    failures: list[BaseException] = []

    def move_when_sending() -> None:
        try:
            deadline = time.monotonic() + 60
            while _commands(clients[0])["get"] - before[0]["get"] < 200:
                if time.monotonic() > deadline:
                    raise AssertionError("no get reached the first master")
                time.sleep(0.02)
            cluster.move(slots, to=1)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test
            failures.append(e)

    mover = threading.Thread(target=move_when_sending, daemon=True)
    mover.start()
    try:
        r = run(GETS, Target(servers=(cluster.url,), cluster=True, ray=_ray(ray_address)))
    finally:
        mover.join(timeout=60)
        cluster.move(slots, to=0)
    assert not failures, failures
    members = r.members
    assert members is not None and r.pool is not None
    prefix = r.spec["prefix_used"]
    hit = {key_slot(f"{prefix}:{i}".encode()) for i in range(2000)} & set(slots)
    assert len(hit) > 50
    # Both agents were redirected, each on its own; the merge is their sum, all the first
    # master's (ASKs too, while the move was under way).
    agents = r.agents["list"]
    assert all(a["redirects"]["moved"] > 0 for a in agents), [a["redirects"] for a in agents]
    assert {k: sum(a["redirects"][k] for a in agents) for k in ("moved", "ask")} \
        == r.pool["redirects"] == members[0]["redirects"]
    assert [m["redirects"] for m in members[1:]] == [{"moved": 0, "ask": 0}] * 2
    assert all(m["errors"] == {} for m in members), [m["errors"] for m in members]
    after = [_commands(c) for c in clients]
    assert [m["replies"] for m in members] == [a["get"] - b["get"]
                                               for a, b in zip(after, before)]
    assert [c.dbsize() for c in clients] == [0, 0, 0]


def test_a_slot_being_migrated_is_asked_by_both_agents(ray_address, cluster) -> None:
    """Slots migrating from the third master (which holds none of the run's keys) to the
    second: every GET of theirs is answered -ASK by the third and served by the second after
    ASKING, by either agent; the merged ASKs are all the third's."""
    slots = cluster.slots_of(2)
    cluster.migrating(slots, source=2, target=1)
    clients = [cluster.client(i) for i in range(3)]
    before = [_commands(c) for c in clients]
    try:
        r = run(dataclasses.replace(GETS, duration=1.0),
                Target(servers=(cluster.url,), cluster=True, ray=_ray(ray_address)))
    finally:
        cluster.stable(slots, 1, 2)
    after = [_commands(c) for c in clients]
    members = r.members
    assert members is not None
    assert members[2]["redirects"]["ask"] > 0, members[2]
    assert all(a["redirects"]["ask"] > 0 for a in r.agents["list"]), r.agents["list"]
    assert [m["redirects"]["ask"] for m in members[:2]] == [0, 0]
    assert all(m["redirects"]["moved"] == 0 for m in members)
    assert all(m["errors"] == {} for m in members), [m["errors"] for m in members]
    assert [m["replies"] for m in members] == [a["get"] - b["get"]
                                               for a, b in zip(after, before)]


def test_the_clean_up_deletes_each_key_from_the_master_serving_its_slot_now(cluster) -> None:
    """The driver's clean-up reads the slot map again: keys written (by redis-py) to their
    cluster are all deleted though the run's slot table is stale (every slot on the first
    master, as after slots moved away from it during a run)."""
    prefix = f"cachelab-test:{os.getpid()}-{time.monotonic_ns()}"
    owner = cluster.owners()
    by_node = {a: cluster.client(i) for i, a in enumerate(cluster.addresses)}
    for i in range(300):
        key = f"{prefix}:{i}"
        by_node[owner[key_slot(key.encode())]].set(key, b"v")
    assert sum(c.dbsize() for c in by_node.values()) == 300
    core = {"key_space": 300, "prefix": prefix, "servers": [[a, 1] for a in cluster.addresses],
            "cluster_slots": [(0, 16383, 0)], "protocol": {"resp": {}}, "tls": None,
            "timeout": 2.0, "connect_timeout": 2.0}
    assert delete_key_space(core) == (300, 0)
    assert [c.dbsize() for c in by_node.values()] == [0, 0, 0]


def test_scale_ray_vary_agents_over_resp(ray_address, redis) -> None:
    c = redis.client()
    before = _commands(c)
    spec = ScaleSpec(vary="agents", points=[1, 2], repeats=1, warmup=0.25, settle=0.25,
                     window=0.5, interval=0.25, connections_per_agent=2, bootstrap=0,
                     workload={"key_space": 200, "mix": {"get": 1.0}, "timeout": 5.0})
    result = scale_run(spec, Target(servers=(redis.url,), ray=_ray(ray_address)))
    moved = _moved(before, _commands(c))
    assert [r["n"] for r in sorted(result.runs, key=lambda r: r["n"])] == [1, 2]
    assert all(r["throughput"] > 0 and r["errors"] == 0 for r in result.runs), [
        {k: r.get(k) for k in ("n", "throughput", "errors", "lost", "window_s", "members")}
        for r in result.runs]
    assert result.server["protocol"] == "resp"
    # Two runs, each prefilled by its agents and cleaned up by the driver.
    assert moved["set"] == moved["unlink"] == 2 * 200
    assert moved["get"] > 0
    assert c.dbsize() == 0


def test_a_wrong_password_over_ray_is_one_line(ray_address, redis) -> None:
    done = cli("load", "--ray", ray_address, "--ray-node-ip", HEAD_IP, "--agents", "2",
               "--server", f"redis://:wrong-{redis.password}@{redis.address}",
               "--duration", "0.5", "--connections", "2", "--no-plots")
    assert done.returncode == 3, done.stderr
    assert "WRONGPASS" in done.stderr and redis.password not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
