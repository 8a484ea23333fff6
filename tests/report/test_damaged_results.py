"""Damaged results give one line: ``report`` and ``compare`` check every field they read.

Issue 29: a saved profile.json with ``cells: "oops"``, a load.json with ``server: null``,
``totals.corrected: 5`` or no ``totals``, given to ``report`` or ``compare``: a traceback,
exit 1. Each result kind now has a JSON Schema of the fields its readers use
(:mod:`cachelab.schemas`), checked where results are read, and the first field it refuses is
named: ``cachelab: error: run1/load.json: field totals.corrected: expected …, got 5``.

The property tests start from a real result of each kind (small runs against the session's
memcached), damage one field anywhere in it (drop it, make it a string, a number, a list, an
object or null), and run ``report`` and ``compare`` on it in-process: never a traceback, exit
0 or 2, and on 2 one line naming the file.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cachelab import load as load_lib
from cachelab import replay as replay_lib
from cachelab import tiers as tiers_lib
from cachelab import traces
from cachelab.cli import run as cli_run
from cachelab.compare import compare
from cachelab.load.validity import CHECKS
from cachelab.profile import ProfileSpec, profile
from cachelab.run import RunSpec, run_study
from cachelab.scale import ScaleSpec, scale
from cachelab.schemas import SCHEMAS
from cachelab.simulate import SimulateSpec, simulate
from cachelab.usl import fit_csv
from clitools import one_error_line

DATA = Path(__file__).parents[1] / "data"

#: Kind -> the result's file name in its directory.
FILES = {"profile": "profile.json", "load": "load.json", "scale": "scale.json",
         "usl": "usl.json", "simulation": "simulate.json", "flat": "simulate.json",
         "size": "size.json", "tiers": "tiers.json", "replay": "replay.json",
         "compare": "compare.json", "run": "run.json"}


#: The per-test timeout of the tests that use :func:`saved`: making it takes ~30 s on a
#: quiet machine (the slowest: replay's and profile's measurements, and the plots).
SETUP_TIMEOUT = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, memcached) -> dict[str, Path]:  # noqa: ANN001
    """A real result of each kind, small, written by its verb's own writer (plots included,
    so the report embeds them rather than re-drawing them for every example)."""
    root = tmp_path_factory.mktemp("saved")
    addr = memcached.address
    profile(ProfileSpec.quick(sizes=(100, 4_000), key_counts=(1, 4), samples=50, seed=1),
            server=addr).write(root / "profile")
    load_lib.load(load_lib.LoadSpec(duration=1.0, warmup=0.25, interval=0.25, connections=1,
                                    key_space=200), server=addr).write(root / "load")
    scale(ScaleSpec(points=[1, 2, 3], repeats=1, warmup=0.1, settle=0.1, window=0.3,
                    interval=0.1, bootstrap=0, workload={"key_space": 500}),
          server=addr).write(root / "scale")
    fit_csv(DATA / "usl" / "raytracer.csv", "processors", "throughput",
            bootstrap=50).write(root / "usl")
    trace = traces.synthesize(traces.SynthParams(requests=600))
    sims = [root / "simulation" / "simulate.json", root / "simulation-b" / "simulate.json"]
    for seed, path in enumerate(sims):
        sim = simulate(trace, SimulateSpec(draws=2, seed=seed, strategies=("none", "lru:50")))
        if seed == 0:  # the one the report renders, with its plots
            sim.write(path.parent)
        else:
            sim.save(path)
    compare(sims).write(root / "compare")
    assert cli_run(["simulate", str(DATA / "traces" / "cloudPhysicsIO.oracleGeneral.bin"),
                    "--policies", "lru,fifo", "--sizes", "500,5000", "--mrc", "--format",
                    "json", "--out", str(root / "flat")]) == 0
    assert cli_run(["size", str(DATA / "traces" / "cloudPhysicsIO.oracleGeneral.bin"),
                    "--memory", "500MB", "--hit-ratios", "20,40", "--format", "json",
                    "--out", str(root / "size")]) == 0
    tiers_lib.tiers(tiers_lib.TiersSpec(reads=3, warmup=1, record_bytes=2_000, list_items=20,
                                        compressions=("zlib",)),
                    server=addr).write(root / "tiers")
    small = traces.synthesize(traces.SynthParams(
        requests=200, domains=2, subjects_per_domain=2.0, topics_per_subject=2.0,
        tutorials_per_topic=2.0, items_per_tutorial=3.0, instances=2))
    replay_lib.replay(small, replay_lib.ReplaySpec(strategies=("none", "lru:10"),
                                                   profile_samples=50, profile_warmup=5,
                                                   calibration_reps=20, slices=2, draws=2),
                      server=addr).write(root / "replay")
    run_study(RunSpec(quick=True, steps=("simulate",), requests=300, report=False,
                      precision=None), root / "run", server=addr, log=lambda _line: None)
    return {kind: root / kind / name for kind, name in FILES.items()}


def _cli(*argv: object) -> tuple[int, str]:
    """``cachelab ARGV`` in-process: the exit code and stderr (a traceback fails the test)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = cli_run([str(a) for a in argv])
    return code, err.getvalue()


@contextlib.contextmanager
def damaged_copy(original: Path, doc: dict[str, Any]) -> Iterator[Path]:
    """``doc`` written under the original's name in a copy of its directory (its plots
    beside it, no other result), in a fresh directory per example."""
    with tempfile.TemporaryDirectory(prefix="cachelab-damaged-") as d:
        where = Path(d) / "r"
        shutil.copytree(original.parent, where,
                        ignore=shutil.ignore_patterns("*.json", "*.csv", "*.hlog", "*.png"))
        for sub in [p for p in where.iterdir() if p.is_dir()]:  # a run's step directories
            shutil.rmtree(sub)
        (where / original.name).write_text(json.dumps(doc))
        yield where / original.name


#: What a damaged field becomes: dropped, or one of these.
REPLACEMENTS = ("oops", 5, -1, 0, [], {}, None)


@st.composite
def damage(draw: st.DrawFn, doc: dict[str, Any]) -> tuple[list[Any], Any]:
    """A path to one field anywhere in ``doc`` (not its schema name) and what it becomes
    (``...`` for dropped)."""
    path: list[Any] = []
    node: Any = doc
    while True:
        keys: list[Any] = (list(node) if isinstance(node, dict) else
                           list(range(len(node))) if isinstance(node, list) else [])
        if not path:
            keys = [k for k in keys if k not in ("schema", "schema_version")]
        if not keys or (path and draw(st.integers(0, 2)) == 0):
            break
        key = draw(st.sampled_from(keys))
        path.append(key)
        node = node[key]
    return path, draw(st.sampled_from((..., *REPLACEMENTS)))


def _apply(doc: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if value is ...:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


def _check_one_line(code: int, err: str, where: Path) -> None:
    assert code in (0, 2), err
    if code == 2:
        line = one_error_line(err)
        assert line.startswith(f"cachelab: error: {where}"), line


# derandomize: the same examples in every run (a test whose outcome does not depend on the
# run); the top-level fields are each dropped by the test below it.
PROPERTIES = settings(max_examples=8, deadline=None, database=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow,
                                             HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@SETUP_TIMEOUT
@pytest.mark.parametrize("kind", sorted(FILES))
@PROPERTIES
@given(data=st.data())
def test_a_damaged_result_is_reported_or_refused_in_one_line(
        kind: str, saved: dict[str, Path], data: st.DataObject) -> None:
    original = saved[kind]
    doc = json.loads(original.read_text())
    path, value = data.draw(damage(doc), label="field and what it becomes")
    with damaged_copy(original, _apply(doc, path, value)) as bad:
        code, err = _cli("report", bad, "--out", bad.parent / "page")
        _check_one_line(code, err, bad)
        if code == 0:  # the page holds every section, none broken
            page = (bad.parent / "page" / "report.html").read_text()
            assert "could not be rendered" not in page
        for pair in ((original, bad), (bad, original)):
            code, err = _cli("compare", *pair, "--out", bad.parent / "cmp", "--no-plots",
                             "--resamples", "100", "--format", "json")
            assert code in (0, 2), err
            if code == 2:
                one_error_line(err)
                assert "cannot compare them" not in err  # the schema knew the field


@pytest.mark.slow
@SETUP_TIMEOUT
@pytest.mark.parametrize("kind", sorted(FILES))
def test_each_top_level_field_dropped_is_refused_or_rendered_whole(
        kind: str, saved: dict[str, Path]) -> None:
    """Every top-level field of a real result dropped in turn (the fields a Result is made
    from): the report names the file and field, or renders every section whole."""
    original = saved[kind]
    doc = json.loads(original.read_text())
    for key in [k for k in doc if k not in ("schema", "schema_version")]:
        with damaged_copy(original, _apply(doc, [key], ...)) as bad:
            code, err = _cli("report", bad, "--out", bad.parent / "page")
            _check_one_line(code, err, bad)
            if code == 0:
                page = (bad.parent / "page" / "report.html").read_text()
                assert "could not be rendered" not in page, key


# -- the cases of the issue -----------------------------------------------------------------

CASES = [
    ("profile", ["cells"], "oops", "field cells: expected a list, got \"oops\""),
    ("load", ["server"], None, "field server: expected an object, got null"),
    ("load", ["totals", "corrected"], 5, "field totals.corrected: expected an object or null, "
     "got 5"),
    ("load", ["totals"], ..., "field totals: missing"),
    # where scale's private server and client ran (issue 33)
    ("scale", ["server", "cpus", "server"], "0", "field server.cpus.server: expected a list or "
     "null, got \"0\""),
]


@SETUP_TIMEOUT
@pytest.mark.parametrize("kind, path, value, expect", CASES)
def test_the_damaged_results_of_the_issue_are_named_in_one_line(
        kind: str, path: list[str], value: Any, expect: str, saved: dict[str, Path]) -> None:
    original = saved[kind]
    doc = json.loads(original.read_text())
    with damaged_copy(original, _apply(doc, path, value)) as bad:
        for argv in (["report", bad, "--out", bad.parent / "page"],
                     ["report", bad.parent, "--out", bad.parent / "page"],
                     ["compare", original, bad, "--out", bad.parent / "cmp"],
                     ["compare", bad.parent, original, "--out", bad.parent / "cmp"]):
            code, err = _cli(*argv)
            assert code == 2, (argv, err)
            assert one_error_line(err) == f"cachelab: error: {bad}: {expect}"
        # Refused before writing anything.
        assert not (bad.parent / "page" / "report.html").exists()
        assert not (bad.parent / "cmp").exists()


@SETUP_TIMEOUT
@pytest.mark.parametrize("kind", ["profile", "load"])
def test_optional_fields_absent_still_render(kind: str, saved: dict[str, Path]) -> None:
    """Results without the fields only some runs write (a probe, a pool, precision,
    validity, the environment) render and compare."""
    original = saved[kind]
    doc = json.loads(original.read_text())
    for name in ("environment", "validity", "probe", "members", "pool", "precision",
                 "repeats", "tls_cost", "behind", "published", "agents", "stalls"):
        doc.pop(name, None)
    with damaged_copy(original, doc) as lean:
        code, err = _cli("report", lean, "--out", lean.parent / "page")
        assert code == 0, err
        assert "could not be rendered" not in (lean.parent / "page" / "report.html").read_text()
        code, err = _cli("compare", original, lean, "--out", lean.parent / "cmp",
                         "--no-plots", "--resamples", "100")
        assert code == 0, err


@SETUP_TIMEOUT
def test_an_older_replay_version_still_renders(saved: dict[str, Path]) -> None:
    """replay.json version 1 is still read (artifacts._ALSO_READS)."""
    doc = json.loads(saved["replay"].read_text())
    doc["schema_version"] = 1
    with damaged_copy(saved["replay"], doc) as old:
        code, err = _cli("report", old, "--out", old.parent / "page")
        assert code == 0, err


def test_the_schemas_name_the_validity_checks_load_makes() -> None:
    """cachelab.schemas sits below cachelab.load, so it keeps its own list of the checks."""
    from cachelab.schemas import CHECK_NAMES  # (imported here: the module is new)

    assert CHECK_NAMES == CHECKS


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_each_schema_is_a_valid_json_schema(kind: str) -> None:
    """Checked here once rather than at every read (it cost ~60 ms a kind per command)."""
    jsonschema.Draft202012Validator.check_schema(SCHEMAS[kind])
