"""Running the ``cachelab`` command from tests, and checking its one-line errors.

Two ways: :func:`cachelab` starts ``python -m cachelab`` as a child process (about 0.9 s of
interpreter and import start-up each time: keep it for what only a real process shows — the
console script, signals, a child's environment, stdout and stderr as separate pipes); the ``cli``
fixture (tests/conftest.py, :class:`InProcess`) runs the same command line through
``cachelab.cli.run`` in the test's own process and returns the same kind of result, for tests of
parsing, usage errors, exit codes and printed output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

#: Seconds any one CLI run may take before the test fails instead of hanging.
RUN_TIMEOUT = 120


def cachelab(
    *args: object,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = RUN_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Runs ``python -m cachelab ARGS`` and returns the finished process (text output)."""
    return subprocess.run(
        [sys.executable, "-m", "cachelab", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
    )


class Capture(Protocol):
    """What the runner needs of pytest's ``capsys``."""

    def readouterr(self) -> tuple[str, str]: ...


class InProcess:
    """``cli(*args, cwd=...)``: ``cachelab ARGS`` through ``cachelab.cli.run`` in this process,
    its output taken from ``capsys``; returns a CompletedProcess as :func:`cachelab` does.

    Output printed before the call is dropped; the SIGTERM handler the CLI installs and the
    working directory are put back afterwards.
    """

    def __init__(self, capsys: Capture) -> None:
        self._capsys = capsys

    def __call__(self, *args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        from cachelab.cli import run

        argv = [str(a) for a in args]
        self._capsys.readouterr()
        previous = signal.getsignal(signal.SIGTERM)
        here = os.getcwd()
        try:
            if cwd is not None:
                os.chdir(cwd)
            code = run(argv)
        finally:
            os.chdir(here)
            with contextlib.suppress(TypeError):  # a handler set outside Python: none to restore
                signal.signal(signal.SIGTERM, previous)
        out, err = self._capsys.readouterr()
        return subprocess.CompletedProcess(["cachelab", *argv], code, out, err)


def gets_served(address: str) -> int:
    """The ``cmd_get`` count of the memcached at ``address``."""
    from cachelab._core import Client

    with Client(address) as c:
        return int(c.stats()["cmd_get"])


def await_gets(address: str, more_than: int, proc: subprocess.Popen[str],
               timeout: float = 60.0) -> None:
    """Waits until the memcached at ``address`` has served more than ``more_than`` gets: the
    child run ``proc`` is measuring (its start-up, seconds on a loaded machine, is over). Fails
    the test if the child exits first or nothing comes within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while gets_served(address) <= more_than:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the run did not get going in {timeout:g} s"
        time.sleep(0.05)


def one_error_line(stderr: str | subprocess.CompletedProcess[str]) -> str:
    """The single line a failed run prints on stderr; fails the test on anything else."""
    if isinstance(stderr, subprocess.CompletedProcess):
        stderr = stderr.stderr
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    return lines[0]
