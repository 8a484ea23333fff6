"""Making partial results the way a user does — a run stopped by Ctrl-C — for the tests that
check every place says so (tests/*/test_*_partial.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import cachelab._core as _core
import cachelab.profiles as profiles
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
    result = caught.value.partial  # type: ignore[attr-defined]
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
