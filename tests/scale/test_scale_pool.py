"""scale on a pool of real memcached members: every point's requests are spread over the
members by the distribution, and each member's share shows in the point."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.scale import ScaleSpec, run, scale
from cachelab.servers import PrivateMemcached
from cachelab.target import Target
from clitools import InProcess
from pools import loopback_pool


@pytest.fixture(scope="module")
def members() -> Iterator[list[PrivateMemcached]]:
    with loopback_pool(threads=1) as servers:
        yield servers


def _gets(m: PrivateMemcached) -> int:
    with _core.Client(m.address) as c:
        return int(c.stats()["cmd_get"])


def test_a_sweep_over_a_pool_spreads_each_point_over_the_members(
        members: list[PrivateMemcached]) -> None:
    before = [_gets(m) for m in members]
    spec = ScaleSpec(points=[1, 2], repeats=1, warmup=0.2, settle=0.2, window=0.4,
                     interval=0.1, bootstrap=0,
                     workload={"key_space": 3000, "distribution": "ketama"})
    r = scale(spec, server=[m.address for m in members])
    after = [_gets(m) for m in members]
    assert r.server["pool"]["members"] == [m.address for m in members]
    assert len(r.runs) == 2
    for point in r.runs:
        assert [x["address"] for x in point["members"]] == [m.address for m in members]
        assert all(x["replies"] > 0 and x["errors"] == 0 for x in point["members"])
    # Every member served gets (the sweep's, prefill's and clean-up's aside).
    assert all(a > b for a, b in zip(after, before))


def test_the_cli_takes_a_pool_and_refuses_it_where_it_cannot_go(
        cli: InProcess, members: list[PrivateMemcached], tmp_path: Path) -> None:
    flags = [x for m in members for x in ("--server", m.address)]
    p = cli("scale", *flags, "--vary", "server-threads", "--out", tmp_path / "a")
    assert p.returncode == 2 and "pool" in p.stderr
    bad = cli("scale", *flags, "--distribution", "nope", "--out", tmp_path / "b")
    assert bad.returncode == 2 and "ketama" in bad.stderr


def test_the_target_s_pool_settings_are_every_run_s(members: list[PrivateMemcached]) -> None:
    """A Target's pool settings (the CLI's --distribution, --member-*) reach every run: the
    Target carries them once, and the verb puts them in each run's workload."""
    spec = ScaleSpec(points=[1], repeats=1, warmup=0.2, settle=0.2, window=0.3, interval=0.1,
                     bootstrap=0, workload={"key_space": 500})
    target = Target(servers=tuple(m.address for m in members),
                    pool={"distribution": "modula", "member_failure_limit": 5})
    r = run(spec, target)
    assert r.server["pool"]["distribution"] == "modula"
    assert len(r.runs) == 1 and all(x["replies"] > 0 for x in r.runs[0]["members"])
