"""``cachelab.scale.run``: the verb's one entry. One server, a private memcached (restarted
per point for ``--vary server-threads``), a pool, a proxy with the servers behind it, a
Redis Cluster, or Ray agents (``--vary agents``): decided here, from the spec and the
target."""

from __future__ import annotations

import dataclasses
from typing import Any

from cachelab.progress import Progress
from cachelab.scale.result import ScaleResult
from cachelab.scale.spec import ScaleSpec
from cachelab.scale.sweep import scale
from cachelab.target import TargetLike, as_target

__all__ = ["run"]


def run(spec: ScaleSpec | None = None, target: TargetLike = None, *,
        progress: Progress | None = None) -> ScaleResult:
    """Runs the sweep ``spec`` against ``target`` (default: a private memcached) and
    returns the result; ``progress`` shows the runs: a bar over them when it draws one,
    else one line per run (``scale: 3/12 N = 4: 81,234/s``). Raises as
    :func:`cachelab.scale.scale` does."""
    target = as_target(target)
    spec = spec or ScaleSpec()
    if target.pool:  # the target's pool settings are every run's
        spec = dataclasses.replace(spec, workload={**spec.workload, **target.pool})
    on_run = None if progress is None else _said_on(progress)
    return scale(spec, server=target.server(), server_options=target.options, on_run=on_run,
                 ray=target.ray, behind=target.behind, resp=target.resp,
                 cluster=target.cluster)


def _said_on(progress: Progress) -> Any:
    def on_run(done: int, total: int, n: int, point: dict[str, Any]) -> None:
        if progress.enabled:  # a bar (a terminal): a line under it would break it
            progress.total, progress.label = total, f"scale N = {n}"
            progress.update(done)
            return
        progress.say(f"scale: {done}/{total} N = {n}: {point['throughput']:,.0f}/s"
                     + ("" if point["steady_reached"] else " (no steady state)"))

    return on_run
