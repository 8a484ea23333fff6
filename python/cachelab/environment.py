"""Facts about the machine and the software, recorded with every result."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cachelab._core import __version__


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


@lru_cache(maxsize=1)
def commit() -> str:
    """The git commit cachelab was run from, with ``-dirty`` for local changes; else unknown."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=2, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=2, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def version() -> str:
    return __version__


def facts() -> dict[str, object]:
    """CPU, cores, kernel, OS, Python, cachelab version and commit."""
    uname = platform.uname()
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = os.cpu_count() or 0
    return {
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "cpus_usable": affinity,
        "kernel": f"{uname.system} {uname.release}",
        "machine": uname.machine,
        "os": _os_name(),
        "python": sys.version.split()[0],
        "cachelab_version": version(),
        "commit": commit(),
    }


#: Other processes using more than this many cores during a measurement make it "busy".
BUSY_CORES = 0.5


@dataclass(frozen=True)
class CpuSnapshot:
    """The machine's CPU time so far (``/proc/stat``) and this process's, in seconds."""

    wall: float
    busy: float
    steal: float
    own: float


def cpu_snapshot() -> CpuSnapshot | None:
    """Now, or None where ``/proc/stat`` cannot be read."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    ticks = [int(x) for x in first[1:9]] + [0] * max(0, 9 - len(first))
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    hz = os.sysconf("SC_CLK_TCK")
    t = os.times()
    return CpuSnapshot(wall=time.monotonic(), busy=(user + nice + system + irq + softirq) / hz,
                       steal=steal / hz, own=t.user + t.system)


def other_cpu(before: CpuSnapshot | None, after: CpuSnapshot | None,
              accounted_s: float = 0.0) -> dict[str, Any] | None:
    """What other processes used of the machine between two snapshots, in cores: everything
    busy but this process and ``accounted_s`` seconds of CPU the caller knows of (a memcached
    on this machine, read from its ``stats``); and the time the hypervisor stole. ``busy`` when
    the others used more than :data:`BUSY_CORES`, or the steal did."""
    if before is None or after is None or after.wall <= before.wall:
        return None
    wall = after.wall - before.wall
    others = (after.busy - before.busy) - (after.own - before.own) - accounted_s
    steal = after.steal - before.steal
    out = {"others_cores": round(max(0.0, others) / wall, 2), "steal_cores": round(steal / wall, 2),
           "cores": os.cpu_count(), "seconds": round(wall, 1)}
    out["busy"] = out["others_cores"] > BUSY_CORES or out["steal_cores"] > BUSY_CORES
    return out
