"""A tiers run cut short keeps the rounds every method finished: the server killed (exit 3)
or SIGTERM (exit 130) writes tiers.json and tiers.csv with them, marked partial, and the
table's first line says PARTIAL with the reads kept."""

from __future__ import annotations

import csv
import json
import signal
from pathlib import Path

import pytest

from cachelab import tiers as lib
from cachelab.cli import run as cli
from cachelab.errors import Interrupted
from cachelab.servers import PrivateMemcached
from partial_runs import Background, error_lines, gets_served, kill

#: Far more reads than a test waits for: it is always stopped.
ASKED = 1_000_000


def start(server: PrivateMemcached, out: Path, tmp_path: Path) -> Background:
    """``tiers`` on ``server``, once it is in its timed rounds (2,000 gets: the warm-up and
    the checks take under 200)."""
    before = gets_served(server.address)
    run = Background(["tiers", "--server", server.address, "--reads", ASKED, "--no-plots",
                      "--format", "table", "--out", out], cwd=tmp_path)
    run.wait_for(lambda: gets_served(server.address) - before >= 2_000, "timed reads")
    return run


def kept(out: Path) -> tuple[dict, int]:
    """tiers.json, and the reads every row of it and of tiers.csv holds (all the same)."""
    doc = json.loads((out / "tiers.json").read_text())
    with (out / "tiers.csv").open() as f:
        reads = {int(r["reads"]) for r in csv.DictReader(f)} | {r["reads"] for r in doc["rows"]}
    assert len(reads) == 1, reads
    return doc, reads.pop()


def assert_headline(stdout: str, why: str, reads: int) -> None:
    lines = stdout.splitlines()
    first = lines[0]
    # the PARTIAL line first, then the answer card, then the table's title
    second = next(line for line in lines if line.startswith("Reading each shape"))
    assert first.startswith(f"PARTIAL ({why} after "), first
    assert first.endswith(f"; reads per method: {reads:,} of {ASKED:,} asked)"), first
    assert second.startswith(f"Reading each shape {reads:,} times (of {ASKED:,} asked)"), second


@pytest.mark.slow
def test_a_run_whose_server_is_killed_keeps_the_rounds_done(tmp_path: Path) -> None:
    out = tmp_path / "cut"
    with PrivateMemcached(threads=2) as server:
        run = start(server, out, tmp_path)
        kill(server)
        p = run.finish()
    assert p.returncode == 3, p.stderr
    (err,) = error_lines(p.stderr)
    assert err.startswith("cachelab: error: the server failed: "), err
    doc, reads = kept(out)
    assert reads >= 100 and doc["run"]["aborted"] == err.removeprefix("cachelab: error: ")
    assert len(doc["rows"]) == 18 and doc["findings"]
    assert_headline(p.stdout, "gave up", reads)


@pytest.mark.slow
def test_sigterm_keeps_the_rounds_done_and_the_report_says_partial(
        fresh_memcached: PrivateMemcached, tmp_path: Path) -> None:
    out = tmp_path / "cut"
    run = start(fresh_memcached, out, tmp_path)
    run.signal(signal.SIGTERM)
    p = run.finish()
    assert p.returncode == 130, p.stderr
    assert error_lines(p.stderr) == [f"cachelab: error: interrupted; partial results saved in "
                                     f"{out}"]
    doc, reads = kept(out)
    assert reads >= 100 and doc["run"]["cancelled"] is True
    assert_headline(p.stdout, "interrupted", reads)
    assert cli(["report", str(out), "--out", str(tmp_path / "page.html")]) == 0
    page = (tmp_path / "page.html").read_text()
    assert f"reads per method: {reads:,} of {ASKED:,} asked)" in page
    assert f"Each method read {reads:,} times (of {ASKED:,} asked)" in page


def test_ctrl_c_in_the_progress_callback_keeps_whole_rounds(memcached: PrivateMemcached) -> None:
    def stop(done: int, _total: int) -> None:
        if done >= 20:
            raise KeyboardInterrupt

    spec = lib.TiersSpec(reads=1_000, warmup=1, record_bytes=5_000, list_items=50)
    try:
        lib.tiers(spec, server=memcached.address, on_progress=stop)
    except Interrupted as e:
        partial = e.partial
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C went through: nothing was kept")
    else:
        pytest.fail("the run was not interrupted")
    assert {r["reads"] for r in partial.rows} == {20}
    assert partial.run["cancelled"] is True and partial.findings
    assert lib.render(partial).startswith("PARTIAL (interrupted after ")
