"""twemproxy (nutcracker 0.5.0, the Debian package) as a real part: where it places keys,
checked key by key against cachelab.pool, and which memcached commands it passes on.

Every key is set through a real nutcracker in front of real memcached members (127.0.0.2,
.3, ... on free ports, and on port 11211 when those are free); each member is then asked
directly which keys it holds. The expected member always comes from twemproxy (or, for the
``host-i`` naming on port 11211, from libmemcached through pylibmc), never from cachelab."""

from __future__ import annotations

import contextlib
import random
import socket
import string
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cachelab import pool
from cachelab.errors import ServerUnreachable, TwemproxyNotInstalled, UsageError
from cachelab.proxies import PrivateTwemproxy, find_nutcracker
from cachelab.servers import PrivateMemcached
from clitools import InProcess, one_error_line

KEYS = 3000
HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]

try:
    find_nutcracker()
except TwemproxyNotInstalled as e:  # `make test` installs it (scripts/install-system-deps.sh)
    pytest.skip(str(e), allow_module_level=True)


def _keys(seed: int) -> list[str]:
    """Random memcached-valid keys of 1-60 characters, some of them non-ASCII."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + ":_-.|/"
    keys = {"".join(rng.choices(alphabet, k=rng.randint(1, 60))) for _ in range(KEYS)}
    keys.update(f"user:{i}:ключ-é" for i in range(100))
    return sorted(keys)


def _client(address: str):  # noqa: ANN202 - pymemcache is an optional test dependency
    from pymemcache.client.base import Client

    host, port = address.rsplit(":", 1)
    return Client((host, int(port)), allow_unicode_keys=True, timeout=5, connect_timeout=5)


def _owners(members: Sequence[PrivateMemcached], keys: list[str]) -> list[int]:
    """Which member holds each key (each asked directly); every key on exactly one."""
    owner: dict[str, int] = {}
    for index, m in enumerate(members):
        c = _client(m.address)
        for start in range(0, len(keys), 200):
            for key in c.get_many(keys[start:start + 200]):
                k = key.decode() if isinstance(key, bytes) else key
                assert k not in owner, f"{k!r} on two members"
                owner[k] = index
        c.close()
    assert len(owner) == len(keys), f"{len(keys) - len(owner)} keys on no member"
    return [owner[k] for k in keys]


def _flush(members: Sequence[PrivateMemcached]) -> None:
    for m in members:
        c = _client(m.address)
        c.flush_all()
        c.close()


def _placement_by_twemproxy(members: Sequence[PrivateMemcached], weights: Sequence[int],
                            keys: list[str], **settings: object) -> list[int]:
    _flush(members)
    specs = [f"{m.address}:{w}" for m, w in zip(members, weights)]
    with PrivateTwemproxy(specs, timeout=5, **settings) as proxy:  # type: ignore[arg-type]
        c = _client(proxy.address)
        for start in range(0, len(keys), 500):
            assert not c.set_many({k: b"1" for k in keys[start:start + 500]}, noreply=False)
        c.close()
    return _owners(members, keys)


def _differ(keys: list[str], want: list[int], got: list[int]) -> str:
    wrong = [(k, w, g) for k, w, g in zip(keys, want, got) if w != g]
    return f"{len(wrong)} of {len(keys)} keys differ, e.g. {wrong[:5]}" if wrong else ""


def _started(hosts: Sequence[str], port: int | None = None) -> Iterator[list[PrivateMemcached]]:
    started: list[PrivateMemcached] = []
    try:
        for host in hosts:
            started.append(PrivateMemcached(host=host, port=port, memory_mb=16,
                                            threads=1).start())
        yield started
    finally:
        for m in started:
            m.stop()


@pytest.fixture(scope="module")
def members() -> Iterator[list[PrivateMemcached]]:
    """Four members on 127.0.0.2-5, free ports."""
    yield from _started(HOSTS)


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As memcached binds: connections of an earlier test in TIME_WAIT do not block it.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def members_11211() -> Iterator[list[PrivateMemcached]]:
    """Four members on 127.0.0.2-5, each on memcached's default port 11211."""
    taken = [h for h in HOSTS if not _port_free(h, 11211)]
    if taken:
        pytest.skip(f"port 11211 is taken on {', '.join(taken)}")
    yield from _started(HOSTS, port=11211)


# (twemproxy distribution, hash, weights, cachelab distributions that must agree)
CASES = [
    ("ketama", "md5", [1, 1, 1], ["ketama", "twemproxy-ketama-md5"]),
    ("ketama", "md5", [1, 3, 2, 5], ["ketama", "twemproxy-ketama-md5"]),
    ("ketama", "fnv1a_64", [1, 1, 1, 1], ["twemproxy-ketama-fnv1a_64"]),
    ("ketama", "fnv1a_64", [2, 1, 4], ["twemproxy-ketama-fnv1a_64"]),
    ("ketama", "one_at_a_time", [1, 1, 1], ["twemproxy-ketama-one_at_a_time"]),
    # With a weight above 1, libmemcached's plain ketama takes the same weighted continuum.
    ("ketama", "one_at_a_time", [1, 2, 1], ["twemproxy-ketama-one_at_a_time", "ketama-plain"]),
    ("modula", "one_at_a_time", [1, 1, 1, 1], ["twemproxy-modula-one_at_a_time"]),
    ("modula", "md5", [3, 1, 2], ["twemproxy-modula-md5"]),
    ("modula", "fnv1a_64", [1, 1, 1], ["twemproxy-modula-fnv1a_64"]),
]


def _id(case: tuple[str, str, list[int], list[str]]) -> str:
    return f"{case[0]}-{case[1]}-{''.join(map(str, case[2]))}"


@pytest.mark.parametrize(("dist", "hash_", "weights", "ours"), CASES, ids=map(_id, CASES))
def test_twemproxy_places_every_key_where_we_do(
        members: list[PrivateMemcached], dist: str, hash_: str, weights: list[int],
        ours: list[str]) -> None:
    used = members[:len(weights)]
    keys = _keys(seed=len(weights) * 100 + sum(weights))
    want = _placement_by_twemproxy(used, weights, keys, distribution=dist, hash=hash_)
    specs = [f"{m.address}:{w}" for m, w in zip(used, weights)]
    for name in ours:
        assert not _differ(keys, want, pool.distribution(name, specs).servers_for(keys)), name
    assert not _differ(keys, want, pool.twemproxy(specs, dist, hash_).servers_for(keys))
    assert len(set(want)) == len(used)


def test_every_distribution_name_builds_and_twemproxy_settings_map_to_them() -> None:
    for name in pool.DISTRIBUTIONS:
        assert pool.distribution(name, ["a:1", "b:2"]).kind == name
    assert pool.twemproxy(["a:1:2", "b:1"]).kind == "twemproxy-ketama-fnv1a_64"
    for dist, hash_ in [("random", "md5"), ("ketama", "crc32")]:
        with pytest.raises(UsageError, match="cachelab computes ketama or modula"):
            pool.twemproxy(["a:1"], dist, hash_)


def test_twemproxy_modula_takes_members_sorted_by_name(members: list[PrivateMemcached]) -> None:
    """twemproxy sorts its members by name (shorter first) when it checks them for
    duplicates, and modula keeps that order: the order libmemcached's modula needs."""
    used = list(reversed(members))
    keys = _keys(seed=7)
    want = _placement_by_twemproxy(used, [1] * len(used), keys, distribution="modula",
                                   hash="one_at_a_time")
    specs = [m.address for m in used]
    assert not _differ(keys, want, pool.distribution("twemproxy-modula-one_at_a_time",
                                                     specs).servers_for(keys))
    order = sorted(range(len(specs)), key=lambda i: (len(specs[i]), specs[i]))
    libmemcached = pool.distribution("modula", [specs[i] for i in order]).servers_for(keys)
    assert not _differ(keys, want, [order[i] for i in libmemcached])


def test_twemproxy_hashes_an_alias_instead_of_the_address(
        members: list[PrivateMemcached]) -> None:
    """``host:port:weight name``: ketama points are named ``name-i``, which is cachelab's
    naming for a member ``name:11211``."""
    used, weights, names = members[:3], [2, 1, 1], ["cache-a", "cache-b", "cache-c"]
    keys = _keys(seed=11)
    want = _placement_by_twemproxy(used, weights, keys, distribution="ketama", hash="md5",
                                   names=names)
    aliases = [f"{n}:11211:{w}" for n, w in zip(names, weights)]
    assert not _differ(keys, want, pool.distribution("ketama", aliases).servers_for(keys))


@pytest.mark.parametrize(("dist", "hash_", "weights", "ours"), [
    ("ketama", "md5", [1, 1, 1], "ketama"),
    ("ketama", "fnv1a_64", [2, 1, 1, 3], "twemproxy-ketama-fnv1a_64"),
    ("modula", "one_at_a_time", [1, 1, 1], "twemproxy-modula-one_at_a_time"),
], ids=["ketama-md5", "ketama-fnv1a_64-weighted", "modula"])
def test_twemproxy_on_port_11211_names_points_by_host(
        members_11211: list[PrivateMemcached], dist: str, hash_: str, weights: list[int],
        ours: str) -> None:
    used = members_11211[:len(weights)]
    keys = _keys(seed=sum(weights) + 11211)
    want = _placement_by_twemproxy(used, weights, keys, distribution=dist, hash=hash_)
    specs = [f"{m.address}:{w}" for m, w in zip(used, weights)]
    assert not _differ(keys, want, pool.distribution(ours, specs).servers_for(keys))


@pytest.mark.parametrize(("kind", "behaviors", "weights"), [
    ("ketama", {"ketama_weighted": True}, [1, 1, 1]),
    ("ketama", {"ketama_weighted": True}, [3, 1, 2, 1]),
    ("ketama-plain", {"ketama": True}, [1, 1, 1, 1]),
], ids=["ketama", "ketama-weighted", "ketama-plain"])
def test_libmemcached_on_port_11211_names_points_host_i(
        members_11211: list[PrivateMemcached], kind: str, behaviors: dict[str, object],
        weights: list[int]) -> None:
    """The ``host-i`` branch of cachelab's ketama, against pylibmc (libmemcached 1.0.16)."""
    import pylibmc  # the test extra's reference

    used = members_11211[:len(weights)]
    keys = _keys(seed=sum(weights) + 1)
    _flush(used)
    specs = [f"{m.address}:{w}" if w != 1 else m.address for m, w in zip(used, weights)]
    mc = pylibmc.Client(specs, behaviors=behaviors)
    assert not mc.set_multi({k: b"1" for k in keys})
    mc.disconnect_all()
    want = _owners(used, keys)
    assert not _differ(keys, want, pool.distribution(kind, specs).servers_for(keys))


# -- what twemproxy 0.5.0 passes on (docs/pools.md, "Through twemproxy") ------------------------

def _exchange(address: str, request: bytes, timeout: float = 1.0) -> bytes:
    """Send ``request`` and read until the proxy closes the connection or goes quiet."""
    host, port = address.rsplit(":", 1)
    out = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request)
        with contextlib.suppress(TimeoutError, socket.timeout):
            for _ in range(1000):  # bounded; each receive within the timeout
                chunk = s.recv(65536)
                if not chunk:
                    return out + b"<closed>"
                out += chunk
                s.settimeout(0.2)
    return out


@pytest.fixture(scope="module")
def proxy(members: list[PrivateMemcached]) -> Iterator[PrivateTwemproxy]:
    with PrivateTwemproxy(members[:3], hash="md5", timeout=2, stats_interval=0.1) as p:
        yield p


def test_twemproxy_passes_the_classic_text_commands(proxy: PrivateTwemproxy) -> None:
    a = proxy.address
    assert _exchange(a, b"version\r\n").startswith(b"VERSION 1.")  # a member's version
    keys = [f"k{i}" for i in range(20)]
    sets = b"".join(f"set {k} 0 0 1\r\n{i % 10}\r\n".encode() for i, k in enumerate(keys))
    assert _exchange(a, sets) == b"STORED\r\n" * 20
    # A multi-key get is split over the members and answered as one, in the order asked.
    got = _exchange(a, ("get " + " ".join(keys) + "\r\n").encode())
    assert got == b"".join(f"VALUE {k} 0 1\r\n{i % 10}\r\n".encode()
                           for i, k in enumerate(keys)) + b"END\r\n"
    assert _exchange(a, b"set q 0 0 1 noreply\r\nx\r\nget q\r\n") == \
        b"VALUE q 0 1\r\nx\r\nEND\r\n"
    assert _exchange(a, b"gets q\r\n").startswith(b"VALUE q 0 1 ")
    # A key of this run alone (the members are shared with the module's other tests).
    n = f"n-{random.getrandbits(64):x}".encode()
    assert _exchange(a, b"touch q 100\r\nincr %s 1\r\ndelete q\r\n" % n) == \
        b"TOUCHED\r\nNOT_FOUND\r\nDELETED\r\n"
    assert _exchange(a, b"add %s 0 0 1\r\n5\r\nreplace %s 0 0 1\r\n7\r\nappend %s 0 0 1\r\n1"
                        b"\r\nprepend %s 0 0 1\r\n1\r\ndecr %s 2\r\ncas %s 0 0 1 1\r\nx\r\n"
                        % (n, n, n, n, n, n)) == \
        b"STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\n169\r\nEXISTS\r\n"


# The binary protocol's get of "k0": magic 0x80, opcode 0, key length 2, body length 2.
BINARY_GET = bytes([0x80, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2]) + bytes(12) + b"k0"


@pytest.mark.parametrize("command", [
    b"stats\r\n", b"stats settings\r\n", b"mg k0 v\r\n", b"ms k0 1\r\nx\r\n", b"md k0\r\n",
    b"mn\r\n", b"gat 10 k0\r\n", b"gats 10 k0\r\n", b"flush_all\r\n", b"verbosity 1\r\n",
    b"get k0\r\nstats\r\n", BINARY_GET], ids=lambda c: c.split(b"\r")[0].decode("latin-1"))
def test_twemproxy_closes_the_connection_on_what_it_does_not_know(
        proxy: PrivateTwemproxy, command: bytes) -> None:
    # Pipelined before the unknown command, even `get k0` goes unanswered.
    assert _exchange(proxy.address, command) == b"<closed>"


def test_private_twemproxy_starts_reports_and_cleans_up(members: list[PrivateMemcached]) -> None:
    with PrivateTwemproxy(members[:2], distribution="modula", hash="fnv1a_64",
                          stats_interval=0.05) as p:
        assert p.running and "distribution: modula" in p.config()
        c = _client(p.address)
        assert c.set("k", b"v", noreply=False) and c.get("k") == b"v"
        c.close()
        stats = p.stats()
        assert stats["service"] == "nutcracker" and stats["version"] == "0.5.0"
        names = {m.address for m in members[:2]}
        assert names <= set(stats[p.pool_name])
        pid, conf_dir = p.pid, p.argv[2].rsplit("/", 1)[0]
    assert not p.running and p.pid is None
    with pytest.raises(ProcessLookupError):
        import os
        os.kill(pid, 0)
    import os.path
    assert not os.path.exists(conf_dir)


def test_private_twemproxy_refuses_clearly() -> None:
    with pytest.raises(TwemproxyNotInstalled, match="apt-get install -y nutcracker"):
        PrivateTwemproxy(["127.0.0.2:1"], binary="no-such-nutcracker").start()
    with pytest.raises(UsageError, match="hash 'crc64'"):
        PrivateTwemproxy(["127.0.0.2:1"], hash="crc64")
    with pytest.raises(UsageError, match="loopback"):
        PrivateTwemproxy(["127.0.0.2:1"], host="10.0.0.1")
    # Two members with one alias: nutcracker refuses its configuration, and says why.
    with pytest.raises(ServerUnreachable, match="same name"):
        PrivateTwemproxy(["127.0.0.2:1", "127.0.0.3:1"], names=["a", "a"]).start()


def test_a_verb_pointed_at_twemproxy_says_it_is_a_proxy(cli: InProcess, proxy: PrivateTwemproxy,
                                                        tmp_path: Path) -> None:
    p = cli("load", "--duration", "1", "--server", proxy.address, "--out", tmp_path / "o")
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert line.startswith(f"cachelab: error: {proxy.address} looks like a proxy such as "
                           "twemproxy, not a memcached: it answers get and version (1."), line
    assert "closes the connection on stats" in line and "give --server one of them" in line
