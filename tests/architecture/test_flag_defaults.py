"""A flag's default and range are written once (issue 30): what every verb's ``--help`` says
a flag defaults to is the spec's field default (the engine's for the pool's member settings),
or for a flag that sets no spec field the one named constant its code uses; and a flag's
range is the engine's or, for a field only Python checks, the one written beside its
dataclass field. These tests read each verb's --help and compare it with the spec, so a
literal that drifts from the spec fails here."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cachelab.replay as replay
import cachelab.run as run_lib
from cachelab.cli import build_parser
from cachelab.cli.cluster import AGENTS
from cachelab.compare import LIMITS as COMPARE_LIMITS
from cachelab.compare import CompareSpec
from cachelab.load import LIMITS as LOAD_LIMITS
from cachelab.load import LoadSpec, parse_mix
from cachelab.load.engine import PROXY_DISTRIBUTION
from cachelab.profile import ProfileSpec
from cachelab.profile.pool import ROUNDS, ROUNDS_LIMIT
from cachelab.profile.spec import LIMITS as PROFILE_LIMITS
from cachelab.raycluster import CONNECT_TIMEOUT, RAY_LIMITS, RayOptions
from cachelab.run import PRIVATE_MEMORY_MB, RunSpec
from cachelab.scale import LIMITS as SCALE_LIMITS
from cachelab.scale import ScaleSpec
from cachelab.servers import DEFAULT_THREADS, SERVER_LIMITS, ServerOptions
from cachelab.simulate import FlatSimulateSpec, SimulateSpec
from cachelab.simulate.drill import DEFAULT_DISTRIBUTIONS
from cachelab.simulate.flat_run import FLAT_LIMITS
from cachelab.simulate.request import LIMITS as SIMULATE_LIMITS
from cachelab.simulate.streamed import CELLS_FROM
from cachelab.simulate.verb import SYNTHETIC, SYNTHETIC_LIMIT, SYNTHETIC_QUICK
from cachelab.size import SizeSpec
from cachelab.size.sizing import LIMITS as SIZE_LIMITS
from cachelab.tiers import TiersSpec
from cachelab.tiers.spec import LIMITS as TIERS_LIMITS
from cachelab.traces.capture_spec import LIMITS as CAPTURE_LIMITS
from cachelab.traces.capture_spec import CaptureSpec
from cachelab.traces.synth import (
    DEFAULT_PRESET,
    SYNTH_PART,
    SYNTH_PART_LIMIT,
    SynthParams,
    synth_parts,
)
from cachelab.traces.synth import LIMITS as SYNTH_LIMITS
from cachelab.usl import LIMITS as USL_LIMITS
from cachelab.usl import UslSpec

CLI = Path(__file__).resolve().parents[2] / "python" / "cachelab" / "cli"

#: ``default X`` in a flag's help (not ``default: words``), and ``X with --quick`` /
#: ``quick X`` for the small run's.
_DEFAULT = re.compile(r"(?<!by )\bdefault (?!:)([^\s;()]+?)[:,]?(?=[\s;)]|$)")
_QUICK = re.compile(r"(?:([^\s;(]+) with --quick|\bquick ([^\s;)]+))")

_POOL = {"member_failure_limit", "member_retry", "distribution"}

#: The flags every measuring verb shares that set no spec field, and the one definition of
#: each one's default.
_SHARED = {"server_threads": DEFAULT_THREADS, "server_memory": ServerOptions().memory_mb,
           "ray_timeout": CONNECT_TIMEOUT, "agents": AGENTS, "proxy": PROXY_DISTRIBUTION}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _spec_default(verb: str, dest: str, quick: bool) -> tuple[bool, Any]:
    """(whether ``dest`` sets a spec field of ``verb``, that field's default), or a shared
    flag's default (:data:`_SHARED`)."""
    if dest in _SHARED:
        return True, _SHARED[dest]
    load = LoadSpec.quick() if quick else LoadSpec()
    if verb == "load" or dest in _POOL:
        if dest == "member_timeout":  # --member-timeout is in milliseconds
            return True, load.member_timeout * 1000
        return hasattr(load, dest), getattr(load, dest, None)
    if verb == "profile":
        if dest == "rounds":  # not a spec field: profile_pool's
            return True, ROUNDS
        spec = ProfileSpec.quick() if quick else ProfileSpec()
        field = {"connections": "concurrency", "keys": "key_counts",
                 "multi_size": "multi_value_size"}.get(dest, dest)
        return hasattr(spec, field), getattr(spec, field, None)
    scale = ScaleSpec.quick() if quick else ScaleSpec()
    if dest in ("mix", "key_space", "value_size", "pipeline"):  # the workload's
        return True, scale.workload.get(dest, getattr(LoadSpec(), dest))
    return hasattr(scale, dest), getattr(scale, dest, None)


def _value(action: argparse.Action, text: str) -> Any:
    """The help's text read as the flag reads it (its own type), as the spec holds it."""
    if action.dest == "mix":
        return _shares(parse_mix(text))
    value = action.type(text) if callable(action.type) else text
    return tuple(value) if isinstance(value, list) else value


def _shares(mix: dict[str, float]) -> dict[str, float]:
    """An op mix as shares of 1 (``get=90,set=10`` is ``{"get": 0.9, "set": 0.1}``)."""
    total = sum(mix.values())
    return {op: round(v / total, 9) for op, v in mix.items()}


def _as_held(value: Any) -> Any:
    if isinstance(value, dict):
        return _shares(value)
    return tuple(value) if isinstance(value, list) else value


def _stated(verb: str) -> list[tuple[str, str, Any, Any]]:
    """(flag, which, stated, spec's) for each default the verb's --help states for a flag
    that sets a spec field; ``which`` is ``default`` or ``quick``."""
    out = []
    for action in _parsers()[verb]._actions:
        if not action.option_strings or not action.help or action.help == argparse.SUPPRESS:
            continue
        text = action.help % {"prog": "cachelab"} if "%(" in action.help else \
            action.help.replace("%%", "%")
        for which, pattern in (("default", _DEFAULT), ("quick", _QUICK)):
            for m in pattern.finditer(text):
                stated = next(g for g in m.groups() if g)
                known, held = _spec_default(verb, action.dest, quick=which == "quick")
                if known:
                    out.append((action.option_strings[0], which, _value(action, stated),
                                _as_held(held)))
    return out


@pytest.mark.parametrize(("verb", "least"), [("load", 34), ("scale", 23), ("profile", 17)])
def test_help_states_the_spec_s_defaults(verb: str, least: int) -> None:
    """Every default a flag's --help states is the spec's (or the engine's) default, read
    back with the flag's own parser: ``--connections N  connections (default 4)`` is
    ``LoadSpec().connections``; ``(default 10; 3 with --quick)`` also ``LoadSpec.quick()``'s."""
    stated = _stated(verb)
    wrong = [(flag, which, got, held) for flag, which, got, held in stated if got != held]
    assert wrong == []
    assert len(stated) >= least, [s[:2] for s in stated]


# -- the other verbs: each stated default against its one definition ----------------------

_REPLAY, _REPLAY_Q = replay.ReplaySpec(), replay.ReplaySpec.quick()
_SIM, _SIM_Q, _FLAT = SimulateSpec(), SimulateSpec.quick(), FlatSimulateSpec()
_TIERS, _TIERS_Q = TiersSpec(), TiersSpec.quick()
_COMPARE, _COMPARE_Q = CompareSpec(), CompareSpec.quick()
_USL, _SIZE, _RUN = UslSpec(file=""), SizeSpec(trace=""), RunSpec()
_SYNTH, _SYNTH_Q = SynthParams.preset(DEFAULT_PRESET), SynthParams.quick()
_CAPTURE = CaptureSpec()

#: The other verbs (``trace``'s by action): each flag whose --help states a default, and that
#: default's one definition, ``dest: (default, quick)`` (quick None: the help states none) —
#: a spec's field default, or the named constant the code uses for a flag that sets no field.
ONE_DEFINITION: dict[str, dict[str, tuple[Any, Any]]] = {
    "replay": {
        "requests": (replay.SYNTHETIC, replay.SYNTHETIC_QUICK),
        "draws": (_REPLAY.draws, _REPLAY_Q.draws),
        "profile_samples": (_REPLAY.profile_samples, _REPLAY_Q.profile_samples),
        "calibration_reps": (_REPLAY.calibration_reps, _REPLAY_Q.calibration_reps),
        "slices": (_REPLAY.slices, None),
        "timeout": (_REPLAY.timeout, None),
        "seed": (_REPLAY.seed, None),
        "server_threads": (replay.SERVER_THREADS, None),
        "server_memory": (ServerOptions().memory_mb, None),
    },
    "simulate": {
        "model": (_SIM.model, None),
        "train": (_SIM.train, None),
        "draws": (_SIM.draws, _SIM_Q.draws),
        "requests": (SYNTHETIC, SYNTHETIC_QUICK),
        "policies": (_FLAT.policies, None),
        "unit": (_FLAT.unit, None),
        "drill_distributions": (DEFAULT_DISTRIBUTIONS, None),
        "seed": (_SIM.seed, None),
        "threads": (_SIM.threads, None),  # FlatSimulateSpec's too
        "ray_timeout": (CONNECT_TIMEOUT, None),
    },
    "tiers": {
        "reads": (_TIERS.reads, _TIERS_Q.reads),
        "codec": (_TIERS.codec, None),
        "compressions": (_TIERS.compressions, None),
        "seed": (_TIERS.seed, None),
        "server_threads": (DEFAULT_THREADS, None),
        "server_memory": (ServerOptions().memory_mb, None),
    },
    "compare": {
        "repeats": (_COMPARE.repeats, _COMPARE_Q.repeats),
        "duration": (_COMPARE.duration, _COMPARE_Q.duration),
        "resamples": (_COMPARE.resamples, None),
        "level": (_COMPARE.level, None),
        "seed": (_COMPARE.seed, None),
    },
    "usl": {
        "method": (_USL.method, None),
        "level": (_USL.level, None),
        "bootstrap": (_USL.bootstrap, None),
        "seed": (_USL.seed, None),
    },
    "size": {"hit_ratios": (_SIZE.hit_ratios, None), "key_length": (_SIZE.key_length, None)},
    "trace synth": {
        "requests": (_SYNTH.requests, _SYNTH_Q.requests),
        "seed": (_SYNTH.seed, None),
        "preset": (DEFAULT_PRESET, None),
        "alpha": (_SYNTH.alpha, None),
        "instances": (_SYNTH.instances, None),
        "duration": (_SYNTH.duration_s, None),
        "part": (SYNTH_PART, None),
    },
    "trace capture": {
        "duration": (_CAPTURE.duration, None),
        "sample": (_CAPTURE.sample, None),
        "max_events": (_CAPTURE.max_events, None),
        "max_mb": (_CAPTURE.max_bytes / 2**20, None),
        "buffer_mb": (_CAPTURE.max_buffer / 2**20, None),
    },
    "run": {
        "steps": (_RUN.steps, None),
        "requests": (SYNTHETIC, SYNTHETIC_QUICK),  # the study simulates simulate's trace
        "seed": (_RUN.seed, None),
        "precision": (_RUN.precision, None),
        "server_threads": (DEFAULT_THREADS, None),
        "server_memory": (PRIVATE_MEMORY_MB, None),
        # memcached's text protocol unless --protocol resp or a redis:// server (the load
        # flag's own help: cli/common.py, add_protocol_option)
        "protocol": ("text", None),
    },
}

#: Words after "default" (or before "with --quick") that state no value: ``--format``'s
#: "(default on a terminal)", ``--in-memory``'s "the default for a file", and ``simulate
#: --server``'s "profile's default cells; 500 samples a cell with --quick" (its numbers are
#: checked in :data:`IN_WORDS`).
PROSE = {("format", "on"), ("format", "otherwise"), ("in_memory", "for"), ("server", "cells"),
         ("server", "cell")}

#: The measuring verbs the first tests cover.
_MEASURING = ("load", "scale", "profile")


def _parser(verb: str) -> argparse.ArgumentParser:
    """The parser of ``verb``, or of one of its actions (``trace synth``)."""
    name, *actions = verb.split()
    p = _parsers()[name]
    for action in actions:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.choices[action]
    return p


def _every_verb() -> list[str]:
    out = []
    for name, p in _parsers().items():
        sub = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        out += [f"{name} {action}" for action in sub[0].choices] if sub else [name]
    return out


def _statements(p: argparse.ArgumentParser) -> list[tuple[argparse.Action, str, str]]:
    """(flag, ``default`` or ``quick``, the text stated) for each default its flags' --help
    state."""
    out = []
    for action in p._actions:
        if not action.option_strings or not action.help or action.help == argparse.SUPPRESS:
            continue
        text = action.help % {"prog": "cachelab"} if "%(" in action.help else \
            action.help.replace("%%", "%")
        for which, pattern in (("default", _DEFAULT), ("quick", _QUICK)):
            out += [(action, which, next(g for g in m.groups() if g))
                    for m in pattern.finditer(text)]
    return out


def _read(action: argparse.Action, text: str) -> Any:
    """The stated text read as the flag reads it (a list flag without a parser: its items)."""
    if re.fullmatch(r"\d{1,3}(,\d{3})+", text):  # 65,536
        text = text.replace(",", "")
    if callable(action.type):
        value = action.type(text)
    else:
        value = tuple(text.split(",")) if "," in text else text
    return tuple(value) if isinstance(value, list) else value


@pytest.mark.parametrize("verb", list(ONE_DEFINITION))
def test_every_other_verb_s_help_states_the_one_definition(verb: str) -> None:
    """What replay, simulate, tiers, compare, usl, size, trace and run --help say a flag
    defaults to (and does with --quick) is its one definition, read back with the flag's own
    parser: ``replay --draws``'s "(default 5; 3 with --quick)" is ``ReplaySpec().draws`` and
    ``ReplaySpec.quick().draws``. Every default stated is in the table, and every one in the
    table is stated."""
    table = ONE_DEFINITION[verb]
    wrong, unknown, said = [], [], set()
    for action, which, text in _statements(_parser(verb)):
        if (action.dest, text) in PROSE:
            continue
        held = table.get(action.dest, (None, None))[which == "quick"]
        if held is None:
            unknown.append((action.option_strings[0], which, text))
            continue
        said.add((action.dest, which))
        got = _read(action, text)
        if got != _as_held(held):
            wrong.append((action.option_strings[0], which, got, held))
    assert wrong == []
    assert unknown == []
    want = {(dest, which) for dest, values in table.items()
            for which, value in zip(("default", "quick"), values) if value is not None}
    assert want - said == set()


@pytest.mark.parametrize("verb", [v for v in _every_verb()
                                  if v not in ONE_DEFINITION and v not in _MEASURING])
def test_a_verb_outside_the_tables_states_no_default(verb: str) -> None:
    """Every verb's help is covered: a verb (or trace action) in neither table states no
    default value, so a new verb's literal default fails here until it is in one."""
    stated = [(a.option_strings[0], which, text) for a, which, text in _statements(_parser(verb))
              if (a.dest, text) not in PROSE]
    assert stated == []


#: Defaults stated in other words: (verb, flag (None: the description), a pattern whose
#: groups are the numbers stated, their one definition).
IN_WORDS = [
    ("simulate", "--server", r"its first ([\d,]+) requests", (CELLS_FROM,)),
    ("simulate", "--server", r"(\d+) samples a cell with --quick", (ProfileSpec.quick().samples,)),
    ("simulate", None, r"--drill-distributions \(default ([^)]+)\)",
     (",".join(DEFAULT_DISTRIBUTIONS),)),
    ("trace synth", "--alpha", r"heavy-pages ([\d.]+)",
     (SynthParams.preset("heavy-pages").alpha,)),
    ("compare", "--quick", r"\((\d+) rounds of ([\d.]+) s per server\)",
     (_COMPARE_Q.repeats, _COMPARE_Q.duration)),
]


@pytest.mark.parametrize(("verb", "flag", "pattern", "held"), IN_WORDS,
                         ids=[f"{v} {f or 'description'} {i}" for i, (v, f, _, _) in
                              enumerate(IN_WORDS)])
def test_a_default_stated_in_words_is_the_one_definition(verb: str, flag: str | None,
                                                         pattern: str, held: tuple) -> None:
    p = _parser(verb)
    if flag is None:
        text = p.description or ""
    else:
        text = next(a.help for a in p._actions if flag in a.option_strings) or ""
    m = re.search(pattern, text.replace("\n", " "))
    assert m is not None, text
    got = tuple(type(h)(g.replace(",", "")) if not isinstance(h, str) else g
                for g, h in zip(m.groups(), held))
    assert got == held


def test_no_help_in_the_cli_writes_a_default_as_a_literal() -> None:
    """Every default a flag's help states is read from its definition (an f-string's
    ``{...}``), never written in the help's words: no ``default 5`` or ``3 with --quick``."""
    literal = [(path.name, m.group(0)) for path in sorted(CLI.glob("*.py"))
               for m in re.finditer(r"\bdefault \d[\d,._]*|\b\d[\d,._]* with --quick",
                                    path.read_text())]
    assert literal == []


# A flag for each field only Python checks, and the range beside its field (or, for a flag that
# sets no spec field, the named constant its code checks).
_MB = {**CAPTURE_LIMITS["max_bytes"], "lo": CAPTURE_LIMITS["max_bytes"]["lo"] // 2**20,
       "hi": CAPTURE_LIMITS["max_bytes"]["hi"] // 2**20}
PYTHON_RANGES = [
    ("load", "--private-pool", LOAD_LIMITS["private_pool"]),
    ("load", "--repeats", LOAD_LIMITS["repeats"]),
    ("scale", "--repeats", SCALE_LIMITS["repeats"]),
    ("scale", "--settle", SCALE_LIMITS["settle"]),
    ("scale", "--window", SCALE_LIMITS["window"]),
    ("profile", "--plain-port", PROFILE_LIMITS["plain_port"]),
    ("profile", "--rounds", ROUNDS_LIMIT),
    ("load", "--server-memory", SERVER_LIMITS["memory_mb"]),
    ("scale", "--server-threads", SERVER_LIMITS["threads"]),
    *[("compare", f"--{f}", COMPARE_LIMITS[f]) for f in ("repeats", "duration", "resamples",
                                                         "level")],
    ("replay", "--requests", replay.SYNTHETIC_LIMIT),
    *[("replay", f"--{f.replace('_', '-')}", replay.LIMITS[f])
      for f in ("train", "draws", "profile_samples", "calibration_reps", "slices", "timeout")],
    ("simulate", "--requests", SYNTHETIC_LIMIT),
    *[("simulate", f"--{f}", SIMULATE_LIMITS[f]) for f in ("train", "draws", "threads")],
    ("simulate", "--shards", FLAT_LIMITS["shards"]),
    ("size", "--shards", SIZE_LIMITS["shards"]),
    ("run", "--requests", run_lib.LIMITS["requests"]),
    ("run", "--seed", run_lib.LIMITS["seed"]),
    ("tiers", "--reads", TIERS_LIMITS["reads"]),
    *[("trace synth", f"--{f}", SYNTH_LIMITS[f])
      for f in ("requests", "seed", "alpha", "instances")],
    ("trace synth", "--duration", SYNTH_LIMITS["duration_s"]),
    ("trace synth", "--part", SYNTH_PART_LIMIT),
    *[("trace capture", f"--{f.replace('_', '-')}", CAPTURE_LIMITS[f])
      for f in ("duration", "sample", "max_events")],
    ("trace capture", "--max-mb", _MB),
    ("usl", "--level", USL_LIMITS["level"]),
    ("load", "--ray-timeout", RAY_LIMITS["connect_timeout"]),
    ("simulate", "--ray-timeout", RAY_LIMITS["connect_timeout"]),
    ("load", "--agents", RAY_LIMITS["agents"]),
]


def _flag_type(verb: str, flag: str) -> Callable[[str], Any]:
    action = next(a for a in _parser(verb)._actions if flag in a.option_strings)
    assert callable(action.type)
    return action.type


@pytest.mark.parametrize(("verb", "flag", "limit"), PYTHON_RANGES,
                         ids=[f"{v} {f}" for v, f, _ in PYTHON_RANGES])
def test_a_python_only_field_s_flag_takes_its_range(verb: str, flag: str,
                                                    limit: dict[str, Any]) -> None:
    convert, lo, hi = _flag_type(verb, flag), limit["lo"], limit["hi"]
    step = 1 if isinstance(hi, int) else 1e-6 * max(1, hi)
    shown = str(int(hi)) if float(hi).is_integer() else str(hi)
    if limit.get("below"):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"below {shown}, got")):
            convert(str(hi))
        assert convert(str(hi - step)) == hi - step
    else:
        assert convert(str(hi)) == hi
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f" {shown}, got")):
            convert(str(hi + step))
    if limit["above"]:
        with pytest.raises(argparse.ArgumentTypeError):
            convert(str(lo))
    else:
        assert convert(str(lo)) == lo
        with pytest.raises(argparse.ArgumentTypeError):
            convert(str(lo - 1))


@pytest.mark.parametrize(("spec", "message"), [
    (LoadSpec(private_pool=65), "private-pool must be a whole number from 2 to 64, not 65"),
    (LoadSpec(repeats=0), "repeats must be a whole number from 1 to 100, not 0"),
    (ScaleSpec(window=0), "window must be a number of seconds above 0 and at most 3600, not 0"),
    (ScaleSpec(settle=-1.0), "settle must be a number of seconds from 0 to 3600, not -1.0"),
    (ScaleSpec(repeats=101), "repeats must be a whole number from 1 to 100, not 101"),
    (replay.ReplaySpec(train=1.0), "train must be a number above 0 and below 1, not 1.0"),
    (SimulateSpec(train=1.0), "train must be a number at least 0 and below 1, not 1.0"),
    (CompareSpec(level=1.0), "level must be a number at least 0.5 and below 1, not 1.0"),
    (SizeSpec(trace="t", shards=1.0), "shards must be a number above 0 and below 1, not 1.0"),
    (RayOptions(agents=0), "agents must be a whole number from 1 to 1024, not 0"),
])
def test_the_spec_refuses_by_the_same_range(spec: Any, message: str) -> None:
    """The spec checks a Python-only field against the range its flag reads, in the
    engine's words."""
    from cachelab.errors import UsageError
    with pytest.raises(UsageError) as e:
        spec.check()
    assert str(e.value) == message


#: Each flag that sets a spec field whose range Python checks, and that spec with the flag's
#: value (as the flag hands it on): the flag takes a value exactly when the spec's check does.
_SPEC_OF: list[tuple[str, str, Callable[[Any], Any]]] = [
    *[("compare", f"--{f}", lambda v, f=f: CompareSpec(**{f: v}))
      for f in ("repeats", "duration", "resamples", "level")],
    *[("replay", f"--{f.replace('_', '-')}", lambda v, f=f: replay.ReplaySpec(**{f: v}))
      for f in ("train", "draws", "profile_samples", "calibration_reps", "slices", "timeout")],
    *[("simulate", f"--{f}", lambda v, f=f: SimulateSpec(**{f: v}))
      for f in ("train", "draws", "threads")],
    ("simulate", "--shards", lambda v: FlatSimulateSpec(shards=v)),
    ("simulate", "--threads", lambda v: FlatSimulateSpec(threads=v)),
    ("size", "--shards", lambda v: SizeSpec(trace="t", shards=v)),
    ("run", "--requests", lambda v: RunSpec(requests=v)),
    ("run", "--seed", lambda v: RunSpec(seed=v)),
    ("tiers", "--reads", lambda v: TiersSpec(reads=v)),
    *[("trace synth", f"--{f}", lambda v, f=f: SynthParams(**{f: v}))
      for f in ("requests", "seed", "alpha", "instances")],
    ("trace synth", "--duration", lambda v: SynthParams(duration_s=v)),
    *[("trace capture", f"--{f.replace('_', '-')}",
       lambda v, f=f: CaptureSpec(server="127.0.0.1:1", **{f: v}))
      for f in ("duration", "sample", "max_events")],
    ("trace capture", "--max-mb", lambda v: CaptureSpec(server="127.0.0.1:1",
                                                        max_bytes=v * 2**20)),
    ("load", "--agents", lambda v: RayOptions(agents=v)),
    ("load", "--ray-timeout", lambda v: RayOptions(connect_timeout=v)),
]

#: Values at and around every range's ends.
_PROBES = [str(v) for v in (-1, 0, 0.1, 0.2, 0.5, 0.99, 1, 2, 9, 10, 49, 50, 99, 100, 101,
                            1000, 1001, 1024, 1025, 3600, 3601, 100_000, 100_001, 1_000_000,
                            1_000_001, 10_000_000, 10_000_001, 100_000_000, 100_000_001,
                            7 * 86_400, 7 * 86_400 + 1, 366 * 86_400, 366 * 86_400 + 1,
                            2**20, 2**20 + 1, 10**10, 10**10 + 1, 2**63 - 2, 2**63 - 1, 2**63,
                            2**64 - 2, 2**64 - 1, 2**64)] + ["5", "5.1", "nan", "inf"]


@pytest.mark.parametrize(("verb", "flag", "spec"), _SPEC_OF,
                         ids=[f"{v} {f} {i}" for i, (v, f, _) in enumerate(_SPEC_OF)])
def test_a_flag_takes_what_its_spec_s_check_takes(verb: str, flag: str,
                                                  spec: Callable[[Any], Any]) -> None:
    """One range, read by both: at every probe, the flag refuses a value exactly when the
    spec's own check does (a flag wider or narrower than its spec fails here)."""
    from cachelab.errors import UsageError
    convert = _flag_type(verb, flag)
    whole = convert.__name__ == "integer"  # common.int_range's: read as int, else float
    differ = []
    for text in _PROBES:
        try:
            value: Any = int(text) if whole else float(text)
        except ValueError:
            continue
        try:
            convert(text)
            flag_takes = True
        except argparse.ArgumentTypeError:
            flag_takes = False
        try:
            spec(value).check()
            spec_takes = True
        except UsageError:
            spec_takes = False
        if flag_takes != spec_takes:
            differ.append((text, flag_takes, spec_takes))
    assert differ == []


@pytest.mark.parametrize(("check", "limit"), [
    (lambda v: replay.load_trace(None, requests=v), replay.SYNTHETIC_LIMIT),
    (lambda v: synth_parts(SynthParams(requests=10), part_requests=v), SYNTH_PART_LIMIT),
], ids=["replay --requests", "trace synth --part"])
def test_a_flag_without_a_field_is_checked_by_its_constant(check: Callable[[Any], Any],
                                                           limit: dict[str, Any]) -> None:
    """A flag that sets no spec field reads the named constant its code checks: the code
    refuses what the flag refuses at either end (a value it takes would be a real run)."""
    from cachelab.errors import UsageError
    for value in (limit["lo"] - 1, limit["hi"] + 1):
        with pytest.raises(UsageError, match=f"from {limit['lo']} to {limit['hi']}, not"):
            check(value)


def test_no_literal_range_in_the_cli() -> None:
    """Every verb's flags read every range from its one definition (``limit_range(LIMITS[
    ...])``: the engine's, the one beside a spec's field, or a named constant): no
    ``int_range(1, 100)`` written anywhere in the CLI."""
    literal = [(path.name, m.group(0)) for path in sorted(CLI.glob("*.py"))
               for m in re.finditer(r"(?:int|float)_range\(\s*-?[\d_.]+", path.read_text())]
    assert literal == []
