"""L2: memcached, through the Rust client (:class:`MemcachedTier`) or a pymemcache client
(:class:`PymemcacheTier`). One small interface, :class:`Tier`.

Both raise :class:`cachelab.errors.ServerError` subclasses when the server is down, slow
(past the timeout) or misbehaves; the cache turns those into a fallback to the loader.

Leases (meta protocol, :class:`MemcachedTier` only) follow memcached's ``mg`` with ``N``
(vivify on miss): the first client to miss a key gets ``W`` (it should fill it) and a CAS value;
others get ``Z`` (someone is filling) and an empty value until the winner's ``ms ... C<cas>``
lands. A delete in between (an invalidation) makes the winner's CAS set fail, so a fill that
raced an invalidation is never stored.

Values larger than memcached's item size limit (``-I``, ``item_size_max``) are refused before
they are sent (:class:`ValueTooLarge`): the limit is given to the tier, or read from the server's
``stats settings`` on the first write.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import cachelab._core as _core
from cachelab.errors import (
    ConnectionClosed,
    ServerError,
    ServerReplyError,
    ServerTimeout,
    UsageError,
)
from cachelab.tls import TlsOptions, core_tls

__all__ = ["ITEM_OVERHEAD", "Lease", "MemcachedTier", "PymemcacheTier", "Tier", "ValueTooLarge"]

#: Bytes memcached counts besides the key and the value against ``item_size_max`` (item header,
#: CAS, terminators: 59 on memcached 1.6; a little room kept).
ITEM_OVERHEAD = 64
#: The smallest item size limit memcached accepts (``-I 1k``): items up to this fit any server.
_SMALLEST_LIMIT = 1024
#: Seconds before a failed read of ``stats settings`` is tried again.
_LIMIT_RETRY = 30.0


class ValueTooLarge(UsageError):
    """A value larger than memcached's item size limit: it cannot be stored (a fill still
    returns the loader's value; see ``oversize`` in the cache's stats)."""

    def __init__(self, key: str, size: int, limit: int | None, server: str = "memcached") -> None:
        self.key, self.size, self.limit = key, size, limit
        if server == "redis":
            super().__init__(
                f"a value of {size} bytes for {key!r} is over Redis's proto-max-bulk-len"
                + (f" of {limit} bytes" if limit is not None else " (the server refused it)")
                + "; store less or compress it (key_class(compression=...))")
            return
        where = (f"memcached's item size limit of {limit} bytes (item_size_max, less "
                 f"{ITEM_OVERHEAD} bytes of item overhead and the key)" if limit is not None
                 else "memcached's item size limit (the server refused it)")
        super().__init__(f"a value of {size} bytes for {key!r} is over {where}; store less, "
                         "compress it (key_class(compression=...)) or raise memcached's -I")


def _too_large(e: Exception) -> bool:
    return "too large" in str(e)


@dataclass(frozen=True)
class Lease:
    """The answer to a lease get: ``value`` (a hit), or ``win`` with the ``cas`` to store
    with, or neither: ``filling`` if another client holds the lease (memcached's ``Z``),
    else an empty value that is no lease (nobody will fill it: do not wait for it)."""

    value: bytes | None = None
    win: bool = False
    cas: int | None = None
    filling: bool = False


class Tier:
    """The L2 interface. Keys are validated memcached keys (str)."""

    supports_leases = False
    name = "memcached"
    #: The server, as ``staleness()`` names it; the words for :meth:`request_bound_s`.
    server, bound_words = "memcached", "connect_timeout + timeout"
    #: Keys a caller should hand :meth:`delete_many` at once to keep one call short.
    delete_batch = 500

    #: memcached's item size limit in bytes, once known (given, or read by
    #: :meth:`item_size_max`).
    _item_limit: int | None = None
    _limit_retry = 0.0

    def request_bound_s(self) -> float | None:
        """The longest one request may take: its connect plus request timeout, when the tier
        has both (``connect_timeout``, ``timeout``); None when it does not say."""
        timeout = getattr(self, "timeout", None)
        connect = getattr(self, "connect_timeout", None)
        if isinstance(timeout, (int, float)) and isinstance(connect, (int, float)):
            return timeout + connect
        return None

    def item_size_max(self) -> int | None:
        """memcached's item size limit: the one given to the tier, else read from ``stats
        settings`` once (None while it cannot be read; tried again after 30 s)."""
        limit = self._item_limit
        if limit is not None:
            return limit
        now = time.monotonic()
        if now < self._limit_retry:
            return None
        try:
            limit = int(self._read_item_size_max())
        except (ServerError, NotImplementedError, KeyError, ValueError, TypeError):
            self._limit_retry = now + _LIMIT_RETRY
            return None
        self._item_limit = limit
        return limit

    def _read_item_size_max(self) -> int:
        """``item_size_max`` from the server's ``stats settings``."""
        raise NotImplementedError

    def check_size(self, key: str, value: bytes) -> None:
        """Raises :class:`ValueTooLarge` if memcached would refuse ``value`` under ``key``."""
        size = len(key) + len(value) + ITEM_OVERHEAD
        if size <= _SMALLEST_LIMIT:  # fits any memcached: no need to know the limit
            return
        limit = self.item_size_max()
        if limit is not None and size > limit:
            raise ValueTooLarge(key, len(value), limit)

    def get_multi(self, keys: list[str]) -> dict[str, bytes]:  # pragma: no cover - interface
        raise NotImplementedError

    def get_list(
        self, keys: list[str], strip: bytes | None = None,
    ) -> tuple[list[bytes | None], int, list[int], int]:
        """One multi-get answered in the order of ``keys``, as
        ``_core.Client.get_multi_list`` answers: ``(values, found, others, stripped_bytes)`` —
        each key's value or None; how many are not None; the indices of the values found that
        do not start with ``strip`` (the others come without it); the total length of those
        that did, ``strip`` included. This default goes through :meth:`get_multi`."""
        got = self.get_multi(keys).get
        values: list[bytes | None] = []
        others: list[int] = []
        found = stripped = 0
        cut = len(strip) if strip else 0
        for n, k in enumerate(keys):
            v = got(k)
            if v is not None:
                found += 1
                if cut and v[:cut] == strip:
                    stripped += len(v)
                    v = v[cut:]
                else:
                    others.append(n)
            values.append(v)
        return values, found, others, stripped

    def set(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        raise NotImplementedError  # pragma: no cover - interface

    def add(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        """Stores only if ``key`` is absent (a fill without a lease must not overwrite a put)."""
        raise NotImplementedError  # pragma: no cover - interface

    def delete(self, key: str) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def delete_many(self, keys: list[str]) -> None:
        """Deletes ``keys`` (missing ones are fine); raises ServerError if any delete may not
        have reached the server. This default deletes them one by one."""
        for k in keys:
            self.delete(k)

    def incr_or_add(self, key: str) -> int:  # pragma: no cover - interface
        """Increments a counter, creating it at 1 when missing; returns the new value."""
        raise NotImplementedError

    def lease_get(self, key: str, lease_ttl: int) -> Lease:  # pragma: no cover - interface
        raise NotImplementedError

    def lease_peek(self, key: str) -> Lease | None:
        """What :meth:`lease_get` would answer, without asking for the lease: None if ``key``
        is absent (no placeholder is made, so a request whose reply is lost leaves none).
        This default says None: a tier that cannot peek is asked for the lease at every poll
        of a lease waiter."""
        return None

    def lease_set(self, key: str, value: bytes, flags: int, ttl: int, cas: int) -> bool:
        raise NotImplementedError  # pragma: no cover - interface

    def get_cas(self, key: str) -> tuple[bytes, int, int, int] | None:  # pragma: no cover
        """``(value, flags, cas, seconds to live)`` of ``key`` (-1: no expiry), or None if
        absent: what a stale-while-revalidate claim reads (tiers with leases only)."""
        raise NotImplementedError

    def set_cas(self, key: str, value: bytes, flags: int, ttl: int,
                cas: int) -> int | None:  # pragma: no cover - interface
        """Stores ``value`` if ``key``'s CAS is still ``cas``: its new CAS, or None when it
        changed (or is gone) meanwhile (tiers with leases only)."""
        raise NotImplementedError

    def lease_release(self, key: str, cas: int) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass


def _lease(status: str, flags: str, value: bytes) -> Lease:
    """A lease get's reply (``mg <key> v c [N<ttl>]``) as a :class:`Lease`."""
    tokens = flags.split()
    if status != "VA":  # EN cannot happen with N; treat anything else as "someone fills"
        return Lease()
    cas = _flag(tokens, "c")
    if "W" in tokens:
        return Lease(win=True, cas=int(cas) if cas else None)
    filling = "Z" in tokens
    if value and "X" not in tokens and not filling:
        return Lease(value=value)
    return Lease(filling=filling)


def _flag(tokens: list[str], letter: str) -> str | None:
    for t in tokens:
        if t and t[0] == letter:
            return t[1:]
    return None


class MemcachedTier(Tier):
    """memcached through ``cachelab._core.Client``: one connection per thread (a client is not
    shared between threads), reconnected after a failure. ``timeout`` bounds every request,
    ``connect_timeout`` every connect (and the TLS handshake). ``tls``
    (:class:`cachelab.tls.TlsOptions`) connects over TLS to a memcached started with ``-Z``;
    its files are checked here."""

    supports_leases = True
    #: :meth:`delete_many` pipelines a batch in one write and one round trip.
    delete_batch = 500

    def __init__(
        self, address: str, *, timeout: float = 0.25, connect_timeout: float = 0.25,
        leases: bool = True, tls: TlsOptions | None = None,
        item_size_max: int | None = None,
    ) -> None:
        if tls is not None:
            tls.check()
        self._item_limit = item_size_max
        self.tls = tls
        self._tls_core = core_tls(tls)
        self.address = address
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.supports_leases = leases
        self._local = threading.local()
        # A subclass that wraps get_multi (to count or alter round trips) keeps seeing every
        # multi-get: get_list then goes through it.
        self._direct_list = type(self).get_multi is MemcachedTier.get_multi
        #: Whether an asyncio caller may read through :meth:`get_list_async` (the native path
        #: of :class:`~cachelab.tiered.AsyncTieredCache`): not for a subclass that wraps
        #: ``get_multi`` or ``get_list`` (it keeps seeing every read, in a worker thread).
        self.native_async = (self._direct_list
                             and type(self).get_list is MemcachedTier.get_list)
        self._aclient: _core.AsyncClient | None = None
        self._aclient_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemcachedTier({self.address!r}, timeout={self.timeout})"

    def _client(self) -> _core.Client:
        c = getattr(self._local, "client", None)
        if c is None:
            c = _core.Client(self.address, connect_timeout=self.connect_timeout,
                             timeout=self.timeout, tls=self._tls_core)
            self._local.client = c
        return c

    def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        c = self._client()
        try:
            return getattr(c, method)(*args, **kw)
        except ServerError as e:
            # Drop the connection unless the server just refused one command politely.
            if not isinstance(e, ServerReplyError):
                self._local.client = None
                c.close()
            raise

    def get_multi(self, keys: list[str]) -> dict[str, bytes]:
        found = self._call("get_multi", keys)
        return dict(zip(map(bytes.decode, found.keys()), found.values()))

    def get_list(
        self, keys: list[str], strip: bytes | None = None,
    ) -> tuple[list[bytes | None], int, list[int], int]:
        if not self._direct_list:
            return super().get_list(keys, strip)
        return self._call("get_multi_list", keys, strip)  # type: ignore[no-any-return]

    def get_list_async(
        self, keys: list[str], strip: bytes | None = None,
    ) -> Awaitable[tuple[list[bytes | None], int, list[int], int]]:
        """:meth:`get_list` as an awaitable, for asyncio callers: one connection of this tier
        (``_core.AsyncClient``, made on first use, again after a failure) carries every
        awaiting task's reads, pipelined; each await ends within ``timeout`` (plus
        ``connect_timeout`` when it connects) with the answer or a
        :class:`~cachelab.errors.ServerError`."""
        c = self._aclient
        if c is None:
            with self._aclient_lock:
                c = self._aclient
                if c is None:
                    c = self._aclient = _core.AsyncClient(
                        self.address, connect_timeout=self.connect_timeout,
                        timeout=self.timeout, tls=self._tls_core)
        return c.get_multi_list(keys, strip)

    def take_async_client(self) -> _core.AsyncClient | None:
        """Takes the asyncio connection (:meth:`get_list_async`'s) out of the tier, for the
        caller to close (``await client.close()``); a later async read opens another. Dropped
        without that, its socket closes once the reads under way have their answers."""
        with self._aclient_lock:
            c, self._aclient = self._aclient, None
        return c

    def _read_item_size_max(self) -> int:
        return int(self._call("stats", "settings")["item_size_max"])

    def set(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        self.check_size(key, value)
        try:
            return bool(self._call("set", key, value, flags=flags, exptime=ttl))
        except ServerReplyError as e:
            if _too_large(e):
                raise ValueTooLarge(key, len(value), None) from e
            raise

    def add(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        self.check_size(key, value)
        return bool(self._call("add", key, value, flags=flags, exptime=ttl))

    def delete(self, key: str) -> bool:
        return bool(self._call("delete", key))

    def delete_many(self, keys: list[str]) -> None:
        # One pipelined write, one round trip, bounded by ``timeout`` as a whole.
        if keys:
            self._call("delete_many", keys)

    def incr_or_add(self, key: str) -> int:
        n = self._call("incr", key, 1)
        if n is None:
            if self._call("add", key, b"1"):
                return 1
            n = self._call("incr", key, 1)
        return int(n or 1)

    def lease_get(self, key: str, lease_ttl: int) -> Lease:
        return _lease(*self._call("meta_get", key, f"v c N{lease_ttl}"))

    def lease_peek(self, key: str) -> Lease | None:
        # memcached reports another's lease (Z) on a plain meta get too; without N a miss
        # stays a miss. (It would hand out a win, W, only for an item marked stale by a
        # delete or set with I, which this library never sends.)
        status, flags, value = self._call("meta_get", key, "v c")
        return None if status == "EN" else _lease(status, flags, value)

    def lease_set(self, key: str, value: bytes, flags: int, ttl: int, cas: int) -> bool:
        self.check_size(key, value)
        try:
            status, _, _ = self._call("meta_set", key, value, f"C{cas} F{flags} T{ttl}")
        except ServerReplyError as e:
            if _too_large(e):
                raise ValueTooLarge(key, len(value), None) from e
            raise
        return status == "HD"

    def lease_release(self, key: str, cas: int) -> None:
        self._call("meta_delete", key, f"C{cas}")

    def get_cas(self, key: str) -> tuple[bytes, int, int, int] | None:
        status, flags, value = self._call("meta_get", key, "v f c t")
        if status != "VA" or not value:
            return None
        tokens = flags.split()
        return (value, int(_flag(tokens, "f") or 0), int(_flag(tokens, "c") or 0),
                int(_flag(tokens, "t") or -1))

    def set_cas(self, key: str, value: bytes, flags: int, ttl: int, cas: int) -> int | None:
        self.check_size(key, value)
        status, got, _ = self._call("meta_set", key, value, f"C{cas} F{flags} T{ttl} c")
        if status != "HD":
            return None
        cas_now = _flag(got.split(), "c")
        return int(cas_now) if cas_now else None

    def close(self) -> None:
        c = getattr(self._local, "client", None)
        if c is not None:
            c.close()
            self._local.client = None
        self.take_async_client()  # dropped: its socket closes once its reads are answered


class PymemcacheTier(Tier):
    """memcached through pymemcache. No leases: fills are plain sets, so a fill racing an
    invalidation may store the old value until its TTL.

    Safe to share between threads, however it is made:

    * :meth:`connect` (or ``factory=``, a callable making a client): each thread gets a client
      of its own, made on its first call (like :class:`MemcachedTier`);
    * ``client``: a pymemcache ``PooledClient`` (or a ``HashClient(use_pooling=True)``) is used
      as it is; any other client (a plain ``Client`` is not thread-safe) is used by one thread
      at a time, under a lock.

    Give clients timeouts: by default pymemcache waits forever for a server that accepts and
    never answers."""

    name = "pymemcache"

    def __init__(self, client: Any = None, *, factory: Callable[[], Any] | None = None,
                 item_size_max: int | None = None) -> None:
        # Deferred on purpose: pymemcache is optional (the ``test`` extra), and whoever makes a
        # PymemcacheTier has it; ``import cachelab.tiered`` must not need it.
        from pymemcache.client.base import PooledClient  # deferred on purpose, as said above
        from pymemcache.exceptions import MemcacheError  # deferred on purpose, as said above

        if (client is None) == (factory is None):
            raise UsageError("PymemcacheTier needs a client or a factory (one of them)")
        self._shared = client
        self._factory = factory
        self._local = threading.local()
        self._made: weakref.WeakSet[_Owned] = weakref.WeakSet()
        pooled = isinstance(client, PooledClient) or bool(getattr(client, "use_pooling", False))
        #: Serialises calls on a shared client that is not thread-safe (None: no need).
        self._lock = threading.Lock() if client is not None and not pooled else None
        self._item_limit = item_size_max
        self._memcache_error: type[Exception] = MemcacheError

    def __repr__(self) -> str:
        how = "per-thread clients" if self._factory is not None else repr(self._shared)
        return f"PymemcacheTier({how})"

    @classmethod
    def connect(cls, address: str, *, timeout: float = 0.25, connect_timeout: float = 0.25,
                tls_context: ssl.SSLContext | None = None,
                item_size_max: int | None = None) -> PymemcacheTier:
        """A tier with a pymemcache ``Client`` per thread for ``address`` (``host:port``) with
        finite timeouts; with ``tls_context`` (an :class:`ssl.SSLContext`, e.g.
        ``ssl.create_default_context(cafile=...)``) it speaks TLS to a memcached started with
        ``-Z``, the handshake bounded by ``connect_timeout``."""
        # Deferred on purpose, as in __init__: pymemcache is optional.
        from pymemcache.client.base import Client

        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise UsageError(f"pymemcache address {address!r} is not HOST:PORT")
        server = (host.strip("[]"), int(port))

        def factory() -> Any:
            return Client(server, timeout=timeout, connect_timeout=connect_timeout,
                          tls_context=tls_context)

        return cls(factory=factory, item_size_max=item_size_max)

    @property
    def client(self) -> Any:
        """The pymemcache client this thread uses."""
        if self._factory is None:
            return self._shared
        owned = getattr(self._local, "owned", None)
        if owned is None:
            owned = self._local.owned = _Owned(self._factory())
            self._made.add(owned)
        return owned.client

    def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        try:
            if self._lock is None:
                return getattr(self.client, method)(*args, **kw)
            with self._lock:
                return getattr(self._shared, method)(*args, **kw)
        except socket.timeout as e:
            raise ServerTimeout(str(e)) from e
        except (OSError, self._memcache_error) as e:
            if _too_large(e):
                raise ValueTooLarge(str(args[0]) if args else "?", len(args[1]) if
                                    len(args) > 1 else 0, None) from e
            raise ConnectionClosed(f"pymemcache: {e}") from e

    def _read_item_size_max(self) -> int:
        settings = self._call("stats", "settings")
        value = settings.get(b"item_size_max", settings.get("item_size_max"))
        return int(value)

    def get_multi(self, keys: list[str]) -> dict[str, bytes]:
        return self._call("get_many", keys)  # type: ignore[no-any-return]

    def set(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        self.check_size(key, value)
        return bool(self._call("set", key, value, expire=ttl, noreply=False, flags=flags))

    def add(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        self.check_size(key, value)
        return bool(self._call("add", key, value, expire=ttl, noreply=False, flags=flags))

    def delete(self, key: str) -> bool:
        return bool(self._call("delete", key, noreply=False))

    def delete_many(self, keys: list[str]) -> None:
        # pymemcache sends the deletes as one pipelined batch and reads every reply.
        if keys:
            self._call("delete_many", keys, noreply=False)

    def incr_or_add(self, key: str) -> int:
        n = self._call("incr", key, 1, noreply=False)
        if n is None:
            if self._call("add", key, b"1", noreply=False):
                return 1
            n = self._call("incr", key, 1, noreply=False)
        return int(n or 1)

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()
        for owned in list(self._made):
            owned.client.close()
        self._local = threading.local()


class _Owned:
    """A thread's own pymemcache client, closed when the thread ends (its ``threading.local``
    goes, and this with it) or the tier is closed."""

    __slots__ = ("__weakref__", "client")

    def __init__(self, client: Any) -> None:
        self.client = client

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # a finalizer must not raise
            self.client.close()
