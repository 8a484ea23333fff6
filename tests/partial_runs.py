"""Making partial results the way a user does — a run stopped by Ctrl-C — for the tests that
check every place says so (tests/*/test_*_partial.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cachelab._core as _core
import cachelab.profile as profiles
from cachelab.errors import Interrupted

#: Seconds a test waits for a command to get going, or to stop after SIGINT.
WAIT = 30


def interrupted_profile(address: str, out: Path, *, samples: int = 1_000_000,
                        after: int = 400) -> dict[str, Any]:
    """A profile of ``address`` stopped by Ctrl-C once ``after`` samples are taken, written to
    ``out`` as ``cachelab profile`` writes it; returns its JSON. The Ctrl-C is a
    KeyboardInterrupt in the progress poll, where a real one lands: the library's own cancel
    path."""
    fired: list[int] = []

    def on_progress(done: int, _total: int) -> None:
        if done >= after and not fired:
            fired.append(done)
            raise KeyboardInterrupt

    spec = profiles.ProfileSpec(samples=samples, warmup=0, sizes=(1, 1000), key_counts=(1, 10),
                                seed=7)
    with pytest.raises(Interrupted) as caught:
        profiles.profile(spec, server=address, on_progress=on_progress)
    assert fired, "the profile ended before it could be interrupted"
    result = caught.value.partial
    result.write(out, plots=False)
    return result.to_dict()


def gets_served(address: str) -> int:
    """The server's ``cmd_get`` counter."""
    with _core.Client(address, timeout=2.0) as c:
        return int(c.stats()["cmd_get"])


def sigint_when_busy(args: list[object], address: str, *, gets: int = 300,
                     cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Runs ``cachelab ARGS`` and sends it SIGINT once the server at ``address`` has served
    ``gets`` more gets than before it started (the run is measuring); returns the finished
    process. Bounded: fails the test if the run does not get going or does not stop."""
    before = gets_served(address)
    proc = subprocess.Popen([sys.executable, "-m", "cachelab", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        deadline = time.monotonic() + WAIT
        while gets_served(address) - before < gets:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not get going"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


#: Seconds a slow command (a replay loading its catalog on a busy machine) may take to get
#: to the part a test interrupts.
SLOW_START = 120


class Background:
    """``cachelab ARGS`` running in the background, its stdout and stderr read as they come
    (so a test can wait for a progress line, then stop the run or its server); ``finish()``
    waits for it to end. Every wait is bounded."""

    def __init__(self, args: list[object], *, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "cachelab", *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=cwd)
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(s, into), daemon=True)
                         for s, into in ((self.proc.stdout, self.out),
                                         (self.proc.stderr, self.err))]
        for t in self._readers:
            t.start()

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def wait_for(self, ready: Callable[[], bool], what: str, timeout: float = SLOW_START) -> None:
        """Until ``ready()``; fails the test if the run ends first or it takes too long."""
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.proc.poll() is None, (f"the run ended before {what}: "
                                              + "".join(self.err))
            assert time.monotonic() < deadline, f"no {what} within {timeout} s"
            time.sleep(0.02)

    def wait_for_line(self, text: str, timeout: float = SLOW_START) -> None:
        """Until stderr has a line holding ``text`` (a progress line)."""
        self.wait_for(lambda: any(text in line for line in list(self.err)), repr(text),
                      timeout)

    def signal(self, signum: int = signal.SIGINT) -> None:
        self.proc.send_signal(signum)

    def finish(self) -> subprocess.CompletedProcess[str]:
        try:
            self.proc.wait(timeout=SLOW_START)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        for t in self._readers:
            t.join(WAIT)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode,
                                           "".join(self.out), "".join(self.err))


def error_lines(stderr: str) -> list[str]:
    """The ``cachelab: error:`` lines of a run's stderr (progress lines aside); no traceback."""
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("cachelab: error:")]


def kill(server: Any) -> None:
    """SIGKILL a private server the test started (by its pid), as a crash would."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
