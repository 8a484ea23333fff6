"""profile on a pool: each member profiled, a slow member (0.5 ms added by the fault proxy
in front of a real memcached) stands out, and the pool's rows are the members' mixture by
key share."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.profile import ProfileSpec
from cachelab.profile.pool import key_shares, mixture_percentiles, profile_pool
from cachelab.servers import PrivateMemcached
from clitools import InProcess
from pools import loopback_pool

sys.path.insert(0, str(Path(__file__).parents[1]))
from faultproxy import FaultProxy  # noqa: E402


@pytest.fixture(scope="module")
def members() -> Iterator[list[PrivateMemcached]]:
    with loopback_pool(threads=1) as servers:
        yield servers


def test_the_mixture_weighs_each_member_by_its_share() -> None:
    fast = _core.hist_from_values([10_000] * 1000)     # 10 µs
    slow = _core.hist_from_values([1_000_000] * 1000)  # 1 ms
    p = mixture_percentiles([fast, slow], [0.7, 0.3], [50.0, 69.0, 71.0, 99.0])
    near = [abs(v - want) / want for v, want in zip(p, (10_000, 10_000, 1_000_000, 1_000_000))]
    assert max(near) < 0.01, p      # HdrHistogram keeps 3 significant digits


def test_shares_follow_the_distribution() -> None:
    shares = key_shares(["10.0.0.1:11211", "10.0.0.2:11211:3"], "ketama")
    assert shares[1] == pytest.approx(0.75, abs=0.05) and sum(shares) == pytest.approx(1.0)


def test_a_slow_member_stands_out(members: list[PrivateMemcached]) -> None:
    with FaultProxy(members[1].address) as slow:
        slow.delay(0.0005)
        spec = ProfileSpec.quick(sizes=(100,), key_counts=(5,))
        r = profile_pool(spec, [members[0].address, slow.address, members[2].address])
    p50 = [m.cells_of("get")[0].percentiles["50"] for m in r.members]
    assert p50[1] > max(p50[0], p50[2]) + 400_000          # the 0.5 ms shows
    assert r.slowest() is not None and slow.address in r.slowest()
    get = next(c for c in r.pool if c["op"] == "get")
    assert min(p50) <= get["percentiles"]["50"] <= max(p50)
    # The slow member holds about a third of the keys: the pool's p90 is slow, its p50 not.
    assert get["percentiles"]["90"] > p50[1] * 0.9 and get["percentiles"]["50"] < p50[1] / 2
    assert all(m.cells_of("get")[0].samples == spec.samples for m in r.members)


def test_the_cli_profiles_a_pool_and_refuses_what_does_not_apply(
        cli: InProcess, members: list[PrivateMemcached], tmp_path: Path) -> None:
    flags = [x for m in members for x in ("--server", m.address)]
    p = cli("profile", *flags, "--quick", "--sizes", "100", "--keys", "5", "--rounds", "1",
            "--no-plots", "--out", tmp_path / "p", "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads((tmp_path / "p" / "profile-pool.json").read_text())
    assert [m["address"] for m in d["members"]] == [m.address for m in members]
    for m in d["members"]:
        assert (tmp_path / "p" / m["profile"] / "profile.json").is_file()
    bad = cli("profile", *flags, "--member-retry", "1", "--out", tmp_path / "q")
    assert bad.returncode == 2 and "--member-retry" in bad.stderr
