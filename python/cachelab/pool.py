"""Server pools: members as ``host:port[:weight]``, the ``--servers-file`` format, and which
member holds a key, computed as production clients compute it (docs/pools.md).

The distributions are Rust (``cachelab._core.Distribution``): ``ketama`` (libmemcached's
weighted ketama, as pylibmc's ``ketama_weighted``), ``ketama-plain`` (pylibmc's plain ``ketama``
behaviour: libmemcached's default one-at-a-time hash), ``rendezvous`` (pymemcache's
``HashClient``), ``modula`` (libmemcached's default: one-at-a-time hash modulo the member
count), and ``twemproxy-<distribution>-<hash>``, a twemproxy (nutcracker) pool's placement for
its ``distribution:`` ketama or modula and ``hash:`` md5, fnv1a_64 or one_at_a_time
(:func:`twemproxy`)::

    pool = distribution("ketama", ["10.0.0.1:11211:2", "10.0.0.2:11211"])
    pool.server_for("user:42")       # -> 0 or 1, the index of the member

A servers file holds one member per line; ``#`` starts a comment, blank lines are skipped.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cachelab import _core
from cachelab.errors import InputError, UsageError

__all__ = ["DISTRIBUTIONS", "RESOLVE_TIMEOUT", "TWEMPROXY_HASHES", "Distribution", "Server",
           "check_distinct", "distribution", "parse_members", "parse_server",
           "read_servers_file", "twemproxy"]

DISTRIBUTIONS = ("ketama", "ketama-plain", "rendezvous", "modula",
                 "twemproxy-ketama-md5", "twemproxy-ketama-fnv1a_64",
                 "twemproxy-ketama-one_at_a_time", "twemproxy-modula-md5",
                 "twemproxy-modula-fnv1a_64", "twemproxy-modula-one_at_a_time")
"""The names ``--distribution`` takes, the default first."""

TWEMPROXY_HASHES = ("md5", "fnv1a_64", "one_at_a_time")
"""The twemproxy ``hash:`` settings cachelab computes (twemproxy's default is ``fnv1a_64``)."""

Distribution = _core.Distribution

RESOLVE_TIMEOUT = 2.0
"""Seconds the members' names may take to resolve (all at once) when checking that no two are
the same server; a name not resolved by then is compared by its spelling alone."""


@dataclass(frozen=True)
class Server:
    """One pool member."""

    host: str
    port: int
    weight: int = 1

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 in brackets), as the client connects to it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def spec(self) -> str:
        """``host:port[:weight]``, the form :func:`parse_server` reads back."""
        return self.address if self.weight == 1 else f"{self.address}:{self.weight}"


def parse_server(spec: str) -> Server:
    """``host:port[:weight]`` -> Server; raises UsageError naming the spec."""
    host, port, weight = _core.parse_server(spec)
    return Server(host, port, weight)


def read_servers_file(path: str | Path) -> list[Server]:
    """The members listed in a servers file; raises InputError naming the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read the servers file: {e}") from e
    servers: list[Server] = []
    seen: dict[tuple[str, int], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        spec = line.split("#", 1)[0].strip()
        if not spec:
            continue
        try:
            server = parse_server(spec)
        except UsageError as e:
            raise InputError(f"{path}:{number}: {e}") from e
        first = seen.setdefault((server.host, server.port), number)
        if first != number:
            raise InputError(f"{path}:{number}: {server.address} is already listed on line {first}")
        servers.append(server)
    if not servers:
        raise InputError(f"{path}: no servers listed")
    lines = list(seen.values())
    try:
        check_distinct(servers, [f"line {n}" for n in lines])
    except UsageError as e:
        raise InputError(f"{path}: {e}") from None
    return servers


def parse_members(specs: Sequence[str], flag: str = "--server") -> list[Server]:
    """A pool's members given one by one (``flag`` repeated): each parsed (UsageError naming
    the bad one) and no two the same server (:func:`check_distinct`)."""
    servers = [parse_server(spec) for spec in specs]
    check_distinct(servers, [f"{flag} {spec}" for spec in specs])
    return servers


def check_distinct(servers: Sequence[Server], names: Sequence[str]) -> None:
    """Raises UsageError naming both members (``names[i]`` is how the user gave member i) when
    two are the same server: the same host and port as written, or names that resolve to a
    common address and the same port (``localhost:11211`` and ``127.0.0.1:11211``). A pool of
    one server twice would send it twice the traffic under two names. Names are resolved
    together within :data:`RESOLVE_TIMEOUT` s; one that does not resolve by then (or at all)
    is compared as written."""
    ports = [s.port for s in servers]
    # only members that share a port can be one server: only their names are resolved
    addresses = _resolve_all({(s.host, s.port) for s in servers if ports.count(s.port) > 1})
    owner: dict[tuple[str, int], int] = {}
    for i, server in enumerate(servers):
        for address in {(server.host.lower(), server.port), *addresses.get(
                (server.host, server.port), ())}:
            j = owner.setdefault(address, i)
            if j != i:
                same = (f"{server.address}" if (servers[j].host, servers[j].port) ==
                        (server.host, server.port) else
                        f"{servers[j].address} and {server.address} both reach "
                        f"{_address_text(address)}")
                raise UsageError(f"{names[j]} and {names[i]} are the same server ({same}): "
                                 "list each pool member once")


def _address_text(address: tuple[str, int]) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _resolve_all(hosts: set[tuple[str, int]]) -> dict[tuple[str, int], set[tuple[str, int]]]:
    """Each ``(host, port)``'s TCP addresses ``(ip, port)``, resolved in parallel threads
    within :data:`RESOLVE_TIMEOUT` s (getaddrinfo has no timeout of its own); a host that
    fails or is late is left out."""
    found: dict[tuple[str, int], set[tuple[str, int]]] = {}
    lock = threading.Lock()

    def resolve(host: str, port: int) -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return
        with lock:
            found[(host, port)] = {(str(i[4][0]), int(i[4][1])) for i in infos}

    threads = [threading.Thread(target=resolve, args=hp, daemon=True,
                                name="cachelab-resolve") for hp in sorted(hosts)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + RESOLVE_TIMEOUT
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return dict(found)


def distribution(kind: str, servers: Iterable[Server | str]) -> Distribution:
    """The key -> member map of ``kind`` over ``servers`` (Server or spec strings), in order.

    Raises UsageError for an unknown kind, an empty pool, a member listed twice, or weights
    given to ``rendezvous`` or ``modula`` (which ignore them; the twemproxy kinds honour them).
    """
    specs: Sequence[str] = [s.spec if isinstance(s, Server) else s for s in servers]
    return _core.Distribution(kind, list(specs))


def twemproxy(servers: Iterable[Server | str], distribution: str = "ketama",
              hash: str = "fnv1a_64") -> Distribution:  # noqa: A002 - twemproxy's name
    """Where a twemproxy pool with these settings puts each key (its defaults: ketama and
    fnv1a_64). ``servers`` as in its ``servers:`` list, without aliases: a member written
    ``host:port:weight name`` is hashed by its name, so give it here as ``name:11211:weight``.
    ``hash_tag`` is not modelled. Raises UsageError for settings cachelab does not compute
    (the ``random`` distribution, the other nine hashes)."""
    if distribution not in ("ketama", "modula") or hash not in TWEMPROXY_HASHES:
        raise UsageError(f"twemproxy distribution {distribution!r} with hash {hash!r}: cachelab "
                         f"computes ketama or modula with {', '.join(TWEMPROXY_HASHES)}")
    specs = [s.spec if isinstance(s, Server) else s for s in servers]
    return _core.Distribution(f"twemproxy-{distribution}-{hash}", specs)
