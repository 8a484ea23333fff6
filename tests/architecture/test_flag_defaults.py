"""A flag's default and range are written once (issue 30): what ``load``, ``scale`` and
``profile --help`` say a flag defaults to is the spec's field default (the engine's for the
pool's member settings), and a flag's range is the engine's or, for a field only Python
checks, the one written beside its dataclass field. These tests read each verb's --help and
compare it with the spec, so a literal that drifts from the spec fails here."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cachelab.cli import build_parser
from cachelab.cli.cluster import AGENTS
from cachelab.load import LIMITS as LOAD_LIMITS
from cachelab.load import LoadSpec, parse_mix
from cachelab.load.engine import PROXY_DISTRIBUTION
from cachelab.profile import ProfileSpec
from cachelab.profile.pool import ROUNDS, ROUNDS_LIMIT
from cachelab.profile.spec import LIMITS as PROFILE_LIMITS
from cachelab.raycluster import CONNECT_TIMEOUT
from cachelab.scale import LIMITS as SCALE_LIMITS
from cachelab.scale import ScaleSpec
from cachelab.servers import DEFAULT_THREADS, SERVER_LIMITS, ServerOptions

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


# A flag for each field only Python checks, and the range beside its field.
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
]


def _flag_type(verb: str, flag: str) -> Callable[[str], Any]:
    action = next(a for a in _parsers()[verb]._actions if flag in a.option_strings)
    assert callable(action.type)
    return action.type


@pytest.mark.parametrize(("verb", "flag", "limit"), PYTHON_RANGES)
def test_a_python_only_field_s_flag_takes_its_range(verb: str, flag: str,
                                                    limit: dict[str, Any]) -> None:
    convert, lo, hi = _flag_type(verb, flag), limit["lo"], limit["hi"]
    assert convert(str(hi)) == hi
    step = 1 if isinstance(hi, int) else 1e-6 * max(1, hi)
    shown = str(int(hi)) if float(hi).is_integer() else str(hi)
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
])
def test_the_spec_refuses_by_the_same_range(spec: Any, message: str) -> None:
    """The spec checks a Python-only field against the range its flag reads, in the
    engine's words."""
    from cachelab.errors import UsageError
    with pytest.raises(UsageError) as e:
        spec.check()
    assert str(e.value) == message


@pytest.mark.parametrize("name", ["load.py", "scale.py", "profile.py"])
def test_no_literal_range_in_the_measuring_verbs_flags(name: str) -> None:
    """The flags of load, scale and profile read every range from its one definition
    (``limit_range(LIMITS[...])``): no ``int_range(1, 100)`` written in the CLI."""
    text = (CLI / name).read_text()
    literal = re.findall(r"(?:int|float)_range\(\s*-?[\d_.]+", text)
    assert literal == []
