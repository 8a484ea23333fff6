"""One spec definition (issue 30): a load or profile spec field is named in the Python
dataclass and in the engine's Rust struct, which derives ``Deserialize`` and is built from the
dataclass's ``to_core`` dict in one conversion; each numeric field's range is written once, in
the engine crate, and read by ``validate``, by the bindings' errors and by the command line."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from cachelab import _core
from cachelab.cli import build_parser
from cachelab.errors import UsageError
from cachelab.load import LoadSpec
from cachelab.profile import ProfileSpec

ROOT = Path(__file__).resolve().parents[2]
BINDINGS = ROOT / "crates" / "py" / "src"

#: Fields ``to_core`` adds that are not the dataclass's: the run's, not the workload's.
RESOLVED = {"load": {"changes", "server_pid", "behind"}, "profile": {"address", "proxy"}}


def _load_core() -> dict[str, Any]:
    return LoadSpec().to_core("127.0.0.1:1", "t")


def _profile_core() -> dict[str, Any]:
    return ProfileSpec().to_core("127.0.0.1:1", seed=0)


ENGINES = {
    "load": (LoadSpec, _load_core, _core.load_check, _core.LOAD_LIMITS),
    "profile": (ProfileSpec, _profile_core, _core.profile_check, _core.PROFILE_LIMITS),
}


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_bindings_name_no_spec_field() -> None:
    """The bindings of the engines (and their one conversion, spec.rs) read no spec field by
    name: no per-field ``get_item``, no field's name in quotes."""
    names = _fields(LoadSpec) | _fields(ProfileSpec) | RESOLVED["load"] | RESOLVED["profile"]
    for name in ("load.rs", "profile.rs", "spec.rs"):
        text = (BINDINGS / name).read_text()
        assert name == "spec.rs" or "get_item(" not in text, name
        assert {n for n in names if f'"{n}"' in text} == set(), name


@pytest.mark.parametrize("engine", ENGINES)
def test_every_field_the_engine_reads_is_a_dataclass_field(engine: str) -> None:
    """Each field of the dict the engine reads (found by spoiling it: the engine then refuses
    the spec naming it) is a field of the dataclass of the same name, or one to_core adds."""
    cls, core, check, _ = ENGINES[engine]
    base = core()
    check(base)
    read = set()
    for key in base:
        spoiled = {**base, key: {"spoiled": [1]}}
        try:
            check(spoiled)
        except UsageError as e:
            msg = str(e)
            assert key in msg or key.replace("_", "-") in msg, (key, msg)
            read.add(key)
    assert len(read) >= 10
    assert read <= _fields(cls) | RESOLVED[engine], read - _fields(cls)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_range_is_a_field_s(engine: str) -> None:
    cls, _, _, limits = ENGINES[engine]
    assert set(limits) <= _fields(cls)
    for limit in limits.values():
        assert limit["lo"] < limit["hi"]
        assert isinstance(limit["above"], bool) and isinstance(limit["unit"], str)


def _flag_types(verb: str) -> dict[str, Any]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.type for a in sub.choices[verb]._actions if a.type is not None}


@pytest.mark.parametrize(("verb", "engine", "least"), [("load", "load", 15),
                                                       ("profile", "profile", 4)])
def test_the_flags_take_the_engine_s_ranges(verb: str, engine: str, least: int) -> None:
    """A flag that sets a field with a range accepts its ends and refuses just past them,
    saying the range (the flags read the engine's limits, not a copy)."""
    limits = ENGINES[engine][3]
    types = _flag_types(verb)
    checked = 0
    for name, limit in limits.items():
        if name not in types or name == "member_timeout":  # --member-timeout is in ms
            continue
        convert, lo, hi = types[name], limit["lo"], limit["hi"]
        if isinstance(convert(str(hi)), list):
            continue  # a list flag (profile --sizes): the range is each item's
        assert convert(str(hi)) == hi, name
        if not limit["above"]:
            assert convert(str(lo)) == lo, name
        step = 1 if isinstance(hi, int) else hi * 1e-9
        for bad in (lo - 1 if isinstance(lo, int) else lo, hi + step):
            if isinstance(lo, float) and not limit["above"] and bad == lo:
                continue
            shown = str(int(hi)) if hi == int(hi) else str(hi)
            with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f" {shown}, got")):
                convert(str(bad))
        checked += 1
    assert checked >= least


@pytest.mark.parametrize(("spec", "message"), [
    (LoadSpec(connections=0), "connections must be a whole number from 1 to 4096, not 0"),
    (LoadSpec(connections="8"),  # type: ignore[arg-type]
     "connections must be a whole number from 1 to 4096, not '8'"),
    (LoadSpec(busy_poll_us=1001),
     "busy-poll-us must be a whole number of µs from 0 to 1000, not 1001"),
    (LoadSpec(member_retry="y"),  # type: ignore[arg-type]  # a field of the pool
     "member-retry must be a number of seconds above 0 and at most 3600, not 'y'"),
    (LoadSpec(timeout=float("nan")),  # a field of the connection options
     "timeout must be a number of seconds above 0 and at most 3600, not nan"),
    (LoadSpec(duration=float("nan")),  # the run's end: a duration or a request count
     "duration must be a number of seconds above 0 and at most 3600, not nan"),
    (LoadSpec(seed=-1), "seed must be a whole number from 0 to 18446744073709551615, not -1"),
    (LoadSpec(stall_ms=0), "stall-ms must be a number of milliseconds above 0 and at most "
                           "3600000, not 0"),
    (ProfileSpec(samples=0), "samples must be a whole number from 1 to 10000000, not 0"),
    (ProfileSpec(concurrency=2000), "concurrency must be a whole number from 1 to 1024, not 2000"),
    (ProfileSpec(give_up_after=-1.0),
     "give-up-after must be a number of seconds above 0 and at most 3600, not -1.0"),
])
def test_a_bad_field_is_one_line_naming_it_and_its_range(spec: Any, message: str) -> None:
    with pytest.raises(UsageError) as e:
        spec.check()
    assert str(e.value) == message
