"""A private PostgreSQL for tests: a throw-away cluster in a temporary directory, on a free
loopback port, started from the OS package's binaries and stopped by PID.

Used by ``tests/tiers/test_tierbench.py`` (``cachelab tiers --dsn``) when no
``CACHELAB_TEST_PG_DSN`` is given. As root (initdb refuses to run as root) the cluster runs
as the ``postgres`` user the Debian package creates (``subprocess``'s ``user=``, so the PID
stopped is the server's own).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


def find_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``postgres`` (newest Debian version first)."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(d, "initdb"), os.X_OK):
            return Path(d)
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    """``with PrivatePostgres() as pg: pg.dsn`` — raises RuntimeError when it cannot start."""

    def __init__(self) -> None:
        bindir = find_binaries()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (no initdb)")
        self.bindir = bindir
        self.port = _free_port()
        self.dsn = f"postgresql://cachelab@127.0.0.1:{self.port}/postgres?connect_timeout=5"
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._as: dict[str, object] = {}

    def __enter__(self) -> PrivatePostgres:
        self._dir = Path(tempfile.mkdtemp(prefix="cachelab-pg-"))
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and there is no postgres user") from None
            os.chown(self._dir, user.pw_uid, user.pw_gid)
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        data = self._dir / "data"
        init = subprocess.run(
            [str(self.bindir / "initdb"), "-D", str(data), "-U", "cachelab",
             "-A", "trust", "--no-sync", "-E", "UTF8"],
            capture_output=True, timeout=120, cwd=self._dir, **self._as,  # type: ignore[call-overload]
        )
        if init.returncode != 0:
            self._cleanup()
            raise RuntimeError(f"initdb failed: {init.stderr.decode(errors='replace')[-400:]}")
        # The server's log goes to a file, not a pipe nobody reads (a full pipe would stall it).
        self._log = self._dir / "postgres.log"
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                 "-k", str(self._dir), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
                stdout=subprocess.DEVNULL, stderr=log, cwd=self._dir,
                **self._as,  # type: ignore[call-overload]
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._log.read_bytes().decode(errors="replace")
                self._cleanup()
                raise RuntimeError(f"postgres exited at start: {err[-400:]}")
            if self._ready():
                break
            time.sleep(0.1)
        else:
            self.__exit__()
            raise RuntimeError(f"postgres did not listen on port {self.port} in {START_TIMEOUT} s")
        return self

    def _ready(self) -> bool:
        """The server accepts a session (not only a TCP connection: it may still be starting)."""
        try:
            import psycopg
        except ImportError:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                return False
        try:
            with psycopg.connect(self.dsn) as db:
                db.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def __exit__(self, *exc: object) -> None:
        p = self._proc
        if p is not None and p.poll() is None:
            # SIGINT is PostgreSQL's "fast" shutdown: it disconnects clients and stops.
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=STOP_TIMEOUT)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
