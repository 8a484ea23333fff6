"""The cache's view of one memcached server: a *lane*.

A lane is a :class:`~cachelab.tiered.backends.Tier` with the :class:`CircuitBreaker` in front
of it and the deletes owed to it (pending invalidations, and writes that may not have landed).
A :class:`~cachelab.tiered.TieredCache` over one tier has one lane; over a
:class:`~cachelab.tiered.MemcachedPool` it has one per member, so a member's failure opens only
its own breaker, queues only its own deletes, and sends only its own keys past memcached
(to the loader) while it is down or owed deletes. Keys are never remapped to another member:
see docs/tiered.md, "Pools".

A lane is what :func:`cachelab.tiered.flight.fill` works on (a
:class:`~cachelab.tiered.flight.FillHost`): the tier, breaker and queue are its own; the lease
settings and the counters are its cache's.

:class:`OwedReplay` is the background thread that sends a cache's owed deletes once their
server answers again, whatever the cache's callers do next (nothing at all, or only L1 hits).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

from cachelab.errors import ServerError, ServerUnreachable
from cachelab.tiered.backends import Tier
from cachelab.tiered.breaker import CircuitBreaker
from cachelab.tiered.flight import LEASE_POLL_MAX, l2_failed
from cachelab.tiered.stats import BreakerStats, TierStats

__all__ = ["Lane", "LaneOwner", "OwedReplay", "per_member"]

_now_ns = time.perf_counter_ns
_log = logging.getLogger("cachelab.tiered")
#: Seconds a flush waits for another one under way (that one makes one bounded request).
_FLUSH_WAIT = 10.0
#: Seconds between two warnings of a lane that a flush under way held up another.
_HELD_LOG_EVERY = 10.0
#: The shortest wait before a lost request's key is deleted a second time (see
#: :meth:`Lane.lost_request_s`), and how many of the tier's request bounds it is at least.
LOST_REQUEST_MIN_S = 1.0
LOST_REQUEST_BOUNDS = 4


class LaneOwner(Protocol):
    """What a lane uses of its cache (:class:`cachelab.tiered.TieredCache`): the lease
    settings, the counters, the write error policy, and a recount of the deletes owed."""

    leases: bool
    lease_ttl: int
    lease_wait: float | None
    write_errors: str
    l2_stats: TierStats
    l3_stats: TierStats
    events: BreakerStats

    def _count_pending(self) -> None:
        """Recounts the deletes owed over all of the cache's lanes."""


class Lane:
    """One memcached server of a cache: ``l2`` behind ``breaker``, with its queue of owed
    deletes. ``address`` and ``weight`` name a pool member (None and 1 for a lone tier).

    Counters of its own (reported per member for a pool): ``bypassed`` — keys read past this
    server (to the loader) because its breaker was open, its queued deletes could not be sent,
    or the read failed; ``hits`` / ``misses`` of its reads; ``deletes_flushed``; and the
    breaker's ``opened``, ``failed_calls``, ``last_opened``, ``last_closed``."""

    __slots__ = ("_confirm", "_flusher", "_flushing", "_held_logged", "_lost", "_owner",
                 "_pending", "_queueing", "_seq", "address", "breaker", "bypassed",
                 "deletes_flushed", "hits", "l2", "misses", "weight")

    def __init__(self, owner: LaneOwner, l2: Tier, breaker: CircuitBreaker,
                 address: str | None = None, weight: int = 1) -> None:
        self._owner = owner
        self.l2 = l2
        self.breaker = breaker
        self.address = address
        self.weight = weight
        #: Keys whose delete has not reached this server yet (read past it until it does),
        #: each with the number of its latest queueing: a flush takes a key off only if no
        #: one queued it again after the flush read the queue (its delete went out before).
        self._pending: dict[str, int] = {}
        self._seq = itertools.count()
        #: Keys whose request was lost once sent (a set, a lease request that timed out), by
        #: when (``time.monotonic()``; from the first delete that reached the server once one
        #: has), kept :meth:`lost_request_s` after that: a server that is only slow, or was
        #: stopped, may still run it after the delete its loss queued, leaving an older value
        #: or a lease placeholder nobody fills, until the second delete. A fill waits on such
        #: a key's placeholder only until then (it may be this process's own). Oldest first.
        self._lost: dict[str, float] = {}
        #: Keys whose delete went out after such a loss, with when a second one is due (that
        #: delete plus :meth:`lost_request_s`); sent by the background replay. Oldest first.
        self._confirm: dict[str, float] = {}
        #: Held to queue a key or take one off (a compare-and-delete).
        self._queueing = threading.Lock()
        #: Held while a flush is under way: a write's set (or a fill) that follows a flush
        #: never overtakes a delete of its key that another thread (the replay) sent first.
        self._flushing = threading.Lock()
        #: (thread name, ``time.monotonic()`` it took ``_flushing``) while a flush is under way
        self._flusher: tuple[str, float] | None = None
        #: When a flush held up by another was last logged (``time.monotonic()``)
        self._held_logged = -_HELD_LOG_EVERY
        self.bypassed = 0
        self.hits = 0
        self.misses = 0
        self.deletes_flushed = 0

    def __repr__(self) -> str:
        return f"Lane({self.l2!r}, breaker={self.breaker.state})"

    # -- what a fill reads of its cache (FillHost) ---------------------------------------------

    @property
    def leases(self) -> bool:
        return self._owner.leases

    @property
    def lease_ttl(self) -> int:
        return self._owner.lease_ttl

    @property
    def lease_wait(self) -> float | None:
        return self._owner.lease_wait

    @property
    def l2_stats(self) -> TierStats:
        return self._owner.l2_stats

    @property
    def l3_stats(self) -> TierStats:
        return self._owner.l3_stats

    @property
    def events(self) -> BreakerStats:
        return self._owner.events

    # -- the breaker and the queue of owed deletes ---------------------------------------------

    @property
    def pending(self) -> int:
        """Deletes owed to this server."""
        return len(self._pending)

    def lost_request_s(self) -> float:
        """Seconds after a request is lost (timed out, the server maybe only slow) within
        which its running late is undone: its key is deleted again then. The tier's request
        bound (connect and request timeouts) times ``LOST_REQUEST_BOUNDS``, at least
        ``LOST_REQUEST_MIN_S``."""
        bound = self.l2.request_bound_s()
        return max(LOST_REQUEST_MIN_S, LOST_REQUEST_BOUNDS * (bound or 0.0))

    def lost_until(self, key: str) -> float | None:
        """When (``time.monotonic()``) the second delete after a lost request of ``key`` has
        had time to land (it is sent :meth:`lost_request_s` after the first delete reached the
        server, or after the loss until then; two lease polls more), if that is still to come:
        until then a lease placeholder there may be this process's own, which nobody fills.
        None otherwise."""
        at = self._lost.get(key)
        if at is None:
            return None
        until = at + self.lost_request_s() + 2 * LEASE_POLL_MAX
        return until if time.monotonic() < until else None

    def confirm_in(self) -> float | None:
        """Seconds until the next second delete is due (0.0: due now; None: none is)."""
        with self._queueing:
            first = next(iter(self._confirm.values()), None)
        return None if first is None else max(0.0, first - time.monotonic())

    def usable(self) -> bool:
        """Whether a read may go to this server now: its breaker allows a call (else counted
        in ``events.skipped``) and no delete is owed to it (they are sent first, in bulk)."""
        if not self.breaker.allow():
            self.events.skipped += 1
            return False
        if self._pending:
            return self.flush() and not self._pending
        return True

    def flush(self, raise_errors: bool = False) -> bool:
        """Sends up to the tier's ``delete_batch`` owed deletes in one
        :meth:`~cachelab.tiered.backends.Tier.delete_many` (the breaker has allowed a call;
        the batch bounds how long one call spends draining the queue after an outage);
        False if it failed: that counts against the breaker and keeps them all (deleting twice
        is harmless); with ``raise_errors`` the error is raised instead. A flush that follows a
        failure keeps its keys queued for one more (the first may have overtaken a request
        sent before the failure, still waiting in a stopped server). One flush at a time: a
        second waits for the first (its one request is bounded by the tier's timeout), then
        sends what is still owed, so nothing a caller sends after a flush can overtake a
        delete still in flight."""
        wait = self._flush_wait()
        if not self._flushing.acquire(timeout=wait):
            self._log_held(wait)
            return False  # as a failed flush: the caller's delete stays owed, its write queued
        self._flusher = (threading.current_thread().name, time.monotonic())
        try:
            return self._flush_locked(raise_errors)
        finally:
            self._flusher = None
            self._flushing.release()

    def _log_held(self, waited: float) -> None:
        """Warns (at most once per ``_HELD_LOG_EVERY`` seconds per server of a cache) that a
        flush gave up waiting for another, naming the thread that holds it and for how long,
        so a long wait names its cause."""
        now = time.monotonic()
        if now - self._held_logged < _HELD_LOG_EVERY:
            return
        self._held_logged = now
        holder = self._flusher  # one read: the holder may finish meanwhile
        by = ("by a flush that has just ended" if holder is None else
              f"by thread {holder[0]!r}, which has held it for {now - holder[1]:.2f} s")
        _log.warning("a flush of owed deletes to %s waited %.2f s for another under way, held "
                     "%s; going on as a failed flush (its deletes stay owed)",
                     self.address or self.l2, waited, by)

    def _flush_wait(self) -> float:
        """How long a flush waits for another under way: two of the tier's requests (connect
        and request timeouts), so no call waits on another's flush longer than on its own
        (a wait of 9.6 s was seen beside a CPU hog with 0.1 s timeouts and a 10 s wait);
        ``_FLUSH_WAIT`` when the tier does not say its timeouts."""
        bound = self.l2.request_bound_s()
        return _FLUSH_WAIT if bound is None else 2.0 * bound

    def _flush_locked(self, raise_errors: bool) -> bool:
        now = time.monotonic()
        with self._queueing:
            batch = list(itertools.islice(self._pending.items(), self.l2.delete_batch))
            room = self.l2.delete_batch - len(batch)
            due = [(k, t) for k, t in itertools.islice(self._confirm.items(), room) if t <= now]
        keys = [k for k, _ in batch] + [k for k, _ in due if k not in self._pending]
        events = self.events
        if keys:
            # After a failure, requests sent before on a dropped connection (a set, a lease
            # request) may still wait in a stopped server's socket and run after this delete
            # when it resumes: such a flush is confirmed by a second one, once this has
            # succeeded (deleting twice is harmless).
            shaky = not self.breaker.healthy
            t0 = _now_ns()
            try:
                self.l2.delete_many(keys)
            except ServerError:
                l2_failed(self)
                events.write_errors += 1
                if raise_errors:
                    raise
                return False
            st = self.l2_stats
            st.record(_now_ns() - t0)
            st.add(calls=1, keys=len(keys))
            self.breaker.success()
            with self._queueing:
                confirm = self._confirm
                for k, t in due:
                    if confirm.get(k) == t:
                        del confirm[k]
            if not shaky:
                pending = self._pending
                done = 0
                settle = self.lost_request_s()
                with self._queueing:
                    self._forget_lost(now)
                    for k, n in batch:
                        if pending.get(k) == n:
                            del pending[k]
                            done += 1
                            # Lost: it may still run after this delete — a server only slow,
                            # or one stopped until now, runs what waited in its socket when it
                            # can. A second delete follows ``settle`` after this one reached a
                            # server that answers, and the loss counts from now (oldest first:
                            # both re-inserted).
                            if self._lost.pop(k, None) is not None:
                                self._lost[k] = now
                                self._confirm.pop(k, None)
                                self._confirm[k] = now + settle
                events.deletes_flushed += done
                self.deletes_flushed += done
        self._owner._count_pending()
        return True

    def _forget_lost(self, now: float) -> None:
        """Drops the lost requests older than :meth:`lost_request_s` and two lease polls
        (oldest first, up to one whose delete is still owed: its loss is counted again from
        that delete; ``_queueing`` held)."""
        lost = self._lost
        keep = self.lost_request_s() + 2 * LEASE_POLL_MAX
        while lost:
            k = next(iter(lost))
            if now - lost[k] < keep or k in self._pending:  # (its delete not sent yet)
                return
            del lost[k]

    def write(self, key: str, data: bytes, flags: int, ttl: int) -> None:
        """A put's set, through the breaker. Whenever the set may not have landed, ``key`` is
        queued for deletion (like a pending invalidation): memcached must not keep serving an
        older value after the outage. Queued deletes go first; one queued for this very key
        may still follow the set (a later miss, never a stale read)."""
        if not self.breaker.allow():
            self._queue_delete(key, lost=False)
            self.skip_write()
            return
        raising = self._owner.write_errors == "raise"
        if self._pending:
            try:
                sent = self.flush(raise_errors=raising)
            except ServerError:
                self._queue_delete(key, lost=False)
                raise
            if not sent:  # the server is away: do not wait for it a second time
                self._queue_delete(key, lost=False)
                return
        t0 = _now_ns()
        try:
            self.l2.set(key, data, flags, ttl)
        except ServerError:
            l2_failed(self)  # first: the replay the queue starts waits for the breaker
            self._queue_delete(key)
            self.events.write_errors += 1
            if raising:
                raise
            return
        self.breaker.success()
        self.l2_stats.record(_now_ns() - t0)
        self.l2_stats.add(calls=1, keys=1, bytes_written=len(data))

    def delete(self, key: str) -> None:
        """An invalidation's delete: queued, then sent (with any others owed) if the breaker
        allows a call; otherwise it stays queued."""
        self._enqueue(key)  # counted below: the background replay only if still owed
        try:
            if self.breaker.allow():
                self.flush(raise_errors=self._owner.write_errors == "raise")
            else:
                self.skip_write()
        finally:
            self._owner._count_pending()

    def _queue_delete(self, key: str, lost: bool = True) -> None:
        """Queues ``key``'s delete (a write that may not have landed, or a lease placeholder a
        fill could neither fill nor release: it must not keep other processes waiting once
        the server is back; deleting a real value instead is harmless). ``lost``: a request
        of the key was sent and its reply lost (it may still run; see ``_lost``), not merely
        left unsent."""
        self._enqueue(key, lost)
        self._owner._count_pending()

    def _enqueue(self, key: str, lost: bool = False) -> None:
        with self._queueing:
            self._pending[key] = next(self._seq)
            if lost:
                self._lost.pop(key, None)  # oldest first: re-inserted
                self._lost[key] = time.monotonic()

    def skip_write(self) -> None:
        """A write not sent: the breaker is open (its key is already queued)."""
        self.events.writes_skipped += 1
        if self._owner.write_errors == "raise":
            where = f" for {self.address}" if self.address else ""
            raise ServerUnreachable(f"memcached write skipped: the circuit breaker{where} is "
                                    "open (the key's delete is queued)")

    # -- stats ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """This server's state and counters (a pool member's entry in the cache's stats)."""
        b = self.breaker
        return {"address": self.address, "weight": self.weight, "state": b.state,
                "down_episodes": b.opened, "failed_calls": b.failed_calls,
                "last_down": b.last_opened, "last_up": b.last_closed,
                "bypassed": self.bypassed, "hits": self.hits, "misses": self.misses,
                "pending_invalidations": len(self._pending),
                "deletes_flushed": self.deletes_flushed}

    def reset_stats(self) -> None:
        self.bypassed = self.hits = self.misses = self.deletes_flushed = 0


class OwedReplay:
    """A daemon thread per cache that sends the deletes owed to its servers as soon as each
    server's breaker lets a call through: at once while the last call succeeded, else
    ``reset_after`` seconds after the last failure (the breaker's trial, when it is open). So
    the deletes a write could not deliver during an outage reach memcached within
    ``reset_after`` plus three attempts (each one ``connect_timeout`` + ``timeout``: the trial
    under way when the server came back may still fail, the next succeeds, and a last one
    confirms it, see :meth:`Lane.flush`) after it answers again, even if the writer makes no
    further call.

    Started by :meth:`poke` when a delete becomes owed; it ends when none is owed (a later
    one starts it again), when its cache is garbage-collected (it holds it weakly), or on
    :meth:`stop`. A daemon: it never keeps the process alive. Every wait has a timeout."""

    #: Shortest pause between two passes (a trial held by another thread, a next batch).
    MIN_PAUSE = 0.02
    #: Longest (a long ``reset_after``): how soon a collected cache's thread notices.
    MAX_PAUSE = 1.0

    def __init__(self, cache: Any) -> None:
        self._cache = weakref.ref(cache)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        #: Passes made (for the tests and the curious).
        self.passes = 0

    @property
    def running(self) -> bool:
        return self._thread is not None

    def poke(self) -> None:
        """Something is owed: start the thread unless it runs (or the cache was closed)."""
        with self._lock:  # always: the thread decides to end under it
            if self._thread is None and not self._stopped.is_set():
                t = threading.Thread(target=self._run, name="cachelab-owed-deletes",
                                     daemon=True)
                self._thread = t
                t.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ends the thread (waiting at most ``timeout`` seconds for a flush under way)."""
        self._stopped.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None

    def _loop(self) -> None:
        while not self._stopped.is_set():
            cache = self._cache()
            if cache is None:
                return
            try:
                pause = self.replay(cache._lanes)
            except Exception as e:  # noqa: BLE001 - a bug must not end the replays for good
                _log.warning("replaying owed deletes failed: %r", e)
                pause = cache.breaker.reset_after
            if pause is None:
                with self._lock:  # a delete owed from now on finds no thread and starts one
                    if not cache._owed and not any(ln._confirm for ln in cache._lanes):
                        self._thread = None
                        return
                pause = 0.0
            del cache
            self._stopped.wait(min(max(pause, self.MIN_PAUSE), self.MAX_PAUSE))

    def replay(self, lanes: Sequence[Lane]) -> float | None:
        """One pass: flushes every lane owed deletes, or a second delete now due, whose
        breaker allows a call; returns the seconds until the next trial of those still owed
        some, or until the next second delete (None: nothing owed)."""
        self.passes += 1
        pause: float | None = None
        for lane in lanes:
            confirm = lane.confirm_in()
            if not lane._pending and confirm is None:
                continue
            if ((lane._pending or confirm == 0.0) and lane.breaker.retry_in() == 0.0
                    and lane.breaker.allow()):
                lane.flush()
            if lane._pending:
                wait = lane.breaker.retry_in()
                pause = wait if pause is None else min(pause, wait)
            confirm = lane.confirm_in()
            if confirm is not None:
                wait = max(confirm, lane.breaker.retry_in())
                pause = wait if pause is None else min(pause, wait)
        return pause


def per_member(members: int) -> str:
    """What the after-outage statement adds for a pool of ``members`` ("" for one server):
    :class:`OwedReplay` tries the members owed deletes in turn, one thread for all."""
    return "" if members == 1 else f" for each of the pool's {members} members, tried in turn"
