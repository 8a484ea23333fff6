"""``cachelab.compare.run``: the verb's one entry. Saved results of one kind, or the live
A/B of server command lines (each started on a private port): decided here, from the spec."""

from __future__ import annotations

from cachelab.compare.engine import compare
from cachelab.compare.result import CompareResult
from cachelab.compare.servers import compare_servers
from cachelab.compare.spec import CompareSpec
from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.target import Target

__all__ = ["CompareSpec", "run"]


def run(spec: CompareSpec, target: Target | None = None, *,
        progress: Progress | None = None) -> CompareResult:
    """Compares as ``spec`` says; ``progress`` shows the live A/B's rounds. (The live A/B
    starts the user's command lines itself — the command is what it measures — so
    ``target`` is unused.)"""
    if spec.server_cmds and spec.paths:
        raise UsageError("give saved results or --server-cmd, not both")
    spec.check()
    if not spec.server_cmds:
        return compare(spec.paths, resamples=spec.resamples, level=spec.level,
                       seed=spec.seed, allow_different=spec.allow_different)
    total = spec.repeats * len(spec.server_cmds)
    if progress is not None:
        progress.total, progress.label = total, "A/B rounds"

    def step(done: int, _total: int, label: str) -> None:
        if progress is not None:
            progress.label = f"A/B {label}"
            progress.update(done)

    result = compare_servers(spec.server_cmds, repeats=spec.repeats, duration=spec.duration,
                             level=spec.level, seed=spec.seed, out=spec.out, on_run=step,
                             tls=spec.tls)
    if progress is not None:
        progress.update(total)
    return result
