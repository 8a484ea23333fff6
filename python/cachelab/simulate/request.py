"""Request-level simulation: how much slower does each web request get under a caching strategy?

The question Khan Academy's "Profiling App Engine Memcached" answered before moving content
out of process memory: replay a request trace (which catalog items each request touched, in
order) against strategies, charge every memcached operation a latency drawn from a latency
model, and look at the distribution of the *fractional latency increase* — added memcached
time divided by the request's base latency.

Semantics (the Rust core implements them; ``docs/simulation.md`` has the details):

* within a request, the first touch of an item costs one get unless it is in the instance's
  in-process cache (L1) or was already fetched by this request; later touches are free;
* ``lru:N`` / ``lru:SIZE`` keep an LRU per app instance; ``fixed:N`` holds the N items most
  touched in the training window; ``prefetch:depth=D`` fetches a topic and its missing
  descendants to depth D in one multi-get when the topic is first touched;
* requests are split by time: the first ``train`` fraction trains ``fixed`` (and warms the
  LRUs); every strategy is reported on the same evaluation window, the rest;
* every operation's latency is drawn with common random numbers (a hash of the draw's seed,
  the request and the touch), so strategies are compared on the same luck; several draws give
  a band.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.answers import Answer
from cachelab.artifacts import created_now, write_json
from cachelab.errors import UsageError
from cachelab.profile import LatencyProfile
from cachelab.simulate.answers import request_answers
from cachelab.simulate.model import LatencyModel, latency_model
from cachelab.simulate.render import PERCENTILES, SLOWED, render_request
from cachelab.simulate.summary import band_at
from cachelab.simulate.terms import cost_terms
from cachelab.tables import write_csv
from cachelab.traces import RequestTrace
from cachelab.units import check_limit, limited, limits_of

__all__ = [
    "DEFAULT_MODEL",
    "LIMITS",
    "PERCENTILES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SLOWED",
    "SimulateSpec",
    "SimulationResult",
    "default_strategies",
    "order_warnings",
    "simulate",
    "strategies_for",
]

#: The schema of ``simulate.json``, request-level and flat alike (``mode`` tells them apart).
SCHEMA = "cachelab.simulation"
SCHEMA_VERSION = 1

#: The latency model used when none is named: App Engine memcached, 2017.
DEFAULT_MODEL = "appengine-2017"


def default_strategies(n_items: int) -> list[str]:
    """The strategies of the seed's figure, sized at 5 % of the catalog (at least 10 items):
    no cache, an LRU, a fixed hot set, and the fixed set with children / descendant prefetch."""
    n = max(10, round(0.05 * n_items))
    return [
        "none",
        f"lru:{n}",
        f"fixed:{n}",
        f"fixed:{n}+prefetch-children",
        f"fixed:{n}+prefetch:depth=2",
    ]


@dataclass
class SimulateSpec:
    """What to simulate. ``strategies=None`` means :func:`default_strategies`."""

    strategies: tuple[str, ...] | None = None
    model: str = DEFAULT_MODEL
    train: float = limited(0.5, 0.0, 1.0, below=True)
    draws: int = limited(5, 1, 1000)
    seed: int = 0
    #: Worker threads (0: one per core).
    threads: int = limited(0, 0, 1024)

    @classmethod
    def quick(cls, **overrides: Any) -> SimulateSpec:
        """The same simulation, small: 3 latency draws."""
        return cls(**{"draws": 3, **overrides})

    def check(self) -> None:
        """Raises UsageError naming the first bad field."""
        for name, limit in LIMITS.items():
            check_limit(name, limit, getattr(self, name))
        if self.seed < 0:
            raise UsageError(f"--seed must be 0 or more, got {self.seed}")
        for s in self.strategies or ():
            _core.parse_strategy(s)


#: The range of each numeric field only Python checks (the flags' too; ``threads`` is
#: :class:`~cachelab.simulate.flat_run.FlatSimulateSpec`'s too).
LIMITS = limits_of(SimulateSpec)


@dataclass
class SimulationResult:
    """Per-strategy results of one simulation, JSON-ready."""

    created: str
    trace: dict[str, Any]
    model: dict[str, Any]
    spec: dict[str, Any]
    strategies: list[dict[str, Any]]
    route_names: list[str]
    elapsed_s: float = 0.0
    #: What the reader should know about the input (e.g. a trace not in time order).
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    #: The profile measured for this simulation (``simulate --server``), written under
    #: ``profile/``; None when the model was given.
    profile: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "mode": "request",
            "created": self.created,
            "trace": self.trace,
            "model": self.model,
            "spec": self.spec,
            "elapsed_s": round(self.elapsed_s, 3),
            "strategies": self.strategies,
            "warnings": self.warnings,
            **self.extra,
        }

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    def by_name(self, strategy: str) -> dict[str, Any]:
        for s in self.strategies:
            if s["strategy"] == strategy:
                return s
        raise KeyError(strategy)

    def render(self) -> str:
        """The tables ``cachelab simulate`` prints: every strategy's bands, and the routes
        that hurt most under the strategy with the lowest p90."""
        return render_request(self.to_dict())

    def answers(self) -> list[Answer]:
        """The answer card: the best strategy and what it saves against no cache, its p50
        and p90 added latency, with the draws' bands — *predicted*, from the model it names
        (:func:`~cachelab.simulate.answers.request_answers`)."""
        return request_answers(self.to_dict())

    def csv_table(self) -> tuple[list[str], list[list[Any]]]:
        """``simulate.csv`` (and ``--format csv``): a row per strategy, with its bands."""
        return _strategy_table(self.to_dict()["strategies"])

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """Writes ``simulate.json``, ``simulate.csv`` (one row per strategy, with bands),
        ``simulate-routes.csv`` and, with ``plots``, ``simulate.png``/``.svg`` into
        ``out_dir``; returns their paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = [self.save(out / "simulate.json")]
        if self.profile is not None:
            written += self.profile.write(out / "profile", plots=plots)
        d = self.to_dict()
        write_csv(out / "simulate.csv", *_strategy_table(d["strategies"]))
        written.append(out / "simulate.csv")
        write_csv(out / "simulate-routes.csv", *_route_table(d["strategies"]))
        written.append(out / "simulate-routes.csv")
        if plots:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.simulate.plots import fractional_increase_plot

            written += fractional_increase_plot(d, out / "simulate")
        return written


def _simulate_here(trace: RequestTrace, model: LatencyModel, strategies: list[str],
                   spec: SimulateSpec) -> list[dict[str, Any]]:
    """Every strategy in this process: ``_core.simulate_requests``, GIL released."""
    return _core.simulate_requests(trace.to_core(), model.to_core(), strategies,
                                   train=spec.train, draws=spec.draws, seed=spec.seed,
                                   threads=spec.threads)


def _strategy_table(strategies: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """``simulate.csv``: per strategy, each percentile and "slowed" share with its band."""
    header = ["strategy"]
    for p in PERCENTILES:
        header += [f"p{p}", f"p{p}_low", f"p{p}_high"]
    for t in SLOWED:
        header += [f"slowed_{t}", f"slowed_{t}_low", f"slowed_{t}_high"]
    header += ["hit_ratio", "round_trips_per_request", "bytes_per_request", "requests"]
    rows = []
    for s in strategies:
        row: list[Any] = [s["strategy"]]
        for field_, key, names in (("percentiles", "percentile", PERCENTILES),
                                   ("slowed", "threshold", SLOWED)):
            for name in names:
                b = band_at(s, field_, key, float(name))
                row += [b["median"], b["low"], b["high"]]
        row += [s["hit_ratio"], s["round_trips_per_request"], s["bytes_per_request"],
                s["counts"]["requests"]]
        rows.append(row)
    return header, rows


def _route_table(strategies: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """``simulate-routes.csv``: per strategy and route, the added time."""
    header = ["strategy", "route", "requests", "mean_added_ms", "mean_increase",
              "total_added_ms"]
    rows = [
        [s["strategy"], r["route"], r["requests"], r["mean_added_ms"], r["mean_increase"],
         r["total_added_ms"]]
        for s in strategies for r in s.get("routes", [])
    ]
    return header, rows


def strategies_for(spec: SimulateSpec, model: LatencyModel, n_items: int) -> list[str]:
    """The canonical strategies ``spec`` names (the defaults for ``n_items`` items when it
    names none); UsageError for a prefetch strategy when the model has no multi-get cells."""
    strategies = list(spec.strategies or default_strategies(n_items))
    canonical = [_core.parse_strategy(s) for s in strategies]
    if any("prefetch" in s for s in canonical) and not model.multiget:
        raise UsageError(
            f"latency model {model.name!r} has no multi-get cells; prefetch strategies need them"
        )
    return canonical


def order_warnings(trace: RequestTrace) -> list[str]:
    """A warning when the trace's requests are not in time order: the simulator orders them by
    time (ties in file order), so the file's order is not the order simulated."""
    back = np.flatnonzero(np.diff(trace.time) < 0) + 1
    if not len(back):
        return []
    r = int(back[0])
    return [
        f"the request trace is not in time order: {len(back):,} request(s) come before the "
        f"one above them in the file (first: request {int(trace.request_ids[r])} at "
        f"{float(trace.time[r]):g} s after {float(trace.time[r - 1]):g} s); requests were "
        "simulated in time order (ties in file order), not in file order"
    ]


def profile_extra(profile: LatencyProfile | None) -> dict[str, Any]:
    """What ``simulate.json`` keeps of a profile measured for the simulation: the cells it
    chose from the trace (``cells_from_trace``), when it says."""
    if profile is None or "cells_from_trace" not in profile.client:
        return {}
    return {"cells_from_trace": profile.client["cells_from_trace"]}


def simulate(
    trace: RequestTrace,
    spec: SimulateSpec | None = None,
    *,
    model: LatencyModel | None = None,
    profile: LatencyProfile | None = None,
    trace_info: dict[str, Any] | None = None,
    runner: Callable[[RequestTrace, LatencyModel, list[str], SimulateSpec],
                     list[dict[str, Any]]] | None = None,
) -> SimulationResult:
    """Simulate ``trace`` (a :class:`cachelab.traces.RequestTrace`) under ``spec``.

    The Rust core does the work with the GIL released, over all cores by default (one task per
    strategy and draw). ``runner(trace, model, strategies, spec)`` replaces that call (one
    result per canonical strategy, in order): :mod:`cachelab.simulate.fanout` runs it on a
    Ray cluster. ``profile``: a profile measured for this simulation (``simulate --server``):
    the model is made from it, and the result keeps it to write beside its own files.
    """
    spec = spec or SimulateSpec()
    spec.check()
    model = model or latency_model(profile if profile is not None else spec.model)
    canonical = strategies_for(spec, model, trace.n_items)
    started = time.perf_counter()
    raw = (runner or _simulate_here)(trace, model, canonical, spec)
    for strategy, result in zip(canonical, raw):
        if "terms" not in result:  # (a runner may have computed them where it ran)
            result["terms"] = cost_terms(trace, model, strategy, train=spec.train,
                                         seed=spec.seed)
    elapsed = time.perf_counter() - started
    names = list(trace.route_names)
    for result in raw:
        for route in result.get("routes", []):
            code = route.get("route")
            if isinstance(code, int) and 0 <= code < len(names):
                route["route"] = names[code]
    info = {"requests": len(trace), "items": trace.n_items, **(trace_info or {})}
    return SimulationResult(
        warnings=order_warnings(trace),
        created=created_now(),
        trace=info,
        model=model.describe(),
        spec={
            "strategies": canonical,
            "train": spec.train,
            "draws": spec.draws,
            "seed": spec.seed,
        },
        strategies=list(raw),
        route_names=names,
        elapsed_s=elapsed,
        extra=profile_extra(profile),
        profile=profile,
    )
