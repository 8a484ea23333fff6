"""Pools of real memcached servers for tests: one per loopback address (127.0.0.2, .3, …),
started together and stopped by pid, whatever happens in between."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence

from cachelab.servers import PrivateMemcached

#: The members' loopback addresses of a test pool.
HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


@contextlib.contextmanager
def loopback_pool(hosts: Sequence[str] = HOSTS, *, threads: int = 1,
                  memory_mb: int = 16) -> Iterator[list[PrivateMemcached]]:
    """A private memcached on each of ``hosts``, running for the block."""
    servers = [PrivateMemcached(host=h, memory_mb=memory_mb, threads=threads) for h in hosts]
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()


def unused_address(host: str = "127.0.0.1") -> str:
    """``host:port`` where nothing listens (a port the kernel just handed out and took back):
    a member or proxy that cannot be reached."""
    with socket.socket() as s:
        s.bind((host, 0))
        return f"{host}:{s.getsockname()[1]}"
