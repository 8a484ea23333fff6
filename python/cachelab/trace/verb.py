"""``cachelab.trace.run``: the verb's one entry — the subcommand the spec's kind names:
synthesize a trace, inspect one, capture a live memcached's key stream (the target's
server, or each member of its pool) or a Redis's commands (``MONITOR``), or convert between
formats."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cachelab.errors import UsageError
from cachelab.pool import parse_server
from cachelab.progress import Progress
from cachelab.target import TargetLike, as_target
from cachelab.trace.result import TraceSummary
from cachelab.trace.spec import CaptureFileSpec, ConvertSpec, InspectSpec, SynthSpec, TraceSpec
from cachelab.traces.formats import convert
from cachelab.traces.inspect import inspect_path
from cachelab.traces.synth import synth_summary, write_synth

if TYPE_CHECKING:
    from cachelab.traces.capture import CaptureResult, CaptureSpec

__all__ = ["run"]


def run(spec: TraceSpec, target: TargetLike = None, *,
        progress: Progress | None = None) -> TraceSummary | CaptureResult:
    """Runs the subcommand ``spec`` names (:mod:`cachelab.trace.spec`). Only a capture
    touches a server: ``target``'s (a pool: every member at once); the others take
    ``target`` for the common shape. ``progress`` shows the requests written (synth) or the
    seconds captured. Raises UsageError for a bad spec, a target capture cannot watch, or a
    file that cannot be written (naming it), InputError for a malformed trace, and for a
    capture as :func:`cachelab.traces.capture.capture` does."""
    action = _ACTIONS.get(type(spec))
    if action is None:
        raise UsageError(f"not a trace spec: {type(spec).__name__} (one of "
                         + ", ".join(t.__name__ for t in _ACTIONS) + ")")
    return action(spec, target, progress)


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """An OSError while writing ``path`` becomes a one-line UsageError naming it."""
    try:
        yield
    except OSError as e:
        raise UsageError(f"{e.filename or path}: cannot write: {e.strerror or e}") from None


def _synth(spec: SynthSpec, target: TargetLike, progress: Progress | None) -> TraceSummary:
    spec.params.check()
    with _writing(spec.path):
        made = write_synth(spec.params, spec.path, spec.format, spec.part,
                           on_progress=None if progress is None else progress.track)
    return TraceSummary("synth", synth_summary(made, spec.params, spec.path, spec.preset),
                        written=spec.path)


def _inspect(spec: InspectSpec, target: TargetLike, progress: Progress | None) -> TraceSummary:
    return TraceSummary("inspect", inspect_path(spec.path, spec.format))


def _convert(spec: ConvertSpec, target: TargetLike, progress: Progress | None) -> TraceSummary:
    with _writing(spec.dst):
        doc = convert(spec.src, spec.dst, from_format=spec.from_format,
                      to_format=spec.to_format)
    return TraceSummary("convert", doc, written=spec.dst)


def capture_servers(spec: CaptureSpec, target: TargetLike) -> CaptureSpec:
    """``spec`` with the servers of ``target`` (one server, or a pool's members without
    their weights; ``spec``'s own when no target is given). UsageError, naming what to give
    instead, for what a capture cannot watch: no server (a private memcached nobody talks
    to), a proxy (twemproxy has no ``watch``), a private pool, Ray agents."""
    if target is None and (spec.server or spec.servers):
        return spec
    t = as_target(target)
    if spec.server or spec.servers:
        raise UsageError("give the servers to capture in the target or in the capture spec, "
                         "not both")
    if t.proxy is not None:
        raise UsageError(f"trace capture watches memcached servers, not a proxy ({t.proxy}: "
                         "twemproxy has no `watch`): give the servers behind it as --server "
                         "(repeated) or --servers-file, without --proxy")
    if t.ray is not None or t.private_pool is not None:
        raise UsageError("trace capture watches servers from this machine: not with --ray "
                         "or --private-pool")
    if t.private:
        raise UsageError("trace capture watches a running memcached: give --server HOST:PORT "
                         "(repeat it for a pool), --servers-file or --socket")
    members = tuple(m if m.startswith("unix:") else parse_server(m).address
                    for m in t.servers)
    if len(members) == 1:
        return dataclasses.replace(spec, server=members[0])
    return dataclasses.replace(spec, servers=members)


def _capture(spec: CaptureFileSpec, target: TargetLike,
             progress: Progress | None) -> CaptureResult:
    # deferred: capture and capture_monitor import pyarrow, which takes ~0.1 s
    from cachelab.traces.capture import capture
    from cachelab.traces.capture_monitor import capture_monitor

    login = None if target is None else as_target(target).resp
    if login is None and spec.tls is not None:
        raise UsageError("trace capture reads a memcached's stream over plain TCP: TLS (--tls) "
                         "is for a Redis (rediss://HOST:PORT)")
    what = capture_servers(spec.capture, target)
    what.check()
    if progress is not None:
        progress.begin(int(what.duration * 1000))
    shown = None if progress is None else \
        lambda elapsed, _events: progress.update(int(elapsed * 1000))
    if login is not None:   # a Redis: through MONITOR
        return capture_monitor(what, spec.path, login, tls=spec.tls, on_progress=shown)
    return capture(what, spec.path, on_progress=shown)


_ACTIONS: dict[type, Callable[[Any, TargetLike, Progress | None], Any]] = {
    SynthSpec: _synth,
    InspectSpec: _inspect,
    CaptureFileSpec: _capture,
    ConvertSpec: _convert,
}
