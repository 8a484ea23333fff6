"""A private redis-server for tests: :class:`cachelab.servers.PrivateRedis` (the OS package's,
on a free loopback port, no persistence, in a directory of its own, stopped by PID, never by
name) with no memory limit unless the test gives one, an optional password and TLS listener,
and redis-py's client (the third party the tests check cachelab against)."""

from __future__ import annotations

import secrets
from typing import Any

import redis

from cachelab import servers
from cachelab.childproc import free_port
from cachelab.errors import ServerUnreachable


class PrivateRedis(servers.PrivateRedis):
    """``extra`` arguments after the defaults (a later ``--maxmemory`` wins); a ``password``
    (``--requirepass``); ``tls``, ``(certificate, key, CA)``: a TLS listener on
    :attr:`tls_port` beside the plain one. Raises RuntimeError when redis-server is not
    installed (the ``redis`` fixture skips on it)."""

    def __init__(self, *extra: str, password: str | None = None,
                 tls: tuple[str, str, str] | None = None) -> None:
        super().__init__(start_timeout=10.0, password=password, extra_args=(
            "--maxmemory", "0", "--maxmemory-policy", "noeviction", *extra))
        self._base_args = self.extra_args
        self.tls = tls
        self.tls_port = 0
        try:
            self._command()
        except ServerUnreachable as e:
            raise RuntimeError(str(e)) from None

    def _launch(self, command: list[str]) -> None:
        self.extra_args = self._base_args
        if self.tls:
            self.tls_port = free_port(self._host)
            cert, key, ca = self.tls
            self.extra_args += ("--tls-port", str(self.tls_port), "--tls-cert-file", cert,
                                "--tls-key-file", key, "--tls-ca-cert-file", ca,
                                "--tls-auth-clients", "no")
        super()._launch(command)

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def url(self) -> str:
        creds = f":{self.password}@" if self.password else ""
        return f"redis://{creds}{self.address}"

    def client(self, **kw: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                           socket_timeout=5, **kw)


def secret() -> str:
    """A password no output could contain by chance."""
    return "pw-" + secrets.token_hex(8)


class PrivateRedisCluster(servers.PrivateRedisCluster):
    """:class:`cachelab.servers.PrivateRedisCluster` for tests (3 masters on 127.0.0.31-33, no
    memory limit), with redis-py's client to each node and slot moves. Raises RuntimeError
    when redis-server or redis-cli is not installed (the fixture skips on it)."""

    def __init__(self) -> None:
        import shutil

        if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
            raise RuntimeError("redis-server and redis-cli are not installed: apt-get install "
                               "-y redis-server")
        super().__init__(3, extra_args=("--maxmemory", "0"))

    @property
    def url(self) -> str:
        """The first node, a seed, as ``load --cluster`` takes it."""
        return f"redis://{self.addresses[0]}"

    def client(self, node: int) -> redis.Redis:
        host, port = self.addresses[node].rsplit(":", 1)
        return redis.Redis(host=host, port=int(port), socket_timeout=5)

    def node_id(self, node: int) -> str:
        return self.cli(node, "CLUSTER", "MYID")

    def move(self, slots: range, to: int) -> None:
        """Gives ``slots`` (holding no keys) to node ``to``: ``CLUSTER SETSLOT s NODE id`` on
        the new owner first, then on every other node."""
        target = self.node_id(to)
        for node in [to, *(i for i in range(len(self.nodes)) if i != to)]:
            c = self.client(node)
            for s in slots:
                assert c.execute_command("CLUSTER", "SETSLOT", s, "NODE", target) in (b"OK", "OK", True)

    def owners(self) -> dict[int, str]:
        """Each slot's master (``host:port``), as redis-py reads ``CLUSTER SLOTS`` from the
        first node."""
        owner = {}
        for start, end, master, *_ in self.client(0).execute_command("CLUSTER", "SLOTS"):
            host = master[0].decode() if isinstance(master[0], bytes) else master[0]
            for s in range(start, end + 1):
                owner[s] = f"{host}:{master[1]}"
        return owner
