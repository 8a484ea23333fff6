"""Running the ``cachelab`` command from tests, and checking its one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def one_error_line(stderr: str | subprocess.CompletedProcess[str]) -> str:
    """The single line a failed run prints on stderr; fails the test on anything else."""
    if isinstance(stderr, subprocess.CompletedProcess):
        stderr = stderr.stderr
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    return lines[0]
