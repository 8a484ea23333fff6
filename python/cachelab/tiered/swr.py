"""Stale-while-revalidate: a key class with a soft TTL serves a value past it while one caller
reloads it.

::

    users = cache.key_class("user", load_users, ttl=300, soft_ttl=60)

A value is *fresh* for ``soft_ttl`` seconds after it was stored, then *stale* until ``ttl`` (the
hard TTL: memcached drops it then). A read that finds a stale value returns it at once; one
caller — across every process sharing memcached — reloads it and stores the new value. The
soft expiry travels with the value: a stamp in front of it (:class:`~cachelab.tiered.codecs.
Stamp`), written by whoever stored it, so every process sees the same times.

Who reloads: the first reader of a stale value *claims* it — it reads the item's CAS and how
long it has left (``mg <key> v f c t``), and rewrites it with the same bytes under a stamp that
says "revalidating until now + ``lease_ttl``" (``ms <key> C<cas> T<seconds left>``, so the
hard expiry does not move). Only one such rewrite can succeed per version of the item; the
others see the claim (in that reply, or in their next multi-get) and return the stale value
without waiting. The winner calls the loader inline (its caller pays the load) and stores the
new value with the claim's CAS: a ``put`` or ``invalidate`` that landed meanwhile changed the
CAS, so the reload is not stored over it (``events.lease_lost``). If the loader raises, or
memcached fails, the stale value keeps being served (the error is counted, and logged); once
the claim lapses (``lease_ttl``), the next reader tries again — never past the hard TTL.
Threads of the winner's own process that want the value meanwhile get the stale value at once
too: single flight hands it to them (:func:`~cachelab.tiered.flight.hand_out`) instead of
making them wait for the reload, as it does for a miss.

L1 holds a fresh value only until its soft expiry, and a stale one not at all: every read of
a stale value goes to memcached, where it sees the reload as soon as it lands. So the oldest
value a read can return is ``ttl`` seconds old (memcached's expiry, to within its 1 s clock),
served at most ``ttl - soft_ttl`` seconds past its soft expiry — the class's
``stale_serve_s`` in :meth:`TieredCache.staleness <cachelab.tiered.TieredCache.staleness>`.
Writes are not part of that window: a ``put`` or ``invalidate`` bounds what other processes
serve exactly as for any other class (``cross_process_s``).

Claims need memcached's meta protocol: a key class with ``soft_ttl`` needs a
:class:`~cachelab.tiered.MemcachedTier` (or pool) with leases.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from cachelab.errors import ServerError
from cachelab.tiered.codecs import CorruptValue, Stamp, read_stamp
from cachelab.tiered.flight import (
    FillHost,
    _encode,
    _load,
    _release,
    _store,
    hand_out,
    l2_failed,
)
from cachelab.tiered.keys import KeyClass

__all__ = ["settle"]

_log = logging.getLogger("cachelab.tiered")
#: The fewest whole seconds a stale item must have left to be claimed. memcached's clock ticks
#: in whole seconds, so an item rewritten with ``T1`` may expire at any moment of the next
#: second — during the reload, whose store (with the claim's CAS) then finds nothing and is
#: dropped, and the next reader misses and loads again: two loads within a second (seen beside
#: a CPU hog). With one second or less left the stale value is served until it expires, and
#: the miss that follows loads once.
_CLAIM_LEFT_S = 2


def settle(cache: FillHost, kc: KeyClass, stamps: Mapping[Any, Stamp], objs: dict,
           sizes: dict, keys: Mapping[Any, str],
           host_of: Callable[[Any], FillHost]) -> set[Any]:
    """Sorts the stamped values a multi-get found (``stamps``, by ident; ``objs`` and
    ``sizes`` as the fetch returns them; ``keys`` their memcached keys, ``host_of(ident)`` the
    lane holding it). A fresh value's L1 weight becomes ``(weight, until)``: L1 holds it until
    its soft expiry (``time.monotonic()``). A stale one is returned as it is, not held by L1;
    those nobody is revalidating are claimed, and the claims won reloaded (see the module
    docstring): their new values replace the stale ones in ``objs``. Returns the idents whose
    reload the loader no longer knows (taken out of ``objs``: not found, not to be loaded
    again)."""
    now = time.time()
    to_mono = time.monotonic() - now
    events = cache.events
    claim: list[Any] = []
    for i, st in stamps.items():
        if i not in objs:
            continue
        if st.soft_at > now and not st.revalidating:
            sizes[i] = (sizes[i], st.soft_at + to_mono)
            continue
        sizes[i] = None  # stale: L1 does not hold it
        if st.revalidating and st.soft_at > now:
            events.stale_hits += 1  # another caller reloads it
        else:
            claim.append(i)
    if not claim:
        return set()
    return _revalidate(cache, kc, claim, stamps, objs, sizes, keys, host_of)


def _revalidate(cache: FillHost, kc: KeyClass, idents: list[Any], stamps: Mapping[Any, Stamp],
                objs: dict, sizes: dict, keys: Mapping[Any, str],
                host_of: Callable[[Any], FillHost]) -> set[Any]:
    """Claims the stale values of ``idents``, reloads those won in one loader call and stores
    them; every other one is served stale (counted in ``events.stale_hits``). Returns the
    idents the loader no longer knows."""
    events = cache.events
    won: dict[Any, tuple[FillHost, int]] = {}
    failed: set[int] = set()  # hosts that failed in this call: not asked again
    for i in idents:
        h = host_of(i)
        if id(h) in failed:
            events.stale_hits += 1
            continue
        try:
            cas = _claim(h, kc, i, keys[i], stamps[i], objs, sizes)
        except ServerError:
            l2_failed(h)
            failed.add(id(h))
            events.revalidation_errors += 1
            cas = None
        if cas is None:
            if sizes[i] is None:  # still the stale value (not a newer one found)
                events.stale_hits += 1
            continue
        won[i] = (h, cas)
    gone: set[Any] = set()
    if not won:
        return gone
    events.revalidations += len(won)
    # Threads of this process waiting on this fetch (single flight) take the stale values
    # (and whatever else was found) now, as other processes do, instead of the reload's wait.
    hand_out({keys[i]: (o, sizes[i]) for i, o in objs.items()})
    try:
        loaded = _load(cache, kc, list(won))
    except Exception as e:  # noqa: BLE001 - served stale until the claim lapses, then retried
        events.revalidation_errors += len(won)
        events.stale_hits += len(won)
        _log.warning("key class %r: reloading %d stale value(s) failed (served stale; the "
                     "next try in %d s, never past the ttl): %r", kc.name, len(won),
                     cache.lease_ttl, e)
        return gone
    for i, (h, cas) in won.items():
        key = keys[i]
        if i not in loaded:  # the loader no longer knows it: gone (the stale item too)
            del objs[i]
            sizes.pop(i, None)
            gone.add(i)
            _release(h, key, cas)
            continue
        objs[i] = loaded[i]
        enc = _encode(h, kc, loaded[i])
        if enc is None:  # returned, stored nowhere; the stale item goes
            sizes[i] = None
            _release(h, key, cas)
            continue
        sizes[i] = enc.plain_size  # fresh: L1 holds it for soft_ttl at most
        if key not in h._pending:
            _store(h, kc, key, enc, cas)
    return gone


def _claim(h: FillHost, kc: KeyClass, ident: Any, key: str, seen: Stamp, objs: dict,
           sizes: dict) -> int | None:
    """Tries to claim ``key``'s stale value for a reload: the claim's CAS, or None (someone
    else claimed it or stored a newer value — which then replaces the stale one in ``objs``
    — or it is gone, or about to expire)."""
    assert h.l2 is not None
    got = h.l2.get_cas(key)
    h.l2_stats.add(calls=1, keys=1)
    if got is None:
        return None  # invalidated or expired since the multi-get: what was read is served
    data, flags, cas, left = got
    now = time.time()
    st, plain = read_stamp(data)
    if st is None or st.soft_at > now:
        if st is not None and not st.revalidating:  # a newer, fresh value: serve that
            try:
                objs[ident], size = kc.format.decode_sized(plain)
            except CorruptValue:
                h.events.corrupt += 1
                return None
            sizes[ident] = (size, st.soft_at + time.monotonic() - now)
        return None
    # Seconds it has left, by memcached (exact in its own clock, which ticks in whole
    # seconds) and by its stamp (rounded up): never more than either, so a claim does not
    # move the hard expiry (by a second at most, if memcached's clock ticks in between).
    left_by = [x for x in (left if left >= 0 else None,
                           math.ceil(st.hard_at - now) if math.isfinite(st.hard_at) else None)
               if x is not None]
    ttl = min(left_by) if left_by else 0  # 0: it was stored without expiry, and stays so
    if left_by and ttl < _CLAIM_LEFT_S:
        return None  # about to expire: served stale, then missed and loaded once
    claimed = Stamp(now + h.lease_ttl, st.hard_at, True).pack(plain)
    return h.l2.set_cas(key, claimed, flags, ttl, cas)
