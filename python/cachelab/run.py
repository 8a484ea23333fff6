"""The whole study in one call: :func:`run_study` measures a memcached and ends in one HTML page.

Steps, each writing its verb's artifacts into a subdirectory of ``out``:

1. ``profile``  — latency of get / set by value size and multi-get by key count;
2. ``scale``    — a concurrency sweep with a USL fit;
3. ``simulate`` — caching strategies on a request trace (synthetic unless given), with the
   profile just measured as the latency model (``simulate/``), and with the published
   ``appengine-2017`` profile for reference (``simulate-appengine-2017/``);
4. ``tiers``    — store vs memcached (+codec, +compression) vs process memory;
5. ``replay``   — the best simulated strategy run for real through ``cachelab.tiered``, beside
   no cache, compared with the simulation's prediction.

One memcached serves every step: the one given, or a private one started for the run (the
scale sweep then starts its own private server with the same flags, so that it can read the
server's scheduler statistics). A step
that fails is recorded (with its error) and the run goes on; the steps after it that need its
result fall back (simulate uses the reference model alone without a profile) or are skipped
with the reason. At the end come ``run.json`` (schema ``cachelab.run`` v1, the step table) and
``report.html`` (every artifact on one page, see :mod:`cachelab.report`).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab import environment
from cachelab.artifacts import write_json
from cachelab.errors import CachelabError, Interrupted, ServerError, UsageError

__all__ = ["SCHEMA", "SCHEMA_VERSION", "STEPS", "RunResult", "RunSpec", "StepOutcome",
           "run_study"]

SCHEMA = "cachelab.run"
SCHEMA_VERSION = 1
STEPS = ("profile", "scale", "simulate", "tiers", "replay")
#: The published profile every simulation is also run with, for reference.
REFERENCE_MODEL = "appengine-2017"


@dataclass
class RunSpec:
    """What :func:`run_study` does. ``quick`` is the same study, small (about a minute)."""

    quick: bool = False
    steps: tuple[str, ...] = STEPS
    seed: int = 0
    #: A request trace (.jsonl, .parquet) for simulate; None: a synthetic one.
    trace: str | None = None
    #: Requests in the synthetic trace (default 100,000; 20,000 quick).
    requests: int | None = None
    report: bool = True

    def check(self) -> None:
        bad = [s for s in self.steps if s not in STEPS]
        if bad:
            raise UsageError(f"unknown step(s) {', '.join(bad)}; the steps are {', '.join(STEPS)}")
        if not self.steps:
            raise UsageError("no steps to run")
        if self.requests is not None and self.requests < 100:
            raise UsageError(f"requests must be at least 100, not {self.requests}")
        if self.seed < 0:
            raise UsageError(f"seed must be 0 or more, not {self.seed}")


@dataclass
class StepOutcome:
    """How one step went: ``ok``, ``problems`` (it ran and reported problems), ``failed`` or
    ``skipped``."""

    name: str
    status: str
    elapsed_s: float = 0.0
    summary: str = ""
    error: str | None = None
    dir: str | None = None
    server_failure: bool = False


@dataclass
class RunResult:
    created: str
    spec: dict[str, Any]
    server: dict[str, Any]
    steps: list[StepOutcome]
    elapsed_s: float = 0.0
    report: str | None = None
    interrupted: bool = False
    environment: dict[str, Any] = field(default_factory=dict)

    def step(self, name: str) -> StepOutcome:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict(), allow_nan=False)


class _Skip(Exception):
    """A step that cannot run; the message says why."""


@dataclass
class _State:
    """What later steps use from earlier ones."""

    out: Path
    address: str | None
    spec: RunSpec
    log: Callable[[str], None]
    profile_path: Path | None = None
    trace: Any = None
    trace_info: dict[str, Any] = field(default_factory=dict)
    best: str | None = None
    #: Facts about the server recorded with each step's result (private, argv).
    server_facts: dict[str, Any] = field(default_factory=lambda: {"private": False})
    #: PrivateMemcached options (memory_mb, threads, extra_args) of a private server.
    server_options: dict[str, Any] = field(default_factory=dict)
    #: Directories this run wrote results into (the report shows these, and nothing older).
    produced: list[Path] = field(default_factory=list)


# -- steps --------------------------------------------------------------------------------


def _need_server(st: _State) -> str:
    if st.address is None:
        raise _Skip("no memcached to measure")
    return st.address


def _step_profile(st: _State) -> tuple[str, bool]:
    from cachelab import profiles
    from cachelab.cli.profile import write_artifacts
    from cachelab.progress import Progress

    address = _need_server(st)
    spec = profiles.ProfileSpec.quick(seed=st.spec.seed) if st.spec.quick else \
        profiles.ProfileSpec(seed=st.spec.seed)
    with Progress(None, "profile") as bar:
        result = profiles.profile(spec, server=address, server_facts=st.server_facts,
                                  on_progress=bar.track)
    out = st.out / "profile"
    write_artifacts(result, out)
    st.produced.append(out)
    st.profile_path = out / "profile.json"
    problems = result.problems()
    if result.run.get("aborted"):
        raise ServerError(f"profile gave up: {result.run['aborted']}")
    gets = {c.value_size: c for c in result.cells_of("get") if c.samples}
    text = ""
    if gets:
        small = min(gets, key=lambda s: abs(s - 1000))
        text = (f"get {gets[small].label} p50 {gets[small].percentiles['50'] / 1000:.1f} µs, "
                f"p99 {gets[small].percentiles['99'] / 1000:.1f} µs")
    if problems:
        text += "; problems: " + ", ".join(f"{n} {k.replace('_', ' ')}"
                                           for k, n in problems.items())
    return text, bool(problems)


def _step_scale(st: _State) -> tuple[str, bool]:
    from cachelab import scale
    from cachelab.cli.scale import write_artifacts
    from cachelab.progress import Progress

    address = _need_server(st)
    spec = (scale.ScaleSpec.quick(repeats=1, seed=st.spec.seed) if st.spec.quick
            else scale.ScaleSpec(repeats=2, seed=st.spec.seed))
    total = len(spec.order())
    # On a terminal a bar with an ETA over the sweep's runs; otherwise a log line per run.
    with Progress(total, "scale") as bar:
        def on_run(done: int, _total: int, n: int, point: dict[str, Any]) -> None:
            bar.label = f"scale N = {n}"
            bar.update(done)
            if not bar.enabled:
                st.log(f"scale {done}/{total}: N = {n}: {point['throughput']:,.0f}/s")

        if st.server_facts.get("private"):
            # A private server of its own, with the same flags: the sweep then reads the
            # server's scheduler statistics (run-queue wait) through its pid.
            result = scale.scale(spec, server=None, server_options=st.server_options,
                                 on_run=on_run)
        else:
            result = scale.scale(spec, server=address, on_run=on_run)
    write_artifacts(result, st.out / "scale")
    st.produced.append(st.out / "scale")
    best = max(result.summary, key=lambda r: r["throughput_mean"])
    text = f"peak measured {best['throughput_mean']:,.0f}/s at N = {best['n']}"
    fit = result.fit
    if fit and fit["peak"].get("n_max") is not None and not fit["peak"].get("n_max_infinite"):
        text += f"; USL Nmax ≈ {fit['peak']['n_max']:.1f} (R² {fit['r_squared']:.2f})"
    bad = any(r["errors"] or r["lost"] for r in result.runs)
    return text + ("; some runs had errors" if bad else ""), bad


def _trace(st: _State) -> None:
    from cachelab import traces

    if st.trace is not None:
        return
    if st.spec.trace:
        st.trace = traces.load_request_trace(st.spec.trace)
        st.trace_info = {"source": str(st.spec.trace)}
        return
    n = st.spec.requests or (20_000 if st.spec.quick else 100_000)
    st.trace = traces.synthesize(traces.SynthParams(requests=n, seed=st.spec.seed + 1))
    st.trace_info = {"source": "synthetic", "generator": st.trace.generator}


def _step_simulate(st: _State) -> tuple[str, bool]:
    from cachelab.cli.simulate import write_artifacts
    from cachelab.progress import Progress
    from cachelab.report.sections import band_at, best_strategy
    from cachelab.simulation import SimulateSpec, simulate

    _trace(st)
    draws = 3 if st.spec.quick else 5
    models: list[tuple[str, str]] = []
    if st.profile_path is not None and st.profile_path.is_file():
        models.append(("simulate", str(st.profile_path)))
    models.append((f"simulate-{REFERENCE_MODEL}", REFERENCE_MODEL))
    texts = []
    with Progress(len(models), "simulate") as bar:
        results = []
        for i, (sub, model) in enumerate(models):
            bar.label = f"simulate ({'measured profile' if sub == 'simulate' else model})"
            bar.update(i)
            results.append(simulate(st.trace, SimulateSpec(model=model, draws=draws,
                                                           seed=st.spec.seed),
                                    trace_info=st.trace_info))
        bar.update(len(models))
    for (sub, model), result in zip(models, results):
        write_artifacts(result, st.out / sub)
        st.produced.append(st.out / sub)
        best = best_strategy(result.to_dict())
        if best is None:
            continue
        p90 = band_at(best, "percentiles", "percentile", 90.0)["median"]
        name = "measured" if sub == "simulate" else model
        texts.append(f"{name}: best {best['strategy']} (p90 +{100 * p90:.1f} %)")
        if st.best is None:
            st.best = best["strategy"]
    if len(models) == 1:
        texts.append("no measured profile: reference model only")
    return "; ".join(texts), False


def _step_tiers(st: _State) -> tuple[str, bool]:
    from cachelab import tiers
    from cachelab.plots.tiers import tiers_plot
    from cachelab.progress import Progress
    from cachelab.tables import write_csv

    address = _need_server(st)
    spec = tiers.TiersSpec.quick(seed=st.spec.seed) if st.spec.quick else \
        tiers.TiersSpec(seed=st.spec.seed)
    with Progress(spec.reads, "tiers") as bar:
        result = tiers.tiers(spec, server=address,
                             on_progress=lambda done, _total: bar.update(done))
    result.server.update({k: v for k, v in st.server_facts.items() if k in ("private", "argv")})
    out = st.out / "tiers"
    out.mkdir(parents=True, exist_ok=True)
    result.save(out / "tiers.json")
    cols = ["shape", "method", "reads", "wall_p50_us", "wall_p90_us", "wall_mean_us",
            "cpu_mean_us", "stored_bytes"]
    write_csv(out / "tiers.csv", cols, [[r[c] for c in cols] for r in result.rows])
    tiers_plot(result, out / "tiers")
    st.produced.append(out)
    n = sum(1 for f in result.findings if f["reproduces"])
    return f"{n} of {len(result.findings)} of the seed's findings reproduce", False


def _step_replay(st: _State) -> tuple[str, bool]:
    from cachelab import replay, traces
    from cachelab.cli.replay import write_artifacts
    from cachelab.progress import Progress, stage_logger

    address = _need_server(st)
    if st.spec.trace:
        raise _Skip("replay runs on the synthetic trace; for your trace run "
                    f"`cachelab replay {st.spec.trace}`")
    if st.best is None:
        raise _Skip("no simulation result to pick a strategy from")
    strategies = ["none"] if st.best == "none" else ["none", st.best]
    try:
        replay.parse(st.best)
    except UsageError as e:
        raise _Skip(f"the best simulated strategy cannot be replayed: {e}") from None
    n = 1_000 if st.spec.quick else 4_000
    trace = traces.synthesize(traces.SynthParams(requests=n, seed=st.spec.seed + 1))
    spec = (replay.ReplaySpec.quick(strategies=tuple(strategies), slices=2, seed=st.spec.seed)
            if st.spec.quick else replay.ReplaySpec(strategies=tuple(strategies),
                                                    seed=st.spec.seed))
    with Progress(None, "replay") as bar:
        result = replay.replay(trace, spec, server=address,
                               trace_info={"source": "synthetic", "generator": trace.generator},
                               log=stage_logger(bar, "replay", st.log), on_progress=bar.track)
    result.server.update({k: v for k, v in st.server_facts.items() if k in ("private", "argv")})
    write_artifacts(result, st.out / "replay")
    st.produced.append(st.out / "replay")
    bad = [s["strategy"] for s in result.strategies if not s.get("within_tolerance")]
    text = f"{', '.join(strategies)}: measured vs predicted " + (
        "agree" if not bad else f"differ beyond tolerance for {', '.join(bad)}")
    return text, False


#: Step name -> the function that runs it; returns (summary, found problems).
_RUNNERS: dict[str, Callable[[_State], tuple[str, bool]]] = {
    "profile": _step_profile,
    "scale": _step_scale,
    "simulate": _step_simulate,
    "tiers": _step_tiers,
    "replay": _step_replay,
}

_DIRS = {"profile": "profile", "scale": "scale", "simulate": "simulate", "tiers": "tiers",
         "replay": "replay"}


# -- the run ------------------------------------------------------------------------------


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return text if isinstance(e, CachelabError) else f"{type(e).__name__}: {text}"


def _check_server(address: str) -> str:
    from cachelab import _core

    with _core.Client(address, timeout=2.0) as c:
        return str(c.version())


def run_study(
    spec: RunSpec | None = None,
    out: str | Path = "cachelab-out/run",
    *,
    server: str | None = None,
    server_options: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
) -> RunResult:
    """Runs the steps of ``spec`` against ``server`` (``host:port`` / ``unix:/path``) or a
    private memcached, writing into ``out``; returns the outcome of every step. Never raises
    for a failed step; raises :class:`~cachelab.errors.Interrupted` (with ``partial``, the
    result so far, whose report is written) on Ctrl-C."""
    from cachelab.servers import PrivateMemcached

    spec = spec or RunSpec()
    spec.check()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    say = log or (lambda _msg: None)
    started = time.perf_counter()
    result = RunResult(created=_now(), spec=asdict(spec), server={"address": server,
                       "private": server is None}, steps=[], environment=environment.facts())
    mc: PrivateMemcached | None = None
    st = _State(out=out, address=None, spec=spec, log=say)
    server_error: str | None = None
    try:
        try:
            if server is None:
                st.server_options = dict(server_options or {})
                opts = dict(st.server_options)
                opts["memory_mb"] = max(int(opts.get("memory_mb", 64)), 256)
                mc = PrivateMemcached(**opts, item_size_max="2m").start()
                st.address = mc.address
                st.server_facts = {"private": True, "argv": mc.argv}
                result.server.update(address=mc.address, argv=mc.argv, version=mc.version)
                say(f"private memcached {mc.version} at {mc.address}")
            else:
                version = _check_server(server)
                st.address = server
                result.server["version"] = version
        except ServerError as e:
            server_error = _one_line(e)
            say(f"no server: {server_error}")
        for i, name in enumerate(spec.steps, 1):
            say(f"[{i}/{len(spec.steps)}] {name}")
            t0 = time.perf_counter()
            outcome = StepOutcome(name=name, status="ok", dir=_DIRS[name])
            try:
                summary, problems = _RUNNERS[name](st)
                outcome.summary = summary
                outcome.status = "problems" if problems else "ok"
            except _Skip as e:
                outcome.status, outcome.error, outcome.dir = "skipped", str(e), None
                if server_error and str(e) == "no memcached to measure":
                    outcome.error = f"no memcached to measure: {server_error}"
                    outcome.server_failure = True
            except (KeyboardInterrupt, Interrupted):
                outcome.status, outcome.error = "failed", "interrupted"
                result.steps.append(outcome)
                result.interrupted = True
                break
            except Exception as e:  # a failed step is reported; the run goes on
                outcome.status, outcome.error = "failed", _one_line(e)
                outcome.server_failure = isinstance(e, ServerError)
                if not isinstance(e, CachelabError):
                    tb = traceback.format_exc(limit=-3).strip().splitlines()
                    say(f"{name} failed: {tb[-1]}")
            outcome.elapsed_s = round(time.perf_counter() - t0, 2)
            result.steps.append(outcome)
            say(f"{name}: {outcome.status} in {outcome.elapsed_s:.1f} s"
                + (f": {outcome.summary}" if outcome.summary else "")
                + (f" ({outcome.error})" if outcome.error else ""))
    finally:
        if mc is not None:
            mc.stop()
    done = {s.name for s in result.steps}
    for name in spec.steps:
        if name not in done:
            result.steps.append(StepOutcome(name=name, status="skipped", error="interrupted"))
    result.elapsed_s = round(time.perf_counter() - started, 2)
    result.save(out / "run.json")
    if spec.report:
        from cachelab.report import write_report

        try:
            # This run's results only: a re-used --out may hold older ones.
            write_report([out / "run.json", *st.produced], out / "report.html",
                         title="cachelab run")
            result.report = str(out / "report.html")
        except Exception as e:  # the results are saved; say why the page is missing
            say(f"report failed: {_one_line(e)}")
        result.elapsed_s = round(time.perf_counter() - started, 2)
        result.save(out / "run.json")
    if result.interrupted:
        err = Interrupted(f"interrupted; partial results and report in {out}")
        err.partial = result  # type: ignore[attr-defined]
        raise err
    return result
