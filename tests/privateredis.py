"""A private redis-server for tests: the OS package's, on a free loopback port, no persistence,
in a directory of its own, stopped by PID (never by name)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

import redis

from cachelab.childproc import free_port


class PrivateRedis:
    """``redis-server --port P --save '' --appendonly no`` and ``extra`` arguments; a
    ``password`` (``--requirepass``) when given. :meth:`client` is redis-py's (the third
    party the tests check cachelab against)."""

    def __init__(self, *extra: str, password: str | None = None,
                 tls: tuple[str, str, str] | None = None) -> None:
        self.binary = shutil.which(os.environ.get("CACHELAB_REDIS", "redis-server"))
        if self.binary is None:
            raise RuntimeError("redis-server is not installed")
        self.extra, self.password = list(extra), password
        #: ``(certificate, key, CA)``: a TLS listener on :attr:`tls_port` beside the plain one.
        self.tls = tls
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = self.tls_port = 0
        self.dir = ""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        creds = f":{self.password}@" if self.password else ""
        return f"redis://{creds}127.0.0.1:{self.port}"

    def client(self, **kw: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                           socket_timeout=5, **kw)

    def __enter__(self) -> PrivateRedis:
        for _ in range(5):
            self.port = free_port()
            self.dir = tempfile.mkdtemp(prefix="cachelab-redis-")
            args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", self.dir, "--logfile", ""]
            if self.password:
                args += ["--requirepass", self.password]
            if self.tls:
                self.tls_port = free_port()
                cert, key, ca = self.tls
                args += ["--tls-port", str(self.tls_port), "--tls-cert-file", cert,
                         "--tls-key-file", key, "--tls-ca-cert-file", ca,
                         "--tls-auth-clients", "no"]
            self.proc = subprocess.Popen(args + self.extra, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if self.client().ping():
                        return self
                except redis.exceptions.ConnectionError:
                    time.sleep(0.05)
            self.stop()  # (the port was taken under us: try another)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # (a test may have stopped it)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __exit__(self, *exc: object) -> None:
        self.stop()


def secret() -> str:
    """A password no output could contain by chance."""
    return "pw-" + secrets.token_hex(8)
