"""What the ``cachelab.tiered`` tests share: a real store (SQLite) and its loader, a tier that
counts round trips, a cache over both, and a patient wait."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cachelab import _core
from cachelab.errors import ServerError
from cachelab.servers import find_memcached
from cachelab.tiered import MemcachedTier, TieredCache


class Store:
    """A SQLite table of JSON-ish rows, and a loader over it that counts its calls."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE item (id TEXT PRIMARY KEY, body TEXT, n INTEGER)")
        self.lock = threading.Lock()
        self.calls: list[list[Any]] = []
        self.before_return: Callable[[], None] | None = None

    def write(self, ident: Any, body: str, n: int = 0) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO item VALUES (?, ?, ?)", (str(ident), body, n))
            self.db.commit()

    def load(self, idents: list[Any]) -> dict[Any, Any]:
        with self.lock:
            self.calls.append(list(idents))
            marks = ",".join("?" * len(idents))
            rows = self.db.execute(
                f"SELECT id, body, n FROM item WHERE id IN ({marks})", [str(i) for i in idents]
            ).fetchall()
        by_id = {r[0]: {"id": r[0], "body": r[1], "n": r[2]} for r in rows}
        out = {i: by_id[str(i)] for i in idents if str(i) in by_id}
        if self.before_return is not None:
            self.before_return()
        return out

    @property
    def loaded_keys(self) -> int:
        return sum(len(c) for c in self.calls)


class CountingTier(MemcachedTier):
    """A MemcachedTier that counts multi-gets (round trips) and their keys."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.multigets: list[int] = []

    def get_multi(self, keys: list[str]) -> dict[str, bytes]:
        self.multigets.append(len(keys))
        return super().get_multi(keys)


def held_loader(store: Any, timeout: float = 5) -> tuple[threading.Event, threading.Event]:
    """Makes the loader of ``store`` (anything with a ``before_return`` hook its loader calls)
    stop before returning until ``release`` is set (once, for at most ``timeout`` s)."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        store.before_return = None
        entered.set()
        assert release.wait(timeout)

    store.before_return = hold
    return entered, release


def make(address: str, store: Store, *, l1: Any = None, prefix: str | None = None,
         **kw: Any) -> tuple[TieredCache, Any, CountingTier]:
    tier = CountingTier(address)
    cache = TieredCache(tier, l1, prefix=prefix, **kw)
    kc = cache.key_class("item", store.load)
    return cache, kc, tier


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.001)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def memcached_on(port: int, host: str = "127.0.0.1") -> Iterator[subprocess.Popen[bytes]]:
    """A memcached on a port (and loopback address) we choose, so that it can come back on
    the same address."""
    argv = [find_memcached(), "-l", host, "-p", str(port), "-U", "0", "-m", "16"]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                _core.Client(f"{host}:{port}", connect_timeout=0.2).version()
                break
            except ServerError:
                if time.monotonic() > deadline or p.poll() is not None:
                    raise
                time.sleep(0.01)
        yield p
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.terminate()
        p.wait(5)


def stop(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until the kernel has stopped every thread of it (state ``T``):
    ``kill`` returns before that, and a request that reaches a thread still running in between
    would still be answered."""
    os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: all_stopped(pid), f"process {pid} to stop")


def all_stopped(pid: int) -> bool:
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue  # a thread that ended is not running
        if state not in ("T", "t"):
            return False
    return True
