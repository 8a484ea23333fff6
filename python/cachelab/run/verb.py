"""``cachelab.run.run``: the verb's one entry — the whole study (every step's verb, then
the report) on the target's memcached (or a private one), written into ``out``."""

from __future__ import annotations

from pathlib import Path

from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.run.result import RunResult, RunSpec
from cachelab.run.study import run_study
from cachelab.target import TargetLike, as_target

__all__ = ["run"]


def run(spec: RunSpec | None = None, target: TargetLike = None, *,
        progress: Progress | None = None, out: str | Path = "cachelab-out/run") -> RunResult:
    """Runs the study ``spec`` against ``target``'s one server (default: a private
    memcached; a private redis-server for a target with a RESP login, ``target.resp``),
    writing every step's artifacts into ``out``; ``progress`` gets a line per stage (``run:
    [2/7] load``). Raises as :func:`cachelab.run.run_study` does."""
    target = as_target(target)
    if target.is_pool or target.proxy is not None:
        raise UsageError("run measures one server: give one --server")
    say = None if progress is None else (lambda msg: progress.say(f"run: {msg}"))
    return run_study(spec, out, server=target.address, server_options=target.options,
                     log=say, resp=target.resp)
