"""``load`` from several agents on a real multi-node Ray cluster (tests/ray/conftest.py):
the merge is lossless, the open-loop schedule holds the requested rate, the server saw what
the agents counted, and a killed agent gives the documented partial result."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import cachelab._core as _core
from cachelab.load import LoadResult, LoadSpec, load_on_ray
from cachelab.scale import ScaleSpec, scale
from clitools import cachelab
from rayaddrs import HEAD_IP
from schedules import poisson_bounds

RATE = 3000.0


def _spec(**kw: Any) -> LoadSpec:
    base: dict[str, Any] = {"connections": 4, "rate": RATE, "duration": 2.0, "warmup": 0.5,
                            "interval": 0.5, "key_space": 500, "seed": 7}
    return LoadSpec(**{**base, **kw})


def _gone(result: LoadResult, server: str) -> bool:
    prefix = result.spec["prefix_used"]
    with _core.Client(server) as client:
        return not client.get_multi([f"{prefix}:{i}" for i in range(result.spec["key_space"])])


def test_two_agents_merge_losslessly_and_hold_the_rate(ray_cluster, ray_memcached) -> None:
    # With a latency probe, which runs on agent 0 alone (mutilate's master).
    result = load_on_ray(_spec(probe_rate=200.0), ray_cluster.options(agents=2),
                         server=ray_memcached.address)
    agents = result.agents["list"]
    assert [a["status"] for a in agents] != ["lost", "lost"]
    assert sorted(a["node_ip"] for a in agents) == sorted(ray_cluster.node_ips)  # one per node
    assert sum(a["connections"] for a in agents) == 4
    assert sum(a["intended_rate"] for a in agents) == pytest.approx(RATE)

    # Lossless: the merged histograms hold every reply each agent counted, no more.
    for tag in ("corrected", "uncorrected"):
        assert result.all[tag]["count"] == sum(a["counts"][tag] for a in agents)
    assert result.all["replies"] == sum(a["replies"] for a in agents)
    assert sum(iv["replies"] for iv in result.intervals) == result.all["replies"]

    # The union of the agents' schedules is the requested one.
    # Held, or (a machine too busy to keep the schedule) not held with its reason shown: a
    # backlog at the end, or measured intervals that fell behind (one was seen beside a CPU
    # hog, caught up by the end: backlog 0, 1.02x the rate).
    s = result.schedule
    assert s["held"] or s["backlog_at_end"] > 0 or s["intervals_behind"], s
    assert s["target_rate"] == RATE
    # The replies per second are the asked rate's, give or take: a Poisson schedule's draws,
    # its first sends waiting for the connections, a loaded machine (5-6 % below it seen with
    # the schedule held) — not half of it (an agent's share lost) nor twice (counted twice).
    # Above it only by what the warm-up left behind and the measured window caught up (11 %
    # seen on a quiet machine after a busy spell): half again, not twice.
    assert result.totals["throughput"] < RATE * 1.5, result.totals
    if s["held"]:  # (not held, 0.59 of the rate was seen beside a CPU hog)
        assert result.totals["throughput"] >= 0.85 * RATE, result.totals
    # Held or not, what the agents' schedules made due was sent or is counted as unsent: a
    # Poisson count of the rate over the warm-up and the run, no agent's share missing.
    due = result.all["sent"] + s["backlog_at_end"] + s["skipped_disconnected"]
    low, high = poisson_bounds(RATE, 2.5)
    assert low <= due <= high, (due, low, high, s)
    assert all(a["replies"] > 0 for a in agents), agents

    # The server saw exactly what the agents and the probe counted.
    deltas = result.server["deltas"]
    assert result.probe is not None and result.probe["all"]["sent"] > 0
    probe_ops = result.probe["all"]["ops"]
    assert deltas["cmd_get"] == result.all["ops"]["get"] + probe_ops["get"]
    assert deltas["cmd_set"] == result.all["ops"]["set"] + probe_ops["set"]
    assert deltas["get_hits"] + deltas["get_misses"] == deltas["cmd_get"]

    # Clocks on one machine are one clock: its true offset, 0, lies within the estimate's
    # stated uncertainty (half the best round trip; 20.5 ms was seen on a loaded machine, so
    # no fixed bound); starts were common.
    for a in agents:
        clock = a["clock"]
        assert abs(clock["offset_ms"]) <= clock["uncertainty_ms"] + 0.002, clock
        # Told the start 1 s ahead: a busy machine can deliver the call late (238 ms seen while
        # a build took both cores); a start computed wrongly is off by seconds.
        assert abs(a["start_skew_ms"]) < 1000
        assert a["cpu_us_per_op"] > 0
    assert result.run["prefilled_keys"] == 500
    assert result.run["leftover_keys"] == 0 and _gone(result, ray_memcached.address)
    # A schedule not held (above) is the one problem a busy machine may add.
    problems = result.problems()
    assert problems.pop("rate_not_held", 0) == int(not result.schedule["held"])
    assert not problems, problems
    assert "agents: 2 (spread)" in result.render()
    again = LoadResult.from_dict(result.to_dict())
    assert again.agents == result.agents


def _agent_pids() -> list[int]:
    """Processes of live load agents (Ray titles its workers ``ray::LoadAgent...``)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if cmd.startswith(b"ray::LoadAgent"):
                pids.append(int(d.name))
    return pids


def _connected_to(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds an established TCP connection to ``port`` (loopback)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "01" and int(f[2].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) in inodes:
                return True
        except OSError:
            continue
    return False


def test_a_killed_agent_ends_the_run_with_the_others(ray_cluster, ray_memcached) -> None:
    killed: list[int] = []
    port = int(ray_memcached.address.rsplit(":", 1)[1])

    def kill_one(progress: Any) -> None:
        if not killed and progress.done >= 1500:  # ms into the run
            # This run's agents: those with a connection to this test's memcached (an earlier
            # test's agents may still be on their way out: Ray ends an actor in its own time).
            pids = [p for p in _agent_pids() if _connected_to(p, port)]
            assert len(pids) == 2, (pids, _agent_pids())
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    result = load_on_ray(_spec(duration=3.0), ray_cluster.options(agents=2),
                         server=ray_memcached.address, on_progress=kill_one)
    assert killed
    lost = result.run["agents_lost"]
    assert len(lost) == 1
    gone = lost[0]["agent"]
    assert result.agents["list"][gone]["pid"] == killed[0]
    assert result.agents["list"][gone]["status"] == "lost"
    assert 1.0 <= lost[0]["at_s"] <= 3.5 + 5
    survivor = result.agents["list"][1 - gone]
    assert survivor["status"] != "lost"
    assert result.all["replies"] == survivor["replies"]
    assert result.all["corrected"]["count"] == survivor["counts"]["corrected"]
    problems = result.problems()
    assert problems["agents_lost"] == 1 and problems["rate_not_held"] == 1
    assert result.render().startswith(f"PARTIAL: agent {gone} on ")
    assert "lost" in result.agents["verdict"]
    assert result.run["leftover_keys"] == 0 and _gone(result, ray_memcached.address)


def test_sets_without_a_prefill_are_deleted_by_the_driver(ray_cluster, ray_memcached) -> None:
    """No engine deletes on its own (one ending first would delete keys the other still
    reads): what the agents set is deleted by the driver once both are done."""
    result = load_on_ray(_spec(mix={"set": 1.0}, duration=1.0), ray_cluster.options(agents=2),
                         server=ray_memcached.address)
    assert result.run["prefilled_keys"] == 0 and result.all["ops"]["set"] > 0
    assert result.run["deleted_keys"] == 500 and result.run["leftover_keys"] == 0
    assert _gone(result, ray_memcached.address)


def test_load_cli_with_ray_writes_a_load_json_report_and_compare_read(
        ray_cluster, ray_memcached, tmp_path: Path) -> None:
    common = ["--server", ray_memcached.address, "--rate", "1500", "--connections", "2",
              "--duration", "0.5", "--warmup", "0.25", "--key-space", "200", "--no-plots",
              "--format", "table"]
    local = cachelab("load", *common, "--out", tmp_path / "local")
    assert local.returncode == 0, local.stderr
    done = cachelab("load", *common, "--ray", ray_cluster.address, "--ray-node-ip", HEAD_IP,
                    "--agents", "2", "--out", tmp_path / "ray")
    assert done.returncode == 0, done.stderr
    assert "agents: 2 (spread)" in done.stdout
    doc = json.loads((tmp_path / "ray" / "load.json").read_text())
    local_doc = json.loads((tmp_path / "local" / "load.json").read_text())
    assert set(doc) - set(local_doc) == {"agents"}
    assert doc["schema_version"] == local_doc["schema_version"]
    assert len(doc["agents"]["list"]) == 2
    compared = cachelab("compare", tmp_path / "local" / "load.json",
                        tmp_path / "ray" / "load.json", "--out", tmp_path / "cmp", "--no-plots")
    assert compared.returncode == 0, compared.stderr
    assert "Traceback" not in compared.stderr
    report = cachelab("report", tmp_path / "ray", "--out", tmp_path / "page")
    assert report.returncode == 0, report.stderr


def test_scale_over_agents(ray_cluster, ray_memcached) -> None:
    spec = ScaleSpec.quick(vary="agents", points=[1, 2], repeats=1, connections_per_agent=2,
                           settle=0.0, window=0.5)
    result = scale(spec, server=ray_memcached.address, ray=ray_cluster.options())
    assert [(r["n"], r["connections"]) for r in result.runs] == [(1, 2), (2, 4)]
    assert all(r["throughput"] > 0 and not r["errors"] for r in result.runs)
    assert result.fit is None  # two loads: too few for the USL, and the notes say so
