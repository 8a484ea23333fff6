"""Every NOT and INVALID line a user reads names the change that would fix it, after an arrow
(issue 31: "every NOT/INVALID line names the one change that would fix it"), written from
the run's own figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachelab.load import LoadSpec
from cachelab.load.fixes import OVERSUBSCRIBED_WAIT, RunShape, fix_for
from cachelab.servers import PrivateMemcached
from cards import invalid_load
from clitools import InProcess


def _verdict_lines(text: str) -> list[str]:
    """The lines that say INVALID or NOT, but the answer card's (whose trust mark names the
    verdict the lines above it fix)."""
    return [line for line in text.splitlines() if ("INVALID" in line or " NOT " in line
            or line.startswith("precision NOT")) and " — indicative (" not in line]


def _shape(**kw: object) -> RunShape:
    base = {"threads": 2, "connections": 8, "rate": 10_000.0, "duration": 10.0, "warmup": 1.0,
            "max_outstanding": 100, "client_wait": 0.0, "server_wait": 0.0}
    return RunShape(**{**base, **kw})  # type: ignore[arg-type]


def test_each_check_s_fix_names_a_flag_from_the_run_s_figures() -> None:
    quiet = _shape()
    assert fix_for("client", {}, quiet).startswith("`--threads 4`")
    # The rate held at worst (10,000 × (1 − 0.3) = 7,000/s), and 10 % under it.
    assert fix_for("rate", {"worst_deviation": -0.3}, quiet).startswith("`--rate 6300`")
    assert fix_for("stationary", {"stalls": 0}, quiet).startswith("`--warmup 5` and "
                                                                  "`--duration 20`")
    assert "`--max-outstanding 200`" in fix_for("late", {"client_status": "pass"}, quiet)
    assert fix_for("late", {"client_status": "fail"}, quiet) == "`--threads 4`"
    assert "`--connections 4`" in fix_for("independent", {}, quiet)
    assert fix_for("arrivals", {"zero_gaps": 9}, _shape(send_batch=4)) == "`--send-batch 1`"
    # Sends due at different times leaving in one wake-up: the pacer should wait awake.
    assert fix_for("arrivals", {"zero_gaps": 9}, quiet).startswith("`--spin-us 300`")
    assert fix_for("arrivals", {"zero_gaps": 9}, _shape(spin_us=300)).startswith("`--threads 4`")
    # On an oversubscribed machine more threads only add to the queue: the fix is the machine.
    busy = _shape(client_wait=OVERSUBSCRIBED_WAIT + 0.1)
    for name in ("client", "rate", "late", "independent"):
        fix = fix_for(name, {"worst_deviation": -0.3, "stalls": 1}, busy)
        assert fix.startswith("quiet the machine (the client's threads waited for one of the "), \
            (name, fix)
        assert "`--ray " in fix


def test_a_private_server_s_run_queue_wait_is_read_per_worker_thread() -> None:
    """The server's share of the run spent waiting for a CPU, as the engine records it
    (``schedstat``, summed over memcached's threads), over its worker threads: 2 workers that
    waited 60 % of the run between them waited 30 % each (issue 33: the check read a key the
    engine never wrote, so a starved server was never named)."""
    spec = LoadSpec(threads=2, connections=8, duration=10.0)
    starved = {"schedstat": {"wait_per_wall": 0.6, "threads": 10}, "stats_after": {"threads": 2}}
    shape = RunShape.of(spec, None, starved)
    assert shape.server_wait == pytest.approx(0.3)
    assert "the server's worker threads waited for one of the" in str(shape.oversubscribed())
    assert "30% of the run each" in str(shape.oversubscribed())
    # 4 workers that waited 60 % between them (15 % each) are not starved; nor is one with no
    # schedstat (a server elsewhere)
    assert RunShape.of(spec, None, {**starved, "stats_after": {"threads": 4}}
                       ).oversubscribed() is None
    assert RunShape.of(spec, None, {"schedstat": None}).server_wait is None


def test_an_invalid_load_names_its_fix_on_every_verdict_line(
        memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = invalid_load(InProcess(capsys), memcached.address, tmp_path / "out")
    assert run.returncode == 0, run.stderr
    lines = _verdict_lines(run.stdout)
    assert lines and lines[0].startswith("INVALID: "), run.stdout
    for line in lines:
        assert " → " in line and line.split(" → ")[-1].strip(), line


def test_a_profile_short_of_its_precision_names_the_samples_it_needs(
        memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = InProcess(capsys)("profile", "--server", memcached.address, "--sizes", "100",
                            "--no-multiget", "--samples", "2000", "--warmup", "10",
                            "--precision", "0.5%", "--format", "table", "--no-plots",
                            "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    lines = [line for line in _verdict_lines(run.stdout) if "precision NOT reached" in line]
    assert lines, run.stdout
    fix = lines[0].split(" → ")[1]
    # The cap was 2000: the fix asks for more, and a target the widest cell met.
    need = int(fix.split("`--samples ")[1].split("`")[0])
    assert need > 2000, fix
    assert "or a wider `--precision " in fix, fix
