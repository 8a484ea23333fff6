"""``cachelab profile``: the command line, its artifacts, its exit codes and its failure modes."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.cli import run as cli_run
from cachelab.errors import ServerUnreachable
from cachelab.servers import PrivateMemcached
from clitools import InProcess, cachelab, one_error_line
from fakes import FakeServer

FakeFactory = Callable[[str], FakeServer]

SAMPLES, WARMUP = 20, 2
SIZES, KEYS = (1, 1000), (1, 3)
#: A tiny spec: every cell, few samples.
TINY = ["--samples", str(SAMPLES), "--warmup", str(WARMUP), "--sizes", "1,1K", "--keys", "1,3"]
#: Seconds any one CLI run may take before the test fails instead of hanging.
RUN_TIMEOUT = 60


# -- helpers ------------------------------------------------------------------------------------






def stats(address: str) -> dict[str, str]:
    with _core.Client(address) as c:
        return dict(c.stats())


def free_port() -> int:
    """A loopback TCP port nobody listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tagged_memcached_pids(tag: str) -> set[int]:
    """Live memcached processes whose environment carries ``CACHELAB_TEST_TAG=tag``.

    The tag is inherited by the private memcached a tagged cachelab run starts, so this finds
    exactly that server even while other test runs start and stop servers of their own.
    """
    marker = f"CACHELAB_TEST_TAG={tag}".encode()
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "memcached":
                continue
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours to read
            continue
        if state != "Z" and marker in environ:
            pids.add(int(entry.name))
    return pids


def tagged_env(tag: str) -> dict[str, str]:
    return {**os.environ, "CACHELAB_TEST_TAG": tag}


def load_json(out: Path) -> dict:
    return json.loads((out / "profile.json").read_text())


def cells_of(doc: dict, op: str) -> list[dict]:
    return [c for c in doc["cells"] if c["op"] == op]


def assert_tiny_cells(doc: dict, samples: int = SAMPLES) -> None:
    """One floor cell, get/set per size, multi-get per key count, each with ``samples``."""
    assert len(cells_of(doc, "floor")) == 1
    assert [c["value_size"] for c in cells_of(doc, "get")] == list(SIZES)
    assert [c["value_size"] for c in cells_of(doc, "set")] == list(SIZES)
    assert [c["keys"] for c in cells_of(doc, "multiget")] == list(KEYS)
    assert len(doc["cells"]) == 1 + 2 * len(SIZES) + len(KEYS)
    for c in doc["cells"]:
        assert c["samples"] == samples, c
        # The histogram really holds that many samples (read independently of "samples").
        assert _core.hist_summary(c["histogram"])["count"] == samples, c
        assert c["errors"] == {} and c["mismatches"] == 0 and c["misses"] == 0, c


def table_section(stdout: str, title: str) -> str:
    """The lines of the table titled ``title`` (up to the next blank line)."""
    start = stdout.index(title)
    end = stdout.find("\n\n", start)
    return stdout[start:] if end < 0 else stdout[start:end]


@pytest.fixture
def in_process() -> Iterator[Callable[..., int]]:
    """``cachelab.cli.run`` in this process; puts back the SIGTERM handler it installs."""
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield lambda *args: cli_run([str(a) for a in args])
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- a measured run -----------------------------------------------------------------------------


@pytest.mark.slow
def test_profile_writes_tables_json_csv_and_plots_and_leaves_no_keys(
    memcached: PrivateMemcached, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    before = stats(memcached.address)
    r = cachelab(
        "profile", *TINY, "--server", memcached.address, "--out", out, "--format", "table",
        cwd=tmp_path,
    )
    after = stats(memcached.address)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr

    # stdout: the three tables, the floor, and the "wrote" line last.
    for title in ("Get latency by value size", "Set latency by value size",
                  "Multi-get latency by key count"):
        assert title in r.stdout
    assert re.search(r"^loopback floor .*p50 .*p99 .*max ", r.stdout, re.M), r.stdout
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("wrote ") and str(out) in last, last

    # profile.json
    doc = load_json(out)
    assert doc["schema"] == "cachelab.latency-profile"
    assert doc["schema_version"] == 1
    assert doc["source"] == "measured"
    assert doc["server"]["address"] == memcached.address
    assert doc["server"]["version"] == memcached.version
    assert doc["run"]["leftover_keys"] == 0 and doc["run"]["cancelled"] is False
    assert_tiny_cells(doc)
    for c in doc["cells"]:
        values = [c["percentiles"][k] for k in ("5", "25", "50", "75", "90", "95", "99", "99.9")]
        assert values == sorted(values) and values[0] > 0
        assert c["percentiles"]["max"] >= values[-1]
    assert {c["value_size"] for c in cells_of(doc, "multiget")} == {1000}  # --multi-size 1K

    # profile.csv: a header and one row per cell, in the order of the JSON.
    with (out / "profile.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    assert header[:4] == ["op", "value_size", "keys", "samples"]
    assert len(body) == len(doc["cells"])
    for row, cell in zip(body, doc["cells"]):
        assert row[:4] == [cell["op"], str(cell["value_size"]), str(cell["keys"]), str(SAMPLES)]

    # Plots: PNG and SVG per operation, one line per cell.
    for name, n_series in (("get-by-size", len(SIZES)), ("set-by-size", len(SIZES)),
                           ("multiget-by-keys", len(KEYS))):
        png, svg = out / f"{name}.png", out / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        text = svg.read_text()
        assert "<svg" in text
        assert f'id="cachelab-series-{n_series - 1}"' in text
        assert f'id="cachelab-series-{n_series}"' not in text

    # Every key written was deleted; and keys were really written: one per get/set sample,
    # k per multi-get sample, warm-up included.
    assert int(after["curr_items"]) - int(before["curr_items"]) == 0
    written = (SAMPLES + WARMUP) * (len(SIZES) + sum(KEYS))
    assert int(after["total_items"]) - int(before["total_items"]) == written


def test_format_json_prints_only_json_on_stdout(
    cli: InProcess, memcached: PrivateMemcached, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    r = cli(
        "profile", *TINY, "--server", memcached.address, "--out", out, "--format", "json",
        "--no-plots", cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # nothing but the JSON
    assert doc["schema"] == "cachelab.latency-profile"
    assert doc == load_json(out)
    assert "wrote" not in r.stdout
    assert r.stderr.strip().splitlines()[-1].startswith("wrote ")
    assert not list(out.glob("*.png")) and not list(out.glob("*.svg"))  # --no-plots


def test_unix_socket(
    memcached_unix: PrivateMemcached, tmp_path: Path, in_process, capsys
) -> None:
    out = tmp_path / "out"
    assert memcached_unix.socket_path is not None
    code = in_process(
        "profile", *TINY, "--socket", memcached_unix.socket_path, "--out", out,
        "--format", "json", "--no-plots",
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["server"]["address"] == f"unix:{memcached_unix.socket_path}"
    assert doc["server"]["version"] == memcached_unix.version
    assert_tiny_cells(doc)
    # The floor is measured over the samples' transport (issue 16: it was TCP, so p50/floor
    # compared a Unix socket with loopback TCP), and the table says which.
    assert doc["server"]["transport"] == "unix"
    code = in_process("profile", "--show", out, "--format", "table")
    assert code == 0
    assert "loopback floor (mn on the measuring Unix connection)" in capsys.readouterr().out


@pytest.mark.slow
def test_without_server_a_private_memcached_is_started_and_stopped(tmp_path: Path) -> None:
    out, tag = tmp_path / "out", uuid.uuid4().hex
    r = cachelab(
        "profile", *TINY, "--out", out, "--format", "json", "--no-plots",
        cwd=tmp_path, env=tagged_env(tag),
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["server"]["private"] is True
    assert Path(doc["server"]["argv"][0]).name == "memcached"
    assert doc["server"]["address"].startswith("127.0.0.1:")
    assert_tiny_cells(doc)
    assert tagged_memcached_pids(tag) == set(), "the private memcached outlived the run"


def test_meta_protocol(memcached: PrivateMemcached, tmp_path: Path, in_process, capsys) -> None:
    out = tmp_path / "out"
    before = stats(memcached.address)
    code = in_process(
        "profile", *TINY, "--protocol", "meta", "--server", memcached.address, "--out", out,
        "--format", "json", "--no-plots",
    )
    captured = capsys.readouterr()
    after = stats(memcached.address)
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["client"]["protocol"] == "meta"
    assert_tiny_cells(doc)
    # Every read found what was just written (memcached counts an mg hit as a get hit).
    assert int(after["curr_items"]) == int(before["curr_items"])
    reads = (SAMPLES + WARMUP) * (len(SIZES) + sum(KEYS))
    assert int(after["get_hits"]) - int(before["get_hits"]) >= reads


def test_concurrency_keeps_the_sample_counts(
    memcached: PrivateMemcached, tmp_path: Path, in_process, capsys
) -> None:
    out = tmp_path / "out"
    before = stats(memcached.address)
    code = in_process(
        "profile", *TINY, "--connections", "3", "--server", memcached.address, "--out", out,
        "--format", "json", "--no-plots",
    )
    captured = capsys.readouterr()
    after = stats(memcached.address)
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["client"]["concurrency"] == 3
    assert_tiny_cells(doc)  # 20 samples per cell, split 7 + 7 + 6 over the connections
    assert int(after["curr_items"]) == int(before["curr_items"])
    assert int(after["total_connections"]) - int(before["total_connections"]) >= 3


# -- bad input ----------------------------------------------------------------------------------

BAD_INPUT = [
    # (arguments, words the one error line must contain)
    (["--sizes", "1,foo"], ["--sizes", "foo"]),
    (["--sizes", "1,1"], ["--sizes", "duplicate"]),
    (["--keys", "0"], ["--keys", "minimum"]),
    (["--samples", "0"], ["samples"]),
    (["--connections", "0"], ["connections"]),
    (["--timeout", "-1"], ["timeout"]),
    (["--server", "nonsense"], ["nonsense"]),
    (["--server", "127.0.0.1:1", "--socket", "/x"], ["--server", "--socket"]),
    (["--no-such-flag"], ["--no-such-flag"]),
    (["--show", "/nonexistent.json"], ["/nonexistent.json"]),
    # A value memcached can never hold (over its 1 GiB ceiling) is a usage error, not a
    # server failure, with or without a server to talk to.
    (["--sizes", "2G"], ["size"]),
]


@pytest.mark.parametrize(("args", "words"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(
    cli: InProcess, args: list[str], words: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    # The bad arguments come last, so they override the good ones in TINY.
    r = cli("profile", *TINY, "--out", out, "--no-plots", *args, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    line = one_error_line(r.stderr)
    for word in words:
        assert word in line, line
    # No Python internals in a message meant for people.
    assert "<lambda>" not in line and "parse_" not in line, line
    assert r.stdout == ""
    assert not out.exists()
    assert not (tmp_path / "cachelab-out").exists()


def test_show_of_invalid_json_names_the_file_and_line(cli: InProcess, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{\n "schema": "cachelab.latency-profile",\n oops\n}\n')
    out = tmp_path / "out"
    r = cli("profile", "--show", bad, "--out", out, cwd=tmp_path)
    assert r.returncode == 2
    line = one_error_line(r.stderr)
    assert f"{bad}:3" in line, line
    assert r.stdout == "" and not out.exists()


def test_show_of_a_file_that_is_not_a_profile_names_the_file(
        cli: InProcess, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something.else", "schema_version": 1, "cells": []}))
    r = cli("profile", "--show", other, cwd=tmp_path)
    assert r.returncode == 2
    line = one_error_line(r.stderr)
    assert str(other) in line and "something.else" in line, line


# -- servers that fail --------------------------------------------------------------------------


def test_unreachable_server_is_exit_3_naming_the_address(cli: InProcess, tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    r = cli("profile", *TINY, "--server", address, "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 3
    line = one_error_line(r.stderr)
    assert address in line, line


def test_silent_server_is_exit_3_without_hanging(
        cli: InProcess, fake_server: FakeFactory, tmp_path: Path) -> None:
    fake = fake_server("silent")
    started = time.monotonic()
    r = cli(
        "profile", *TINY, "--server", fake.address, "--timeout", "0.2",
        "--out", tmp_path / "out", cwd=tmp_path,
    )
    took = time.monotonic() - started
    assert r.returncode == 3, r.stderr
    line = one_error_line(r.stderr)
    assert re.search(r"no reply|time", line, re.I), line
    assert took < 5, f"took {took:.1f} s to give up on a silent server"


def test_corrupted_values_are_all_counted_and_exit_1(
    cli: InProcess, memcached: PrivateMemcached, fake_server: FakeFactory, tmp_path: Path
) -> None:
    proxy = fake_server(f"corrupt:{memcached.address}")
    out = tmp_path / "out"
    r = cli(
        "profile", *TINY, "--server", proxy.address, "--out", out, "--format", "table",
        "--no-plots", "--fail-on", "problems", cwd=tmp_path,
    )
    corrupted = proxy.values_corrupted  # the run is over: every reply has passed the proxy
    assert r.returncode == 1, r.stderr  # asked to check for problems
    assert "Traceback" not in r.stderr
    line = one_error_line(r.stderr)
    assert line.startswith("cachelab: check failed: --fail-on problems: ") and \
        "mismatches" in line, line

    doc = load_json(out)
    gets, multigets = cells_of(doc, "get"), cells_of(doc, "multiget")
    reported = sum(c["mismatches"] for c in gets + multigets)
    assert corrupted > 0
    assert reported == corrupted, "every corrupted value must be counted, none twice"
    # The proxy flips every value, warm-up included: one per get, k per k-key multi-get.
    assert [c["mismatches"] for c in gets] == [SAMPLES + WARMUP] * len(SIZES)
    assert [c["mismatches"] for c in multigets] == [(SAMPLES + WARMUP) * k for k in KEYS]
    assert all(c["mismatches"] == 0 for c in cells_of(doc, "set") + cells_of(doc, "floor"))
    assert all(c["misses"] == 0 for c in doc["cells"])

    # The get table shows the mismatch counts.
    get_table = table_section(r.stdout, "Get latency by value size")
    row = next(line for line in get_table.splitlines() if line.startswith("mismatches"))
    assert row.split()[1:] == [str(c["mismatches"]) for c in gets]


# -- showing a saved or built-in profile -------------------------------------------------------


def test_show_builtin_appengine_2017(tmp_path: Path, in_process, capsys) -> None:
    code = in_process("profile", "--show", "appengine-2017", "--format", "table")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Get latency by value size" in captured.out
    assert "Multi-get latency by key count" in captured.out
    assert "Set latency" not in captured.out  # the article has no set table

    code = in_process("profile", "--show", "appengine-2017", "--format", "json")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["source"] == "published" and doc["name"] == "appengine-2017"
    assert {c["op"] for c in doc["cells"]} == {"get", "multiget"}


def test_show_of_a_saved_profile_directory(
    memcached: PrivateMemcached, tmp_path: Path, in_process, capsys
) -> None:
    out = tmp_path / "out"
    assert in_process(
        "profile", *TINY, "--server", memcached.address, "--out", out, "--format", "json",
        "--no-plots",
    ) == 0
    saved = json.loads(capsys.readouterr().out)
    assert in_process("profile", "--show", out, "--format", "json") == 0
    assert json.loads(capsys.readouterr().out) == saved


# -- Ctrl-C ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigint_keeps_partial_results_and_stops_the_private_server(tmp_path: Path) -> None:
    out, tag = tmp_path / "out", uuid.uuid4().hex
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "profile", "--samples", "1000000", "--warmup", "0",
         "--sizes", "1", "--keys", "1", "--no-plots", "--format", "json", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env=tagged_env(tag),
    )
    try:
        # Wait, bounded, until the private server is up and the measuring is under way.
        deadline = time.monotonic() + 60
        pid = port = None
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not get going"
            if pid is None:
                found = tagged_memcached_pids(tag)
                if found:
                    (pid,) = found
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    port = int(argv[argv.index(b"-p") + 1])
            if port is not None:
                try:
                    with _core.Client(f"127.0.0.1:{port}") as c:
                        if int(c.stats()["cmd_get"]) >= 200:
                            break
                except ServerUnreachable:
                    # The process exists before it listens (or a port clash made the run start
                    # another one): look again.
                    pid = port = None
            time.sleep(0.05)

        proc.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 130, stderr
    # Promptly: the whole run (a million samples a cell) would take minutes; 30 s is room for a
    # loaded machine to write the partial result and stop the server.
    assert took < 30, f"took {took:.1f} s to stop after SIGINT"
    assert "Traceback" not in stderr
    assert "interrupted" in stderr.strip().splitlines()[-1]
    doc = load_json(out)
    assert doc["run"]["cancelled"] is True
    assert json.loads(stdout) == doc
    kept = [c["samples"] for c in doc["cells"]]
    assert all(0 < n < 1_000_000 for n in kept), kept
    assert tagged_memcached_pids(tag) == set(), "the private memcached outlived the run"


# -- help -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_help(tmp_path: Path) -> None:
    r = cachelab("--help", cwd=tmp_path)
    assert r.returncode == 0
    assert "profile" in r.stdout
    assert re.search(r"[Ee]xit codes?:", r.stdout)
    for code in ("0 measured and written", "1 a check asked for with --fail-on", "2 usage",
                 "3 server", "130 interrupted"):
        assert code in " ".join(r.stdout.split()), code

    r = cachelab("profile", "--help", cwd=tmp_path)
    assert r.returncode == 0
    for option in ("--sizes", "--keys", "--multi-size", "--samples", "--warmup",
                   "--connections", "--protocol", "--timeout", "--seed", "--quick", "--show",
                   "--no-plots", "--out", "--format", "--server", "--socket"):
        assert option in r.stdout, option


def test_an_error_message_with_newlines_is_printed_as_one_line(monkeypatch, capsys) -> None:  # noqa: ANN001
    import argparse

    import cachelab.cli as cli
    from cachelab.errors import UsageError

    def fails(args: argparse.Namespace) -> int:
        raise UsageError("cannot connect: refused\n\tIs the server running?")

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=fails)
    monkeypatch.setattr(cli, "build_parser", lambda verb=None: parser)
    assert cli.run([]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert err == "cachelab: error: cannot connect: refused Is the server running?\n"
