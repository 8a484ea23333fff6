"""The fault suite: ``cachelab load`` against a real memcached that is stopped, killed or
restarted, or behind a fault proxy (delay and jitter, a reset, a half-open connection, a
blackhole, a trickle). Each case checks what the user sees: the exit code, the headline the
table prints, and the files saved.

A fault starts a fixed time after the server counted the run's first get (the warm-up's start:
the command's start-up and prefill take seconds on a busy machine), and the tests assert on the
lengths and counts of what happened, not on when; the bounds on a length leave room for a
loaded machine (the test process stops and continues the server, it may wait for a CPU too).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cachelab.load import LoadResult
from cachelab.servers import PrivateMemcached, find_memcached, read_stats
from clitools import one_error_line
from faultproxy import FaultProxy

pytestmark = pytest.mark.slow  # each case is a real run of seconds with a fault in it

RUN_TIMEOUT = 60


class Run:
    """``cachelab load --format table`` started in the background; ``finish()`` waits."""

    def __init__(self, tmp_path: Path, address: str, *args: object) -> None:
        self.out = tmp_path / "out"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cachelab", "load", "--server", address, "--format", "table",
             "--out", str(self.out), "--no-plots", "--warmup", "0.5", "--interval", "0.5",
             *map(str, args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        self.stdout = self.stderr = ""

    def wait_for_gets(self, server: PrivateMemcached, seconds: float) -> None:
        """Sleep until ``seconds`` after the server counted the run's first get: the warm-up's
        start, whatever the process's start-up and prefill (sets only) took."""
        deadline = time.monotonic() + RUN_TIMEOUT
        while int(read_stats(server.address)["cmd_get"]) == 0:
            assert self.proc.poll() is None and time.monotonic() < deadline, "no get was sent"
            time.sleep(0.01)
        time.sleep(seconds)

    def finish(self) -> Run:
        self.stdout, self.stderr = self.proc.communicate(timeout=RUN_TIMEOUT)
        assert "Traceback" not in self.stderr, self.stderr
        return self

    @property
    def code(self) -> int:
        return int(self.proc.returncode)

    @property
    def saved(self) -> dict[str, Any]:
        return dict(json.loads((self.out / "load.json").read_text()))

    def verdict_reasons(self) -> list[str]:
        """The reasons of an INVALID verdict: the table's first line, then its "also:" lines
        (which reason comes first depends on the machine: a busy one saturates the client)."""
        lines = self.stdout.splitlines()
        assert lines and lines[0].startswith("INVALID: "), self.stdout
        reasons = [lines[0].removeprefix("INVALID: ")]
        for line in lines[1:]:
            if not line.startswith("  also: "):
                break
            reasons.append(line.removeprefix("  also: "))
        return reasons

    def headline_max_s(self) -> float:
        """The max latency in the table's headline (µs in the table), in seconds."""
        row = next(line for line in self.stdout.splitlines()
                   if re.match(r"(latency|corrected)\s+[\d.]", line))
        return float(row.split()[-1]) / 1e6

    def stall_lines(self) -> list[str]:
        lines = self.stdout.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("stalls ("))
        return [line.strip() for line in lines[at + 1:] if line.startswith("  ")]


def stall_lengths(run: Run) -> list[float]:
    """The stall lengths the table lists, seconds."""
    return [float(m.group(1)) for line in run.stall_lines()
            if (m := re.search(r"\(([\d.]+) s\):", line))]


def _no_failed_stall(saved: dict[str, Any]) -> bool:
    """No stall with a timeout or the server down in it: only slow replies, if any."""
    return all(not s["timeouts"] and not s["down"] for s in saved["stalls"])


@pytest.fixture
def proxy(fresh_memcached: PrivateMemcached) -> Iterator[FaultProxy]:
    with FaultProxy(fresh_memcached.address) as p:
        yield p


def _pause(pid: int, seconds: float) -> None:
    """SIGSTOP the process ``pid`` (a server, or the client) for ``seconds``, then SIGCONT."""
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)


# -- the server stops, dies, comes back ---------------------------------------------------------


def test_closed_loop_headline_shows_a_sigstop_stall(
    tmp_path: Path, fresh_memcached: PrivateMemcached
) -> None:
    assert fresh_memcached.pid is not None
    run = Run(tmp_path, fresh_memcached.address, "--duration", "4", "--timeout", "5")
    run.wait_for_gets(fresh_memcached, 0.5 + 1.0)  # 1 s into the measured 4
    _pause(fresh_memcached.pid, 1.5)
    run.finish()
    assert run.code == 0, run.stderr  # slow, not failed: no request timed out
    # ... but not a valid measurement: the verdict, first line of the table, says why (on a
    # busy machine "client saturated" may come first, the stall on an "also:" line under it).
    # One stall is the SIGSTOP's; a loaded machine may add short ones of its own (a thread
    # waiting 100 ms or more for a CPU).
    reasons = run.verdict_reasons()
    assert any(r.startswith("not stationary: ") and " stall(s)" in r for r in reasons), run.stdout
    assert run.saved["validity"]["verdict"] == "INVALID"
    # The headline's max is the stall, not a quiet tail's max.
    assert 1.2 <= run.headline_max_s() <= 3.5, run.stdout
    lengths = stall_lengths(run)
    assert len([x for x in lengths if x >= 1.0]) == 1 and 1.2 <= max(lengths) <= 3.5, run.stdout
    saved = run.saved
    assert saved["totals"]["uncorrected"]["max"] >= 1.2e9
    longest = max(saved["stalls"], key=lambda st: st["end_s"] - st["start_s"])
    assert longest["slow_replies"] >= 1, saved["stalls"]


def test_open_loop_headline_and_rate_verdict_show_a_sigstop_stall(
    tmp_path: Path, fresh_memcached: PrivateMemcached
) -> None:
    assert fresh_memcached.pid is not None
    run = Run(tmp_path, fresh_memcached.address, "--rate", "4000", "--duration", "4",
              "--timeout", "5", "--max-outstanding", "50")
    run.wait_for_gets(fresh_memcached, 0.5 + 1.0)
    _pause(fresh_memcached.pid, 1.5)
    run.finish()
    # 4 connections × 50 in flight: the schedule fell behind while the server was stopped:
    # a problem said on stderr, exit 0 (no --fail-on asked for it).
    assert run.code == 0, run.stderr
    assert "found problems" in run.stderr and "rate not held" in run.stderr
    assert re.search(r"target rate 4000/s NOT held: .* interval\(s\) fell behind", run.stdout)
    # Requests due during the stall waited from their intended time: the corrected tail is
    # the stall, in the headline.
    assert run.headline_max_s() >= 1.2, run.stdout
    saved = run.saved
    assert saved["totals"]["corrected"]["percentiles"]["99"] >= 0.5e9
    assert saved["schedule"]["held"] is False and saved["schedule"]["intervals_behind"]
    assert len([x for x in stall_lengths(run) if x >= 1.0]) == 1, run.stdout


def test_server_killed_mid_run_exits_3_with_the_partial_results_saved(tmp_path: Path) -> None:
    server = PrivateMemcached(threads=2).start()
    try:
        run = Run(tmp_path, server.address, "--duration", "5", "--give-up", "1.5")
        run.wait_for_gets(server, 0.5 + 2.0)  # 2 s into the measured run, whatever start-up took
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        run.finish()
    finally:
        server.stop()
    assert run.code == 3, run.stderr
    err = run.stderr.strip().splitlines()
    assert any(line.startswith("cachelab: error: the server went away") for line in err), err
    assert run.stdout.startswith("PARTIAL"), run.stdout
    assert re.search(r"no replies at all for [\d.]+ s .* replies/s over the [\d.]+ s the "
                     r"server answered", run.stdout), run.stdout
    saved = run.saved
    assert saved["run"]["aborted"].startswith("the server went away")
    live = saved["run"]["liveness"]
    assert live["dead_s"] >= 0.5 and live["live_throughput"] > saved["totals"]["throughput"]
    assert any(s["down"] for s in saved["stalls"])
    assert (run.out / "load.csv").exists()


def test_server_gone_at_the_end_of_a_short_run_is_exit_3(tmp_path: Path) -> None:
    # The run's time is up before the reconnect budget is spent; the server is still gone.
    # (The clean-up then tries the server for the rest of that budget: 8 s, not 30, keeps
    # the test short.)
    server = PrivateMemcached(threads=2).start()
    try:
        run = Run(tmp_path, server.address, "--duration", "3", "--give-up", "8")
        run.wait_for_gets(server, 0.5 + 2.0)
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        run.finish()
    finally:
        server.stop()
    assert run.code == 3, run.stderr
    assert "every connection was down when the run ended" in run.stderr


def _memcached_on(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [find_memcached(), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-u", "root",
         "-t", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_server_restarted_mid_run_is_reconnected_and_counted(tmp_path: Path) -> None:
    first = PrivateMemcached(threads=2).start()
    port = first.port
    assert port is not None and first.pid is not None
    second: subprocess.Popen[bytes] | None = None
    try:
        run = Run(tmp_path, first.address, "--duration", "4", "--mix", "get=50,set=50",
                  "--no-prefill")
        run.wait_for_gets(first, 0.5 + 1.0)
        os.kill(first.pid, signal.SIGKILL)
        time.sleep(0.5)
        second = _memcached_on(port)
        run.finish()
    finally:
        first.stop()
        if second is not None:
            second.kill()
            second.wait(5)
    assert run.code == 0, run.stderr  # completed, with errors (said, not failed: no --fail-on)
    assert "found problems" in run.stderr
    saved = run.saved
    errors = saved["totals"]["errors"]
    assert errors.get("connect_refused", 0) >= 1, errors
    down = [s for s in saved["stalls"] if s["down"]]
    assert len(down) == 1 and 0.3 <= down[0]["end_s"] - down[0]["start_s"] <= 2.0, down
    # Replies came again after the restart, and the table names the errors by kind.
    assert saved["intervals"][-2]["replies"] > 0
    assert re.search(r"^errors\s+\d+\s+\(.*connect_refused \d+", run.stdout, re.M), run.stdout


def test_server_restarted_mid_run_is_named_and_its_counters_are_never_negative(
        tmp_path: Path) -> None:
    """A server killed and started again on its port: the stats after the run are another
    process's, so the headline names the restart (when, which pids) and no delta is a
    difference of the two processes' counters (it read ``get_hits +-313184 … CPU -3.19 s``)."""
    first = PrivateMemcached(threads=2).start()
    port, old_pid = first.port, first.pid
    assert port is not None and old_pid is not None
    second: subprocess.Popen[bytes] | None = None
    try:
        run = Run(tmp_path, first.address, "--duration", "5", "--key-space", "2000")
        run.wait_for_gets(server=first, seconds=0.5 + 1.5)  # 1.5 s into the measured run
        os.kill(old_pid, signal.SIGKILL)
        first.stop()
        second = _memcached_on(port)
        run.finish()
    finally:
        first.stop()
        if second is not None:
            second.kill()
            second.wait(5)
    saved = run.saved
    restart = saved["server"]["restart"]
    assert restart is not None and restart["restarts"] == 1, saved["server"]
    assert restart["pids"] == [old_pid, second.pid]
    assert restart["counted"] in ("per life", "the new life only"), restart
    # named at the top of what the user reads, before the run's description
    lines = run.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("SERVER RESTARTED: "))
    assert at < next(i for i, line in enumerate(lines) if line.startswith("memcached ")), lines
    head = lines[at]
    assert head.startswith(f"SERVER RESTARTED: {first.address} restarted about "), head
    assert f"(pid {old_pid} -> {second.pid})" in head, head
    assert 0 <= restart["at_s"] <= 5, restart
    server_line = next(line for line in run.stdout.splitlines() if line.startswith("server ("))
    assert f"pid {old_pid} -> {second.pid}" in server_line, server_line
    assert "+-" not in server_line and not re.search(r"CPU -", server_line), server_line
    for k, v in saved["server"]["deltas"].items():
        assert (min(v.values()) if isinstance(v, dict) else v) >= 0, (k, v)
    for life in restart["lives"]:
        assert all(v >= 0 for v in (life["deltas"] or {}).values()
                   if not isinstance(v, dict)), life
    assert saved["server"]["schedstat"] is None  # the old process's run-queue wait is gone
    # the run measured: exit 0, the errors the kill caused said on stderr (never 3: not
    # aborted; 1 only with --fail-on problems)
    assert run.code == 0, run.stderr
    if LoadResult.from_dict(saved).problems():
        assert "cachelab: found problems: " in run.stderr, run.stderr
    # the report says it too
    page = tmp_path / "report.html"
    p = subprocess.run([sys.executable, "-m", "cachelab", "report", str(run.out), "--out",
                        str(page)], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert f"SERVER RESTARTED: {first.address} restarted about" in page.read_text()


# -- network faults through the proxy -----------------------------------------------------------


def test_added_delay_and_jitter_show_in_the_percentiles(tmp_path: Path, proxy: FaultProxy) -> None:
    proxy.delay(0.02, jitter=0.005)
    run = Run(tmp_path, proxy.address, "--duration", "2", "--connections", "2").finish()
    assert run.code == 0, run.stderr
    p = run.saved["totals"]["uncorrected"]["percentiles"]
    assert 15e6 <= p["50"] <= 40e6, p
    # No request timed out or found the server down (a stall of slow replies alone is the
    # machine: the proxy is a thread of this test process, and may wait for a CPU).
    assert _no_failed_stall(run.saved), run.stdout


def test_a_slowdown_late_in_the_run_is_in_the_headline_and_the_steady_window_is_flagged(
    tmp_path: Path, proxy: FaultProxy, fresh_memcached: PrivateMemcached
) -> None:
    """The replies slow down 10 ms at 3.5 s of a 5 s run: the steady-state detector settles on
    the slow tail (its reference is the last half), so its window is short; the headline
    still covers all 5 s, and the summary warns that the steady window is not the run.

    The 3.5 s are counted from the warm-up's first get, not from the process's start: on a
    busy machine start-up and prefill take a second or two, which moved the slowdown to the
    middle of the run and made its tail more than half the run."""
    run = Run(tmp_path, proxy.address, "--duration", "5", "--connections", "2")
    run.wait_for_gets(fresh_memcached, 0.5 + 3.5)
    proxy.delay(0.01)
    run.finish()
    assert run.code == 0, run.stderr
    saved = run.saved
    assert saved["totals"]["duration_s"] >= 4.5
    window = saved["steady"]["window"]["duration_s"]
    assert saved["steady"]["short"] == (window < saved["totals"]["duration_s"] / 2)
    # Where the slowdown landed in the measured run (the intervals whose p50 is the 10 ms
    # delay's): on a very busy machine the warm-up's end can come so late that the slow tail
    # is more than half the run, and then it is the steady state, rightly.
    measured = [iv for iv in saved["intervals"] if not iv["warmup"]]
    slow = sum(iv["duration_s"] for iv in measured
               if iv["uncorrected"]["percentiles"]["50"] >= 8e6)
    assert slow > 0, measured
    if slow >= saved["totals"]["duration_s"] / 2:
        # The reference (the last half) is mostly slow: its p50 near the 10 ms delay, far
        # from the fast part's fraction of a millisecond (a busy machine's reference held
        # 7.9 ms: an interval of the fast part in it).
        assert saved["steady"]["reference_p50_ns"] >= 5e6, (saved["steady"], slow)
        return
    assert saved["steady"]["short"] or not saved["steady"]["reached"], (saved["steady"], slow)
    assert "WARNING: the steady window is less than half the measured run" in run.stdout or \
        "WARNING: the run never reached a steady state" in run.stdout, run.stdout
    # The fast part is in the headline: its p50 is under the 10 ms the slow part takes.
    assert saved["totals"]["uncorrected"]["percentiles"]["50"] < 10e6


def test_a_connection_reset_is_counted_and_the_run_goes_on(
    tmp_path: Path, proxy: FaultProxy, fresh_memcached: PrivateMemcached
) -> None:
    run = Run(tmp_path, proxy.address, "--duration", "3", "--connections", "2",
              "--fail-on", "problems")
    run.wait_for_gets(fresh_memcached, 0.5 + 1.0)
    proxy.reset()
    run.finish()
    # Asked to check for problems: exit 1, one line naming the check and what it counted.
    assert run.code == 1, run.stderr
    assert one_error_line(run.stderr).startswith("cachelab: check failed: --fail-on problems: ")
    saved = run.saved
    assert set(saved["all"]["errors"]) & {"reset", "closed", "io"}, saved["all"]["errors"]
    assert saved["intervals"][-2]["replies"] > 0  # reconnected
    assert proxy.connections >= 4


def test_a_half_open_connection_times_out_and_the_run_gives_up(
    tmp_path: Path, proxy: FaultProxy, fresh_memcached: PrivateMemcached
) -> None:
    run = Run(tmp_path, proxy.address, "--duration", "6", "--timeout", "0.3",
              "--give-up", "1.5", "--connections", "2")
    run.wait_for_gets(fresh_memcached, 0.5 + 1.0)
    proxy.half_open()
    gone = time.monotonic()
    run.finish()
    assert run.code == 3, run.stderr
    assert "the server went away: no request succeeded" in run.stderr
    # Clean-up gets the same budget, not a timeout per batch of deletes (it took 27 s): the
    # client last tries the server within the budget for the run, the budget for clean-up and
    # some seconds more (a request's timeout, the stats read after the run, late wake-ups on
    # a busy machine). Not the process's exit: after that its verdict's statistics (scipy,
    # imported once the run is over) take seconds of a busy machine's CPU.
    assert proxy.last_heard is not None
    assert proxy.last_heard - gone < 1.5 + 1.5 + 6, (proxy.last_heard - gone, run.stdout)
    assert "COULD NOT be deleted" in run.stdout
    saved = run.saved
    assert saved["totals"]["errors"].get("timeout", 0) >= 2
    # The errors row is the sum of every kind listed beside it.
    m = re.search(r"^errors +(\d+)  \((.+)\)$", run.stdout, re.M)
    assert m, run.stdout
    kinds = dict((k, int(n)) for n, k in (part.rsplit(" ", 1)[::-1] for part in
                                            m.group(2).split(", ")))
    assert int(m.group(1)) == sum(kinds.values()) == sum(saved["totals"]["errors"].values())
    assert saved["stalls"] and saved["stalls"][-1]["timeouts"] >= 2
    assert run.stdout.startswith("PARTIAL")


def test_timeouts_up_to_the_end_of_a_run_are_a_stall_not_a_server_gone(
    tmp_path: Path, proxy: FaultProxy, fresh_memcached: PrivateMemcached
) -> None:
    """Replies held from 1.5 s before the end of a run with --timeout 0.2: every request
    times out, connections reconnect and time out again, and often every one is down,
    waiting to reconnect, when the run ends. Nothing was closed or refused (the proxy
    accepts): the run is measured (exit 0) with the stall in its headline, not "the server
    went away" (exit 3), which a client starved past its timeout on a loaded machine also
    used to get."""
    run = Run(tmp_path, proxy.address, "--duration", "3", "--timeout", "0.2",
              "--give-up", "6", "--connections", "2")
    run.wait_for_gets(fresh_memcached, 0.5 + 1.5)
    proxy.blackhole(2.5)
    run.finish()
    assert run.code == 0, (run.stderr, run.stdout)
    assert "went away" not in run.stderr + run.stdout
    saved = run.saved
    assert saved["all"]["errors"].get("timeout", 0) >= 2, saved["all"]["errors"]
    assert saved["stalls"] and saved["stalls"][-1]["timeouts"] >= 1, saved["stalls"]
    assert re.search(r"no replies at all for [\d.]+ s", run.stdout), run.stdout
    assert re.search(r"stall\(s\) in the measured run", run.stdout), run.stdout


def test_replies_that_came_while_the_client_did_not_run_are_not_timeouts(
    tmp_path: Path, fresh_memcached: PrivateMemcached
) -> None:
    """A loaded machine may not run the client for longer than the timeout, also between its
    reading a socket and its looking for requests past their time: the replies that came in
    meanwhile are read first, not counted as timeouts. The client (connections kept busy with
    deep pipelines: a stop lands between a read and that check more often) is stopped
    (SIGSTOP) for 1.2 s six times, over a healthy server, with --timeout 0.5."""
    run = Run(tmp_path, fresh_memcached.address, "--duration", "10", "--timeout", "0.5",
              "--connections", "2", "--pipeline", "64")
    run.wait_for_gets(fresh_memcached, 0.5 + 0.5)
    for _ in range(6):
        _pause(run.proc.pid, 1.2)
        time.sleep(0.2)
    run.finish()
    assert run.code == 0, (run.stderr, run.stdout)
    saved = run.saved
    # The stops are the run's stalls of a second or more: none has a timeout in it.
    stops = [s for s in saved["stalls"] if s["end_s"] - s["start_s"] >= 1.0]
    assert stops, run.stdout
    # A timeout in a stop or elsewhere (a stall of about the timeout, 0.5 s) is a loaded
    # machine's own: the server not run for that long, which the run counts as its wait for a
    # CPU. The fault guarded (requests in flight counted as timed out before the socket was
    # read) put timeouts in nearly every stop; a loaded machine put them in one of four.
    late = [s for s in stops if s["timeouts"]]
    if late:
        assert len(late) <= len(stops) // 2, (stops, run.stdout)
        assert saved["server"]["schedstat"]["run_queue_wait_s"] >= 0.5, saved["server"]
    errors = saved["all"]["errors"]
    if errors:
        assert set(errors) == {"timeout"}, (errors, run.stdout)
        assert saved["server"]["schedstat"]["run_queue_wait_s"] >= 0.5, saved["server"]


def test_a_two_second_blackhole_is_one_stall_in_the_headline(
    tmp_path: Path, proxy: FaultProxy, fresh_memcached: PrivateMemcached
) -> None:
    run = Run(tmp_path, proxy.address, "--duration", "4", "--timeout", "5", "--connections", "2")
    run.wait_for_gets(fresh_memcached, 0.5 + 0.8)
    proxy.blackhole(2.0)
    run.finish()
    assert run.code == 0, run.stderr
    assert 1.7 <= run.headline_max_s() <= 3.5, run.stdout
    # One stall is the blackhole's; a loaded machine may add short ones of its own.
    lengths = stall_lengths(run)
    assert len([x for x in lengths if x >= 1.0]) == 1, run.stdout
    assert 1.7 <= max(lengths) <= 3.5, run.stdout


def test_a_trickle_of_bytes_makes_slow_replies_not_errors(
    tmp_path: Path, proxy: FaultProxy
) -> None:
    # 1,000-byte values, 50 bytes every 10 ms: each get reply takes ~0.2 s.
    proxy.trickle(50, 0.01)
    run = Run(tmp_path, proxy.address, "--duration", "2", "--connections", "1",
              "--value-size", "1000", "--mix", "get=1", "--key-space", "20", "--timeout", "2")
    run.finish()
    assert run.code == 0, run.stderr
    p = run.saved["totals"]["uncorrected"]["percentiles"]
    assert p["50"] >= 0.1e9, p
    assert stall_lengths(run), run.stdout


def test_fault_proxy_is_transparent_when_clear(tmp_path: Path, proxy: FaultProxy) -> None:
    """The proxy itself: a plain run through it has no errors and no stalls (so the cases
    above measure the faults, not the proxy)."""
    run = Run(tmp_path, proxy.address, "--duration", "1.5", "--connections", "2").finish()
    assert run.code == 0, run.stderr
    assert run.saved["totals"]["errors"] == {}
    assert _no_failed_stall(run.saved), run.stdout

