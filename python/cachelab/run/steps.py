"""The steps of ``run``, one function each, found through one table (:data:`RUNNERS`).

Each step runs one verb through its entry (``cachelab.<verb>.run(spec, target,
progress=…)``), on the run's server handed on as a :class:`~cachelab.target.Target`
(:meth:`~cachelab.target.Live.handed`; scale and replay start a private server of their own
with the run's options when the run started its own), and writes that verb's artifacts with
the result's own ``write`` into a subdirectory of the run's output; it returns a one-line summary
and whether it found problems. A step that cannot run raises :class:`Skip` with the reason; one
that ran but whose check failed (replay's prediction vs measurement) raises
:class:`CheckFailed`, after writing its artifacts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cachelab.profile as profiles
import cachelab.replay as replay
import cachelab.scale as scale
import cachelab.simulate as simulate_lib
import cachelab.tiers as tiers_lib
import cachelab.traces as traces
from cachelab.answers import NOT_MEASURED, Answer
from cachelab.errors import InputError, Interrupted, ServerError, UsageError
from cachelab.profile.precise import not_reached, precision_percentile, precision_text, wider
from cachelab.progress import Progress
from cachelab.run.result import RunSpec
from cachelab.scale.answers import ceiling_line
from cachelab.scale.result import precision_missed
from cachelab.scale.verdicts import verdict_lines
from cachelab.servers import ServerOptions
from cachelab.simulate.summary import band_at, best_strategy
from cachelab.simulate.verb import SYNTHETIC, SYNTHETIC_QUICK
from cachelab.target import Target
from cachelab.units import num
from cachelab.usl import relative_se

__all__ = ["REFERENCE_MODEL", "RUNNERS", "CheckFailed", "Skip", "State", "card", "profile_spec",
           "replay_setup", "scale_spec", "tiers_spec"]

#: The published profile every simulation is also run with, for reference.
REFERENCE_MODEL = "appengine-2017"
#: Requests in the replay step's synthetic trace (``--quick``, full).
REPLAY_REQUESTS = {True: 1_000, False: 4_000}


class Skip(Exception):
    """A step that cannot run; the message says why."""


class CheckFailed(Exception):
    """A step that ran to the end but whose result failed its check: ``summary`` is the step's
    one line as usual, the message which check failed, with the numbers."""

    def __init__(self, summary: str, reason: str, check: str = "replay") -> None:
        super().__init__(reason)
        self.summary = summary
        #: The check's name, as ``--fail-on`` takes it.
        self.check = check


@dataclass
class State:
    """What later steps use from earlier ones."""

    out: Path
    #: The run's server, handed on to each step (None: there is none to measure).
    target: Target | None
    spec: RunSpec
    log: Callable[[str], None]
    profile_path: Path | None = None
    trace: Any = None
    trace_info: dict[str, Any] = field(default_factory=dict)
    best: str | None = None
    #: The options of the run's private server (None when the run was given a server).
    server_options: ServerOptions | None = None
    #: Directories this run wrote results into (the report shows these, and nothing older).
    produced: list[Path] = field(default_factory=list)
    #: Step -> the answer card of its result (:func:`card`), for the run's own card.
    answers: dict[str, list[Answer]] = field(default_factory=dict)
    #: Step -> its verdict and precision lines (NOT, INVALID, each with its ``→ fix``), also
    #: in its summary: the run's "what to trust:" block says them once.
    caveats: dict[str, list[str]] = field(default_factory=dict)

    def wrote(self, sub: str) -> Path:
        """The directory of a step's artifacts, remembered for the report."""
        out = self.out / sub
        self.produced.append(out)
        return out


@contextlib.contextmanager
def _keeping_partial(st: State, step: str) -> Iterator[None]:
    """Around a step's verb: what it measured before Ctrl-C (its partial result,
    ``Interrupted.partial``) is written into the step's directory, so the run's report shows
    it, marked partial; the Interrupted goes on."""
    try:
        yield
    except Interrupted as e:
        if e.partial is not None:
            e.partial.write(st.wrote(step))
        raise


def _gave_up(run: dict[str, Any], step: str) -> None:
    """A step whose verb gave up on the server (``run.aborted``; its partial result is
    written) fails as a server failure."""
    if run.get("aborted"):
        raise ServerError(f"{step} gave up: {run['aborted']}")


def card(st: State, step: str, result: Any) -> None:
    """The answer card of a step's result, kept for the run's card: whatever its
    ``answers()`` gives — any verb's result that has one (:mod:`cachelab.answers`); nothing
    for one without."""
    answers = getattr(result, "answers", None)
    if not callable(answers):
        return
    try:
        st.answers[step] = list(answers())
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:  # the card
        # is no reason to lose the measurement: the card says it has no answer, and why
        st.answers[step] = [Answer(step, "not measured", NOT_MEASURED,
                                   f"its card failed ({type(e).__name__}: {e})")]


def _keep(st: State, step: str, result: Any) -> None:
    """The step's result written into its directory and its card kept (:func:`card`); a
    verb that gave up on the server then fails the step (:func:`_gave_up`)."""
    result.write(st.wrote(step))
    card(st, step, result)
    _gave_up(result.run, step)


def _need_server(st: State) -> Target:
    if st.target is None:
        raise Skip("no memcached to measure")
    return st.target


def _own_or(st: State, given: Target) -> Target:
    """A private server of the step's own, with the run's options, when the run started its
    own (scale then reads the server's scheduler statistics through its pid; replay's
    strategies all meet one server thread); else the server given."""
    return (given if st.server_options is None
            else Target(options=st.server_options, resp=given.resp))


def _memcached_only(target: Target, step: str) -> None:
    """Skips a step that measures memcached alone when the study's server is a Redis."""
    if target.resp is not None:
        raise Skip(f"{step} measures memcached (cachelab.tiered's tier), not a Redis yet: "
                   f"`cachelab run` on a memcached has it")


def _problems_text(problems: dict[str, int]) -> str:
    return ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in problems.items())


def profile_spec(spec: RunSpec) -> profiles.ProfileSpec:
    """The profile step's spec."""
    return (profiles.ProfileSpec.quick(seed=spec.seed, precision=spec.precision) if spec.quick
            else profiles.ProfileSpec(seed=spec.seed, precision=spec.precision))


def scale_spec(spec: RunSpec) -> scale.ScaleSpec:
    """The scale step's spec."""
    return (scale.ScaleSpec.quick(repeats=1, seed=spec.seed, precision=spec.precision,
                                  pin=spec.pin)
            if spec.quick else scale.ScaleSpec(repeats=2, seed=spec.seed, pin=spec.pin,
                                               precision=spec.precision))


def tiers_spec(spec: RunSpec) -> tiers_lib.TiersSpec:
    """The tiers step's spec."""
    return (tiers_lib.TiersSpec.quick(seed=spec.seed) if spec.quick
            else tiers_lib.TiersSpec(seed=spec.seed))


def replay_setup(spec: RunSpec, strategies: tuple[str, ...]) -> tuple[Any, replay.ReplaySpec]:
    """The replay step's synthetic trace and spec, for ``strategies``."""
    trace = replay.synthetic(REPLAY_REQUESTS[spec.quick], seed=spec.seed + 1)
    rspec = (replay.ReplaySpec.quick(strategies=strategies, slices=2, seed=spec.seed)
             if spec.quick else replay.ReplaySpec(strategies=strategies, seed=spec.seed))
    return trace, rspec


def step_profile(st: State) -> tuple[str, bool]:
    target = _need_server(st)
    spec = profile_spec(st.spec)
    issued = None
    if "simulate" in st.spec.steps:
        with contextlib.suppress(InputError):  # the simulate step reports it
            _trace(st)
    if st.trace is not None and target.address is not None:
        # Also the cells the simulation will ask of the model (docs/simulation.md).
        spec, issued = simulate_lib.cells_for(st.trace, target.address, base=spec)
    with Progress(None, "profile") as bar, _keeping_partial(st, "profile"):
        result = profiles.run(spec, target, progress=bar)
    if issued is not None:
        result.client["cells_from_trace"] = issued.to_dict()
    # Not _keep: the path is recorded before the step may give up, so that simulate also
    # models a partial profile.
    out = st.wrote("profile")
    result.write(out)
    card(st, "profile", result)
    st.profile_path = out / "profile.json"
    problems = result.problems()
    _gave_up(result.run, "profile")
    gets = {c.value_size: c for c in result.cells_of("get") if c.samples}
    text = ""
    if gets:
        small = min(gets, key=lambda s: abs(s - 1000))
        text = (f"get {gets[small].label} p50 {gets[small].percentiles['50'] / 1000:.1f} µs, "
                f"p99 {gets[small].percentiles['99'] / 1000:.1f} µs"
                + (f" (p{precision_percentile(result.precision)} "
                   f"{precision_text(gets[small])})" if gets[small].precision else ""))
    if result.precision is not None:
        missed = not_reached(result.cells)
        if missed:
            line = (f"precision NOT reached in {len(missed)} of {len(result.cells)} cells "
                    f"(p{precision_percentile(result.precision)} within "
                    f"±{100 * result.precision['target']:g} %) → "
                    + (wider(missed, float(result.precision["target"])).lstrip(", ") or
                       "a wider `--precision`") + " or `--precision off`"
                    + ("; the full study (no `--quick`) samples more" if st.spec.quick
                       else ""))
            st.caveats.setdefault("profile", []).append(line)
            text += "; " + line
        else:
            text += (f"; every cell's p{precision_percentile(result.precision)} "
                     f"within ±{100 * result.precision['target']:g} %")
    if problems:
        text += "; problems: " + _problems_text(problems)
    return text, bool(problems)


def step_scale(st: State) -> tuple[str, bool]:
    target = _own_or(st, _need_server(st))
    spec = scale_spec(st.spec)
    # On a terminal a bar with an ETA over the sweep's runs; otherwise a log line per run.
    with Progress(len(spec.order()), "scale") as bar, _keeping_partial(st, "scale"):
        result = scale.run(spec, target, progress=bar)
    _keep(st, "scale", result)
    best = max((r for r in result.summary if r["throughput_mean"] is not None),
               key=lambda r: r["throughput_mean"], default=None)
    text = (f"peak measured {best['throughput_mean']:,.0f}/s at N = {best['n']}" if best
            else "no N had a run in the fit")
    fit = result.fit
    ceiling = ceiling_line(result.to_dict())
    if fit and fit["peak"].get("n_max") is not None and not fit["peak"].get("n_max_infinite"):
        pct = relative_se(fit["x"], fit.get("sigma"))
        text += f"; USL Nmax ≈ {fit['peak']['n_max']:.1f}" + (
            " (the load client's ceiling, not memcached's)" if ceiling else
            f" (residual s.e. {num(pct, 2)} % of mean X)" if pct is not None else "")
    if fit and fit.get("superlinear"):
        sup = fit["superlinear"]
        cross = sup.get("n_cross")
        text += ("; superlinear start (α = "
                 f"{num(sup['alpha'])} unbounded" + (f", payback N× ≈ {cross:.1f}" if cross else "")
                 + ")")
    caveats = st.caveats.setdefault("scale", [])
    caveats += [*verdict_lines(result.spec, result.runs), *([ceiling] if ceiling else [])]
    missed = precision_missed(result.spec, result.runs)
    if missed:
        # (scale's own fix names its --window; run's flags are --precision and --quick)
        caveats.append(missed.split(" (p")[0] + f" (p{spec.precision_percentile}) → a wider "
                       "`--precision` or `--precision off`"
                       + ("; the full study (no `--quick`) measures longer windows"
                          if st.spec.quick else ""))
    for line in caveats:
        text += "; " + line
    if not missed and spec.precision is not None:
        text += f"; every run's p{spec.precision_percentile} within ±{100 * spec.precision:g} %"
    bad = any(r["errors"] or r["lost"] for r in result.runs)
    return text + ("; some runs had errors" if bad else ""), bad


def _trace(st: State) -> None:
    if st.trace is not None:
        return
    if st.spec.trace:
        st.trace = traces.load_request_trace(st.spec.trace)
        st.trace_info = {"source": str(st.spec.trace)}
        return
    # simulate's synthetic trace, as long as simulate makes it
    n = st.spec.requests or (SYNTHETIC_QUICK if st.spec.quick else SYNTHETIC)
    st.trace = traces.synthesize(traces.SynthParams(requests=n, seed=st.spec.seed + 1))
    st.trace_info = {"source": "synthetic", "generator": st.trace.generator}


def step_simulate(st: State) -> tuple[str, bool]:
    _trace(st)
    sim = simulate_lib.SimulateSpec.quick if st.spec.quick else simulate_lib.SimulateSpec
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
            # No target: the model is a profile file, and a local simulation shows no bar.
            spec = sim(model=model, seed=st.spec.seed)
            results.append(simulate_lib.run(spec, None, trace=st.trace,
                                            trace_info=st.trace_info))
        bar.update(len(models))
    # The card: the first simulation's (with the measured profile when there is one).
    card(st, "simulate", results[0])
    for (sub, model), result in zip(models, results):
        result.write(st.wrote(sub))
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


def step_tiers(st: State) -> tuple[str, bool]:
    target = _need_server(st)
    _memcached_only(target, "tiers")
    spec = tiers_spec(st.spec)
    with Progress(spec.reads, "tiers") as bar, _keeping_partial(st, "tiers"):
        result = tiers_lib.run(spec, target, progress=bar)
    _keep(st, "tiers", result)
    n = sum(1 for f in result.findings if f["reproduces"])
    return f"{n} of {len(result.findings)} of the seed's findings reproduce", False


def step_replay(st: State) -> tuple[str, bool]:
    given = _need_server(st)
    _memcached_only(given, "replay")
    if st.spec.trace:
        raise Skip("replay runs on the synthetic trace; for your trace run "
                   f"`cachelab replay {st.spec.trace}`")
    if st.best is None:
        raise Skip("no simulation result to pick a strategy from")
    strategies = ["none"] if st.best == "none" else ["none", st.best]
    try:
        replay.parse(st.best)
    except UsageError as e:
        raise Skip(f"the best simulated strategy cannot be replayed: {e}") from None
    trace, spec = replay_setup(st.spec, tuple(strategies))
    # On the study's own server, replay starts a private one of its own: single-threaded
    # (replay.SERVER_THREADS), so that every strategy meets the same server thread.
    with Progress(None, "replay") as bar, _keeping_partial(st, "replay"):
        result = replay.run(spec, _own_or(st, given), progress=bar, trace=trace,
                            trace_info={"source": "synthetic", "generator": trace.generator})
    _keep(st, "replay", result)
    failed = result.failure()
    if failed:
        raise CheckFailed(f"{', '.join(strategies)}: measured vs predicted differ", failed)
    return f"{', '.join(strategies)}: measured vs predicted agree", False


#: Step name -> the function that runs it; returns (summary, found problems).
RUNNERS: dict[str, Callable[[State], tuple[str, bool]]] = {
    "profile": step_profile,
    "scale": step_scale,
    "simulate": step_simulate,
    "tiers": step_tiers,
    "replay": step_replay,
}
