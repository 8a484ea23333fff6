"""What ``run`` is asked to do (:class:`RunSpec`) and what it did (:class:`RunResult`, one
:class:`StepOutcome` per step), with its artifact (``run.json``, schema ``cachelab.run`` v1)
and its human table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import trust_layout
from cachelab.artifacts import write_json
from cachelab.errors import UsageError
from cachelab.intervals import check_precision
from cachelab.report.overview import run_answers, run_partial, step_text
from cachelab.traces.synth import LIMITS as SYNTH_LIMITS
from cachelab.units import check_limit, limited, limits_of

__all__ = ["DEFAULT_PRECISION", "LIMITS", "PRIVATE_ITEM_SIZE_MAX", "PRIVATE_MEMORY_MB",
           "SCHEMA", "SCHEMA_VERSION", "STEPS", "RunResult", "RunSpec", "StepOutcome"]

SCHEMA = "cachelab.run"
SCHEMA_VERSION = 1
STEPS = ("profile", "scale", "simulate", "tiers", "replay")
#: The precision the study's profile and scale run to (docs/load.md, "Percentile
#: intervals and precision"): ±5 %, with today's samples and windows as the caps; on the p99,
#: and on the p50 for a quick study (whose samples cannot certify a p99).
DEFAULT_PRECISION = 0.05
#: The run's private memcached: at least this much memory (-m) and this largest item (-I),
#: big enough for replay's catalog and tiers' largest record.
PRIVATE_MEMORY_MB = 256
PRIVATE_ITEM_SIZE_MAX = "2m"


@dataclass
class RunSpec:
    """What :func:`run_study` does. ``quick`` is the same study, small (about a minute)."""

    quick: bool = False
    steps: tuple[str, ...] = STEPS
    #: The seed of every step; its synthetic trace's is this one + 1, so one below the
    #: trace's largest (the engines' u64).
    seed: int = limited(0, 0, SYNTH_LIMITS["seed"]["hi"] - 1)
    #: A request trace (.jsonl, .parquet) for simulate; None: a synthetic one.
    trace: str | None = None
    #: Requests in the synthetic trace (None: simulate's, ``simulate.verb.SYNTHETIC``; its
    #: ``SYNTHETIC_QUICK`` quick).
    requests: int | None = limited(None, 100, SYNTH_LIMITS["requests"]["hi"])
    report: bool = True
    #: The precision of the profile's cells and of each scale run (their caps: the samples
    #: per cell and the window), on their specs' ``precision_percentile``; None: fixed
    #: samples and windows.
    precision: float | None = DEFAULT_PRECISION
    #: The scale step pins its private memcached and the load client to separate CPUs on a
    #: small machine (``ScaleSpec.pin``); False: ``--no-pin``.
    pin: bool = True

    def check(self) -> None:
        bad = [s for s in self.steps if s not in STEPS]
        if bad:
            raise UsageError(f"unknown step(s) {', '.join(bad)}; the steps are {', '.join(STEPS)}")
        if not self.steps:
            raise UsageError("no steps to run")
        for name, limit in LIMITS.items():
            if getattr(self, name) is not None:
                check_limit(name, limit, getattr(self, name))
        check_precision(self.precision)


#: The range of each numeric field (the flags' too).
LIMITS = limits_of(RunSpec)


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
    #: The step failed on its input (a malformed ``--trace``: a UsageError), exit 2.
    input_failure: bool = False
    #: The check a ``failed`` step failed (``replay``: its prediction vs the measurement),
    #: which ``run --fail-on`` names; None for a step that failed with an error.
    check: str | None = None
    #: The answer card of the step's result (:meth:`cachelab.answers.Answer.to_dict` of each
    #: of its ``answers()``), empty when its result has none or there is no result.
    answers: list[dict[str, str]] = field(default_factory=list)
    #: Its verdict and precision lines (NOT, INVALID, each ending in its ``→ fix``), also
    #: in ``summary``: the run's table says them once, under "what to trust:".
    caveats: list[str] = field(default_factory=list)
    #: For a step that failed with an unexpected error (a bug, not a CachelabError): the
    #: traceback's last frames, so a report of it can say where.
    traceback: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    created: str
    spec: dict[str, Any]
    server: dict[str, Any]
    steps: list[StepOutcome]
    elapsed_s: float = 0.0
    report: str | None = None
    interrupted: bool = False
    #: Why the run is partial without a signal: the first step that failed on the server
    #: (its partial result, if it has one, is in its directory); None when none did.
    aborted: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)

    def step(self, name: str) -> StepOutcome:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    def failed_checks(self) -> dict[str, str]:
        """The checks ``run --fail-on`` can ask for that this study failed, each with its
        reason: ``replay`` (the replay step's prediction missed the measurement) and
        ``problems`` (a step that reported problems, or failed with an error other than the
        server's, exit 3, or on its input, exit 2)."""
        out: dict[str, str] = {}
        replay = [s for s in self.steps if s.status == "failed" and s.check == "replay"]
        if replay:
            out["replay"] = "; ".join(str(s.error) for s in replay)
        bad = [s for s in self.steps if s.status == "problems"
               or (s.status == "failed" and s.check is None and not s.server_failure
                   and not s.input_failure)]
        if bad:
            out["problems"] = "step(s) " + ", ".join(
                f"{s.name} {s.status}" + (f" ({s.error})" if s.error else "") for s in bad)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict(), allow_nan=False)

    def render(self) -> str:
        """The run's table laid out as every verb's (:func:`~cachelab.answers.trust_layout`):
        a run Ctrl-C stopped, or whose server failed, says so first
        (:func:`~cachelab.report.overview.run_partial`), else its first caveat; then the
        card — every step's answers (a failed or skipped step's as *not measured*, with why:
        :func:`~cachelab.report.overview.run_answers`) —; then "what to trust:", each
        step's verdict and precision lines after its name; then the step table: status,
        time, summary (without those lines) and error of each step, and the total."""
        d = self.to_dict()
        header = ["step", "status", "time", "summary"]
        rows = [[s["name"], s["status"], f"{s['elapsed_s']:.1f} s", step_text(_told(s))]
                for s in d["steps"]]
        widths = [max(len(x[i]) for x in [header, *rows]) for i in range(3)]
        partial = run_partial(d)
        alarms = [partial] if partial else []
        alarms += [f"{s['name']}: {c}" for s in d["steps"] for c in s.get("caveats") or []]
        table = ["  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3]
                 for row in [header, ["-" * w for w in widths] + ["-" * 7], *rows]]
        table.append(f"total {self.elapsed_s:.1f} s")
        return "\n".join(trust_layout(alarms, run_answers(d), table))


def _told(step: dict[str, Any]) -> dict[str, Any]:
    """A step without the caveats its summary holds: the run's block says them."""
    summary = step.get("summary") or ""
    for c in step.get("caveats") or []:
        summary = summary.replace("; " + c, "").replace(c, "")
    return {**step, "summary": summary.strip("; ")}
