"""A private redis-server for tests: :class:`cachelab.servers.PrivateRedis` (the OS package's,
on a free loopback port, no persistence, in a directory of its own, stopped by PID, never by
name) with no memory limit unless the test gives one, an optional password and TLS listener,
and redis-py's client (the third party the tests check cachelab against)."""

from __future__ import annotations

import secrets
import time
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

    def slots_of(self, master: int, n: int = 1000) -> range:
        """``n`` consecutive slots, the first of those master ``master`` serves, all its own."""
        owner = self.owners()
        address = self.addresses[master]
        start = min(s for s, a in owner.items() if a == address)
        slots = range(start, start + n)
        assert all(owner[s] == address for s in slots)
        return slots

    def node_id(self, node: int) -> str:
        return self.cli(node, "CLUSTER", "MYID")

    def move(self, slots: range, to: int) -> None:
        """Gives ``slots`` (holding no keys) to node ``to`` as ``redis-cli --cluster reshard``
        does: ``IMPORTING`` on it, ``MIGRATING`` on their owner, then ``NODE`` on it (which
        bumps its config epoch, so its claim wins), on their owner, on the others."""
        owner = self.owners()
        index = {a: i for i, a in enumerate(self.addresses)}
        target = self.node_id(to)
        ids = {i: self.node_id(i) for i in range(len(self.nodes))}
        sources = {s: index[owner[s]] for s in slots}

        def each(node: int, command: list[object]) -> None:
            p = self.client(node).pipeline(transaction=False)
            for s in slots:
                p.execute_command("CLUSTER", "SETSLOT", s, *command)
            p.execute()

        for src in set(sources.values()) - {to}:
            p = self.client(to).pipeline(transaction=False)
            q = self.client(src).pipeline(transaction=False)
            for s in slots:
                if sources[s] == src:
                    p.execute_command("CLUSTER", "SETSLOT", s, "IMPORTING", ids[src])
                    q.execute_command("CLUSTER", "SETSLOT", s, "MIGRATING", target)
            p.execute()
            q.execute()
        each(to, ["NODE", target])
        for node in range(len(self.nodes)):
            if node != to:
                each(node, ["NODE", target])
        deadline = time.monotonic() + 10
        while any(o != self.addresses[to] for s, o in self.owners().items() if s in slots):
            assert time.monotonic() < deadline, "the slots did not move"
            time.sleep(0.05)

    def migrating(self, slots: range, source: int, target: int) -> None:
        """Marks ``slots`` as migrating from node ``source`` to node ``target`` (the source
        then answers ``-ASK`` for their keys it does not hold)."""
        src, dst = self.node_id(source), self.node_id(target)
        p = self.client(target).pipeline(transaction=False)
        q = self.client(source).pipeline(transaction=False)
        for s in slots:
            p.execute_command("CLUSTER", "SETSLOT", s, "IMPORTING", src)
            q.execute_command("CLUSTER", "SETSLOT", s, "MIGRATING", dst)
        p.execute()
        q.execute()

    def stable(self, slots: range, *nodes: int) -> None:
        """Ends any migration of ``slots`` on ``nodes``."""
        for node in nodes:
            p = self.client(node).pipeline(transaction=False)
            for s in slots:
                p.execute_command("CLUSTER", "SETSLOT", s, "STABLE")
            p.execute()

    def owners(self) -> dict[int, str]:
        """Each slot's master (``host:port``), as redis-py reads ``CLUSTER SLOTS`` from the
        first node."""
        owner = {}
        for start, end, master, *_ in self.client(0).execute_command("CLUSTER", "SLOTS"):
            host = master[0].decode() if isinstance(master[0], bytes) else master[0]
            for s in range(start, end + 1):
                owner[s] = f"{host}:{master[1]}"
        return owner
