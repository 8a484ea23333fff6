"""``cachelab.simulate.run``: the verb's one entry. Which simulator runs is decided here,
from the spec, the trace and the target: a flat key trace (:class:`FlatSimulateSpec`) on
this machine or on Ray; a request trace streamed from its file in parts, loaded whole, or
synthesized; with the latency model of the spec, or of a profile measured on the target's
server first; on this machine or as Ray tasks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cachelab.traces as traces
from cachelab.errors import UsageError
from cachelab.profile.spec import ProfileSpec
from cachelab.progress import Progress
from cachelab.simulate.cells import measure_and_simulate
from cachelab.simulate.fanout import simulate_flat_trace_on_ray, simulate_on_ray
from cachelab.simulate.flat_run import (
    FlatSimulateSpec,
    FlatSimulationResult,
    simulate_flat_trace,
)
from cachelab.simulate.request import SimulateSpec, SimulationResult, simulate
from cachelab.simulate.streamed import measure_and_simulate_file, simulate_trace_file
from cachelab.target import TargetLike, as_target
from cachelab.units import check_limit, limit

__all__ = ["run"]

#: Requests of the synthetic trace simulated when no trace is given (``quick``: fewer).
SYNTHETIC, SYNTHETIC_QUICK = 100_000, 20_000
#: The requests a synthetic trace may have (``simulate --requests``).
SYNTHETIC_LIMIT = limit(1, 100_000_000)


def run(spec: SimulateSpec | FlatSimulateSpec | None = None, target: TargetLike = None, *,
        progress: Progress | None = None,
        trace: str | os.PathLike[str] | traces.RequestTrace | None = None,
        trace_format: str | None = None, trace_info: dict[str, Any] | None = None,
        requests: int | None = None, in_memory: bool = False, quick: bool = False,
        shared_trace: bool = False) -> SimulationResult | FlatSimulationResult:
    """Simulates ``trace`` (a path, a loaded :class:`~cachelab.traces.RequestTrace`, or
    None: a synthetic trace of ``requests`` requests, default 100,000, 20,000 ``quick``)
    with ``spec``: a :class:`FlatSimulateSpec` for a flat key trace (miss ratios by policy
    and size), else a :class:`SimulateSpec` for a request trace (latency by strategy).

    ``target``: with servers, the latency model is a profile measured on its (one) server
    first (``quick``: a quick profile); with ``ray``, the work runs as Ray tasks
    (``shared_trace``: a flat trace read by every node from one shared path). A request
    trace file is streamed in parts unless ``in_memory`` (or Ray) loads it whole.
    ``progress`` shows a measurement or the Ray tasks; it is hidden for a local simulation.
    """
    target = as_target(target)
    ray, server = target.ray, target.address
    if isinstance(spec, FlatSimulateSpec):
        if trace is None or isinstance(trace, traces.RequestTrace):
            raise UsageError("a flat simulation reads a flat key trace file (TRACE)")
        if ray is None:
            _hide(progress)
            return simulate_flat_trace(trace, spec)
        _label(progress, "simulate on Ray")
        return simulate_flat_trace_on_ray(trace, spec, ray, shared=shared_trace,
                                          on_task=_tasks(progress))
    spec = spec or SimulateSpec()
    if in_memory and trace is None:
        raise UsageError("--in-memory: only with a request trace file (TRACE)")
    if server is not None and ray is not None:
        raise UsageError("--server with --ray: profile first (`cachelab simulate "
                         "--server` writes profile/), then pass it as --model")
    base = ProfileSpec.quick() if quick else ProfileSpec()
    track = None if progress is None else progress.track
    path = None if trace is None or isinstance(trace, traces.RequestTrace) else trace
    if path is not None and not in_memory and ray is None:  # streamed in parts
        if server is not None:
            _label(progress, "profile for the simulation")
            return measure_and_simulate_file(path, spec, server, base=base,
                                             format=trace_format, on_progress=track)
        _hide(progress)
        return simulate_trace_file(path, spec, format=trace_format)
    loaded, info = _request_trace(trace, trace_format, trace_info, requests, quick)
    if server is not None:
        _label(progress, "profile for the simulation")
        return measure_and_simulate(loaded, spec, server, base=base, trace_info=info,
                                    on_progress=track)
    if ray is None:
        _hide(progress)
        return simulate(loaded, spec, trace_info=info)
    _label(progress, "simulate on Ray")
    return simulate_on_ray(loaded, spec, ray, trace_info=info, on_task=_tasks(progress))


def _request_trace(trace: str | os.PathLike[str] | traces.RequestTrace | None,
                   trace_format: str | None, info: dict[str, Any] | None,
                   requests: int | None, quick: bool
                   ) -> tuple[traces.RequestTrace, dict[str, Any] | None]:
    """The trace loaded (or synthesized), and what to record about it (a trace given
    loaded: ``info`` as given)."""
    if isinstance(trace, traces.RequestTrace):
        return trace, info
    if trace is not None:
        return (traces.load_request_trace(Path(trace), trace_format),
                info or {"source": str(trace)})
    if requests is not None:
        check_limit("requests", SYNTHETIC_LIMIT, requests)
    n = requests or (SYNTHETIC_QUICK if quick else SYNTHETIC)
    made = traces.synthesize(traces.SynthParams(requests=n))
    return made, info or {"source": "synthetic", "generator": made.generator}


def _label(progress: Progress | None, label: str) -> None:
    if progress is not None:
        progress.label = label


def _hide(progress: Progress | None) -> None:
    """A local simulation shows no bar."""
    if progress is not None:
        progress.enabled = False


def _tasks(progress: Progress | None) -> Any:
    """An ``on_task(done, total)`` that moves ``progress``."""
    if progress is None:
        return None

    def on_task(done: int, total: int) -> None:
        progress.total = total
        progress.update(done)

    return on_task
