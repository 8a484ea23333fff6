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
