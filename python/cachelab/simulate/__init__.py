"""The ``simulate`` verb: caching strategies on request traces, eviction policies on flat traces.

* :mod:`cachelab.simulate.request` — request-level simulation: how much slower each web
  request gets under a caching strategy (:class:`SimulateSpec`, :func:`simulate`,
  :class:`SimulationResult`);
* :mod:`cachelab.simulate.model` — latency models: a latency profile as quantile tables
  (:func:`latency_model`);
* :mod:`cachelab.simulate.flat` — classic miss-ratio simulation of flat key traces and LRU
  miss-ratio curves (:func:`simulate_flat`, :func:`miss_ratio_curve`);
* :mod:`cachelab.simulate.flat_run` — the verb on a flat trace (:class:`FlatSimulateSpec`,
  :func:`simulate_flat_trace`, :class:`FlatSimulationResult`);
* :mod:`cachelab.simulate.cells` — the profile a simulation needs: the multi-get key counts
  and value sizes its strategies issue on a trace (:func:`issued_cells`, :func:`measure_for`);
* :mod:`cachelab.simulate.summary` — reading a result (:func:`band_at`,
  :func:`best_strategy`); :mod:`~cachelab.simulate.render`, :mod:`~cachelab.simulate.plots`
  and :mod:`~cachelab.simulate.section` show it.

``docs/simulation.md`` has the semantics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cachelab._lazy import exports

if TYPE_CHECKING:
    from cachelab.simulate.cells import (
        IssuedCells,
        cells_for,
        issued_cells,
        measure_and_simulate,
        measure_for,
        profile_spec_for,
    )
    from cachelab.simulate.flat import (
        FlatResult,
        FlatSimulation,
        MissRatioCurve,
        miss_ratio_curve,
        simulate_flat,
    )
    from cachelab.simulate.flat_run import (
        FlatSimulateSpec,
        FlatSimulationResult,
        simulate_flat_trace,
    )
    from cachelab.simulate.model import LatencyModel, latency_model
    from cachelab.simulate.request import (
        DEFAULT_MODEL,
        PERCENTILES,
        SCHEMA,
        SCHEMA_VERSION,
        SLOWED,
        SimulateSpec,
        SimulationResult,
        default_strategies,
        simulate,
    )
    from cachelab.simulate.streamed import (
        IN_MEMORY_FALLBACK,
        TraceOutOfOrder,
        measure_and_simulate_file,
        simulate_file,
        simulate_trace_file,
    )
    from cachelab.simulate.summary import band_at, best_strategy
    from cachelab.simulate.verb import run

# Names load on first use: flat simulation alone imports neither numpy nor the request
# simulator (see cachelab._lazy).
__getattr__, __dir__ = exports(__name__, {
    "cachelab.simulate.cells": (
        "IssuedCells", "cells_for", "issued_cells", "measure_and_simulate", "measure_for",
        "profile_spec_for",
    ),
    "cachelab.simulate.flat": (
        "FlatResult", "FlatSimulation", "MissRatioCurve", "miss_ratio_curve", "simulate_flat",
    ),
    "cachelab.simulate.flat_run": (
        "FlatSimulateSpec", "FlatSimulationResult", "simulate_flat_trace",
    ),
    "cachelab.simulate.model": ("LatencyModel", "latency_model"),
    "cachelab.simulate.request": (
        "DEFAULT_MODEL", "PERCENTILES", "SCHEMA", "SCHEMA_VERSION", "SLOWED", "SimulateSpec",
        "SimulationResult", "default_strategies", "simulate",
    ),
    "cachelab.simulate.streamed": (
        "IN_MEMORY_FALLBACK", "TraceOutOfOrder", "measure_and_simulate_file", "simulate_file",
        "simulate_trace_file",
    ),
    "cachelab.simulate.summary": ("band_at", "best_strategy"),
    "cachelab.simulate.verb": ("run",),
})

__all__ = [
    "DEFAULT_MODEL",
    "PERCENTILES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SLOWED",
    "IN_MEMORY_FALLBACK",
    "FlatResult",
    "FlatSimulateSpec",
    "FlatSimulation",
    "FlatSimulationResult",
    "IssuedCells",
    "LatencyModel",
    "MissRatioCurve",
    "SimulateSpec",
    "SimulationResult",
    "band_at",
    "best_strategy",
    "cells_for",
    "default_strategies",
    "issued_cells",
    "latency_model",
    "measure_and_simulate",
    "measure_and_simulate_file",
    "measure_for",
    "miss_ratio_curve",
    "profile_spec_for",
    "run",
    "simulate",
    "simulate_flat",
    "simulate_file",
    "simulate_flat_trace",
    "simulate_trace_file",
    "TraceOutOfOrder",
]
