"""``cachelab.compare.run``: the verb's one entry. Saved results of one kind, or the live
A/B of server command lines (each started on a private port): decided here, from the spec."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachelab.compare.engine import compare
from cachelab.compare.result import CompareResult
from cachelab.compare.servers import compare_servers
from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.target import Target
from cachelab.tls import TlsOptions

__all__ = ["CompareSpec", "run"]


@dataclass(frozen=True)
class CompareSpec:
    """What to compare: saved results (``paths``, the first the baseline A), or the
    commands of a live A/B (``server_cmds``, ``repeats`` rounds of ``duration`` s each,
    over ``tls`` when given; its files under ``out``); and the intervals' settings."""

    paths: Sequence[str | Path] = ()
    server_cmds: Sequence[str] = ()
    resamples: int = 2000
    level: float = 0.95
    seed: int = 0
    allow_different: bool = False
    repeats: int = 4
    duration: float = 2.0
    tls: TlsOptions | None = None
    out: Path | None = None

    @classmethod
    def quick(cls, **overrides: Any) -> CompareSpec:
        """The live A/B, short: 2 rounds of 1 s per server."""
        return cls(**{"repeats": 2, "duration": 1.0, **overrides})


def run(spec: CompareSpec, target: Target | None = None, *,
        progress: Progress | None = None) -> CompareResult:
    """Compares as ``spec`` says; ``progress`` shows the live A/B's rounds. (The live A/B
    starts the user's command lines itself — the command is what it measures — so
    ``target`` is unused.)"""
    if spec.server_cmds and spec.paths:
        raise UsageError("give saved results or --server-cmd, not both")
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
