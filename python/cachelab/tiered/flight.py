"""Stampede protection: keys that many want at once are loaded once.

* **Single flight**, in process (:class:`SingleFlight`): the first thread to miss a batch of
  keys fetches it; other threads wanting any of those keys wait for its results instead of
  fetching them again (or, when it reloads stale values, take what it found at once:
  :func:`hand_out`).
* **Leases**, across processes (:func:`fill`): for keys missing from memcached, the first
  client to miss a key gets a lease (memcached ``mg ... N``) and loads it; the others poll
  memcached for its value as long as the lease is held (memcached answers ``Z``; a poll asks
  for no lease, so a lost one leaves nothing to delete), then load it themselves without
  storing. The winner stores with the lease's CAS, so a fill that raced an
  invalidation (a delete in between) is not stored.

Leases cannot hurt: a winner whose loader (or the value's encoding) raises deletes its lease
placeholder — with the lease's CAS, so never a real value — before the error goes on, and the
next caller wins at once. Waiters poll while the placeholder lives, which is at most
``lease_ttl`` seconds (its memcached TTL: a holder that died frees the key then), so a loader
slower than any fixed wait is still called once, not once per waiting process. ``lease_wait``
(None by default) caps that wait for callers that prefer a second load to a long wait. An empty
value that is no lease (no ``Z``) is not waited for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Container, Mapping
from itertools import repeat
from typing import Any, Protocol

from cachelab.errors import ServerError, UsageError
from cachelab.tiered.backends import Tier, ValueTooLarge
from cachelab.tiered.breaker import CircuitBreaker
from cachelab.tiered.checks import foreign_keys, loaded_mapping
from cachelab.tiered.codecs import CorruptValue, Encoded
from cachelab.tiered.keys import KeyClass
from cachelab.tiered.stats import BreakerStats, TierStats

__all__ = ["LEASE_POLL_MAX", "Fetch", "FillHost", "Flight", "SingleFlight", "fill", "hand_out",
           "l2_failed"]

_now_ns = time.perf_counter_ns
_allocate_lock = threading.Lock
_log = logging.getLogger("cachelab.tiered")
#: ``.flight``: the :class:`Flight` this thread leads now (for :func:`hand_out`)
_leading = threading.local()
#: The longest pause between a lease waiter's polls (seconds): 1 ms doubling up to it.
LEASE_POLL_MAX = 0.05
#: Key classes whose unencodable or oversize values have been logged (once each).
_logged: set[tuple[str, str]] = set()

#: ``fetch(kc, idents, keys) -> ({ident: object}, {ident: L1 weight})`` for those found.
Fetch = Callable[[KeyClass, list[Any], list[str]], tuple[dict, dict]]


class Flight:
    """A batch of keys being filled by one thread; other threads wanting any of them wait on
    it. The lock is held by the filling thread until it is done (one lock per batch, not per
    key: a 100-key multi-get makes one)."""

    __slots__ = ("early", "error", "lock", "rest", "results", "stale", "started", "waiters")

    def __init__(self, started: float) -> None:
        #: ``time.monotonic()`` when its leader began the lookup: its values are no older
        self.started = started
        #: set by a put/invalidate of one of its keys that returned while it was under way:
        #: its results may predate that write, so a waiter fetches again instead of using them
        self.stale = False
        self.lock = _allocate_lock()
        self.lock.acquire()
        #: memcached key -> (object, weight) for the keys found; None if nobody was waiting
        #: when the flight ended (a waiter that comes that late fetches for itself)
        self.results: dict[str, tuple] | None = None
        self.waiters = 0
        self.error: BaseException | None = None
        #: memcached key -> (object, weight) handed out before the flight ends (see
        #: :func:`hand_out`); then ``lock`` is released at once and ``rest`` is held instead
        #: until the flight ends, for the threads waiting on its other keys
        self.early: dict[str, tuple] | None = None
        self.rest: threading.Lock | None = None


class SingleFlight:
    """The flights under way in one cache, by memcached key.

    ``dict.setdefault`` and ``dict.pop`` are atomic under the GIL, so claiming and ending a
    flight needs no lock of its own."""

    __slots__ = ("_flights",)

    def __init__(self) -> None:
        self._flights: dict[str, Flight] = {}

    def mark_stale(self, key: str) -> None:
        """A write of ``key`` has reached memcached: the flight under way for it (if any) may
        hold an older value, so threads waiting on it must not use it."""
        f = self._flights.get(key)
        if f is not None:
            f.stale = True

    def fetch(self, kc: KeyClass, idents: list[Any], keys: list[str], lead: Fetch,
              events: BreakerStats, born: list[float] | None = None) -> tuple[dict, dict]:
        """``lead(kc, idents, keys)`` for the keys (aligned with ``idents``, distinct) no other
        thread is fetching; waits for the others' flights for the rest (counted in
        ``events.singleflight_waits``). Returns ``({ident: object}, {ident: L1 weight})`` for
        those found, in ``idents``' order. A leader's exception is raised in its waiters too.
        ``born`` (``[time.monotonic()]`` at the caller's start) is lowered to the start of the
        oldest flight whose results are used: the values are no older than ``born[0]``."""
        flights = self._flights
        mine = Flight(time.monotonic() if born is None else born[0])
        n = len(keys)
        claimed = list(map(flights.setdefault, keys, repeat(mine, n)))
        follow: list[tuple[Any, str, Flight]] = []
        if claimed.count(mine) == n:  # the usual case: nobody else is fetching any of them
            led, led_keys = idents, keys
        else:
            led, led_keys = [], []
            for i, k, f in zip(idents, keys, claimed):
                if f is mine:
                    led.append(i)
                    led_keys.append(k)
                else:
                    follow.append((i, k, f))
        objs: dict[Any, Any] = {}
        sizes: dict[Any, int] = {}
        try:
            if led:
                outer = getattr(_leading, "flight", None)  # a loader may read another cache
                _leading.flight = mine
                try:
                    objs, sizes = lead(kc, led, led_keys)
                finally:
                    _leading.flight = outer
        except BaseException as e:
            mine.error = e
            raise
        finally:
            list(map(flights.pop, led_keys, repeat(None, len(led_keys))))
            if mine.waiters:  # no one can start waiting on us after the pops
                key_of = dict(zip(led, led_keys))
                mine.results = {key_of[i]: (o, sizes[i]) for i, o in objs.items()}
            (mine.rest or mine.lock).release()
        if not follow:
            return objs, sizes
        late: list[Any] = []
        late_keys: list[str] = []
        for i, k, f in follow:
            events.singleflight_waits += 1
            f.waiters += 1
            f.lock.acquire()
            f.lock.release()
            early = f.early
            r = None if early is None else early.get(k)
            if r is not None and not f.stale:
                objs[i], sizes[i] = r  # handed out while its leader reloads (hand_out)
                continue
            if f.rest is not None:
                f.rest.acquire()
                f.rest.release()
            if f.error is not None:
                raise f.error
            if f.results is None or f.stale:
                late.append(i)
                late_keys.append(k)
                continue
            r = f.results.get(k)
            if r is not None:
                objs[i], sizes[i] = r
                if born is not None and f.started < born[0]:
                    born[0] = f.started
        if late:
            more = self.fetch(kc, late, late_keys, lead, events, born)
            objs.update(more[0])
            sizes.update(more[1])
        return {i: objs[i] for i in idents if i in objs}, sizes


def hand_out(values: Mapping[str, tuple]) -> None:
    """Called by a flight's leader about to reload stale values (stale-while-revalidate,
    :mod:`cachelab.tiered.swr`): ``values`` (memcached key -> (object, L1 weight): the stale
    values and whatever else it has found) go at once to the threads of this process waiting
    on its flight, and to those that join it until it ends, instead of waiting for the reload;
    those waiting on its other keys still wait for the end. Nothing outside a flight."""
    f: Flight | None = getattr(_leading, "flight", None)
    if f is None or f.rest is not None:
        return
    rest = _allocate_lock()
    rest.acquire()
    f.early = dict(values)
    f.rest = rest  # set before the release: a waiter that wakes sees both
    f.lock.release()


# -- leases -----------------------------------------------------------------------------------


class FillHost(Protocol):
    """What a fill uses of its cache (:class:`cachelab.tiered.TieredCache`): the tier, the
    breaker, the lease settings, the counters, and the keys whose delete is pending (never
    stored until it succeeds)."""

    l2: Tier | None
    breaker: CircuitBreaker
    leases: bool
    lease_ttl: int
    lease_wait: float | None
    l2_stats: TierStats
    l3_stats: TierStats
    events: BreakerStats
    _pending: Container[str]

    def _queue_delete(self, key: str, lost: bool = True) -> None:
        """Queues ``key``'s delete with the pending invalidations (sent when memcached is
        back; reads go past it until then). ``lost``: a request of the key was sent and its
        reply lost (it may still run: a second delete follows the first)."""

    def lost_until(self, key: str) -> float | None:
        """Until when a placeholder of ``key`` may be this process's own, from a lost request
        (its second delete still to come); None if it may not."""

def l2_failed(cache: FillHost) -> None:
    """Counts a failed L2 call (against the breaker, and in the L2 errors)."""
    cache.breaker.failure()
    cache.l2_stats.add(errors=1)


class _Route:
    """Where a fill sends one server's keys: its host (a lane) and whether it may still be
    used in this fill (False from its first failure on)."""

    __slots__ = ("host", "ok")

    def __init__(self, host: FillHost, ok: bool) -> None:
        self.host = host
        self.ok = ok


def fill(cache: FillHost, kc: KeyClass, missing: list[Any], keys: dict, l2_ok: bool,
         routes: Mapping[Any, tuple[FillHost, bool]] | None = None) -> dict:
    """Loads ``missing`` (not in L2; ``keys`` maps each to its memcached key) and stores them
    in L2, under leases when possible: ``{ident: (object, L1 weight)}`` for those found.

    ``routes`` (a pool: ``{ident: (host, usable)}``) sends each ident's leases and store to its
    own server's host; one loader call still serves them all. Without it every ident goes to
    ``cache``, usable if ``l2_ok``."""
    result: dict[Any, tuple] = {}
    winners: dict[Any, int | None] = {}
    waiters: list[Any] = []
    if routes is None:
        one = _Route(cache, l2_ok)
        route_of: dict[Any, _Route] = dict.fromkeys(missing, one)
    else:
        made: dict[int, _Route] = {}
        route_of = {}
        for i in missing:
            host, ok = routes[i]
            r = made.get(id(host))
            if r is None:
                r = made[id(host)] = _Route(host, ok)
            route_of[i] = r
    for i in missing:
        r = route_of[i]
        h = r.host
        l2 = h.l2
        if not (r.ok and h.leases and l2 is not None and l2.supports_leases):
            winners[i] = None
            continue
        try:
            lease = l2.lease_get(keys[i], h.lease_ttl)
        except ServerError:  # this server is away: the rest of its keys load without leases
            l2_failed(h)
            # A request whose reply was lost may still run (a stopped server runs it when it
            # continues) and leave a placeholder nobody fills: its delete is owed, as a set's.
            h._queue_delete(keys[i])
            r.ok = False
            winners[i] = None
            continue
        h.l2_stats.add(calls=1, keys=1)
        if lease.value is not None:
            try:
                result[i] = kc.format.decode_sized(lease.value)
                continue
            except CorruptValue:
                h.events.corrupt += 1
                winners[i] = None
        elif lease.win:
            h.events.lease_wins += 1
            winners[i] = lease.cas
        else:
            waiters.append(i)
    if winners:
        settled: set[Any] = set()  # winners whose lease was used or released
        try:
            loaded = _load(cache, kc, list(winners))
            for i, cas in winners.items():
                r = route_of[i]
                h = r.host
                enc = _encode(cache, kc, loaded[i]) if i in loaded else None
                if enc is None:
                    if i in loaded:  # returned, stored nowhere (an L1 weight of None is not held)
                        result[i] = (loaded[i], None)
                    if cas is not None and r.ok:
                        r.ok = _release(h, keys[i], cas)
                    elif cas is not None:
                        h._queue_delete(keys[i], lost=False)
                    settled.add(i)
                    continue
                result[i] = (loaded[i], enc.plain_size)
                if r.ok and keys[i] not in h._pending:
                    r.ok = _store(h, kc, keys[i], enc, cas)
                elif cas is not None and r.ok:
                    # A delete is owed: nothing is stored, and our placeholder goes now — the
                    # owed delete may already have reached the server before it was made.
                    r.ok = _release(h, keys[i], cas)
                elif cas is not None:
                    h._queue_delete(keys[i], lost=False)  # our placeholder: not left for lease_ttl
                settled.add(i)
        except BaseException:
            # A loader or encoding error: free every lease still held (after a server's first
            # failure, queue its deletes: it is away), then go on raising.
            for i, cas in winners.items():
                if cas is not None and i not in settled:
                    r = route_of[i]
                    if r.ok:
                        r.ok = _release(r.host, keys[i], cas)
                    else:
                        r.host._queue_delete(keys[i], lost=False)
            raise
    for i in waiters:
        cache.events.lease_waits += 1
        got = _await_fill(route_of[i].host, kc, i, keys[i])
        if got is not None:
            result[i] = got
    return result


def _encode(cache: FillHost, kc: KeyClass, obj: Any) -> Encoded | None:
    """``obj`` encoded, or None (counted, logged once per key class) if its codec cannot: a
    fill still returns what the loader gave."""
    try:
        return kc.encode(obj)
    except UsageError as e:
        cache.events.unencodable += 1
        _log_once(kc, "unencodable", e)
        return None


def _log_once(kc: KeyClass, what: str, e: Exception) -> None:
    if (kc.name, what) not in _logged:
        _logged.add((kc.name, what))
        _log.warning("key class %r: a filled value is not cached: %s", kc.name, e)


def _store(cache: FillHost, kc: KeyClass, key: str, enc: Encoded, cas: int | None) -> bool:
    """Stores a fill; False if memcached failed (a value over its size limit is counted in
    ``oversize``, its lease released)."""
    assert cache.l2 is not None
    t0 = _now_ns()
    try:
        if cas is not None:
            stored = cache.l2.lease_set(key, enc.data, enc.flags, kc.ttl, cas)
            if not stored:
                cache.events.lease_lost += 1
        elif cache.leases and cache.l2.supports_leases:  # replacing a corrupt value
            stored = cache.l2.set(key, enc.data, enc.flags, kc.ttl)
        else:  # no lease: add, so a fill never overwrites a newer put
            stored = cache.l2.add(key, enc.data, enc.flags, kc.ttl)
    except ValueTooLarge as e:
        cache.events.oversize += 1
        _log_once(kc, "oversize", e)
        if cas is not None:
            _release(cache, key, cas)
        return True
    except ServerError:
        l2_failed(cache)
        cache._queue_delete(key)  # the placeholder, or a set that may land late
        return False
    cache.l2_stats.record(_now_ns() - t0)
    cache.l2_stats.add(calls=1, keys=1, bytes_written=len(enc.data) if stored else 0)
    return True


def _release(cache: FillHost, key: str, cas: int) -> bool:
    """Deletes a lease placeholder if it is still ours (its CAS); False if L2 failed."""
    assert cache.l2 is not None
    try:
        cache.l2.lease_release(key, cas)
    except ServerError:
        l2_failed(cache)
        cache._queue_delete(key)
        return False
    cache.events.lease_released += 1
    return True


def _await_fill(cache: FillHost, kc: KeyClass, ident: Any, key: str) -> tuple | None:
    """Another process holds the lease: poll memcached for its value while it does (``Z``);
    win the lease if it is released or expires. Load without storing when the value is an
    empty one that nobody fills, or after ``lease_wait`` seconds (default: the lease's TTL and
    a second of slack for memcached's clock, past which the placeholder cannot live)."""
    assert cache.l2 is not None
    wait = cache.lease_wait
    deadline = time.monotonic() + (cache.lease_ttl + 1.0 if wait is None else wait)
    # A placeholder left by this process's own lost request is gone at its second delete:
    # wait no longer than that for it (another's is filled meanwhile: no second load).
    lost = cache.lost_until(key)
    if lost is not None:
        deadline = min(deadline, lost)
    pause = 0.001
    while time.monotonic() < deadline:
        if key in cache._pending:
            break  # the placeholder is this process's own, from a lost request: nobody fills it
        time.sleep(pause)
        pause = min(pause * 2, LEASE_POLL_MAX)
        # Only a request that may have *won* may leave an orphan placeholder, so only its
        # lost reply owes a delete. A poll only reads (no lease asked): whatever became of
        # it, it made no placeholder — the one there is the holder's, and a delete queued
        # for it would remove the holder's placeholder once sent, so that the next caller
        # wins and loads the key again (extra loader calls under load). The lease is asked
        # for only once the key is gone (its holder released it, or it expired or was
        # deleted); that request may have won, so its lost reply is treated as fill's.
        try:
            lease = cache.l2.lease_peek(key)
            if lease is None:
                cache.l2_stats.add(calls=1, keys=1)
                try:
                    lease = cache.l2.lease_get(key, cache.lease_ttl)
                except ServerError:
                    cache._queue_delete(key)  # it may have won: as in fill
                    raise
        except ServerError:
            l2_failed(cache)
            break
        cache.l2_stats.add(calls=1, keys=1)
        if lease.value is not None:
            try:
                return kc.format.decode_sized(lease.value)
            except CorruptValue:
                cache.events.corrupt += 1
                break
        if lease.win:
            cache.events.lease_wins += 1
            try:
                loaded = _load(cache, kc, [ident])
                enc = _encode(cache, kc, loaded[ident]) if ident in loaded else None
            except BaseException:
                if lease.cas is not None:
                    _release(cache, key, lease.cas)
                raise
            if enc is None:
                _release(cache, key, lease.cas or 0)
                # not found, or returned but stored nowhere (its codec cannot encode it)
                return (loaded[ident], None) if ident in loaded else None
            if key not in cache._pending:
                _store(cache, kc, key, enc, lease.cas)
            else:  # a delete is owed: our placeholder goes now (as in fill)
                _release(cache, key, lease.cas or 0)
            return loaded[ident], enc.plain_size
        if not lease.filling:
            break  # an empty value that is no lease: nobody will fill it
    else:
        if lost is None or deadline != lost:  # (not the end of a lost request's window)
            cache.events.lease_timeouts += 1
    loaded = _load(cache, kc, [ident])
    if ident not in loaded:
        return None
    enc = _encode(cache, kc, loaded[ident])
    return loaded[ident], enc.plain_size if enc is not None else None


def _load(cache: FillHost, kc: KeyClass, idents: list[Any]) -> Mapping[Any, Any]:
    """The loader (L3) for ``idents``, timed and counted."""
    t0 = _now_ns()
    try:
        loaded = loaded_mapping(kc, kc.loader(idents))
    except BaseException:
        cache.l3_stats.add(errors=1)
        raise
    cache.l3_stats.record(_now_ns() - t0)
    found = sum(1 for i in idents if i in loaded)
    if not found and loaded:
        foreign_keys(kc, idents, loaded)  # e.g. {"1": ...} for [1]: silent misses otherwise
    cache.l3_stats.add(calls=1, keys=len(idents), hits=found, misses=len(idents) - found)
    return loaded
