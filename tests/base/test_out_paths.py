"""``--out`` is checked before any work, and results survive a failure to write them.

Issue 16: an ``--out`` that cannot be written crashed eight verbs with a traceback *after*
measuring. Every verb now refuses it first (exit 2, one line naming ``--out``), and a
failure while writing after the measurement keeps the results elsewhere and says where.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cachelab.servers import PrivateMemcached
from clitools import cachelab, one_error_line

#: Every verb that writes into ``--out``, with arguments that would otherwise do real work
#: (measure a server or simulate). ``{trace}``, ``{profile}`` and ``{csv}`` are filled in.
VERBS = {
    "profile": ["profile", "--quick"],
    "load": ["load", "--duration", "5"],
    "scale": ["scale", "--quick"],
    "simulate": ["simulate", "{trace}"],
    "tiers": ["tiers", "--quick"],
    "replay": ["replay", "{trace}"],
    "usl": ["usl", "{csv}"],
    "compare": ["compare", "{profile}", "{profile}"],
    "report": ["report", "{profile_dir}"],
    "run": ["run", "--quick"],
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A request trace, a profile and a scale CSV for the verbs that read one."""
    d = tmp_path_factory.mktemp("inputs")
    trace = d / "t.jsonl"
    assert cachelab("trace", "synth", "--requests", "300", trace).returncode == 0
    usl = Path(__file__).parents[1] / "data" / "usl"
    csv = next(p for p in sorted(usl.iterdir()) if p.suffix == ".csv")
    profile_dir = d / "p"
    profile_dir.mkdir()
    doc = {"schema": "cachelab.profile", "schema_version": 1}
    # A real profile is made by the one test that needs it; the refusal comes before reading.
    (profile_dir / "profile.json").write_text(json.dumps(doc))
    return {"trace": str(trace), "csv": str(csv), "profile": str(profile_dir / "profile.json"),
            "profile_dir": str(profile_dir)}


def _argv(verb: str, inputs: dict[str, str]) -> list[str]:
    return [a.format(**inputs) for a in VERBS[verb]]


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("bad", ["proc", "file", "under-a-file"])
def test_a_bad_out_is_refused_before_any_work(verb: str, bad: str, inputs: dict[str, str],
                                              tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("mine\n")
    out = {"proc": "/proc/cachelab-x", "file": "afile", "under-a-file": "afile/sub"}[bad]
    p = cachelab(*_argv(verb, inputs), "--out", out, cwd=tmp_path, timeout=30)
    assert p.returncode == 2, (p.stdout, p.stderr)
    line = one_error_line(p)
    assert line.startswith(f"cachelab: error: --out {out}: "), line
    assert p.stdout == ""
    # Nothing was measured or written: no default output, the file in the way untouched.
    assert sorted(x.name for x in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "mine\n"


def test_report_out_ending_in_a_slash_is_a_directory(tmp_path: Path,
                                                     memcached: PrivateMemcached) -> None:
    prof = tmp_path / "p"
    assert cachelab("profile", "--quick", "--server", memcached.address, "--out", prof,
                    "--format", "json").returncode == 0
    for out in ("existing/", "new/"):
        if out == "existing/":
            (tmp_path / "existing").mkdir()
        p = cachelab("report", prof, "--out", out, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert (tmp_path / out / "report.html").is_file()


def test_results_survive_an_out_that_breaks_during_the_run(tmp_path: Path,
                                                           memcached: PrivateMemcached) -> None:
    """``--out`` is fine when checked, then replaced by a file while load runs: the results
    go to a fresh directory under $TMPDIR, stderr says where, and the exit code is 1."""
    out = tmp_path / "out"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "load", "--server", memcached.address,
         "--duration", "3", "--connections", "2", "--threads", "1", "--out", str(out),
         "--format", "table"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        time.sleep(1.5)  # checked and running; the directory is made only when writing
        if out.is_dir():
            out.rmdir()
        out.write_text("in the way\n")
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, stderr
    line = one_error_line(stderr)
    assert line.startswith(f"cachelab: error: cannot write {out}"), line
    rescued = [d for d in scratch.iterdir() if d.name.startswith("cachelab-load-")]
    assert len(rescued) == 1 and line.endswith(f"saved in {rescued[0]} instead")
    doc = json.loads((rescued[0] / "load.json").read_text())
    assert doc["schema"] == "cachelab.load" and doc["totals"]["throughput"] > 0
    assert f"wrote {rescued[0]}" in stdout
    assert out.read_text() == "in the way\n"
