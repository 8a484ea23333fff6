"""Tests of cachelab.progress: a progress bar that only draws on terminals and never raises."""

from __future__ import annotations

import io
import os
import threading
import time

import pytest

from cachelab.progress import Progress, run_cancellable


class FakeTTY(io.StringIO):
    """A string buffer that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_disabled_writes_nothing() -> None:
    stream = io.StringIO()  # not a terminal: disabled by default
    with Progress(10, "get", stream=stream) as progress:
        assert not progress.enabled
        for done in range(11):
            progress.update(done)
    assert stream.getvalue() == ""


def test_explicitly_disabled_on_a_terminal_writes_nothing() -> None:
    stream = FakeTTY()
    with Progress(10, "get", stream=stream, enabled=False) as progress:
        progress.update(5)
    assert stream.getvalue() == ""


def test_enabled_on_a_terminal_draws_one_line() -> None:
    stream, clock = FakeTTY(), FakeClock()
    with Progress(200, "get 1KB", stream=stream, clock=clock) as progress:
        assert progress.enabled
        clock.now += 2.0
        progress.update(50)
    output = stream.getvalue()
    assert output.startswith("\r") and output.endswith("\n")
    assert output.count("\n") == 1
    last = output.rstrip("\n").split("\r")[-1]
    assert last.startswith("get 1KB [")
    assert " 25%" in last and "50/200" in last
    assert "25/s" in last  # 50 done in 2 s
    assert "ETA 0:06" in last  # 150 left at 25/s


def test_redraws_are_throttled() -> None:
    stream, clock = FakeTTY(), FakeClock()
    progress = Progress(1000, "x", stream=stream, clock=clock)
    progress.update(1)  # the first update always draws
    for done in range(2, 50):
        clock.now += 0.001
        progress.update(done)
    assert stream.getvalue().count("\r") == 1
    clock.now += 0.2
    progress.update(60)
    assert stream.getvalue().count("\r") == 2
    progress.update(1000)  # reaching the total always draws
    assert stream.getvalue().count("\r") == 3
    assert "100%" in stream.getvalue().split("\r")[-1]


def test_close_shows_the_final_state_once() -> None:
    stream, clock = FakeTTY(), FakeClock()
    progress = Progress(4, "x", stream=stream, clock=clock)
    progress.update(1)
    clock.now += 0.01
    progress.update(3)  # throttled: not drawn yet
    progress.close()
    progress.close()  # idempotent
    progress.update(4)  # after close: ignored
    output = stream.getvalue()
    assert output.endswith("\n") and output.count("\n") == 1
    assert "3/4" in output.split("\r")[-1]


def test_shorter_line_blanks_the_previous_one() -> None:
    stream, clock = FakeTTY(), FakeClock()
    progress = Progress(10, "x", stream=stream, clock=clock)
    clock.now += 1000.0
    progress.update(1)  # slow start: a long ETA
    long_line = stream.getvalue().split("\r")[-1]
    clock.now += 1.0
    progress.update(10)
    short_line = stream.getvalue().split("\r")[-1]
    assert len(short_line.rstrip()) < len(long_line) <= len(short_line)


def test_percent_uses_integer_maths() -> None:
    progress = Progress(100, "x", stream=FakeTTY(), clock=FakeClock())
    progress.done = 29
    assert " 29%" in progress.render(101.0)
    progress.done = 999  # more than the total: capped
    assert "100%" in progress.render(101.0)


def test_zero_total_is_complete() -> None:
    stream = FakeTTY()
    with Progress(0, "nothing", stream=stream, clock=FakeClock()):
        pass
    assert "100%" in stream.getvalue()


class ClosedStream(FakeTTY):
    def write(self, text: str) -> int:
        raise ValueError("I/O operation on closed file.")


class BrokenPipe(FakeTTY):
    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("stream_class", [ClosedStream, BrokenPipe])
def test_output_errors_are_swallowed(stream_class: type[FakeTTY]) -> None:
    with Progress(10, "x", stream=stream_class(), clock=FakeClock()) as progress:
        progress.update(5)
        assert not progress.enabled  # gave up drawing after the failure
        progress.update(10)


def test_isatty_on_a_closed_stream_means_disabled() -> None:
    stream = io.StringIO()
    stream.close()
    with Progress(10, "x", stream=stream) as progress:
        progress.update(3)
    assert not progress.enabled


def test_default_stream_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress(10, "x") as progress:  # captured stderr is no terminal
        progress.update(10)
    assert capsys.readouterr().err == ""


def test_stage_logger_labels_the_bar_on_a_terminal_and_logs_elsewhere() -> None:
    from cachelab.progress import stage_logger

    stream, clock, logged = FakeTTY(), FakeClock(), []
    with Progress(4, "replay", stream=stream, clock=clock) as bar:
        log = stage_logger(bar, "replay", logged.append)
        log("slice 2/4: 500 requests under every strategy in turn")
        assert bar.label == "replay: slice 2/4"
        clock.now += 1.0
        bar.update(2)
    assert logged == []  # nothing printed under the live bar
    assert stream.getvalue().count("\n") == 1
    assert "replay: slice 2/4 [" in stream.getvalue()

    plain = io.StringIO()  # not a terminal: the messages are log lines, whole
    with Progress(4, "replay", stream=plain) as bar:
        log = stage_logger(bar, "replay", logged.append)
        log("loading 10 items (0.1 MB) into memcached")
    assert logged == ["replay: loading 10 items (0.1 MB) into memcached"]
    assert plain.getvalue() == ""


def test_unknown_total_shows_time_then_begin_counts_from_then() -> None:
    stream, clock = FakeTTY(), FakeClock()
    with Progress(None, "replay", stream=stream, clock=clock) as bar:
        clock.now += 3.0
        bar.update(0)
        assert stream.getvalue().split("\r")[-1].startswith("replay …  0:03")
        bar.begin(100)
        clock.now += 2.0
        bar.update(50)
    last = stream.getvalue().rstrip("\n").split("\r")[-1]
    assert "50/100" in last and "25/s" in last  # 50 in the 2 s since begin, not in 5 s


def test_track_begins_on_the_first_report_and_follows_the_total() -> None:
    stream, clock = FakeTTY(), FakeClock()
    with Progress(None, "profile", stream=stream, clock=clock) as bar:
        clock.now += 10.0  # e.g. starting a server: not part of the rate
        bar.track(0, 100)
        clock.now += 1.0
        bar.track(10, 100)
        assert bar.total == 100 and "10/s" in bar.render(clock.now)
        bar.track(10, 200)  # the total can grow
        assert bar.total == 200


# -- run_cancellable ------------------------------------------------------------------------------


def _policy(tid: int) -> int:
    return os.sched_getscheduler(tid)


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies")
def test_the_waiting_thread_yields_to_the_run_and_is_restored() -> None:
    # The caller waits in SCHED_BATCH (its wake-ups wait their turn instead of preempting the
    # run's senders on a shared core); the run's own thread keeps the usual policy.
    caller = threading.get_native_id()
    before = _policy(0)
    seen: dict[str, int] = {}

    def work() -> dict[str, object]:
        deadline = time.monotonic() + 10
        while _policy(caller) != os.SCHED_BATCH and time.monotonic() < deadline:
            time.sleep(0.005)
        seen.update(caller=_policy(caller), run=_policy(0))
        return {}

    assert run_cancellable(work, lambda: None, name="t") == {}
    assert seen == {"caller": os.SCHED_BATCH, "run": before}
    assert _policy(0) == before


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies")
def test_a_poll_that_raises_leaves_the_caller_in_its_policy() -> None:
    before = _policy(0)
    release = threading.Event()

    def poll() -> None:
        raise ValueError("from poll")

    with pytest.raises(ValueError, match="from poll"):
        run_cancellable(lambda: release.wait(10) and {}, lambda: None, name="t", poll=poll)
    release.set()
    assert _policy(0) == before


def test_the_run_s_end_wakes_the_caller_and_its_error_is_raised_here() -> None:
    # No poll: the caller sleeps up to a second at a time, and the run's end wakes it.
    started = time.monotonic()
    assert run_cancellable(lambda: {"n": 1}, lambda: None, name="t") == {"n": 1}
    assert time.monotonic() - started < 0.9

    def fails() -> dict[str, object]:
        raise RuntimeError("in the run")

    with pytest.raises(RuntimeError, match="in the run"):
        run_cancellable(fails, lambda: None, name="t")
