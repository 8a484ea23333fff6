"""``--out`` is checked before any work, and results survive a failure to write them.

Issue 16: an ``--out`` that cannot be written crashed eight verbs with a traceback *after*
measuring. Every verb now refuses it first (exit 2, one line naming ``--out``), and a
failure while writing after the measurement keeps the results elsewhere and says where.

Issue 29: ``report --out /dev/null`` (as root) replaced the device with an HTML file, and
``trace convert`` did the same to a FIFO. Every command refuses an output path that is a
device, FIFO, socket or a symlink to one, before any work, and leaves the node as it was;
the writers themselves open only fresh temporary files and replace only regular files.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachelab.artifacts import write_json, write_through
from cachelab.cli import run as cli_run
from cachelab.servers import PrivateMemcached, read_stats
from clitools import InProcess, cachelab, one_error_line

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
    "size": ["size", "{flat}"],
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
    flat = Path(__file__).parents[1] / "data" / "traces" / "zipf_1.0.txt"
    return {"trace": str(trace), "csv": str(csv), "profile": str(profile_dir / "profile.json"),
            "profile_dir": str(profile_dir), "flat": str(flat)}


def _argv(verb: str, inputs: dict[str, str]) -> list[str]:
    return [a.format(**inputs) for a in VERBS[verb]]


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("bad", ["proc", "file", "under-a-file"])
def test_a_bad_out_is_refused_before_any_work(cli: InProcess, verb: str, bad: str,
                                              inputs: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("mine\n")
    out = {"proc": "/proc/cachelab-x", "file": "afile", "under-a-file": "afile/sub"}[bad]
    p = cli(*_argv(verb, inputs), "--out", out, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    line = one_error_line(p)
    assert line.startswith(f"cachelab: error: --out {out}: "), line
    assert p.stdout == ""
    # Nothing was measured or written: no default output, the file in the way untouched.
    assert sorted(x.name for x in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "mine\n"


def test_report_out_ending_in_a_slash_is_a_directory(cli: InProcess, tmp_path: Path,
                                                     memcached: PrivateMemcached) -> None:
    prof = tmp_path / "p"
    assert cli("profile", "--samples", "20", "--warmup", "2", "--sizes", "1,1K", "--keys", "1,3",
               "--server", memcached.address, "--out", prof, "--format", "json").returncode == 0
    for out in ("existing/", "new/"):
        if out == "existing/":
            (tmp_path / "existing").mkdir()
        p = cli("report", prof, "--out", out, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert (tmp_path / out / "report.html").is_file()


@pytest.mark.slow
def test_results_survive_an_out_that_breaks_during_the_run(tmp_path: Path,
                                                           memcached: PrivateMemcached) -> None:
    """``--out`` is fine when checked, then replaced by a file while load runs: the results
    go to a fresh directory under $TMPDIR, stderr says where, and the exit code is 2 (an
    --out that cannot be written, as when it is refused before the run; it was 1)."""
    out = tmp_path / "out"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    gets = int(read_stats(memcached.address)["cmd_get"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "load", "--server", memcached.address,
         "--duration", "3", "--connections", "2", "--threads", "1", "--out", str(out),
         "--format", "table"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        # Checked and running once the server has answered load's first gets (the directory
        # is made only when writing): however slow the start on a loaded machine. (Not once
        # its connections are open: beside a CPU hog memcached had not yet counted an earlier
        # stats connection closed, and the file went in before --out was checked.)
        deadline = time.monotonic() + 60
        while int(read_stats(memcached.address)["cmd_get"]) <= gets:
            assert time.monotonic() < deadline and proc.poll() is None, "load never connected"
            time.sleep(0.05)
        if out.is_dir():
            out.rmdir()
        out.write_text("in the way\n")
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a timeout: kill it, and close its pipes
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, stderr
    line = one_error_line(stderr)
    assert line.startswith(f"cachelab: error: cannot write {out}"), line
    rescued = [d for d in scratch.iterdir() if d.name.startswith("cachelab-load-")]
    assert len(rescued) == 1 and line.endswith(f"saved in {rescued[0]} instead")
    doc = json.loads((rescued[0] / "load.json").read_text())
    assert doc["schema"] == "cachelab.load" and doc["totals"]["throughput"] > 0
    assert f"wrote {rescued[0]}" in stdout
    assert out.read_text() == "in the way\n"


# -- issue 29: devices, FIFOs, sockets and symlinks to them are never written ---------------

#: Every command with the path it writes as ``{out}``: the verbs' ``--out`` (a directory;
#: report's a page), and the trace commands' files. The node is named as the command expects
#: its file (a trace suffix), so the refusal is about what the node is, not its name.
COMMANDS: dict[str, tuple[list[str], str, str]] = {
    **{verb: ([*argv, "--out", "{out}"], "node", "--out") for verb, argv in VERBS.items()},
    "report-static": (["report", "{profile_dir}", "--out", "{tmp}/page.html", "--static",
                       "{out}"], "node", "--static"),
    "trace-synth-out": (["trace", "synth", "--requests", "300", "--out", "{out}"],
                        "node.jsonl", "--out"),
    "trace-synth-out-dir": (["trace", "synth", "--requests", "300", "--out", "{out}"], "node",
                            "--out"),
    "trace-synth-path": (["trace", "synth", "--requests", "300", "{out}"], "node.jsonl", ""),
    "trace-inspect": (["trace", "inspect", "{trace}", "--out", "{out}"], "node", "--out"),
    "trace-capture": (["trace", "capture", "--server", "127.0.0.1:9", "--duration", "1",
                       "--out", "{out}"], "node.capture.parquet", "--out"),
    "trace-capture-dir": (["trace", "capture", "--server", "127.0.0.1:9", "--duration", "1",
                           "--out", "{out}"], "node", "--out"),
    "trace-convert": (["trace", "convert", "{trace}", "{out}", "--to", "csv"], "node.csv", ""),
    "trace-convert-parquet": (["trace", "convert", "{trace}", "{out}"], "node.parquet", ""),
}

#: Node kinds made in a scratch directory; a character device needs root (CAP_MKNOD).
NODES = ("chardev", "fifo", "socket", "symlink-to-chardev", "dangling-symlink")


def _make_node(path: Path, kind: str) -> Iterator[None]:
    """Makes ``kind`` at ``path`` (a socket stays bound while the test runs)."""
    if kind in ("chardev", "symlink-to-chardev"):
        if os.geteuid() != 0:
            pytest.skip("making a character device needs root")
        dev = path.with_name(path.name + ".dev") if kind != "chardev" else path
        # /dev/null's numbers: writing to it would lose the bytes, not harm anything
        os.mknod(dev, stat.S_IFCHR | 0o644, os.makedev(1, 3))
        if dev != path:
            path.symlink_to(dev.name)
        yield
    elif kind == "fifo":
        os.mkfifo(path)
        yield
    elif kind == "dangling-symlink":
        path.symlink_to("nowhere")
        yield
    else:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(str(path))
            yield


def _snapshot(d: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry of ``d`` with its (mode, inode, device numbers), not following links."""
    return {p.name: (st.st_mode, st.st_ino, st.st_rdev)
            for p in d.iterdir() for st in [p.lstat()]}


@pytest.mark.parametrize("kind", NODES)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_node_as_the_output_is_refused_and_left_alone(
        command: str, kind: str, inputs: dict[str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    argv, name, flag = COMMANDS[command]
    work = tmp_path / "w"
    work.mkdir()
    node = work / name
    monkeypatch.chdir(work)  # where a default output would go
    for _ in _make_node(node, kind):
        before = _snapshot(work)
        code = cli_run([a.format(**inputs, out=node, tmp=work) for a in argv])
        out, err = capsys.readouterr()
        assert code == 2, (out, err)
        assert out == ""
        line = one_error_line(err)
        shown = f"{flag} {node}" if flag else str(node)
        assert line.startswith(f"cachelab: error: {shown}: is a "), line
        expected = {"chardev": "a character device", "fifo": "a FIFO", "socket": "a socket",
                    "symlink-to-chardev": "a symlink to a character device",
                    "dangling-symlink": "a dangling symlink"}[kind]
        assert f": is {expected}, not " in line, line
        # The node is as it was, and nothing else was made.
        assert _snapshot(work) == before
        if kind == "chardev":
            assert stat.S_ISCHR(node.lstat().st_mode)
            assert node.lstat().st_rdev == os.makedev(1, 3)


@pytest.mark.parametrize("kind", ["chardev", "fifo"])
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_node_at_the_verbs_json_in_out_is_refused(
        verb: str, kind: str, inputs: dict[str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An existing ``--out`` directory holding a device or FIFO where the verb writes its
    JSON (report: its page): refused before any work, the node left alone."""
    out = tmp_path / "out"
    out.mkdir()
    name = "report.html" if verb == "report" else f"{verb}.json"
    # report: a --out ending in a slash is a directory, which takes report.html
    argv = [*(a.format(**inputs) for a in VERBS[verb]), "--out",
            f"{out}/" if verb == "report" else str(out)]
    monkeypatch.chdir(tmp_path)
    for _ in _make_node(out / name, kind):
        before = _snapshot(out)
        code = cli_run(argv)
        stdout, err = capsys.readouterr()
        assert code == 2, (stdout, err)
        line = one_error_line(err)
        assert line.startswith("cachelab: error: --out "), line
        assert f"{name} there is a " in line, line
        assert _snapshot(out) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("kind", ["chardev", "fifo"])
def test_a_write_never_replaces_a_node_in_out(kind: str, tmp_path: Path) -> None:
    """A node where a result's other file goes (not checked before the run): the files are
    not moved in, the node is left, and the results are kept in a fresh directory instead."""
    out = tmp_path / "out"
    out.mkdir()
    rescue_root = tmp_path / "tmp"
    rescue_root.mkdir()

    def write(d: Path) -> list[Path]:
        write_json(d / "x.json", {"a": 1})
        (d / "x.csv").write_text("a\n1\n")
        return [d / "x.json", d / "x.csv"]

    for _ in _make_node(out / "x.csv", kind):
        before = _snapshot(out)
        with pytest.MonkeyPatch.context() as m:
            m.setattr("tempfile.tempdir", str(rescue_root))
            done = write_through(write, out, name="t")
        assert done.failure is not None and done.failure.startswith(f"{out / 'x.csv'}: is a")
        assert done.directory is not None and done.directory.parent == rescue_root
        assert json.loads((done.directory / "x.json").read_text()) == {"a": 1}
        # Nothing moved in, not even the file that had no node in its way.
        assert _snapshot(out) == before


def test_write_json_opens_no_file_it_did_not_create(tmp_path: Path) -> None:
    """``write_json`` used to write ``NAME.tmp`` (a name anyone could prepare) and rename it:
    a device placed there was written to and then moved onto the result's name."""
    for _ in _make_node(tmp_path / "r.json.tmp", "chardev"):
        write_json(tmp_path / "r.json", {"a": 1})
        assert stat.S_ISCHR((tmp_path / "r.json.tmp").lstat().st_mode)
        assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.json.tmp"]


@pytest.mark.parametrize("kind", ["chardev", "fifo"])
def test_write_json_refuses_to_replace_a_node(kind: str, tmp_path: Path) -> None:
    for _ in _make_node(tmp_path / "r.json", kind):
        before = _snapshot(tmp_path)
        with pytest.raises(OSError, match="is a (character device|FIFO), not a regular file"):
            write_json(tmp_path / "r.json", {"a": 1})
        assert _snapshot(tmp_path) == before
