"""Issue 30, item 4: the output door prints table, JSON or CSV. ``--format csv`` prints a
verb's main table — the same rows as the CSV file it writes into ``--out`` — and nothing else
on stdout; the verbs without one table (``run``, ``report``, ``trace``) refuse it before
anything runs. In-process; the measuring verbs make short runs on the session's memcached."""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

import pytest

from cachelab import cli as cli_lib
from cachelab import traces
from cachelab.servers import PrivateMemcached
from clitools import InProcess, one_error_line

DATA = Path(__file__).resolve().parents[1] / "data"
RAYTRACER = DATA / "usl" / "raytracer.csv"
ZIPF = DATA / "traces" / "zipf_1.0.txt"

#: The verbs with a main table, and the first column of its header.
TABLES = {"compare": "item", "load": "index", "profile": "op", "replay": "strategy",
          "scale": "order", "simulate": "strategy", "size": "bytes", "tiers": "shape",
          "usl": "kind"}

#: Short runs of the verbs that touch a server: ``{server}`` is filled in.
SCALE = ["--points", "1,2", "--repeats", "1", "--warmup", "0.2", "--settle", "0.2", "--window",
         "0.4", "--interval", "0.1", "--bootstrap", "0", "--key-space", "1000"]
PROFILE = ["--samples", "30", "--warmup", "2", "--sizes", "1,1K", "--keys", "1,3"]


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _same_table(p, out: Path, name: str, first: str) -> list[list[str]]:  # noqa: ANN001
    """stdout is exactly ``out/name``, header first (``first`` its first column), with rows."""
    assert p.returncode == 0, p.stderr
    written = (out / name).read_bytes().decode("utf-8")
    stdout = _rows(p.stdout)
    assert stdout == _rows(written)
    assert stdout[0][0] == first and len(stdout) > 1, stdout[:2]
    assert p.stdout == written  # nothing else on stdout: "wrote …" went to stderr
    assert f"wrote {out}" in p.stderr
    return stdout


@pytest.mark.parametrize(("case", "argv", "first"), [
    ("usl", ["usl", RAYTRACER, "--no-plots"], "kind"),
    ("request", ["simulate", "--quick", "--requests", "300", "--draws", "1", "--no-plots"],
     "strategy"),
    ("flat", ["simulate", ZIPF, "--policies", "lru,fifo", "--sizes", "100,1000", "--no-plots"],
     "policy"),
    ("size", ["size", ZIPF, "--no-plots"], "bytes"),
])
def test_the_verbs_reading_files_print_the_csv_they_write(
        cli: InProcess, tmp_path: Path, case: str, argv: list[object], first: str) -> None:
    out = tmp_path / "out"
    p = cli(*argv, "--format", "csv", "--out", out, cwd=tmp_path)
    _same_table(p, out, f"{argv[0]}.csv", first)


def test_compare_prints_its_rows(cli: InProcess, tmp_path: Path) -> None:
    for seed in ("1", "2"):
        made = cli("simulate", "--quick", "--requests", "300", "--draws", "1", "--seed", seed,
                   "--no-plots", "--out", tmp_path / seed, cwd=tmp_path)
        assert made.returncode == 0, made.stderr
    out = tmp_path / "cmp"
    p = cli("compare", tmp_path / "1", tmp_path / "2", "--resamples", "100", "--no-plots",
            "--format", "csv", "--out", out, cwd=tmp_path)
    rows = _same_table(p, out, "compare.csv", "item")
    assert {r[2] for r in rows[1:]} == {"B vs A"}


@pytest.mark.parametrize(("verb", "argv", "name"), [
    ("load", ["--duration", "0.6", "--warmup", "0.2", "--interval", "0.2", "--connections",
              "2", "--key-space", "1000", "--no-plots"], "load.csv"),
    ("scale", [*SCALE, "--no-plots"], "scale.csv"),
    ("profile", [*PROFILE, "--no-plots"], "profile.csv"),
    ("tiers", ["--quick", "--reads", "5", "--compressions", "zlib", "--no-plots"], "tiers.csv"),
])
def test_the_measuring_verbs_print_the_csv_they_write(
        cli: InProcess, memcached: PrivateMemcached, tmp_path: Path, verb: str,
        argv: list[str], name: str) -> None:
    out = tmp_path / "out"
    p = cli(verb, *argv, "--server", memcached.address, "--format", "csv", "--out", out,
            cwd=tmp_path)
    _same_table(p, out, name, TABLES[verb])


def test_a_pool_profile_prints_every_members_rows(
        cli: InProcess, memcached: PrivateMemcached, fresh_memcached: PrivateMemcached,
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    members = [memcached.address, fresh_memcached.address]
    p = cli("profile", *PROFILE, "--rounds", "1", "--no-plots", "--server", members[0],
            "--server", members[1], "--format", "csv", "--out", out, cwd=tmp_path)
    rows = _same_table(p, out, "profile-pool.csv", "member")
    assert rows[0][1:3] == ["op", "value_size"]
    assert {r[0] for r in rows[1:]} == set(members)
    # each member's rows are its own profile.csv's
    for i, address in enumerate(members):
        [own] = (out / "members").glob(f"{i}-*")
        mine = _rows((own / "profile.csv").read_bytes().decode("utf-8"))
        assert [r[1:] for r in rows[1:] if r[0] == address] == mine[1:]


def test_replay_prints_its_rows(cli: InProcess, memcached: PrivateMemcached,
                                tmp_path: Path) -> None:
    trace = traces.synthesize(traces.SynthParams(
        requests=300, domains=2, subjects_per_domain=2.0, topics_per_subject=3.0,
        tutorials_per_topic=3.0, items_per_tutorial=4.0, instances=3))
    path = tmp_path / "t.jsonl"
    traces.save_request_trace(trace, path)
    out = tmp_path / "out"
    p = cli("replay", path, "--strategies", "none,fixed:5", "--profile-samples", "50",
            "--calibration-reps", "10", "--slices", "2", "--draws", "1", "--server",
            memcached.address, "--format", "csv", "--out", out, cwd=tmp_path)
    rows = _same_table(p, out, "replay.csv", "strategy")
    assert {r[0] for r in rows[1:]} == {"none", "fixed:5"}


def _format_choices() -> dict[str, tuple[str, ...]]:
    """``--format``'s choices by command line (``trace synth`` …), where it is offered."""
    out: dict[str, tuple[str, ...]] = {}

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, sub in action.choices.items():
                    walk(f"{name} {verb}".strip(), sub)
            elif "--format" in action.option_strings and name:
                out[name] = tuple(action.choices or ())

    walk("", cli_lib.build_parser())
    return out


def test_csv_is_offered_exactly_where_a_verb_has_a_table(cli: InProcess,
                                                         tmp_path: Path) -> None:
    choices = _format_choices()
    assert set(TABLES) <= set(choices)
    for name, offered in choices.items():
        assert ("csv" in offered) == (name in TABLES), (name, offered)
    verbs = next(a for a in cli_lib.build_parser()._actions
                 if isinstance(a, argparse._SubParsersAction)).choices
    for verb in TABLES:
        text = " ".join(verbs[verb].format_help().split())
        assert "csv, the rows of " in text, (verb, text)

    # the others refuse it before anything runs: one line, exit 2, nothing written
    for argv in (["run", "--quick"], ["report", "."], ["trace", "synth", "t.jsonl"]):
        p = cli(*argv, "--format", "csv", cwd=tmp_path)
        assert p.returncode == 2 and p.stdout == "", argv
        line = one_error_line(p)
        assert "--format" in line and "'csv'" in line, line
    assert list(tmp_path.iterdir()) == []
