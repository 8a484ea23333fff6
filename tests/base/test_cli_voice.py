"""Issue 30, items 4-6: the CLI speaks with one voice. Every verb's ``--help`` ends with its
exit codes and 2-4 examples; old flag spellings work with one deprecation line; a verdict
inside a result exits 0 unless ``--fail-on`` asks for its check (then 1, one line naming it);
``report --out`` is a directory; every verb ends through ``cli/output.py`` and nothing below
``cli/`` prints or exits. In-process and without a server: cheap."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

import cachelab.profile as profile_lib
import cachelab.run as run_lib
from cachelab import cli

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "cachelab"
RAYTRACER = ROOT / "tests" / "data" / "usl" / "raytracer.csv"


def _verb_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every verb's parser, and each ``trace`` action's, by its command line."""
    out = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if name:
            out.append((name, parser))
        for sub in subs:
            for verb, p in sub.choices.items():
                walk(f"{name} {verb}".strip(), p)

    walk("", cli.build_parser())
    return out


def test_every_help_ends_with_the_exit_codes_and_two_to_four_examples() -> None:
    parsers = _verb_parsers()
    assert len([n for n, _ in parsers if " " not in n]) == 12  # and trace's four actions
    for name, parser in parsers:
        text = parser.format_help()
        head, sep, examples = text.rpartition("\nExamples:\n")
        assert sep, f"{name}: no examples"
        commands = [line.strip() for line in examples.splitlines()
                    if line.strip().startswith("cachelab ")]
        assert 2 <= len(commands) <= 4, (name, commands)
        # The examples are the last thing printed: nothing but them (and their comments and
        # continuation lines) after the heading.
        assert all(line.startswith("  ") for line in examples.splitlines() if line), name
        assert "Exit codes: 0 measured and written" in " ".join(head.split()), name


@pytest.mark.parametrize(("argv", "dest", "value", "use"), [
    (["profile", "--concurrency", "3"], "connections", 3, "--connections"),
    (["scale", "--client-connections", "8"], "client_connections", 8, "--connections"),
    (["replay", "--strategy", "none,lru:5"], "strategies", "none,lru:5", "--strategies"),
    (["simulate", "--trace-format", "csv"], "trace_format", "csv", "--from"),
])
def test_old_spellings_work_with_one_deprecation_line_and_are_hidden(
        argv: list[str], dest: str, value: object, use: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    assert capsys.readouterr().err.splitlines() == [
        f"cachelab: {argv[1]} is deprecated: use {use}"]
    verb = dict(_verb_parsers())[argv[0]]
    help_text = verb.format_help()
    assert argv[1] not in help_text.split() and use in help_text


def test_run_help_states_the_private_servers_real_defaults() -> None:
    args = cli.build_parser().parse_args(["run"])
    assert args.server_memory == run_lib.PRIVATE_MEMORY_MB == 256
    text = " ".join(dict(_verb_parsers())["run"].format_help().split())
    assert "(-m; default 256," in text and f"-I {run_lib.PRIVATE_ITEM_SIZE_MAX}" in text
    assert "(-m; default 64," in " ".join(dict(_verb_parsers())["load"].format_help().split())


def _profile_missing_precision(tmp_path: Path) -> Path:
    """A saved profile (the built-in one) whose first cell did not reach its precision."""
    doc = profile_lib.load_profile("appengine-2017").to_dict()
    doc["cells"][0]["precision"] = {"half_width": 0.2, "reached": False}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_verdict_exits_0_unless_its_check_is_asked_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _profile_missing_precision(tmp_path)
    show = ["profile", "--show", str(path), "--format", "table"]
    assert cli.run(show) == 0
    out, err = capsys.readouterr()
    assert "NOT" in out and err == ""
    assert cli.run([*show, "--fail-on", "problems"]) == 0  # asked, but not failed
    capsys.readouterr()
    assert cli.run([*show, "--fail-on", "precision", "--format", "json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["schema"] == "cachelab.latency-profile"
    assert err.splitlines() == ["cachelab: check failed: --fail-on precision: precision NOT "
                                "reached in 1 of 12 cell(s): get 1B"]
    # A check the verb does not make is a usage error.
    assert cli.run([*show, "--fail-on", "replay"]) == 2
    assert "choose from precision,problems" in capsys.readouterr().err


def _fake_study(monkeypatch: pytest.MonkeyPatch, *steps: run_lib.StepOutcome) -> None:
    """``cachelab run`` ends with these steps, without running any."""
    import cachelab.cli.study as study

    def run(spec: object, target: object, **_: object) -> run_lib.RunResult:
        return run_lib.RunResult(created="now", spec={}, server={"address": "x"},
                                 steps=list(steps))

    monkeypatch.setattr(study.lib, "run", run)


def test_run_exits_0_when_replays_prediction_misses_unless_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``run --quick`` exited 1 whenever replay's comparison missed on a busy machine."""
    missed = "prediction off by more than 15 %: lru:20 p50 0.412 ms predicted vs 0.335 ms"
    _fake_study(monkeypatch,
                run_lib.StepOutcome(name="profile", status="ok"),
                run_lib.StepOutcome(name="replay", status="failed", error=missed,
                                    check="replay"))
    argv = ["run", "--out", str(tmp_path / "r"), "--format", "json"]
    assert cli.run(argv) == 0
    err = capsys.readouterr().err
    assert f"run: {missed}" in err.splitlines() and "check failed" not in err
    assert cli.run([*argv, "--fail-on", "problems"]) == 0  # a check's miss is not a problem
    capsys.readouterr()
    assert cli.run([*argv, "--fail-on", "replay,problems"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == f"cachelab: check failed: --fail-on replay: {missed}"


def test_run_problems_are_a_check_and_a_server_failure_is_3(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _fake_study(monkeypatch, run_lib.StepOutcome(name="load", status="problems"))
    argv = ["run", "--out", str(tmp_path / "r"), "--format", "json"]
    assert cli.run(argv) == 0
    assert "found problems: step(s) load problems" in capsys.readouterr().err
    assert cli.run([*argv, "--fail-on", "problems"]) == 1
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "cachelab: check failed: --fail-on problems: step(s) load problems")
    _fake_study(monkeypatch, run_lib.StepOutcome(name="scale", status="failed",
                                                 error="gone", server_failure=True))
    assert cli.run([*argv, "--fail-on", "problems"]) == 3
    assert "cachelab: error: the server failed" in capsys.readouterr().err


def test_report_out_is_a_directory_and_a_page_path_is_deprecated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fit = tmp_path / "fit"
    assert cli.run(["usl", str(RAYTRACER), "--out", str(fit), "--no-plots", "--bootstrap",
                    "0", "--format", "json"]) == 0
    capsys.readouterr()
    assert cli.run(["report", str(fit), "--out", str(tmp_path / "page"), "--format",
                    "json"]) == 0
    out, err = capsys.readouterr()
    page = tmp_path / "page" / "report.html"
    assert page.is_file() and "<html" in page.read_text()[:200].lower()
    assert json.loads(out) == {"page": str(page), "sections": ["usl"], "skipped": [],
                               "static": None}
    assert err.splitlines() == [f"wrote {page}"]
    old = tmp_path / "old.html"
    assert cli.run(["report", str(fit), "--out", str(old), "--format", "table"]) == 0
    out, err = capsys.readouterr()
    assert old.is_file() and f"wrote {old}" in out
    assert err.splitlines() == [f"cachelab: --out {old} (a page) is deprecated: --out is a "
                                "directory that gets report.html"]


def _calls(tree: ast.AST) -> list[str]:
    """The dotted names called in ``tree`` (``print``, ``sys.exit``, ``output.finish``)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            names.append(ast.unparse(node.func))
    return names


def _own_returns(func: ast.FunctionDef) -> list[ast.Return]:
    """The ``return`` statements of ``func`` itself, not of functions defined inside it."""
    out, todo = [], list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            out.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def test_nothing_below_cli_prints_or_exits() -> None:
    """The library returns results; the CLI prints them (progress bars on stderr excepted)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "cli" or rel.as_posix() == "progress.py":
            continue
        for name in _calls(ast.parse(path.read_text())):
            if name in ("print", "sys.exit", "exit", "quit", "os._exit"):
                offenders.append(f"{rel}: {name}")
    assert offenders == []


def test_every_verb_ends_through_the_output_door() -> None:
    """Each ``cli/<verb>.py`` ``run`` ends in ``output.finish`` (or an early exit code of
    ``output``), and only ``cli/output.py`` prints a result's JSON."""
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        tree = ast.parse(path.read_text())
        if path.name != "output.py":
            assert "json.dumps" not in _calls(tree), path.name
        funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
        entries = [n for n in funcs if n == "run" or n.startswith("run_")]
        if path.name in ("__init__.py", "output.py", "common.py", "cluster.py", "target.py"):
            continue
        assert entries, path.name
        seen: set[str] = set()
        todo = list(entries)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for node in _own_returns(funcs[name]):
                if node.value is None:
                    continue
                value = node.value
                if isinstance(value, ast.Attribute):
                    assert ast.unparse(value).startswith("output.EXIT_"), \
                        f"{path.name}:{node.lineno}"
                    continue
                assert isinstance(value, ast.Call), f"{path.name}:{node.lineno}"
                called = ast.unparse(value.func)
                if called in funcs:  # a helper of the same verb, checked the same way
                    todo.append(called)
                else:
                    assert called == "output.finish", f"{path.name}:{node.lineno}: {called}"
