"""A circuit breaker in front of L2.

Closed: calls go through; ``failures`` consecutive failures open it. Open: calls are refused
(the cache reads from the loader instead) for ``reset_after`` seconds. Then half-open: one
call is let through; success closes the breaker, failure opens it again.

The breaker keeps the story of its episodes for the stats: how many times it opened
(``opened``), every failure counted (``failed_calls``), and the wall-clock times
(``time.time()``) it last opened and last closed again (``last_opened``, ``last_closed``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cachelab.errors import UsageError

__all__ = ["CircuitBreaker"]


class CircuitBreaker:
    """Closed, open for ``reset_after`` seconds after ``failures`` consecutive failures, then
    half-open (one trial call). Thread-safe."""

    def __init__(
        self, failures: int = 3, reset_after: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failures < 1 or reset_after <= 0:
            raise UsageError("breaker: failures must be >= 1 and reset_after > 0")
        self.failures = failures
        self.reset_after = reset_after
        self._clock = clock
        self._lock = threading.Lock()
        self._consecutive = 0
        self._opened_at: float | None = None
        self._trial = False
        #: When the last failure was counted (``clock()``).
        self._failed_at = 0.0
        #: Times the breaker opened.
        self.opened = 0
        #: Failures counted (every call that failed, whether or not it opened the breaker).
        self.failed_calls = 0
        #: ``time.time()`` when it last opened / last closed after being open (None: never).
        self.last_opened: float | None = None
        self.last_closed: float | None = None

    def like(self) -> CircuitBreaker:
        """A new, closed breaker with this one's settings (one per pool member)."""
        return CircuitBreaker(self.failures, self.reset_after, self._clock)

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at >= self.reset_after:
            return "half-open"
        return "open"

    @property
    def healthy(self) -> bool:
        """Closed, and the last call did not fail."""
        return self._opened_at is None and self._consecutive == 0

    def retry_in(self) -> float:
        """Seconds until a call made only to retry (a background one) is due: ``reset_after``
        after the last failure — open (its trial) or not (fewer than ``failures``); 0 when
        the last call succeeded. :meth:`allow` may still refuse it while another caller's
        trial is under way."""
        if self.healthy:
            return 0.0
        return max(0.0, self.reset_after - (self._clock() - self._failed_at))

    def allow(self) -> bool:
        if self._opened_at is None:
            return True
        with self._lock:
            if self._opened_at is None:
                return True
            if self._clock() - self._opened_at < self.reset_after or self._trial:
                return False
            self._trial = True
            return True

    def success(self) -> None:
        if self._opened_at is None and self._consecutive == 0:
            return
        with self._lock:
            if self._opened_at is not None:
                self.last_closed = time.time()
            self._consecutive = 0
            self._opened_at = None
            self._trial = False

    def failure(self) -> None:
        with self._lock:
            self._consecutive += 1
            self.failed_calls += 1
            self._failed_at = self._clock()
            if self._trial or (self._opened_at is None and self._consecutive >= self.failures):
                if self._opened_at is None:
                    self.last_opened = time.time()
                if self._opened_at is None or self._trial:
                    self.opened += 1
                self._opened_at = self._clock()
                self._trial = False
