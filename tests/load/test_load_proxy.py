"""load through a real twemproxy in front of real memcached servers: every request goes to
the proxy, the servers behind it count them (their stats), and the verb says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cachelab.load import LoadSpec, load
from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from cachelab.servers import PrivateMemcached
from clitools import cachelab
from pools import loopback_pool

try:
    find_nutcracker()
except Exception as e:  # noqa: BLE001 - the reason is shown in the skip
    pytest.skip(f"no twemproxy: {e}", allow_module_level=True)


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[list[PrivateMemcached], PrivateTwemproxy]]:
    with loopback_pool() as members, PrivateTwemproxy(
            [m.address for m in members], distribution="ketama", hash="md5") as proxy:
        yield members, proxy


def test_requests_through_the_proxy_are_counted_by_the_servers_behind_it(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy]) -> None:
    members, proxy = pool
    spec = LoadSpec(duration=0.6, warmup=0.0, connections=2, key_space=2000,
                    mix={"get": 0.8, "set": 0.2})
    r = load(spec, server=proxy.address, behind=[m.address for m in members])
    assert r.server["proxy"] and r.server["address"] == proxy.address
    assert [b["address"] for b in r.behind] == [m.address for m in members]
    gets = [b["server"]["deltas"]["cmd_get"] for b in r.behind]
    sets = [b["server"]["deltas"]["cmd_set"] for b in r.behind]
    # Every get and set the client sent reached one server behind the proxy, and each server
    # got its share (ketama over three members).
    assert sum(gets) == r.all["ops"]["get"] and sum(sets) == r.all["ops"]["set"]
    assert all(g > 0.15 * sum(gets) for g in gets)
    assert r.server["deltas"]["cmd_get"] == sum(gets)
    text = r.render()
    assert "through the proxy" in text and "behind the proxy" in text


def test_the_cli_runs_through_a_proxy_and_asks_for_the_servers_behind_it(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy], tmp_path: Path) -> None:
    members, proxy = pool
    flags = [x for m in members for x in ("--server", m.address)]
    p = cachelab("load", "--proxy", proxy.address, *flags, "--duration", "0.5",
                 "--key-space", "1000", "--out", tmp_path / "a")
    assert p.returncode == 0, p.stderr
    assert '"behind"' in p.stdout  # JSON on a pipe
    lone = cachelab("load", "--proxy", proxy.address, "--duration", "0.5", "--out", tmp_path / "b")
    assert lone.returncode == 2 and "servers behind it" in lone.stderr
    # Pointed at the proxy as if it were a memcached, the verb says what it is.
    direct = cachelab("load", "--server", proxy.address, "--duration", "0.5",
                      "--out", tmp_path / "c")
    assert direct.returncode == 2 and "proxy" in direct.stderr
