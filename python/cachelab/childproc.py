"""A program cachelab starts for a run — a private memcached (:mod:`cachelab.servers`), a
private twemproxy (:mod:`cachelab.proxies`) — started, waited for and stopped one way.

:class:`ChildProcess` holds what they share: launching in a session of its own (a Ctrl-C
typed in the terminal reaches only us, and we stop the child in order) with
``prctl(PR_SET_PDEATHSIG)`` so it dies with us; retrying a launch whose port was taken under
us; waiting until it answers (the subclass's :meth:`~ChildProcess._ready`), with the end of
its own output in the error when it does not; stopping it by pid (SIGTERM, then SIGKILL after
a grace period) and removing its files; an ``atexit`` registry for any left running. A
subclass says how to launch the program and how to tell that it answers.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import IO, Any, TypeVar

from cachelab.errors import ServerUnreachable, UsageError

__all__ = ["LOOPBACK", "ChildProcess", "ExitRegistry", "free_port", "is_loopback"]

LOOPBACK = "127.0.0.1"
"""The address private servers and proxies listen on unless told another loopback one."""

_ATTEMPTS = 5  # launches tried when another process takes one of our ports first
_STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
_POLL_FIRST, _POLL_MAX = 0.002, 0.1  # seconds between start-up probes, doubling
_TAIL_LINES = 5  # lines of the child's output quoted in errors
_TAIL_BYTES = 16384
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>

Self = TypeVar("Self", bound="ChildProcess")


class ExitRegistry:
    """Private processes still running, stopped by :meth:`stop_all` (registered with
    ``atexit``). Anything with a ``stop()`` fits."""

    def __init__(self) -> None:
        self._running: set[Any] = set()
        self._lock = threading.RLock()  # reentrant: stop() may run from a signal handler
        atexit.register(self.stop_all)

    def remember(self, process: Any) -> None:
        with self._lock:
            self._running.add(process)

    def forget(self, process: Any) -> None:
        with self._lock:
            self._running.discard(process)

    def stop_all(self) -> None:
        """Stop every process remembered and not stopped yet."""
        with self._lock:
            running = list(self._running)
        for process in running:
            process.stop()


class ChildProcess:
    """A program started by us on a loopback address; ``start()`` returns once it answers,
    ``stop()`` ends it, a ``with`` block does both; a stopped one may be started again.

    A subclass sets :attr:`program` (its name in "did not start"), :attr:`label` (its name in
    "did not answer"), :attr:`registry` (its :class:`ExitRegistry`), and defines
    :meth:`_command` (the binary and any prefix, resolved at each start), :meth:`_launch`
    (choose fresh addresses, then :meth:`_spawn` the argv) and :meth:`_ready`.
    """

    program = "process"
    label = "process"
    registry: ExitRegistry

    def __init__(self, *, host: str = LOOPBACK, start_timeout: float = 5.0,
                 binary: str | None = None) -> None:
        if not is_loopback(host):
            raise UsageError(f"a private {self.label} listens on a loopback address "
                             f"(127.0.0.0/8), not {host!r}")
        if start_timeout <= 0:
            raise UsageError(f"start_timeout must be positive, not {start_timeout}")
        self.binary = binary
        self.start_timeout = start_timeout
        self._host = host
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        #: A private temporary directory (a socket, a configuration), removed by stop().
        self._dir: str | None = None
        self._argv: list[str] = []

    # -- what a subclass defines ---------------------------------------------------------------

    def _command(self) -> list[str]:
        """The command prefix to launch with (the binary, any wrapper), found at start."""
        raise NotImplementedError

    def _launch(self, command: list[str]) -> None:
        """Choose fresh addresses and :meth:`_spawn` the process (without waiting)."""
        raise NotImplementedError

    def _ready(self, deadline: float) -> bool:
        """One probe: whether the process answers as ours now (``deadline``: the start's)."""
        raise NotImplementedError

    def _retry(self, failure: str) -> bool:
        """Whether a start that failed with ``failure`` is tried again on new ports."""
        return "Address already in use" in failure

    def _nudge(self) -> None:
        """Called after SIGTERM, to make the process notice it sooner (nothing by default)."""

    def _output(self) -> str:
        """What the process wrote (its stderr), for errors."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - _TAIL_BYTES))
        return self._stderr.read().decode("utf-8", "replace")

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self: Self) -> Self:
        """Launch the process and wait until it answers; return self.

        If it exits because a port was taken under us, retry on new ports (up to 5
        launches). Raises the subclass's not-installed error, or ServerUnreachable (with the
        end of the process's output).
        """
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        command = self._command()
        deadline = time.monotonic() + self.start_timeout
        failure, attempts = "", 0
        while attempts < _ATTEMPTS:
            attempts += 1
            try:
                self._launch(command)
                if self._await_ready(deadline):
                    return self
                failure = self._exit_summary()
            except BaseException:
                self.stop()
                raise
            self.stop()
            if not self._retry(failure):
                break
        tries = f" in {attempts} attempts" if attempts > 1 else ""
        raise ServerUnreachable(f"{self.program} did not start{tries}: {failure}")

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 2 s) and remove its files; safe to
        call any number of times."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                self._nudge()
                try:
                    process.wait(_STOP_GRACE)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            self.registry.forget(self)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self: Self) -> Self:
        return self if self.running else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The process id while it runs, else None."""
        return self._process.pid if self._process is not None else None

    @property
    def argv(self) -> list[str]:
        """The command line of the latest launch (empty before ``start()``)."""
        return list(self._argv)

    # -- shared internals ----------------------------------------------------------------------

    def _spawn(self, argv: Sequence[str]) -> None:
        """Start ``argv`` in a session of its own, dying with us, its stderr kept for errors,
        and remember it for the exit hook."""
        self._argv = list(argv)
        # Kept open while the process runs, for error messages; stop() closes it.
        self._stderr = tempfile.TemporaryFile(prefix=f"cachelab-{self.program}-")  # noqa: SIM115
        self._process = subprocess.Popen(
            self._argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._stderr, start_new_session=True, preexec_fn=die_with_parent())
        self.registry.remember(self)

    def _await_ready(self, deadline: float) -> bool:
        """Poll until the process answers (True) or exits (False); raise at the deadline."""
        assert self._process is not None
        delay = _POLL_FIRST
        while self._process.poll() is None:
            if self._ready(deadline):
                return True
            if time.monotonic() + delay >= deadline:
                raise ServerUnreachable(
                    f"{self.label} at {self._where()} did not answer within "
                    f"{self.start_timeout:g} s: {self._tail() or 'no output'}")
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)
        return False

    def _where(self) -> str:
        """The address named in a start-up error (the subclass's ``address``)."""
        return str(getattr(self, "address", "?"))

    def _exit_summary(self) -> str:
        """One line on why the process exited during start-up."""
        assert self._process is not None
        return f"exited with status {self._process.returncode}: {self._tail() or 'no output'}"

    def _tail(self) -> str:
        """The last lines of the process's output, joined into one line."""
        lines = [line.strip() for line in self._output().splitlines() if line.strip()]
        return " | ".join(lines[-_TAIL_LINES:])


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an IPv4 address in 127.0.0.0/8."""
    try:
        return ipaddress.IPv4Address(host).is_loopback
    except ValueError:
        return False


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` (loopback) that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when we die; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    sigterm = int(signal.SIGTERM)

    def preexec() -> None:  # runs in the child between fork and exec
        prctl(_PR_SET_PDEATHSIG, sigterm)
        if os.getppid() != parent:  # we died before the request took effect
            os.kill(os.getpid(), sigterm)

    return preexec


def read_tail(path: str) -> str:
    """The end of a log file a child writes (empty when it cannot be read)."""
    with contextlib.suppress(OSError), open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - _TAIL_BYTES))
        return f.read().decode("utf-8", "replace")
    return ""
