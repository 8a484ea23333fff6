"""The machine's CPU used by other processes during a measurement (a busy machine makes a
measured-vs-predicted comparison unreliable: replay says so)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cachelab.environment import BUSY_CORES, CpuSnapshot, cpu_snapshot, other_cpu


def test_other_cpu_excludes_this_process_and_what_the_caller_accounts_for() -> None:
    before = CpuSnapshot(wall=100.0, busy=50.0, steal=1.0, own=10.0)
    # 4 s: the machine was busy 6 CPU-s, of which this process 2 and the server 1.
    after = CpuSnapshot(wall=104.0, busy=56.0, steal=1.4, own=12.0)
    got = other_cpu(before, after, accounted_s=1.0)
    assert got is not None
    assert (got["others_cores"], got["steal_cores"], got["seconds"]) == (0.75, 0.1, 4.0)
    assert BUSY_CORES < 0.75 and got["busy"] is True
    assert other_cpu(before, after, accounted_s=3.5)["busy"] is False  # type: ignore[index]
    assert other_cpu(None, after) is None and other_cpu(after, before) is None


@pytest.mark.slow
def test_a_cpu_hog_is_seen_as_another_process() -> None:
    hog = subprocess.Popen([sys.executable, "-c",
                            "import time\nt = time.monotonic()\n"
                            "while time.monotonic() - t < 1.5: pass"])
    try:
        before = cpu_snapshot()
        hog.wait(timeout=10)
        after = cpu_snapshot()
    finally:
        hog.kill()
    got = other_cpu(before, after)
    assert got is not None
    # The hog ran on one core for (nearly) the whole window; this process slept.
    assert got["others_cores"] >= 0.6 and got["busy"], got
    assert after is not None and before is not None and after.own - before.own < 0.3
