"""A one-line progress bar for long measurements, drawn only on a terminal.

    with Progress(total=10_000, label="get 1KB") as progress:
        for done in range(1, 10_001):
            ...
            progress.update(done)

shows, redrawn in place at most ten times a second::

    get 1KB [##########..............]  42%  4200/10000  1.3k/s  ETA 0:04

When the stream is not a terminal (a pipe, a log file, a test) nothing at all is written, so
progress output never ends up in captured results.  Output errors such as a closed stream or a
broken pipe are swallowed: a progress bar must never be the reason a measurement fails.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

from cachelab.units import per_second

__all__ = ["Progress", "run_cancellable", "stage_logger"]

_REDRAW_INTERVAL = 0.1  # seconds between redraws
# Seconds the main thread waits at most between looks at a run it waits for without a
# ``poll`` (run_cancellable); the run's end wakes it at once.
_IDLE_WAKE = 1.0
_BAR_WIDTH = 24


class Progress:
    """Progress of ``total`` steps of work, shown as a bar with rate and ETA on ``stream``.

    ``stream`` defaults to :data:`sys.stderr` (looked up when the bar is created); ``enabled``
    defaults to whether that stream is a terminal.  ``clock`` returns seconds and exists for
    tests.  Use it as a context manager, or call :meth:`close` when the work is done.
    """

    def __init__(
        self,
        total: int | None,
        label: str,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: None while the amount of work is not known yet (the bar then shows the label and
        #: the time so far); set it when it becomes known.
        self.total: int | None = None if total is None else max(0, int(total))
        self.label = label
        self.done = 0
        self._stream = sys.stderr if stream is None else stream
        self.enabled = _isatty(self._stream) if enabled is None else enabled
        self._clock = clock
        self._start = clock()
        self._last_draw: float | None = None
        self._drawn_width = 0
        self._drawn_done: int | None = None  # the ``done`` shown by the last redraw
        self._closed = False

    def update(self, done: int) -> None:
        """Record that ``done`` steps are complete, redrawing if the last redraw was long ago.

        The first update, and the one that reaches ``total``, are always drawn.
        """
        self.done = done
        if not self.enabled or self._closed:
            return
        now = self._clock()
        recent = self._last_draw is not None and now - self._last_draw < _REDRAW_INTERVAL
        if recent and (self.total is None or done < self.total):
            return
        self._draw(now)

    def begin(self, total: int) -> None:
        """The amount of work is now known: set ``total`` and count rate and ETA from now (the
        time spent before, e.g. loading data, would otherwise slow the rate)."""
        self.total = max(0, int(total))
        self.done = 0
        self._start = self._clock()

    def track(self, done: int, total: int) -> None:
        """An ``on_progress(done, total)`` callback: the first call with the total begins the
        bar (rate and ETA count from then, see :meth:`begin`); every call updates it."""
        if self.total is None:
            self.begin(total)
        else:
            self.total = max(0, int(total))
        self.update(done)

    def say(self, message: str) -> None:
        """Write ``message`` as a line of its own on the bar's stream — also when no bar is
        drawn (not a terminal, ``enabled=False``): a verb's log line, such as each point of a
        sweep. A bar drawn on the line is blanked first and drawn again at the next update."""
        if self.enabled and self._drawn_width and not self._closed:
            self._write("\r" + " " * self._drawn_width + "\r")
            self._drawn_width = 0
            self._last_draw = None
        try:
            self._stream.write(message + "\n")
            self._stream.flush()
        except (OSError, ValueError):  # broken pipe, closed stream: carry on
            pass

    def close(self) -> None:
        """Draw the final state and end the line; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        if self.enabled:
            if self._drawn_done != self.done:
                self._draw(self._clock())
            self._write("\n")

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def render(self, now: float) -> str:
        """The text of the bar at time ``now`` (a ``clock`` reading), without ``\\r``."""
        done = max(0, self.done)
        if self.total is None:
            return f"{self.label} …  {_clock_time(max(0.0, now - self._start))}"
        shown = min(done, self.total) if self.total else 1  # integer maths: 29/100 is 29%
        whole = self.total or 1
        percent, filled = shown * 100 // whole, shown * _BAR_WIDTH // whole
        bar = "#" * filled + "." * (_BAR_WIDTH - filled)
        elapsed = max(0.0, now - self._start)
        rate = done / elapsed if elapsed > 0 else 0.0
        if done >= self.total:
            timing = f"in {_clock_time(elapsed)}"
        elif rate > 0:
            timing = f"ETA {_clock_time((self.total - done) / rate)}"
        else:
            timing = "ETA --:--"
        return (f"{self.label} [{bar}] {percent:3d}%  {done}/{self.total}  "
                f"{per_second(rate)}  {timing}")

    def _draw(self, now: float) -> None:
        line = self.render(now)
        padding = " " * max(0, self._drawn_width - len(line))  # blank a longer previous line
        self._drawn_width = len(line)
        self._last_draw = now
        self._drawn_done = self.done
        self._write("\r" + line + padding)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # broken pipe, closed stream: stop drawing, carry on
            self.enabled = False


def stage_logger(bar: Progress, name: str,
                 fallback: Callable[[str], None]) -> Callable[[str], None]:
    """A log function for work that reports its stages in messages while ``bar`` shows its
    progress: on a terminal each message's head (up to a colon or a parenthesis) becomes the
    bar's label, since a line printed under a live bar would break it; elsewhere the message
    goes to ``fallback`` prefixed with ``name``."""

    def log(message: str) -> None:
        if bar.enabled:
            bar.label = f"{name}: " + message.split(":")[0].split(" (")[0][:48]
            bar.update(bar.done)
        else:
            fallback(f"{name}: {message}")

    return log


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _clock_time(seconds: float) -> str:
    """``0:04``, ``12:30``, ``1:02:03``."""
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _batch_scheduling() -> contextlib.ExitStack:
    """Puts the calling thread in ``SCHED_BATCH`` until the stack returned is closed: a thread
    woken then waits for the scheduler's next turn instead of taking the CPU from the thread
    running there at once. The thread waiting for a run wakes ten times a second to look at it
    (and every half second reads the server's ``stats``, the eviction watch); when it shares a
    core with the run's senders, each wake-up preempted them. Only a thread in the default
    policy is moved (an unprivileged thread may move back), and only where Linux allows it."""
    stack = contextlib.ExitStack()
    if not hasattr(os, "SCHED_BATCH"):
        return stack
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            return stack
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except OSError:  # not permitted here (a sandbox): the usual policy it is
        return stack

    def back() -> None:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    stack.callback(back)
    return stack


def run_cancellable(
    work: Callable[[], dict[str, Any]],
    cancel: Callable[[], None],
    *,
    name: str,
    poll: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Runs ``work`` (a Rust run that releases the GIL) in a thread, calling ``poll`` ten times
    a second. Ctrl-C calls ``cancel`` — the run stops early and returns what it has, marked
    ``"cancelled": True``. An exception from ``work`` is raised here.

    The calling thread may share a core with the run's threads (``taskset``, or a small
    machine), and each of its wake-ups takes the core from them: it waits in ``select`` on a
    socket the run's thread writes to when it ends, so it wakes only to poll and at the end,
    and in ``SCHED_BATCH`` (:func:`_batch_scheduling`), so that a wake-up waits its turn.

    It waits on neither an Event nor ``Thread.join``: a KeyboardInterrupt inside ``join()``
    can leave the thread looking finished while the Rust run goes on, and one inside
    ``Event.wait()`` can come while its lock is being taken back and break it ("RuntimeError:
    release unlocked lock" instead of the interrupt: a pool profile's Ctrl-C beside a CPU
    hog). ``select`` is interrupted cleanly.
    """
    box: dict[str, Any] = {}
    finished = threading.Event()
    woken, waker = socket.socketpair()

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as e:  # handed to the calling thread
            box["error"] = e
        finally:
            finished.set()
            # Closed by this thread alone, so its descriptor is never reused under it; the
            # caller's end may be closed already (it has gone).
            with waker, contextlib.suppress(OSError):
                waker.send(b"x")

    interrupted = False
    with woken:
        try:
            threading.Thread(target=run, name=name, daemon=True).start()
        except BaseException:  # no thread to close its end
            waker.close()
            raise
        with _batch_scheduling():  # (after the start: the run's threads keep their policy)
            next_poll = time.monotonic() + _REDRAW_INTERVAL
            while not finished.is_set():
                try:
                    wait = (_IDLE_WAKE if poll is None
                            else min(_IDLE_WAKE, max(0.0, next_poll - time.monotonic())))
                    select.select([woken], [], [], wait)
                    if poll and time.monotonic() >= next_poll:
                        next_poll = max(next_poll + _REDRAW_INTERVAL, time.monotonic())
                        poll()
                except KeyboardInterrupt:
                    interrupted = True
                    cancel()
    if "error" in box:
        raise box["error"]
    if interrupted:
        box["result"]["cancelled"] = True
    return box["result"]
