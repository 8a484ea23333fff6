"""Scalability sweeps: :func:`scale` measures throughput at a series of loads N with the load
engine (:mod:`cachelab.load`) and fits the Universal Scalability Law (:mod:`cachelab.usl`).

N is one of (``vary``):

* ``connections`` (default): closed-loop client connections, one request outstanding each;
* ``threads``: client threads, each with ``connections_per_thread`` connections;
* ``server-threads``: worker threads (``-t N``) of a private memcached, restarted per point,
  driven by a fixed number of client connections.

Each run warms up, lets the engine find the steady state, then takes a fixed measuring window
of whole intervals from the steady-state start. Repeats run in interleaved order (all points,
then all points again, alternately ascending and descending) so slow drift of the machine
cancels instead of bending the curve. The result (schema ``cachelab.scale`` v1) is written by
:meth:`ScaleResult.save` and read back by :func:`read_scale_result`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cachelab import _core, environment
from cachelab import load as loadlib
from cachelab.artifacts import check_schema, read_json, write_json
from cachelab.errors import InputError, UsageError
from cachelab.usl import MIN_POINTS, UslFit, fit_usl

__all__ = ["SCHEMA", "SCHEMA_VERSION", "VARY", "ScaleResult", "ScaleSpec", "read_scale_result",
           "scale"]

SCHEMA = "cachelab.scale"
SCHEMA_VERSION = 1
VARY = ("connections", "threads", "server-threads")
#: Percentiles kept for each point's latency distribution.
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 100.0)


@dataclass
class ScaleSpec:
    """A sweep. The workload fields are those of :class:`cachelab.load.LoadSpec`
    (``workload``), except connections/threads, which the sweep sets."""

    vary: str = "connections"
    points: list[int] = field(default_factory=lambda: [1, 2, 4, 6, 8, 12, 16, 24, 32])
    repeats: int = 3
    warmup: float = 1.0
    #: Extra seconds after the warm-up in which the steady state may start.
    settle: float = 1.0
    #: Seconds measured from the steady-state start (whole intervals).
    window: float = 3.0
    interval: float = 0.5
    connections_per_thread: int = 1
    #: Client connections when ``vary`` is ``server-threads``.
    client_connections: int = 16
    method: str = "bounded"
    bootstrap: int = 1000
    seed: int = 0
    workload: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def quick(cls, **overrides: Any) -> ScaleSpec:
        """Six points, two repeats, 1.5 s per run: about 20 s against a local memcached."""
        base: dict[str, Any] = {"points": [1, 2, 3, 4, 6, 8], "repeats": 2, "warmup": 0.25,
                                "settle": 0.5, "window": 0.75, "interval": 0.25,
                                "bootstrap": 500, "client_connections": 8,
                                "workload": {"key_space": 1000}}
        if overrides.get("vary") == "server-threads":
            base["points"] = [1, 2, 3, 4, 5, 6]
        return cls(**{**base, **overrides})

    def check(self) -> None:
        if self.vary not in VARY:
            raise UsageError(f"vary must be one of {', '.join(VARY)}, not {self.vary!r}")
        if not self.points or any(not isinstance(p, int) or p < 1 for p in self.points):
            raise UsageError(f"points must be whole numbers >= 1, not {self.points!r}")
        if len(set(self.points)) != len(self.points):
            raise UsageError(f"points must not repeat: {self.points!r} (use repeats)")
        if not isinstance(self.repeats, int) or self.repeats < 1:
            raise UsageError(f"repeats must be a whole number >= 1, not {self.repeats!r}")
        for name in ("warmup", "settle", "window", "interval"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise UsageError(f"{name} must be a number of seconds >= 0, not {v!r}")
        if self.window < self.interval or self.interval <= 0:
            raise UsageError("window must be at least one interval, and interval above 0")
        limit = 64 if self.vary != "connections" else 4096
        if max(self.points) > limit:
            raise UsageError(f"{self.vary}: at most {limit}, not {max(self.points)}")
        bad = {"connections", "threads", "duration", "requests", "warmup", "interval"} & set(
            self.workload)
        if bad:
            raise UsageError(f"workload must not set {', '.join(sorted(bad))}: the sweep does")

    def run_spec(self, n: int) -> loadlib.LoadSpec:
        """The load spec of one run at N = n."""
        if self.vary == "connections":
            conns, threads = n, 1
        elif self.vary == "threads":
            conns, threads = n * self.connections_per_thread, n
        else:
            conns, threads = self.client_connections, 1
        spec = loadlib.LoadSpec(**{**self.workload, "connections": conns, "threads": threads,
                                   "warmup": self.warmup, "duration": self.settle + self.window,
                                   "interval": self.interval,
                                   "seed": self.seed if self.seed is not None else 0})
        spec.check()
        return spec

    def order(self) -> list[tuple[int, int]]:
        """(repeat, N) in run order: interleaved, alternately ascending and descending."""
        pts = sorted(self.points)
        out = []
        for r in range(self.repeats):
            out += [(r, n) for n in (pts if r % 2 == 0 else pts[::-1])]
        return out


@dataclass
class ScaleResult:
    """A finished sweep: every run, a summary per N, the USL fit, and what limits the result."""

    created: str
    spec: dict[str, Any]
    runs: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    fit: dict[str, Any] | None
    limits: list[str]
    server: dict[str, Any]
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def usl(self) -> UslFit | None:
        """The fit as a :class:`~cachelab.usl.UslFit` (None when there were too few points)."""
        return None if self.fit is None else UslFit.from_dict(self.fit, "scale fit")

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "scale result") -> ScaleResult:
        check_schema(d, SCHEMA, SCHEMA_VERSION, "scale result", where)
        try:
            return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})
        except TypeError as e:
            raise InputError(f"{where}: {e}") from None


def read_scale_result(path: str | Path) -> ScaleResult:
    """A sweep saved as ``scale.json`` (or a directory holding one)."""
    path, data = read_json(path, "scale.json")
    return ScaleResult.from_dict(data, str(path))


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def measure_window(result: loadlib.LoadResult, window: float) -> dict[str, Any]:
    """Throughput and latency over the first ``window`` seconds of whole intervals from the
    steady-state start (fewer when the run ends first: ``window_short``)."""
    ivs = result.intervals
    start = result.steady["start_index"]
    chosen, span = [], 0.0
    for iv in ivs[start:]:
        if span >= window - 1e-9:
            break
        chosen.append(iv)
        span += iv["duration_s"]
    which = "corrected" if result.mode == "open" else "uncorrected"
    replies = sum(iv["replies"] for iv in chosen)
    hists = [iv[which]["histogram"] for iv in chosen if iv[which]["count"]]
    merged = _core.hist_merge(hists) if hists else None
    pct = (dict(zip([f"{p:g}" for p in PERCENTILES],
                    _core.hist_percentiles(merged, list(PERCENTILES)))) if merged else {})
    errors = sum(sum(iv["errors"].values()) for iv in chosen)
    return {
        "throughput": replies / span if span > 0 else 0.0,
        "replies": replies,
        "window_s": round(span, 6),
        "intervals": len(chosen),
        "window_short": span < window - 1e-9,
        "steady_reached": bool(result.steady["reached"]),
        "errors": errors,
        "lost": sum(iv["lost"] for iv in chosen),
        "latency": {"which": which, "histogram": merged, "percentiles_ns": pct},
    }


def _cpu_limits(spec: ScaleSpec, server: Mapping[str, Any]) -> list[str]:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or 1
    local = server.get("private") or str(server.get("address", "")).startswith(
        ("127.", "localhost", "unix:", "[::1]"))
    out = []
    if spec.vary == "server-threads":
        top = max(spec.points)
        if top > cpus:
            out.append(f"memcached gets up to {top} worker threads but this machine has {cpus} "
                       f"CPU(s): beyond N = {cpus} the threads time-share cores, so the fitted "
                       "β measures CPU oversubscription, not memcached's locks.")
    if local:
        client_threads = max(spec.points) if spec.vary == "threads" else 1
        server_threads = (max(spec.points) if spec.vary == "server-threads"
                          else server.get("threads") or "?")
        out.append(
            f"client ({client_threads} load thread(s)) and server ({server_threads} worker "
            f"thread(s)) share this machine's {cpus} CPU(s): every core the client uses is "
            "taken from memcached, so α and β describe client + server on this box, not "
            "memcached alone; the curve flattens once both together saturate the CPUs. "
            "Measure from another machine to separate them."
        )
    return out


def scale(
    spec: ScaleSpec | None = None,
    *,
    server: str | None = None,
    server_options: Mapping[str, Any] | None = None,
    on_run: Callable[[int, int, int, dict[str, Any]], None] | None = None,
) -> ScaleResult:
    """Runs the sweep against ``server`` (``host:port``/``unix:/path``), or a private
    memcached (required for ``vary="server-threads"``). ``on_run(done, total, n, point)`` is
    called after each run."""
    from cachelab.servers import PrivateMemcached

    spec = spec or ScaleSpec()
    spec.check()
    if spec.vary == "server-threads" and server is not None:
        raise UsageError("--vary server-threads needs a private memcached (no --server): "
                         "cachelab restarts it with -t N for every point")
    opts = dict(server_options or {})
    order = spec.order()
    runs: list[dict[str, Any]] = []
    server_facts: dict[str, Any] = {"address": server, "private": server is None}
    shared: PrivateMemcached | None = None
    try:
        if server is None and spec.vary != "server-threads":
            memory = max(int(opts.pop("memory_mb", 64)),
                         loadlib._memory_mb(spec.run_spec(max(spec.points))))
            shared = PrivateMemcached(memory_mb=memory, **opts).start()
            server_facts.update(address=shared.address, argv=shared.argv,
                                threads=shared.threads)
        for done, (rep, n) in enumerate(order, 1):
            run_spec = spec.run_spec(n)
            if spec.vary == "server-threads":
                o = {k: v for k, v in opts.items() if k != "threads"}
                memory = max(int(o.pop("memory_mb", 64)), loadlib._memory_mb(run_spec))
                with PrivateMemcached(memory_mb=memory, threads=n, **o) as mc:
                    result = loadlib.load(run_spec, server=mc.address, server_pid=mc.pid,
                                          server_facts={"private": True, "argv": mc.argv})
                server_facts.update(address="private (restarted per point)")
            elif shared is not None:
                result = loadlib.load(run_spec, server=shared.address, server_pid=shared.pid,
                                      server_facts={"private": True, "argv": shared.argv})
            else:
                result = loadlib.load(run_spec, server=server)
            server_facts.setdefault("version", result.server.get("version"))
            point = {"n": n, "repeat": rep, "order": done - 1,
                     "connections": run_spec.connections, "threads": run_spec.threads,
                     **measure_window(result, spec.window)}
            sched = result.server.get("schedstat")
            point["server_run_queue_wait_per_wall"] = sched["wait_per_wall"] if sched else None
            point["client_cpu_us_per_op"] = result.client.get("cpu_us_per_op")
            runs.append(point)
            if on_run:
                on_run(done, len(order), n, point)
    finally:
        if shared is not None:
            shared.stop()

    summary = _summary(runs, spec)
    usable = [r for r in runs if r["throughput"] > 0]
    fit = None
    notes = _cpu_limits(spec, server_facts)
    if len(usable) >= MIN_POINTS and len({r["n"] for r in usable}) >= 3:
        f = fit_usl([r["n"] for r in usable], [r["throughput"] for r in usable], spec.method,
                    bootstrap=spec.bootstrap, seed=spec.seed,
                    source={"sweep": spec.vary, "n": spec.vary, "x": "replies/s"})
        fit = f.to_dict()
    else:
        notes.append(f"only {len(usable)} usable measurement(s) at {len({r['n'] for r in usable})}"
                     f" load(s): the USL needs at least {MIN_POINTS} at 3 or more loads; no fit")
    if any(not r["steady_reached"] for r in runs):
        bad = sorted({r["n"] for r in runs if not r["steady_reached"]})
        notes.append(f"no steady state was detected at N = {', '.join(map(str, bad))}; those "
                     "points were measured from the end of the warm-up (use a longer --settle)")
    noisy = [row["n"] for row in summary
             if row["throughput_sd"] and row["throughput_sd"] > 0.1 * row["throughput_mean"]]
    if noisy:
        notes.append(f"repeats differ by more than 10 % (coefficient of variation) at N = "
                     f"{', '.join(map(str, noisy))}: the machine is not quiet (other load, "
                     "frequency scaling); the fit's intervals widen accordingly")
    if any(r["errors"] or r["lost"] for r in runs):
        notes.append("some runs had errors or lost requests (see runs[].errors)")
    return ScaleResult(created=_now(), spec=asdict(spec), runs=runs, summary=summary, fit=fit,
                       limits=notes, server=server_facts, environment=environment.facts())


def _summary(runs: Sequence[Mapping[str, Any]], spec: ScaleSpec) -> list[dict[str, Any]]:
    out = []
    for n in sorted(spec.points):
        rs = [r for r in runs if r["n"] == n]
        xs = [r["throughput"] for r in rs]
        mean = sum(xs) / len(xs)
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
        hists = [r["latency"]["histogram"] for r in rs if r["latency"]["histogram"]]
        merged = _core.hist_merge(hists) if hists else None
        pct = (dict(zip([f"{p:g}" for p in PERCENTILES],
                        _core.hist_percentiles(merged, list(PERCENTILES)))) if merged else {})
        out.append({"n": n, "runs": len(rs), "throughput_mean": mean, "throughput_sd": sd,
                    "latency": {"histogram": merged, "percentiles_ns": pct}})
    return out
