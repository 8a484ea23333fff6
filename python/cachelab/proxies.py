"""A private twemproxy (nutcracker) in front of memcached members, always cleaned up.

Tests use it to check where twemproxy places keys (docs/pools.md, "Through twemproxy")::

    with PrivateMemcached(host="127.0.0.2") as a, PrivateMemcached(host="127.0.0.3") as b, \\
            PrivateTwemproxy([a, b], distribution="ketama", hash="md5") as proxy:
        print(proxy.address)          # "127.0.0.1:40123": memcached's text protocol
        print(proxy.stats()[proxy.pool_name])  # stats port JSON: the pool, each member

It takes the same care as :class:`~cachelab.servers.PrivateMemcached`: a configuration file in
a private temporary directory, free loopback ports (the proxy's and its stats port), a start
that waits until both answer (and names the end of nutcracker's log if it does not), SIGTERM
then SIGKILL by pid on ``stop()``, ``prctl(PR_SET_PDEATHSIG)`` so it dies with us, and an
``atexit`` hook for any left running.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from typing import Any, Union

from cachelab.childproc import LOOPBACK, ChildProcess, ExitRegistry, free_port, read_tail
from cachelab.errors import ServerUnreachable, TwemproxyNotInstalled, UsageError
from cachelab.pool import Server, parse_server
from cachelab.servers import PrivateMemcached, proxy_message

__all__ = ["HASHES", "PrivateTwemproxy", "find_nutcracker", "proxy_message", "stop_all"]

HASHES = ("one_at_a_time", "md5", "crc16", "crc32", "crc32a", "fnv1_64", "fnv1a_64", "fnv1_32",
          "fnv1a_32", "hsieh", "murmur", "jenkins")
"""twemproxy 0.5.0's ``hash:`` values (its default is ``fnv1a_64``)."""

DISTRIBUTIONS = ("ketama", "modula", "random")
"""twemproxy's ``distribution:`` values (its default is ``ketama``)."""

Member = Union[str, Server, PrivateMemcached]

_INSTALL_HINT = ("twemproxy (nutcracker) is not installed; install it with: "
                 "apt-get install -y nutcracker")
_PROBE_TIMEOUT = 0.25  # seconds per socket operation while waiting for the proxy
# Debian installs nutcracker in /usr/sbin, which a user's PATH may lack.
_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def find_nutcracker(binary: str | None = None) -> str:
    """The path of the nutcracker binary: ``binary``, else ``CACHELAB_NUTCRACKER``, else
    ``nutcracker`` on ``PATH`` or in the sbin directories. Raises TwemproxyNotInstalled."""
    name = binary or os.environ.get("CACHELAB_NUTCRACKER") or "nutcracker"
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), *_SBIN])
    path = shutil.which(name, path=search)
    if path is None:
        raise TwemproxyNotInstalled(_INSTALL_HINT)
    return path


def _member(m: Member) -> Server:
    if isinstance(m, Server):
        return m
    if isinstance(m, PrivateMemcached):
        if m.host is None or m.port is None:
            raise UsageError(f"{m!r}: a twemproxy member must be a started TCP server")
        return Server(m.host, m.port)
    return parse_server(m)


class PrivateTwemproxy(ChildProcess):
    """nutcracker with one pool of ``members``, on a free loopback port of ``host``.

    ``start()`` returns once the proxy and its stats port answer; ``stop()`` ends it; a context
    manager does both. Stopped proxies may be started again (on new ports). Starting, waiting
    and stopping are :class:`~cachelab.childproc.ChildProcess`'s.
    """

    program, label = "nutcracker", "twemproxy"

    def __init__(
        self,
        members: Sequence[Member],
        *,
        distribution: str = "ketama",
        hash: str = "fnv1a_64",  # noqa: A002 - twemproxy's own name for the setting
        names: Sequence[str] | None = None,
        host: str = LOOPBACK,
        auto_eject: bool = False,
        server_failure_limit: int = 2,
        server_retry_timeout: float = 30.0,
        timeout: float | None = None,
        server_connections: int = 1,
        stats_interval: float = 1.0,
        binary: str | None = None,
        start_timeout: float = 5.0,
        redis: bool = False,
    ) -> None:
        """Describe the proxy; nothing runs until ``start()``.

        members: ``host:port[:weight]`` specs, :class:`~cachelab.pool.Server` or started
        :class:`~cachelab.servers.PrivateMemcached` (weight 1), in the order written to the
        configuration. distribution, hash: twemproxy's settings (:data:`DISTRIBUTIONS`,
        :data:`HASHES`; its defaults are ketama and fnv1a_64). names: an alias per member
        (``host:port:weight name``), which twemproxy then hashes instead of the address.
        auto_eject, server_failure_limit, server_retry_timeout (seconds): twemproxy's
        ``auto_eject_hosts`` and friends. timeout: seconds twemproxy waits for a member (its
        ``timeout``; None: for ever, its default). server_connections: connections to each
        member. stats_interval: seconds between twemproxy's stats aggregations (``-i``).
        start_timeout: seconds ``start()`` may take in all. redis: the pool speaks RESP to
        Redis or Valkey members (twemproxy's ``redis: true``) rather than memcached's text.
        """
        super().__init__(host=host, start_timeout=start_timeout, binary=binary)
        if distribution not in DISTRIBUTIONS:
            raise UsageError(f"twemproxy distribution {distribution!r}: expected one of "
                             f"{', '.join(DISTRIBUTIONS)}")
        if hash not in HASHES:
            raise UsageError(f"twemproxy hash {hash!r}: expected one of {', '.join(HASHES)}")
        self.members = [_member(m) for m in members]
        if not self.members:
            raise UsageError("a twemproxy pool needs at least one member")
        if names is not None and (len(names) != len(self.members)
                                  or any(not n or any(c.isspace() for c in n) for n in names)):
            raise UsageError("names: one alias per member, each a word without spaces")
        for what, value in [("server_failure_limit", server_failure_limit),
                            ("server_connections", server_connections),
                            ("server_retry_timeout", server_retry_timeout),
                            ("stats_interval", stats_interval),
                            ("timeout", 1 if timeout is None else timeout)]:
            if value <= 0:
                raise UsageError(f"{what} must be positive, not {value}")
        self.distribution = distribution
        self.hash = hash
        self.names = None if names is None else list(names)
        self.auto_eject = auto_eject
        self.server_failure_limit = server_failure_limit
        self.server_retry_timeout = server_retry_timeout
        self.timeout = timeout
        self.server_connections = server_connections
        self.stats_interval = stats_interval
        self.redis = redis
        self.pool_name = f"cachelab_{secrets.token_hex(4)}"
        self._port: int | None = None
        self._stats_port: int | None = None

    # -- properties and queries ----------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port`` where clients talk to the pool: memcached's text protocol, or RESP
        with ``redis``."""
        if self._port is None:
            raise RuntimeError("the proxy has not been started")
        return f"{self._host}:{self._port}"

    @property
    def stats_address(self) -> str:
        """``host:port`` of twemproxy's stats port (one JSON document per connection)."""
        if self._stats_port is None:
            raise RuntimeError("the proxy has not been started")
        return f"{self._host}:{self._stats_port}"

    def config(self, port: int = 0) -> str:
        """The YAML configuration, listening on ``port`` (the running one unless given)."""
        lines = [f"{self.pool_name}:",
                 f"  listen: {self._host}:{port or self._port or 0}",
                 f"  hash: {self.hash}",
                 f"  distribution: {self.distribution}",
                 f"  auto_eject_hosts: {'true' if self.auto_eject else 'false'}",
                 f"  server_failure_limit: {self.server_failure_limit}",
                 f"  server_retry_timeout: {_ms(self.server_retry_timeout)}",
                 f"  server_connections: {self.server_connections}",
                 f"  redis: {'true' if self.redis else 'false'}"]
        if self.timeout is not None:
            lines.append(f"  timeout: {_ms(self.timeout)}")
        lines.append("  servers:")
        for i, m in enumerate(self.members):
            alias = f" {self.names[i]}" if self.names is not None else ""
            lines.append(f"   - {m.host}:{m.port}:{m.weight}{alias}")
        return "\n".join(lines) + "\n"

    def stats(self, timeout: float = 2.0) -> dict[str, Any]:
        """twemproxy's stats as its stats port gives them: the process's figures, and under
        :attr:`pool_name` the pool's, with one entry per member (by its twemproxy name)."""
        if self._stats_port is None:
            raise RuntimeError("the proxy has not been started")
        doc = _read_json(self._host, self._stats_port, timeout)
        if doc is None:
            raise ServerUnreachable(f"twemproxy stats at {self.stats_address} did not answer "
                                    f"within {timeout:g} s")
        return doc

    def __repr__(self) -> str:
        where = self.address if self._port else "not started"
        state = f"pid {self.pid}" if self.running else "stopped"
        return (f"<PrivateTwemproxy {where} {state} {self.distribution}/{self.hash} "
                f"members={len(self.members)}>")

    # -- what ChildProcess asks of us ------------------------------------------------------------

    def _command(self) -> list[str]:
        return [find_nutcracker(self.binary)]

    def _launch(self, command: list[str]) -> None:
        """Pick fresh ports, write the configuration and start the process (no waiting)."""
        self._dir = tempfile.mkdtemp(prefix="cachelab-twemproxy-")
        self._port, self._stats_port = free_port(self._host), free_port(self._host)
        while self._stats_port == self._port:
            self._stats_port = free_port(self._host)
        conf = os.path.join(self._dir, "nutcracker.yml")
        with open(conf, "w", encoding="utf-8") as f:
            f.write(self.config())
        self._spawn([*command, "-c", conf, "-o", os.path.join(self._dir, "nutcracker.log"),
                     "-a", self._host, "-s", str(self._stats_port),
                     "-i", str(_ms(self.stats_interval))])

    def _ready(self, deadline: float) -> bool:
        """Ready: the stats port gives JSON naming our pool (so it is our process, not another
        program that took the port), the proxy port takes a connection, and the process is
        still alive after both (nutcracker exits when it cannot bind the proxy port)."""
        assert self._process is not None and self._port is not None
        timeout = max(0.001, min(_PROBE_TIMEOUT, deadline - time.monotonic()))
        doc = _read_json(self._host, self._stats_port or 0, timeout)
        if doc is not None and self.pool_name in doc:
            with contextlib.suppress(OSError), \
                    socket.create_connection((self._host, self._port), timeout=timeout):
                time.sleep(0.01)  # a proxy port it failed to bind: the exit shows by now
                if self._process.poll() is None:
                    return True
        return False

    def _output(self) -> str:
        """nutcracker's log, then its stderr."""
        log = "" if self._dir is None else read_tail(os.path.join(self._dir, "nutcracker.log"))
        return log + super()._output()


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _read_json(host: str, port: int, timeout: float) -> dict[str, Any] | None:
    """The JSON document a twemproxy stats port sends on connect, or None (no answer, or not
    JSON). The read is bounded: at most 64 MiB, each receive within ``timeout``."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            chunks: list[bytes] = []
            size = 0
            while size < 64 << 20:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        doc = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


# -- the registry of running proxies, stopped at exit ------------------------------------------

# Made after cachelab.servers' registry (imported above), so its atexit hook runs first:
# proxies stop before their members.
_registry = ExitRegistry()
PrivateTwemproxy.registry = _registry


def stop_all() -> None:
    """Stop every private proxy this process started and has not stopped yet."""
    _registry.stop_all()
