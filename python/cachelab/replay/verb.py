"""``cachelab.replay.run``: the verb's one entry — the trace given, or a synthetic one,
replayed through the real tiered cache on the target's memcached (or a private one)."""

from __future__ import annotations

import os
from typing import Any

from cachelab.errors import UsageError
from cachelab.progress import Progress, stage_logger
from cachelab.replay.engine import load_trace, replay
from cachelab.replay.result import ReplayResult
from cachelab.replay.spec import ReplaySpec
from cachelab.target import TargetLike, as_target, recorded

__all__ = ["run"]


def run(spec: ReplaySpec | None = None, target: TargetLike = None, *,
        progress: Progress | None = None, trace: str | os.PathLike[str] | Any = None,
        trace_format: str | None = None, trace_info: dict[str, Any] | None = None,
        requests: int | None = None, quick: bool = False) -> ReplayResult:
    """Replays ``trace`` (a request trace's path, a loaded
    :class:`~cachelab.traces.RequestTrace` with ``trace_info``, or None: a synthetic one of
    ``requests`` requests, fewer ``quick``) with ``spec`` on ``target``'s one server
    (default: a private memcached). ``progress`` shows the replay and, as lines on its
    stream, the stages. Raises as :func:`cachelab.replay.replay` does."""
    target = as_target(target)
    if target.is_pool or target.proxy is not None:
        raise UsageError("replay measures one server: give one --server")
    if trace is None or isinstance(trace, (str, os.PathLike)):
        trace, trace_info = load_trace(None if trace is None else str(trace), trace_format,
                                       requests=requests, quick=quick)
    log = None if progress is None else stage_logger(progress, "replay", progress.say)
    result = replay(trace, spec, server=target.address,
                    server_options=target.options if target.address is None else None,
                    trace_info=trace_info, log=log,
                    on_progress=None if progress is None else progress.track)
    result.server.update(recorded(target))
    return result
