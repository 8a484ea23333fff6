"""Request-level simulation of a trace file read in parts: memory that does not grow with the
number of requests.

:func:`simulate_file` reads the catalog and counts the requests, then (when a ``fixed:``
strategy needs its hot set) reads the training window once to rank the items, then reads the
whole trace again in parts of :data:`~cachelab.traces.stream.DEFAULT_PART` requests, each
simulated by every strategy and draw in the Rust core (``_core.RequestStream``) and then
dropped. What stays is per item and per strategy: each item's state, each app instance's LRU,
and each draw's summary (see ``docs/simulation.md``).

The results are those of :func:`~cachelab.simulate.request.simulate` on the whole trace,
bit for bit, while the fractional increases fit the exact limit (``exact_limit`` values over
all strategies and draws; 4,194,304 by default, 32 MB); past it, percentiles (and the cost
terms' percentiles) come from histograms and ``simulate.json`` says so under
``trace.percentiles``.

The file must be in time order: the whole-trace simulation orders requests by time, and here
the order read is the order simulated. A trace out of order raises :class:`TraceOutOfOrder`,
naming the file and line (or row) of the first request earlier than the one before it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.artifacts import created_now
from cachelab.errors import InputError, UsageError
from cachelab.profile import LatencyProfile, ProfileSpec
from cachelab.simulate.cells import measure_for
from cachelab.simulate.model import LatencyModel, latency_model
from cachelab.simulate.request import (
    SimulateSpec,
    SimulationResult,
    profile_extra,
    simulate,
    strategies_for,
)
from cachelab.simulate.terms import COLUMNS, StreamedTerms, unit_costs
from cachelab.traces.formats import detect_format, load_request_trace
from cachelab.traces.stream import DEFAULT_PART, PART_MULTIPLE, RequestParts, open_request_parts

__all__ = ["CELLS_FROM", "DEFAULT_EXACT_LIMIT", "IN_MEMORY_FALLBACK", "TraceOutOfOrder",
           "measure_and_simulate_file", "simulate_file", "simulate_trace_file"]

#: Fractional increases kept exactly, over all strategies and draws.
DEFAULT_EXACT_LIMIT = 1 << 22
#: A trace out of time order with up to this many requests is simulated whole, in memory.
IN_MEMORY_FALLBACK = 1_000_000
#: ``simulate TRACE --server`` chooses the cells it profiles from this many first requests.
CELLS_FROM = 1 << 20


class TraceOutOfOrder(InputError):
    """The trace is not in time order; ``where`` names the first request out of order."""

    def __init__(self, where: str, requests: int) -> None:
        super().__init__(f"{where}: this request is earlier than the one before it; a trace "
                         "simulated in parts must be in time order (sort its requests by time, "
                         "or simulate it whole with --in-memory)")
        self.where, self.requests = where, requests


def _out_of_order(src: RequestParts, e: InputError) -> InputError:
    """The core's "request N ... not in time order" as an error naming file and line."""
    text = str(e)
    if "not in time order" not in text:
        return e
    found = re.search(r"request (\d+)", text)
    if found is None:  # worded otherwise: the core's own message, which says what is wrong
        return e
    return TraceOutOfOrder(src.where(int(found.group(1))), src.n_requests)


def simulate_file(
    path: str | Path,
    spec: SimulateSpec | None = None,
    *,
    format: str | None = None,
    model: LatencyModel | None = None,
    profile: LatencyProfile | None = None,
    trace_info: dict[str, Any] | None = None,
    part_requests: int = DEFAULT_PART,
    exact_limit: int = DEFAULT_EXACT_LIMIT,
) -> SimulationResult:
    """Simulates the request trace at ``path`` (JSONL or Parquet) under ``spec``, part by
    part; ``model`` and ``profile`` as :func:`~cachelab.simulate.request.simulate` takes
    them. Raises :class:`TraceOutOfOrder` for a trace out of time order."""
    spec = spec or SimulateSpec()
    spec.check()
    model = model or latency_model(profile if profile is not None else spec.model)
    started = time.perf_counter()
    src = open_request_parts(path, detect_format(path, format), part_requests)
    canonical = strategies_for(spec, model, src.n_items)
    try:
        stream = _core.RequestStream(**src.core_catalog(), model=model.to_core(),
                                     strategies=canonical, requests=src.n_requests,
                                     train=spec.train, draws=spec.draws, seed=spec.seed,
                                     threads=spec.threads, exact_limit=exact_limit, costs=True)
    except (UsageError, InputError):
        # A bad file says so before a window that does not fit it: read it through first.
        for _ in src.parts():
            pass
        raise
    units = unit_costs(model)
    terms = [StreamedTerms(units, max(1, exact_limit // 8 // len(canonical)))
             for _ in canonical]
    try:
        if stream.needs_training:
            for part in src.parts():
                if not stream.train(**part.core_columns()):
                    break
        for part in src.parts():
            stream.feed(**part.core_columns())
            for k, t in enumerate(terms):
                t.add({name: np.frombuffer(b, "<f8")
                       for name, b in stream.part_costs(k, list(COLUMNS)).items()})
        histograms = stream.histograms
        cpu_s = stream.cpu_s
        raw = stream.finish()
    except InputError as e:
        raise _out_of_order(src, e) from None
    names = src.route_names
    for result, t in zip(raw, terms):
        result["terms"] = t.result()
        for route in result.get("routes", []):
            code = route.get("route")
            if isinstance(code, int) and 0 <= code < len(names):
                route["route"] = names[code]
    info = {"requests": src.n_requests, "items": src.n_items, **(trace_info or {}),
            "read": f"in parts of {part_requests:,} requests",
            "simulation_cpu_s": {s: round(c, 3) for s, c in zip(canonical, cpu_s)}}
    if histograms or any(t.hists is not None for t in terms):
        info["percentiles"] = ("from histograms (within 0.05 % of the exact value; cost "
                               "terms within 0.14 %)")
    return SimulationResult(
        created=created_now(),
        trace=info,
        model=model.describe(),
        spec={"strategies": canonical, "train": spec.train, "draws": spec.draws,
              "seed": spec.seed},
        strategies=list(raw),
        route_names=names,
        elapsed_s=time.perf_counter() - started,
        extra=profile_extra(profile),
        profile=profile,
    )


def simulate_trace_file(path: str | Path, spec: SimulateSpec | None = None, *,
                        format: str | None = None, profile: LatencyProfile | None = None,
                        trace_info: dict[str, Any] | None = None) -> SimulationResult:
    """``simulate TRACE``: :func:`simulate_file`; a trace out of time order of up to
    :data:`IN_MEMORY_FALLBACK` requests is loaded whole and simulated by time, with the
    warning :func:`~cachelab.simulate.request.simulate` gives; a longer one is refused.
    ``trace_info`` defaults to the file's name as ``source``."""
    info = trace_info if trace_info is not None else {"source": str(path)}
    try:
        return simulate_file(path, spec, format=format, profile=profile, trace_info=info)
    except TraceOutOfOrder as e:
        if e.requests > IN_MEMORY_FALLBACK:
            raise
    trace = load_request_trace(path, format)
    return simulate(trace, spec, profile=profile, trace_info=info)


def measure_and_simulate_file(
    path: str | Path, spec: SimulateSpec, server: str, *, base: ProfileSpec | None = None,
    format: str | None = None, on_progress: Callable[[int, int], None] | None = None,
    cells_from: int = CELLS_FROM,
) -> SimulationResult:
    """``simulate TRACE --server``: profiles the memcached at ``server`` at the cells the
    strategies issue on the trace's first ``cells_from`` requests (their key counts and value
    sizes: :func:`~cachelab.simulate.cells.measure_for`; rounded up to a multiple of
    :data:`~cachelab.traces.stream.PART_MULTIPLE`), then simulates the whole trace with
    that profile's model, in parts (:func:`simulate_trace_file`'s rules: a trace out of time
    order of up to :data:`IN_MEMORY_FALLBACK` requests is loaded whole). The result keeps the
    profile, to write under ``profile/``."""
    spec.check()
    cells_from = -(-max(1, cells_from) // PART_MULTIPLE) * PART_MULTIPLE
    src = open_request_parts(path, detect_format(path, format), cells_from)
    first = next(iter(src.parts()), None)
    sample = src.trace_of(first)
    measured, _ = measure_for(sample, server, strategies=spec.strategies, train=spec.train,
                              base=base, on_progress=on_progress)
    info = {"source": str(path),
            "cells_from": f"the first {len(sample):,} of {src.n_requests:,} requests"}
    return simulate_trace_file(path, spec, format=format, profile=measured, trace_info=info)
