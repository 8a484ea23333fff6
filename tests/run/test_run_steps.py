"""``run``'s steps call each verb through its one entry, ``<verb>.run(spec, target,
progress=…)``, with the study's server handed on as a Target: so following ``--server`` from
``run`` to an engine passes each file once. Each verb's entry is replaced by a recorder that
fails its step at once (the study goes on), so only the study's own private memcached runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import cachelab.profile
import cachelab.scale
import cachelab.simulate
import cachelab.tiers
from cachelab.errors import InputError
from cachelab.run import RunSpec, run_study
from cachelab.servers import ServerOptions
from cachelab.target import Target


def test_each_step_calls_its_verb_s_run_with_the_study_s_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    called: dict[str, tuple[Any, Any, dict[str, Any]]] = {}

    def recorder(verb: str) -> Any:
        def run(spec: Any, target: Any = None, **kw: Any) -> Any:
            called[verb] = (spec, target, kw)
            raise InputError(f"{verb}: recorded")
        return run

    for module in (cachelab.profile, cachelab.scale, cachelab.simulate, cachelab.tiers):
        name = module.__name__.rsplit(".", 1)[1]
        monkeypatch.setattr(module, "run", recorder(name))
    options = ServerOptions(memory_mb=300, threads=2)
    result = run_study(RunSpec(quick=True, steps=("profile", "scale", "simulate", "tiers"),
                               requests=200, report=False, precision=None),
                       tmp_path / "run", server_options=options)

    assert set(called) == {"profile", "scale", "simulate", "tiers"}
    assert {s.name: s.error for s in result.steps} == {
        name: f"{name}: recorded" for name in ("profile", "scale", "simulate", "tiers")}
    address = result.server["address"]
    for verb in ("profile", "tiers"):  # on the study's own server, recorded as private
        spec, target, kw = called[verb]
        assert isinstance(target, Target) and target.servers == (address,), verb
        assert target.facts["private"] is True and target.facts["argv"], verb
        assert kw["progress"] is not None, verb
    # scale starts a private server of its own with the study's options
    spec, target, kw = called["scale"]
    assert isinstance(target, Target) and target.private and target.options == options
    assert kw["progress"] is not None
    # simulate: the synthetic trace, the reference model (no profile was measured), no server
    spec, target, kw = called["simulate"]
    assert target is None and spec.model == "appengine-2017"
    assert len(kw["trace"].request_ids) == 200


def test_a_step_failing_with_a_bug_keeps_its_traceback_in_run_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(spec: Any, target: Any = None, **kw: Any) -> Any:
        return [0][1]  # an IndexError, as a bug would raise

    monkeypatch.setattr(cachelab.simulate, "run", broken)
    result = run_study(RunSpec(quick=True, steps=("simulate",), requests=200, report=False,
                               precision=None), tmp_path / "run")

    (step,) = result.steps
    assert step.status == "failed"
    assert step.error == "IndexError: list index out of range"
    written = json.loads((tmp_path / "run" / "run.json").read_text())
    (saved,) = written["steps"]
    assert saved["traceback"][-1] == "IndexError: list index out of range"
    assert any("in broken" in line for line in saved["traceback"])
    assert any("return [0][1]" in line for line in saved["traceback"])
