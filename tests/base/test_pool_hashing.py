"""Key -> server distribution (cachelab.pool) against the independent implementations:
libmemcached through pylibmc (ketama_weighted, modula) on real private memcached servers, and
pymemcache's HashClient (rendezvous). The expected server always comes from the other library,
never from cachelab."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachelab import pool
from cachelab.errors import InputError, UsageError
from cachelab.servers import PrivateMemcached
from clitools import InProcess, one_error_line

KEYS = 5000


def _keys(seed: int) -> list[str]:
    """Random memcached-valid keys of 1-60 characters, some of them non-ASCII."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + ":_-.|/"
    keys = {"".join(rng.choices(alphabet, k=rng.randint(1, 60))) for _ in range(KEYS)}
    keys.update(f"user:{i}:ключ-é" for i in range(100))
    return sorted(keys)


@pytest.fixture(scope="module")
def servers() -> Iterator[list[PrivateMemcached]]:
    started: list[PrivateMemcached] = []
    try:
        for _ in range(5):
            started.append(PrivateMemcached(memory_mb=16, threads=1).start())
        yield started
    finally:
        for s in started:
            s.stop()


def _placement_by_pylibmc(servers: list[PrivateMemcached], specs: list[str],
                          behaviors: dict[str, object], keys: list[str]) -> list[int]:
    """Each key's server as libmemcached chose it: set through pylibmc, then found by asking
    every server (through pymemcache's single-server client) which keys it holds."""
    import pylibmc  # the test extra's reference (libmemcached inside): never skipped
    from pymemcache.client.base import Client  # optional test dependency

    singles = [Client((s.host, s.port), allow_unicode_keys=True) for s in servers]
    for c in singles:
        c.flush_all()
    mc = pylibmc.Client(specs, behaviors=behaviors)
    failed = mc.set_multi({k: b"1" for k in keys})
    assert not failed
    owner: dict[str, int] = {}
    for index, c in enumerate(singles):
        for start in range(0, len(keys), 200):
            for key in c.get_many(keys[start:start + 200]):
                k = key.decode() if isinstance(key, bytes) else key
                assert k not in owner, f"{k!r} on two servers"
                owner[k] = index
    for c in singles:
        c.close()
    assert len(owner) == len(keys)
    return [owner[k] for k in keys]


CASES = [
    ("ketama", {"ketama_weighted": True}, [1, 1, 1]),
    ("ketama", {"ketama_weighted": True}, [1, 3, 2, 5]),
    ("ketama", {"ketama_weighted": True}, [7, 1, 1, 2, 4]),
    ("ketama-plain", {"ketama": True}, [1, 1, 1]),
    ("ketama-plain", {"ketama": True}, [1, 1, 1, 1, 1]),
    ("ketama-plain", {"ketama": True}, [1, 2, 1, 4]),
    ("modula", {"distribution": "modula"}, [1, 1, 1]),
    ("modula", {"distribution": "modula"}, [1, 1, 1, 1, 1]),
]


@pytest.mark.parametrize(("kind", "behaviors", "weights"), CASES,
                         ids=[f"{k}-{len(w)}x{''.join(map(str, w))}" for k, _, w in CASES])
def test_libmemcached_places_every_key_where_we_do(
        servers: list[PrivateMemcached], kind: str, behaviors: dict[str, object],
        weights: list[int]) -> None:
    members = servers[:len(weights)]
    specs = [f"{s.address}:{w}" if w != 1 else s.address for s, w in zip(members, weights)]
    keys = _keys(seed=len(weights) * 100 + sum(weights))
    want = _placement_by_pylibmc(members, specs, behaviors, keys)
    got = pool.distribution(kind, specs).servers_for(keys)
    wrong = [(k, w, g) for k, w, g in zip(keys, want, got) if w != g]
    assert not wrong, f"{len(wrong)} of {len(keys)} keys differ, e.g. {wrong[:5]}"
    assert len(set(want)) == len(members)


@pytest.mark.parametrize("addresses", [
    ["127.0.0.1:11211", "127.0.0.1:11212", "127.0.0.1:11213"],
    ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211", "10.0.0.4:11211", "10.0.0.5:11211"],
    ["cache-a.example:11211", "cache-b.example:22122", "[::1]:11211", "[::1]:11212"],
])
def test_pymemcache_hashclient_picks_the_server_we_do(addresses: list[str]) -> None:
    from pymemcache.client.hash import HashClient  # optional test dependency

    # HashClient connects lazily: choosing a server needs no network.
    hc = HashClient(addresses, allow_unicode_keys=True)
    keys = _keys(seed=len(addresses))
    names = [f"{h}:{p}" for h, p, _ in pool.distribution("rendezvous", addresses).servers]
    got = pool.distribution("rendezvous", addresses).servers_for(keys)
    wrong = []
    for key, index in zip(keys, got):
        host, port = hc._get_client(key).server
        if f"{host}:{port}" != names[index]:
            wrong.append((key, f"{host}:{port}", names[index]))
    assert not wrong, f"{len(wrong)} of {len(keys)} keys differ, e.g. {wrong[:5]}"


def test_server_specs_parse_and_refuse_clearly() -> None:
    assert pool.parse_server("10.0.0.1:11211") == pool.Server("10.0.0.1", 11211, 1)
    assert pool.parse_server("[::1]:11212:3") == pool.Server("::1", 11212, 3)
    assert pool.parse_server("[::1]:11212:3").spec == "[::1]:11212:3"
    for bad in ["10.0.0.1", "h:99999", "h:1:0", "h:1:heavy"]:
        with pytest.raises(UsageError, match=bad):
            pool.parse_server(bad)
    with pytest.raises(UsageError, match="unknown distribution"):
        pool.distribution("jump", ["a:1"])
    with pytest.raises(UsageError, match="only ketama"):
        pool.distribution("modula", ["a:1:2", "b:1"])
    with pytest.raises(UsageError, match="twice"):
        pool.distribution("ketama", ["a:1", "a:1:3"])


def test_servers_file_reads_members_and_names_the_bad_line(tmp_path: Path) -> None:
    good = tmp_path / "pool.txt"
    good.write_text("# the pool\n10.0.0.1:11211\n\n10.0.0.2:11211:2  # bigger box\n")
    assert [s.spec for s in pool.read_servers_file(good)] == ["10.0.0.1:11211",
                                                            "10.0.0.2:11211:2"]
    bad = tmp_path / "bad.txt"
    bad.write_text("10.0.0.1:11211\n10.0.0.2\n")
    with pytest.raises(InputError, match=r"bad\.txt:2: .*10\.0\.0\.2"):
        pool.read_servers_file(bad)
    twice = tmp_path / "twice.txt"
    twice.write_text("a:1\n# again\na:1:2\n")
    with pytest.raises(InputError, match=r"twice\.txt:3: a:1 is already listed on line 1"):
        pool.read_servers_file(twice)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(InputError, match="no servers"):
        pool.read_servers_file(empty)
    with pytest.raises(InputError, match="missing.txt"):
        pool.read_servers_file(tmp_path / "missing.txt")


def test_a_member_given_twice_is_refused_by_spelling_and_by_resolved_address(
        tmp_path: Path) -> None:
    """``localhost:P`` and ``127.0.0.1:P`` are one server: a pool of both would send it twice
    the traffic under two names. Refused on the command line and in a servers file."""
    with pytest.raises(UsageError, match=r"--server localhost:11311 and --server "
                       r"127\.0\.0\.1:11311 are the same server .*both reach 127\.0\.0\.1:11311"):
        pool.parse_members(["localhost:11311", "127.0.0.1:11311"])
    with pytest.raises(UsageError, match=r"--server 127\.0\.0\.1:7:2 and --server 127\.0\.0\.1:7 "
                       "are the same server"):
        pool.parse_members(["127.0.0.1:7:2", "127.0.0.1:7"])
    assert [s.address for s in pool.parse_members(["127.0.0.1:7", "127.0.0.2:7",
                                                   "localhost:8"])] == [
        "127.0.0.1:7", "127.0.0.2:7", "localhost:8"]
    f = tmp_path / "pool.txt"
    f.write_text("127.0.0.1:11311\n# the same, by name\nlocalhost:11311:2\n")
    with pytest.raises(InputError, match=r"pool\.txt: line 1 and line 3 are the same server"):
        pool.read_servers_file(f)


def test_the_cli_refuses_a_pool_of_one_server_twice(cli: InProcess, tmp_path: Path) -> None:
    for verb in ("load", "profile", "scale"):
        r = cli(verb, "--server", "localhost:11311", "--server", "127.0.0.1:11311",
                "--quick", "--out", tmp_path / verb)
        assert r.returncode == 2, (verb, r.stdout)
        line = one_error_line(r)
        assert "--server localhost:11311 and --server 127.0.0.1:11311 are the same server" \
            in line, line
        assert not (tmp_path / verb).exists()
