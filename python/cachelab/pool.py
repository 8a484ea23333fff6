"""Server pools: members as ``host:port[:weight]``, the ``--servers-file`` format, and which
member holds a key, computed as production clients compute it (docs/pools.md).

The distributions are Rust (``cachelab._core.Distribution``): ``ketama`` (libmemcached's
weighted ketama, as pylibmc's ``ketama_weighted``), ``ketama-plain`` (pylibmc's plain ``ketama``
behaviour: libmemcached's default one-at-a-time hash), ``rendezvous`` (pymemcache's
``HashClient``) and ``modula`` (libmemcached's default: one-at-a-time hash modulo the member
count)::

    pool = distribution("ketama", ["10.0.0.1:11211:2", "10.0.0.2:11211"])
    pool.server_for("user:42")       # -> 0 or 1, the index of the member

A servers file holds one member per line; ``#`` starts a comment, blank lines are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cachelab import _core
from cachelab.errors import InputError, UsageError

__all__ = ["DISTRIBUTIONS", "Distribution", "Server", "distribution", "parse_server",
           "read_servers_file"]

DISTRIBUTIONS = ("ketama", "ketama-plain", "rendezvous", "modula")
"""The names ``--distribution`` takes, the default first."""

Distribution = _core.Distribution


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
    return servers


def distribution(kind: str, servers: Iterable[Server | str]) -> Distribution:
    """The key -> member map of ``kind`` over ``servers`` (Server or spec strings), in order.

    Raises UsageError for an unknown kind, an empty pool, a member listed twice, or weights
    given to ``rendezvous`` or ``modula`` (which ignore them).
    """
    specs: Sequence[str] = [s.spec if isinstance(s, Server) else s for s in servers]
    return _core.Distribution(kind, list(specs))
