"""profile through a real twemproxy in front of real memcached servers: every request goes to
the proxy, the floor is a get of a key never written, the servers behind count exactly the
requests the spec implies, and every key written is gone afterwards."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.load import server_view
from cachelab.pool import twemproxy
from cachelab.profile import ProfileSpec, profile
from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from cachelab.servers import PrivateMemcached, find_memcached, read_stats, stats_or_none
from clitools import InProcess, one_error_line
from pools import loopback_pool, unused_address

try:
    find_nutcracker()
except Exception as e:  # noqa: BLE001 - the reason is shown in the skip
    pytest.skip(f"no twemproxy: {e}", allow_module_level=True)

COUNTERS = ("cmd_get", "get_misses", "cmd_set", "delete_hits", "curr_items")


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[list[PrivateMemcached], PrivateTwemproxy]]:
    with loopback_pool() as members, PrivateTwemproxy(
            [m.address for m in members], distribution="ketama", hash="md5",
            stats_interval=0.1) as proxy:
        yield members, proxy


def _proxy_counts(proxy: PrivateTwemproxy) -> dict[str, int]:
    """The pool's counters on the proxy's stats port: client connections closed cleanly
    (``client_eof``), closed for a command it refused (``client_err``), still open; and the
    requests it sent to the servers behind it and the responses they gave, summed."""
    pool = proxy.stats()[proxy.pool_name]
    out = {k: int(pool[k]) for k in ("client_eof", "client_err", "client_connections")}
    servers = [v for v in pool.values() if isinstance(v, dict)]
    for k in ("requests", "responses"):
        out[k] = sum(int(v[k]) for v in servers)
    return out


def _proxy_counts_after(proxy: PrivateTwemproxy, before: dict[str, int],
                        closed: int) -> dict[str, int]:
    """The counters once the proxy has aggregated the end of a run that opened ``closed``
    connections (each closed, cleanly or not, and none left open); fails after 3 s."""
    deadline = time.monotonic() + 3
    while True:
        now = _proxy_counts(proxy)
        ended = now["client_eof"] + now["client_err"] - before["client_eof"] - \
            before["client_err"]
        if ended >= closed and now["client_connections"] == 0:
            return now
        assert time.monotonic() < deadline, f"the proxy's stats did not show the run: {now}"
        time.sleep(0.05)


def _counters(members: list[PrivateMemcached]) -> list[dict[str, int]]:
    out = []
    for m in members:
        with _core.Client(m.address) as c:
            stats = c.stats()
        out.append({k: int(stats[k]) for k in COUNTERS})
    return out


def _flags(members: list[PrivateMemcached]) -> list[str]:
    return [x for m in members for x in ("--server", m.address)]


def test_the_servers_behind_count_every_request_the_spec_implies_and_keep_no_key(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy]) -> None:
    members, proxy = pool
    spec = ProfileSpec(sizes=(100, 10_000), key_counts=(1, 5), samples=40, warmup=5, seed=3)
    before, proxy_before = _counters(members), _proxy_counts(proxy)
    r = profile(spec, server=proxy.address, behind=[m.address for m in members])
    after = _counters(members)
    # The proxy refused nothing profile sent (it closes the connection on a command it does
    # not pass on, counted as client_err), over the 3 connections the run opened (version,
    # the floor's probe, and the measuring connection, which carries the floor too).
    proxy_after = _proxy_counts_after(proxy, proxy_before, closed=3)
    assert proxy_after["client_err"] == proxy_before["client_err"]
    assert r.client["floor_command"] == "get-miss"
    assert r.server["proxy"] and r.server["address"] == proxy.address
    assert r.server["behind"] == [m.address for m in members]
    for c in r.cells:
        assert (c.samples, c.errors, c.mismatches, c.misses) == (40, {}, 0, 0), c
    # From the spec alone: each of the 45 rounds (5 warm-up) reads the floor's key twice (an
    # untimed read, then the timed one), one key per size, the untimed primer's key and 1 + 5
    # multi-get keys, and writes one value per size and per multi-get key; the floor probe
    # reads once more. Only the floor's and the primer's reads (keys never written) miss;
    # every value is deleted.
    rounds = 45
    sets = rounds * (2 + 1 + 5)
    gets = 1 + rounds * (2 + 2 + 1 + 1 + 5)
    delta = {k: sum(a[k] - b[k] for a, b in zip(after, before)) for k in COUNTERS}
    assert delta == {"cmd_get": gets, "get_misses": 3 * rounds + 1, "cmd_set": sets,
                     "delete_hits": sets, "curr_items": 0}
    assert [a["curr_items"] for a in after] == [b["curr_items"] for b in before]
    # The requests the client sent through the proxy: version, the probe, and per round the
    # floor's 2, a set and a get per size, the 6 multi-get values' sets, the primer, 2 multi-gets
    # and the deletes of the 8 values written (the last round's at the end). The proxy sent
    # the servers more, all answered: it split the 5-key multi-gets by server.
    client_requests = 2 + rounds * (2 + 2 * 2 + 6 + 1 + 2 + 8)
    forwarded = proxy_after["requests"] - proxy_before["requests"]
    assert forwarded > client_requests
    assert forwarded == proxy_after["responses"] - proxy_before["responses"]
    # The proxy spread the keys: every server behind it got some of them.
    assert all(a["cmd_set"] > b["cmd_set"] for a, b in zip(after, before))
    # The result's own record of the servers behind says the same.
    recorded = [b["server"]["deltas"] for b in r.behind or []]
    assert [d["cmd_get"] for d in recorded] == [a["cmd_get"] - b["cmd_get"]
                                               for a, b in zip(after, before)]
    assert sum(d["cmd_set"] for d in recorded) == sets
    text = r.render()
    assert "floor (get-miss: a get of a key never written, through the proxy" in text
    assert "behind the proxy" in text and f"through the proxy at {proxy.address}" in text


def test_the_cli_profiles_through_the_proxy_and_writes_its_artifacts(
        cli: InProcess, pool: tuple[list[PrivateMemcached], PrivateTwemproxy],
        tmp_path: Path) -> None:
    members, proxy = pool
    before = _counters(members)
    out = tmp_path / "p"
    r = cli("profile", "--proxy", proxy.address, *_flags(members), "--samples", "30",
            "--warmup", "2", "--sizes", "100", "--keys", "1,3", "--no-plots",
            "--format", "table", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "floor (get-miss" in r.stdout and "behind the proxy" in r.stdout
    d = json.loads((out / "profile.json").read_text())
    assert d["client"]["floor_command"] == "get-miss" and d["server"]["proxy"] is True
    assert [b["address"] for b in d["behind"]] == [m.address for m in members]
    assert (out / "profile.csv").exists()
    after = _counters(members)
    assert [a["curr_items"] for a in after] == [b["curr_items"] for b in before]
    sets = 32 * (1 + 1 + 3)
    assert sum(a["delete_hits"] - b["delete_hits"] for a, b in zip(after, before)) == sets


def test_the_cli_refuses_what_cannot_go_through_the_proxy(
        cli: InProcess, pool: tuple[list[PrivateMemcached], PrivateTwemproxy],
        tmp_path: Path) -> None:
    members, proxy = pool
    flags = ["--proxy", proxy.address, *_flags(members), "--samples", "5", "--out", tmp_path]
    meta = cli("profile", *flags, "--protocol", "meta")
    assert meta.returncode == 2 and "meta commands" in one_error_line(meta)
    dist = cli("profile", *flags, "--distribution", "ketama")
    assert dist.returncode == 2 and "--distribution" in one_error_line(dist)
    lone = cli("profile", "--proxy", proxy.address, "--samples", "5", "--out", tmp_path)
    assert lone.returncode == 2 and "servers behind it" in one_error_line(lone)


def test_an_unreachable_proxy_is_exit_3_naming_it(
        cli: InProcess, pool: tuple[list[PrivateMemcached], PrivateTwemproxy],
        tmp_path: Path) -> None:
    members, _ = pool
    address = unused_address()
    r = cli("profile", "--proxy", address, *_flags(members), "--samples", "5",
            "--out", tmp_path / "x")
    assert r.returncode == 3, r.stderr
    assert address in one_error_line(r)


def test_every_miss_of_the_run_lands_on_the_one_server_the_floor_key_maps_to(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy]) -> None:
    members, proxy = pool
    addresses = [m.address for m in members]
    placement = twemproxy(addresses, "ketama", "md5")  # as the fixture's proxy places keys
    # A run's own prefix whose floor key and the multi-gets' former primer key map to two
    # different servers: a read meant to miss that used a key of its own would show there.
    token = secrets.token_hex(4)
    prefix = next(p for p in (f"cachelab:{token}{i}" for i in range(200))
                  if placement.server_for(f"{p}:floor") != placement.server_for(f"{p}:primer"))
    floor = placement.server_for(f"{prefix}:floor")
    spec = ProfileSpec(sizes=(100,), key_counts=(1, 3), samples=20, warmup=2, prefix=prefix)
    before = _counters(members)
    r = profile(spec, server=proxy.address, behind=addresses)
    after = _counters(members)
    misses = [a["get_misses"] - b["get_misses"] for a, b in zip(after, before)]
    # Every floor sample (an untimed and a timed read), every round's untimed read before its
    # multi-gets (22 rounds, warm-up included) and the probe, all on the floor's server; none
    # anywhere else.
    rounds = 22
    assert misses == [3 * rounds + 1 if i == floor else 0 for i in range(len(members))]
    assert [b["server"]["deltas"]["get_misses"] for b in r.behind or []] == misses


def test_a_server_behind_that_restarted_is_named_first_and_counted_per_life(
        pool: tuple[list[PrivateMemcached], PrivateTwemproxy]) -> None:
    """The stats of a server behind the proxy read before and after from two processes (it
    was killed and started again on its port): the profile's first line names the restart
    and its row never shows a difference of the two processes' counters."""
    members, proxy = pool
    spec = ProfileSpec(sizes=(100,), key_counts=(1,), samples=5, warmup=1, seed=5)
    r = profile(spec, server=proxy.address, behind=[m.address for m in members])
    server = PrivateMemcached(threads=1).start()
    second = None
    try:
        with _core.Client(server.address) as c:
            for i in range(300):
                c.get(f"cachelab-restart-test:{i}")
        before = read_stats(server.address)
        assert server.pid is not None and server.port is not None
        os.kill(server.pid, signal.SIGKILL)
        server.stop()
        second = subprocess.Popen(
            [find_memcached(), "-l", "127.0.0.1", "-p", str(server.port), "-U", "0", "-u",
             "root", "-t", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while (after := stats_or_none(server.address, timeout=0.5)) is None:
            assert time.monotonic() < deadline, "the restarted server did not answer"
            time.sleep(0.02)
    finally:
        server.stop()
        if second is not None:
            second.kill()
            second.wait(5)
    assert r.behind
    r.behind[0]["server"] = server_view(
        {"version": after["version"], "before": before, "after": after}, 1.0)
    lines = r.render().splitlines()
    assert lines[0].startswith(f"SERVER RESTARTED: {r.behind[0]['address']} restarted "), lines
    assert f"(pid {before['pid']} -> {after['pid']})" in lines[0]
    row = next(line for line in lines if line.startswith(r.behind[0]["address"]))
    assert "-" not in row.split(maxsplit=1)[1], row  # no negative count
