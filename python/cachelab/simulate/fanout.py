"""``simulate --ray``: a sweep fanned out as Ray tasks, with results identical to the local run.

* Request traces: one task per strategy (every capacity is a strategy of its own: ``lru:N``,
  ``fixed:N``), each running all of its draws. A strategy's draws use common random numbers
  from the run's seed, the request and the touch, so a task computes exactly what the local
  run computes for that strategy; the trace and the latency model travel through the object
  store once.
* Flat traces: one task per (policy, capacity) cell. The trace reaches the nodes through the
  object store (its bytes, written to a scratch file once per worker process), or, with
  ``shared=True``, from the same path on every node (a shared file system). The LRU curve
  (``--mrc``) is one pass and stays here.

Tasks take one CPU each and run the Rust core single-threaded; the cluster's CPUs are the
parallelism. docs/scale-out.md has the design.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cachelab._core as _core
from cachelab.raycluster import RayOptions, connected
from cachelab.simulate import flat
from cachelab.simulate.flat_run import (
    FlatSimulateSpec,
    FlatSimulationResult,
    simulate_flat_trace,
)
from cachelab.simulate.model import LatencyModel
from cachelab.simulate.request import SimulateSpec, SimulationResult, simulate
from cachelab.simulate.terms import cost_terms
from cachelab.traces import RequestTrace

__all__ = ["simulate_flat_trace_on_ray", "simulate_on_ray"]

#: Called after each task: ``on_task(done, total)``.
OnTask = Callable[[int, int], None]

#: The trace a worker process loaded last: (digest or path, the trace).
_LOADED: dict[str, Any] = {}


def _request_task(trace: RequestTrace, model: LatencyModel, strategy: str,
                  spec: SimulateSpec) -> dict[str, Any]:
    """One strategy, every draw, and its cost terms (a Ray task)."""
    result = _core.simulate_requests(trace.to_core(), model.to_core(), [strategy],
                                     train=spec.train, draws=spec.draws, seed=spec.seed,
                                     threads=1)[0]
    result["terms"] = cost_terms(trace, model, strategy, train=spec.train, seed=spec.seed)
    return result


def _flat_trace(source: tuple[str, Any, str], fmt: str | None) -> _core.FlatTrace:
    """The trace of a task: from a shared path, or from its bytes in the object store (written
    to a scratch file with the original name's suffix, so the format is known)."""
    kind, data, name = source
    key = data if kind == "path" else hashlib.sha256(data).hexdigest()
    if _LOADED.get("key") != key:
        _LOADED.clear()
        if kind == "path":
            trace = flat.load_trace(data, fmt)
        else:
            with tempfile.TemporaryDirectory(prefix="cachelab-trace-") as d:
                path = Path(d) / Path(name).name
                path.write_bytes(data)
                trace = flat.load_trace(path, fmt)
        _LOADED.update(key=key, trace=trace)
    return _LOADED["trace"]


def _flat_task(source: tuple[str, Any, str], fmt: str | None, policy: str, capacity: int,
               unit: str) -> dict[str, Any]:
    """One (policy, capacity) cell (a Ray task)."""
    return _core.flat_simulate(_flat_trace(source, fmt), [policy], [capacity], unit, 1, fmt)[0]


def _gather(ray: Any, refs: list[Any], on_task: OnTask | None) -> list[Any]:
    """The tasks' results in order, reporting each one done."""
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=None)
        if on_task:
            on_task(len(refs) - len(pending), len(refs))
    return ray.get(refs)


def simulate_on_ray(
    trace: RequestTrace,
    spec: SimulateSpec | None,
    ray_options: RayOptions,
    *,
    trace_info: dict[str, Any] | None = None,
    on_task: OnTask | None = None,
) -> SimulationResult:
    """:func:`cachelab.simulate.simulate`, one Ray task per strategy."""
    with connected(ray_options) as ray:
        task = ray.remote(num_cpus=1)(_request_task)

        def runner(trace: RequestTrace, model: LatencyModel, strategies: list[str],
                   spec: SimulateSpec) -> list[dict[str, Any]]:
            t, m = ray.put(trace), ray.put(model)
            return _gather(ray, [task.remote(t, m, s, spec) for s in strategies], on_task)

        return simulate(trace, spec, trace_info=trace_info, runner=runner)


def simulate_flat_trace_on_ray(
    path: str | os.PathLike[str],
    spec: FlatSimulateSpec | None,
    ray_options: RayOptions,
    *,
    shared: bool = False,
    on_task: OnTask | None = None,
) -> FlatSimulationResult:
    """:func:`cachelab.simulate.simulate_flat_trace`, one Ray task per (policy, capacity);
    ``shared``: every node reads ``path`` itself (it must exist there, the same)."""
    spec = spec or FlatSimulateSpec()
    with connected(ray_options) as ray:
        task = ray.remote(num_cpus=1)(_flat_task)

        def runner(_trace: Any, policies: Sequence[str], capacities: Sequence[int],
                   unit: str) -> flat.FlatSimulation:
            name = os.fspath(path)
            if shared:
                source: tuple[str, Any, str] = ("path", os.path.abspath(name), name)
            else:
                source = ("store", Path(name).read_bytes(), name)
            ref = ray.put(source)
            refs = [task.remote(ref, spec.format, p, c, unit)
                    for p in policies for c in capacities]
            rows = _gather(ray, refs, on_task)
            return flat.FlatSimulation(None, unit, tuple(flat.FlatResult(**r) for r in rows))

        return simulate_flat_trace(path, spec, runner=runner)
