"""One replay (:func:`replay`): the catalog into memcached; every strategy built for real
(:mod:`~cachelab.replay.driver`) and run over the evaluation window slice by slice, its
profile sampled (:mod:`~cachelab.replay.sampler`) and the library's unit costs calibrated
(:mod:`~cachelab.replay.calibrate`) as it goes; then each strategy's prediction from the
simulator and the comparison (:mod:`~cachelab.replay.compare`)."""

from __future__ import annotations

import gc
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np

import cachelab._core as _core
import cachelab.environment as environment
import cachelab.traces as traces
from cachelab.artifacts import created_now
from cachelab.capacity import Evicting, EvictionWatch, guard
from cachelab.errors import Interrupted, ServerError
from cachelab.load import server_side
from cachelab.profile import delete_tier_cells, think_summary, tier_cells, tier_profile
from cachelab.replay.calibrate import Calibrator, calibrate
from cachelab.replay.compare import compare
from cachelab.replay.driver import (
    Driver,
    Workload,
    clock,
    cpu,
    delete_catalog,
    load_catalog,
    windows,
)
from cachelab.replay.footprint import replay_writes
from cachelab.replay.result import ReplayResult
from cachelab.replay.sampler import Sampler, pool_bytes, profile_cells
from cachelab.replay.spec import ReplaySpec, default_strategies, parse
from cachelab.servers import ServerOptions, on_this_machine, stats_or_none
from cachelab.simulate import latency_model
from cachelab.target import Target
from cachelab.tiered import MemcachedTier, TieredCache
from cachelab.units import check_limit, limit

__all__ = ["SERVER_THREADS", "SYNTHETIC", "SYNTHETIC_LIMIT", "SYNTHETIC_QUICK", "SYNTH_PRESET",
           "load_trace", "replay", "synthetic"]

#: Requests of the synthetic trace replayed when no trace is given (``quick``: fewer).
SYNTHETIC, SYNTHETIC_QUICK = 4_000, 2_000
#: The requests a synthetic trace may have (``replay --requests``).
SYNTHETIC_LIMIT = limit(10, 100_000_000)


def load_trace(path: str | None, fmt: str | None = None, *, requests: int | None = None,
               quick: bool = False) -> tuple[Any, dict[str, Any]]:
    """The trace to replay and what ``replay.json`` records of it: the request trace at
    ``path`` (``fmt``: jsonl or parquet, when the extension does not say), or, without a path,
    a synthetic one of ``requests`` requests (default :data:`SYNTHETIC`;
    :data:`SYNTHETIC_QUICK` when ``quick``) of the :data:`SYNTH_PRESET` shape."""
    if path is not None:
        return traces.load_request_trace(path, fmt), {"source": str(path)}
    if requests is not None:
        check_limit("requests", SYNTHETIC_LIMIT, requests)
    trace = synthetic(requests or (SYNTHETIC_QUICK if quick else SYNTHETIC))
    return trace, {"source": "synthetic", "generator": trace.generator}


#: Worker threads of replay's private memcached unless ``--server-threads`` says. With
#: several, each strategy's connection is served by its own thread, and on a machine that
#: client and server share, whether a thread runs on the client's CPU (a get in ~17 µs) or on
#: the other one (~85 µs, woken across CPUs) depends on that thread's history: reads took the
#: fast path 40–50 % of the time for some strategies and 0.4 % for others, and differently for
#: the application's reads and the profile's samples, so a strategy's error depended on which
#: others ran beside it. With one thread every strategy meets the same server thread (the fast
#: path 0.4 % for all; every strategy within 7 % at p50/p90/p99 on a quiet VM, where 4 threads
#: gave lru p50 +13 % and prefetch-children −18 %): docs/simulation.md.
SERVER_THREADS = 1

#: The synthetic trace replay runs when given none: pages that touch about 21 items each. On
#: the default shape (calibrated to the seed article) most requests under a cache make no
#: memcached call, so a replay's p50 would measure the library's overhead alone.
SYNTH_PRESET = "heavy-pages"


def synthetic(requests: int, seed: int | None = None) -> Any:
    """Replay's synthetic trace: ``requests`` requests of the :data:`SYNTH_PRESET` shape
    (``seed``: the generator's; None, its default)."""
    extra = {} if seed is None else {"seed": seed}
    return traces.synthesize(traces.SynthParams.preset(SYNTH_PRESET, requests=requests, **extra))


def replay(
    trace: Any, spec: ReplaySpec | None = None, *, server: str | None = None,
    server_options: ServerOptions | None = None, trace_info: dict[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replays ``trace`` (a :class:`cachelab.traces.RequestTrace`) on the memcached at
    ``server`` — or on a private one (``server_options``, with at least the memory the catalog
    needs) — and compares with the prediction. ``log(message)`` hears the stages;
    ``on_progress(done, total)`` is called as evaluated requests are replayed (every 200, and
    at the end of each slice).

    On a server cachelab did not start, the catalog and profile values are first checked
    against the server's free memory and item size limit (:mod:`cachelab.capacity`:
    :class:`~cachelab.capacity.WontFit` before anything is written), and the replay stops
    (:class:`~cachelab.capacity.Evicting`, after deleting what it wrote) if the server starts
    evicting; ``server.user_items_lost`` in the result counts the evictions.

    Cut short, it keeps the slices every strategy finished, compared with the prediction for
    the same requests: on Ctrl-C (or SIGTERM) it raises :class:`~cachelab.errors.Interrupted`
    with the partial result as ``err.partial`` (``run.cancelled``); when the server fails or
    starts evicting after the first slice, the result is returned with ``run.aborted`` saying
    why. Before the first slice is done, a server failure raises (nothing to keep)."""
    spec = spec or ReplaySpec()
    spec.check()
    sizes = trace.item_sizes
    need_mb = int(sizes.sum() / 1e6 * 1.6) + 64
    big = int(sizes.max()) > 1_000_000 - 300
    with Target.of(server, options=server_options).open(
            memory_mb=need_mb, default_threads=SERVER_THREADS,
            item_size_max="2m" if big else None) as target:
        run = _Run(trace, spec, target.address, log or (lambda msg: None),
                   on_progress or (lambda done, total: None))
        result = run.result(trace_info or {}, target.facts, guarded=target.private is None)
    if result.run.get("cancelled"):
        raise Interrupted("stopped by a signal; partial results kept", partial=result)
    return result


def _server_stats(address: str, timeout: float) -> dict[str, str] | None:
    """The ``stats`` of a memcached on this machine (whose CPU is this machine's); None for
    one elsewhere or one that does not answer."""
    return stats_or_none(address, timeout=timeout) if on_this_machine(address) else None


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        return []


class _Run:
    """One replay on one server: its windows and strategies, then (:meth:`result`) the
    catalog, a driver, sampler and calibrator per strategy, what they measured, and the
    prediction."""

    def __init__(self, trace: Any, spec: ReplaySpec, address: str, say: Callable[[str], None],
                 progress: Callable[[int, int], None]) -> None:
        self.started = time.perf_counter()
        self.load_before = _load()
        self.cpu_before = environment.cpu_snapshot()
        self.server_before = _server_stats(address, max(1.0, spec.timeout))
        self.trace, self.spec, self.address, self.say, self.progress = (
            trace, spec, address, say, progress)
        self.canonical = [str(parse(s))
                          for s in spec.strategies or default_strategies(trace.n_items)]
        n = len(trace)
        self.order, self.n_train, self.evaluated = windows(trace, spec.train)
        self.n_eval = int(self.evaluated.sum())
        self.work = Workload.of(trace)
        # The simulator's own fixed sets, so the real cache pins what the model assumes.
        self.fixed = {c: _core.fixed_set(self.work.core, c, train=spec.train)
                      for c in self.canonical}
        self.rng = np.random.default_rng(spec.seed)
        self.drivers: list[Driver] = []
        self.samplers: dict[str, Sampler] = {}
        self.calibrators: dict[str, Calibrator] = {}
        #: Profile cells written to memcached (deleted at the end).
        self.written: list[list[Any]] = []
        #: Per strategy and request: wall ns, and the part inside memcached calls.
        self.added = {c: np.zeros(n, dtype=np.int64) for c in self.canonical}
        self.in_mc = {c: np.zeros(n, dtype=np.int64) for c in self.canonical}
        #: Per strategy: the unit costs measured in each slice.
        self.cals: dict[str, list[dict[str, float]]] = {c: [] for c in self.canonical}
        #: When this process's last L2 read ended (wall, CPU), shared by every strategy.
        self.shared = {"last": 0, "cpu": 0}
        #: The server's evictions since the start (None on a private server).
        self.watch: EvictionWatch | None = None
        #: The evaluated requests of the slices every strategy finished, and how many slices.
        self.done = np.zeros(n, dtype=bool)
        self.slices_done = 0
        #: The tiers' failed calls already checked (:meth:`_check_server`).
        self.failures_seen = 0

    def result(self, trace_info: dict[str, Any], server_facts: dict[str, Any], *,
               guarded: bool = True) -> ReplayResult:
        """Runs the replay; ``guarded``: on a server cachelab did not start (checked first,
        and watched for evictions)."""
        spec, trace, address = self.spec, self.trace, self.address
        self.watch = guard(address, replay_writes(trace, spec, self.work), private=not guarded,
                           timeout=max(1.0, spec.timeout))
        prefix = f"cachelab:{secrets.token_hex(6)}"
        loader_cache = TieredCache(MemcachedTier(address, timeout=spec.timeout), None,
                                   prefix=prefix)
        kc = loader_cache.key_class("item", lambda ids: {}, codec="raw")
        sizes = trace.item_sizes
        self.say(f"loading {trace.n_items:,} items ({sizes.sum() / 1e6:.1f} MB) into memcached")
        pool = os.urandom(int(sizes.max()) + 65_536)
        with _core.Client(address, timeout=spec.timeout, connect_timeout=spec.timeout) as c:
            version = c.version()
        stop: dict[str, Any] = {"cancelled": False, "aborted": None}
        rows: list[dict[str, Any]] = []
        profile_info: dict[str, Any] = {}
        try:
            try:
                load_catalog(loader_cache, kc, sizes, pool, self._check_evictions)
                self.mean_size = max(1, int(round(float(sizes.mean()))))
                self._build(prefix, kc)
                self._measure()
            except (KeyboardInterrupt, Interrupted):
                stop["cancelled"] = True
            except ServerError as e:
                if not self.slices_done:
                    raise  # nothing measured to keep
                stop["aborted"] = (str(e) if isinstance(e, Evicting) else
                                   f"the server failed in slice {self.slices_done + 1} of "
                                   f"{spec.slices}: {e}")
            if self.slices_done:
                self.say("simulating" + ("" if self.slices_done == spec.slices else
                                         f" the {self.slices_done} slice(s) replayed"))
                try:
                    self._predict(version, rows, profile_info)
                except (KeyboardInterrupt, Interrupted):  # the strategies compared are kept
                    stop["cancelled"] = True
        finally:
            # Every key written goes, also after an error (each clean-up bounded in time).
            for d in self.drivers:
                d.tier.close()
            left = sum(delete_tier_cells(address, cells, spec.timeout) for cells in self.written)
            left += delete_catalog(address, loader_cache, kc, trace.n_items)
            if left:
                self.say(f"could not delete {left} keys under {prefix}")
        lost = None
        if self.watch is not None:
            try:
                lost = self.watch.poll(force=True)
            except ServerError:  # gone: the count read during the run stands
                lost = self.watch.evicted
        evaluated = int((self.evaluated & self.done).sum())
        machine = self._machine()
        elapsed_s = round(time.perf_counter() - self.started, 3)  # one clock read for both
        return ReplayResult(
            machine=machine,
            created=created_now(),
            trace={"requests": len(trace), "items": trace.n_items, "evaluated": evaluated,
                   "bytes": int(sizes.sum()), **trace_info,
                   **({} if evaluated == self.n_eval else {"evaluated_asked": self.n_eval})},
            spec={**asdict(spec), "strategies": self.canonical},
            server={"address": address, "version": version, **server_facts,
                    **({} if lost is None else {"user_items_lost": lost})},
            profile=profile_info,
            strategies=rows,
            elapsed_s=elapsed_s,
            environment=environment.facts(),
            load_average={"before": self.load_before, "after": _load()},
            run={"elapsed_s": elapsed_s, **stop,
                 "slices": {"done": self.slices_done, "asked": spec.slices}},
        )

    def _machine(self) -> dict[str, Any] | None:
        """The CPU other processes used during the replay (this process and the memcached
        on this machine excepted): a busy machine makes the comparison unreliable."""
        after = _server_stats(self.address, max(1.0, self.spec.timeout))
        # its CPU over the replay (a server restarted meanwhile: its new process's since it
        # started, never the difference of two processes' counters)
        used, _ = server_side(self.server_before or {}, after or {})
        server = used.get("rusage_user_s", 0.0) + used.get("rusage_system_s", 0.0)
        return environment.other_cpu(self.cpu_before, environment.cpu_snapshot(), server)

    def _build(self, prefix: str, kc: Any) -> None:
        """A driver per strategy, warmed on the training window; its profile's cells in
        memcached and its sampler warmed; in ``interleaved`` mode its calibrator."""
        spec = self.spec
        self.drivers = [Driver(self.work, self.address, prefix, c, self.fixed[c], spec.timeout,
                               self.shared) for c in self.canonical]
        for d in self.drivers:
            self.say(f"warming {d.strategy} on the training window")
            d.warm(self.order[:self.n_train])
            self._check_evictions()
        for d in self.drivers:
            cells = tier_cells(
                self.address, f"{prefix}:profile:{len(self.samplers)}",
                **profile_cells(self.work, d.depth, self.evaluated),
                multi_value_size=self.mean_size, timeout=spec.timeout, seed=spec.seed,
                pool_bytes=pool_bytes(self.trace))
            self.written.append(cells)
            self._check_evictions()
            d.tier.strip = getattr(kc.format, "own_header", None)
            self.samplers[d.strategy] = Sampler(d.tier, cells, spec.profile_samples, self.n_eval,
                                                self.rng)
            self.samplers[d.strategy].warm(spec.profile_warmup)
        self.started_profiles = time.time()
        if spec.profile_mode == "interleaved":
            self.calibrators = {d.strategy: Calibrator(d, self.rng) for d in self.drivers}

    def _measure(self) -> None:
        """The evaluation window, slice by slice: each request under every strategy in turn
        (who goes first rotates), GC off; the profile samples and calibration requests after
        each request (``interleaved``) or after the slice (``slices``)."""
        spec, drivers, samplers = self.spec, self.drivers, self.samplers
        interleaved = spec.profile_mode == "interleaved"
        chunks = np.array_split(self.order[self.n_train:], spec.slices)
        replayed = 0
        self.progress(0, self.n_eval)
        for k, chunk in enumerate(chunks):
            self.say(f"slice {k + 1}/{len(chunks)}: {len(chunk):,} requests under every "
                     "strategy in turn" + (", each followed by a few samples of its profile "
                                           "and calibration requests" if interleaved else
                                           "; then each strategy's profile slice and "
                                           "calibration"))
            for d in drivers:
                d.tier.forget()
                d.tier.recording = True
                samplers[d.strategy].new_segment()
            # Interleaved: each request is followed by its strategy's profile samples due and
            # its share of the slice's calibration requests.
            steps = {c: -(-spec.calibration_reps * cal.per_round // max(1, len(chunk)))
                     for c, cal in self.calibrators.items()}
            gc.collect()
            gc.disable()
            try:
                for j, r in enumerate(chunk.tolist()):
                    for q in range(len(drivers)):  # rotate who goes first
                        d = drivers[(j + q) % len(drivers)]
                        self.added[d.strategy][r], self.in_mc[d.strategy][r] = d.run(r)
                        if interleaved:
                            samplers[d.strategy].after_request()
                            self.calibrators[d.strategy].aside(steps[d.strategy])
                    self._check_evictions()
                    self._check_server()
                    if j % 200 == 199:
                        self.progress(replayed + j + 1, self.n_eval)
            finally:
                gc.enable()
                for d in drivers:
                    d.tier.recording = False
            if not interleaved:
                # Who samples first rotates by slice too, as the requests do.
                for q in range(len(drivers)):
                    d = drivers[(k + q) % len(drivers)]
                    d.tier.forget()
                    samplers[d.strategy].new_segment()
                    samplers[d.strategy].after_request(len(chunk))
            for d in drivers:
                if interleaved:
                    self.cals[d.strategy].append(self.calibrators[d.strategy].terms())
                    self.calibrators[d.strategy].reset()
                else:
                    self.cals[d.strategy].append(calibrate(d, spec.calibration_reps, self.rng))
            replayed += len(chunk)
            self.done[chunk] = True
            self.slices_done += 1
            self.progress(replayed, self.n_eval)

    def _check_evictions(self) -> None:
        """Stops the replay (:class:`~cachelab.capacity.Evicting`) once the server has
        evicted anything. The ``stats`` read (every half second) is kept out of the next L2
        read's think time, as calibration is."""
        if self.watch is None:
            return
        shared = self.shared
        last, last_cpu = shared["last"], shared["cpu"]
        t0, c0 = clock(), cpu()
        self.watch.stop_if_evicting()
        if last:
            shared["last"] = last + (clock() - t0)
            shared["cpu"] = last_cpu + (cpu() - c0)

    def _check_server(self) -> None:
        """The tiered cache counts a failed memcached call as an error and goes on (to its
        loader); when calls have failed since the last check, the server is asked for its
        version: one that does not answer stops the replay (a ServerError saying so)."""
        failures = sum(d.tier.failures for d in self.drivers)
        if failures == self.failures_seen:
            return
        self.failures_seen = failures
        try:
            with _core.Client(self.address, timeout=self.spec.timeout,
                              connect_timeout=self.spec.timeout) as c:
                c.version()
        except ServerError as e:
            raise ServerError(f"it stopped answering: {e}") from None

    def _costs(self, strategy: str, model: Any) -> list[dict]:
        """The simulator's ``request_costs`` of ``strategy`` under ``model``, one per draw,
        for the evaluated requests replayed (all of them unless the replay was cut short)."""
        core_model = model.to_core()
        draws = [_core.request_costs(self.work.core, core_model, strategy, train=self.spec.train,
                                     seed=self.spec.seed, draw=i)
                 for i in range(self.spec.draws)]
        if self.slices_done == self.spec.slices:
            return draws
        return [_only(d, self.done) for d in draws]

    def _predict(self, version: str, rows: list[dict[str, Any]],
                 profile_info: dict[str, Any]) -> None:
        """Per strategy: its profile and model, the simulator's costs, and measured vs
        predicted (into ``rows``); and what ``replay.json`` keeps of each profile (into
        ``profile_info``)."""
        spec = self.spec
        evaluated = self.evaluated & self.done
        n_eval = int(evaluated.sum())
        for d in self.drivers:
            smp = self.samplers[d.strategy]
            prof = tier_profile(
                smp.cells, address=self.address, version=version, started=self.started_profiles,
                client={"think_ns": think_summary(smp.think), "think_cpu": True,
                        "samples": spec.profile_samples, "warmup": spec.profile_warmup,
                        "mode": spec.profile_mode, "timeout": spec.timeout},
                sequence=smp.sequence)
            model = latency_model(prof, sequence=spec.sequence)
            other = latency_model(prof, sequence=not spec.sequence)
            predicted = self._costs(d.strategy, model)
            alternative = self._costs(d.strategy, other) if other.draws != model.draws else None
            cals = self.cals[d.strategy]
            terms = {key: float(np.median([c[key] for c in cals])) for key in cals[0]}
            gaps = (np.asarray(d.tier.gaps, dtype=np.int64),
                    np.asarray(d.tier.cpu_gaps, dtype=np.int64))
            measured = {"added_ns": self.added[d.strategy], "memcached_ns": self.in_mc[d.strategy],
                        "round_trips_by_request": d.round_trips, "calls": d.calls,
                        **d.counts(n_eval)}
            row = compare(self.trace, d.strategy, measured, predicted, evaluated, terms,
                          gaps, spec.seed, alternative)
            row["draws"] = {"used": model.draws, "lag1": (prof.sequence or {}).get("lag1")}
            rows.append(row)
            profile_info[d.strategy] = {
                "name": prof.name,
                "multi_value_size": self.mean_size,
                "get_p50_us": {c.label: c.at([50.0])[0] / 1000 for c in prof.cells_of("get")},
                "multiget_p50_us": {c.label: c.at([50.0])[0] / 1000
                                    for c in prof.cells_of("multiget")},
                "latency_profile": prof.to_dict(),
            }


def _only(draw: dict[str, Any], keep: np.ndarray) -> dict[str, Any]:
    """A ``request_costs`` draw for the requests in ``keep`` (a mask over the trace) alone:
    every per-request list cut to them, in the same order."""
    req = np.asarray(draw["request"], dtype=np.int64)
    sel = keep[req]
    return {k: (np.asarray(v)[sel] if isinstance(v, list) and len(v) == len(req) else v)
            for k, v in draw.items()}
