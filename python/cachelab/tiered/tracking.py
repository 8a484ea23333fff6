"""Every process's L1 told of writes through Redis's server-assisted client-side caching
(``CLIENT TRACKING``, broadcasting mode, RESP3 push messages): :class:`RedisTracking`.

::

    cache = TieredCache(RedisTier(url), LRUMemory(max_bytes=64 << 20, ttl=30), prefix="app")
    tracking = RedisTracking(cache)      # cross_process_s: 0.325 s instead of the L1 ttl
    ...
    tracking.close()

A thread holds one connection of its own to the tier's Redis (``HELLO 3``, then ``CLIENT
TRACKING ON BCAST PREFIX <prefix>:``, so Redis pushes ``invalidate`` with the name of every
key under the cache's prefix that any client writes or deletes — a ``put``, an
``invalidate``, a fill, an expiry). Each pushed key's L1 entry is dropped, and the cache's
epoch bumped under its admission lock (so a fill in this process that read the older value
before the push is not admitted to L1 after it).

**The bound.** The thread sends ``PING`` every ``interval`` seconds. Redis queues a write's
push on this connection before it answers the writer, and answers a later ``PING`` after it:
so once the ``PONG`` of a ping sent after a write has arrived, that write's push has too. A
write that returned at *w* is followed by a ping by *w* + ``interval``; its ``PONG`` comes
within ``timeout`` or the thread, checking every ``interval / 2``, declares the connection
*blind* by then: it clears L1 (and bumps the epoch, so no fill that read before the clear is
admitted after it), then again at least every ``interval + timeout`` while blind (the wait
before a reconnect, the connect, then every ``interval`` of the handshake), and once tracking
is on again and a ``PONG`` proves it, clears L1 once more (pushes missed in the gap) and
trusts L1 again. A fill admitted while blind read Redis after the previous clear, so it is
cleared within one such gap of any write it missed. So no other process serves the older
value from L1 more than ``1.5 × interval + timeout`` after the write returned
(:meth:`bound_s`; 0.325 s with the defaults and a tier's 0.25 s timeout), whatever the server
or the network does — provided this thread gets the CPU.
``TieredCache.staleness()`` states ``min(L1 ttl, that)`` as ``cross_process_s``.

It connects as the tier's own client does: TCP, TLS (``rediss://``: the client's certificate
settings, ``ssl_ca_certs``, ``ssl_certfile`` …, verified the same way) or a Unix socket (a
``redis.Redis(unix_socket_path=…)`` given to the tier). Limits: one Redis (no cluster); OCSP
checks are refused in one line; every push bumps the cache's one epoch, so under heavy
writes fills racing pushes are not admitted to L1 (read again from Redis: correct, slower).
Keys are mapped back to L1 entries through the cache's key memo; a pushed key this process
cannot map (its memo was cleared since) clears the whole L1.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any

from cachelab.errors import UsageError
from cachelab.tiered.redis import LEASE_SUFFIX, RedisTier

if TYPE_CHECKING:
    from cachelab.tiered.cache import TieredCache

__all__ = ["RedisTracking"]

_log = logging.getLogger("cachelab.tiered")


def _command(*args: str | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class _Closed(Exception):
    """The connection closed, or sent what is not RESP3."""


class _Reader:
    """RESP3 replies from a socket: ``read()`` one frame, or None if none is complete yet."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> None:
        self.buf += data

    def read(self) -> Any:
        try:
            value, pos = self._parse(0)
        except IndexError:
            return None
        self.buf = self.buf[pos:]
        return value

    def _line(self, pos: int) -> tuple[bytes, int]:
        end = self.buf.find(b"\r\n", pos)
        if end < 0:
            raise IndexError
        return self.buf[pos:end], end + 2

    def _parse(self, pos: int) -> tuple[Any, int]:
        if pos >= len(self.buf):
            raise IndexError
        kind = self.buf[pos:pos + 1]
        line, pos = self._line(pos + 1)
        if kind in (b"+", b"(", b","):
            return line, pos
        if kind in (b"-", b"!"):
            return UsageError(line.decode(errors="replace")), pos
        if kind == b":":
            return int(line), pos
        if kind == b"_":
            return None, pos
        if kind == b"#":
            return line == b"t", pos
        if kind in (b"$", b"="):
            n = int(line)
            if n < 0:
                return None, pos
            if len(self.buf) < pos + n + 2:
                raise IndexError
            return self.buf[pos:pos + n], pos + n + 2
        if kind in (b"*", b">", b"~", b"%", b"|"):
            n = int(line)
            if n < 0:
                return None, pos
            n *= 2 if kind in (b"%", b"|") else 1
            items = []
            for _ in range(n):
                v, pos = self._parse(pos)
                items.append(v)
            if kind == b">":
                return ("push", items), pos
            if kind == b"|":  # attributes: skip them, the reply follows
                return self._parse(pos)
            return items, pos
        raise _Closed(f"not RESP3: {kind!r}")


#: redis-py's ``ssl_cert_reqs`` words.
_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
              "required": ssl.CERT_REQUIRED}


def _tls_context(ckw: dict[str, Any]) -> ssl.SSLContext:
    """The TLS settings of a redis-py ``SSLConnection``'s keyword arguments, checked as it
    checks them: the CA, the client certificate, ``ssl_cert_reqs``, ``ssl_check_hostname``,
    the minimum version, the ciphers and the verify flags."""
    if ckw.get("ssl_validate_ocsp") or ckw.get("ssl_validate_ocsp_stapled"):
        raise UsageError("RedisTracking does not check OCSP (ssl_validate_ocsp): track over "
                         "a client without it, or leave RedisTracking out")
    reqs = ckw.get("ssl_cert_reqs", "required")
    if isinstance(reqs, str):
        if reqs.lower() not in _CERT_REQS:
            raise UsageError(f"ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}, "
                             f"not {reqs!r}")
        reqs = _CERT_REQS[reqs.lower()]
    ctx = ssl.create_default_context()
    ctx.check_hostname = bool(ckw.get("ssl_check_hostname", True)) and reqs != ssl.CERT_NONE
    ctx.verify_mode = reqs
    for flag in ckw.get("ssl_include_verify_flags") or ():
        ctx.verify_flags |= flag
    for flag in ckw.get("ssl_exclude_verify_flags") or ():
        ctx.verify_flags &= ~flag
    if ckw.get("ssl_certfile") or ckw.get("ssl_keyfile"):
        ctx.load_cert_chain(ckw.get("ssl_certfile"), ckw.get("ssl_keyfile"),
                            ckw.get("ssl_password"))
    if any(ckw.get(k) is not None for k in ("ssl_ca_certs", "ssl_ca_path", "ssl_ca_data")):
        ctx.load_verify_locations(cafile=ckw.get("ssl_ca_certs"), capath=ckw.get("ssl_ca_path"),
                                  cadata=ckw.get("ssl_ca_data"))
    if ckw.get("ssl_min_version") is not None:
        ctx.minimum_version = ckw["ssl_min_version"]
    if ckw.get("ssl_ciphers"):
        ctx.set_ciphers(ckw["ssl_ciphers"])
    return ctx


class RedisTracking:
    """Drops ``cache``'s L1 entries as Redis reports writes of their keys (see the module
    docstring). ``cache`` has a :class:`~cachelab.tiered.RedisTier` L2 over ``redis://``.
    ``interval`` (seconds between pings) and ``timeout`` (the longest a ping may go
    unanswered; default the tier's) make :meth:`bound_s`."""

    def __init__(self, cache: TieredCache, *, interval: float = 0.05,
                 timeout: float | None = None) -> None:
        tier = cache.l2
        if not isinstance(tier, RedisTier):
            raise UsageError("RedisTracking needs a TieredCache whose l2 is a RedisTier")
        if tier.cluster_client is not None:
            raise UsageError("RedisTracking tracks one Redis, not a cluster (RedisTier.cluster): "
                             "each master pushes its own keys' writes only")
        ckw = tier.client.connection_pool.connection_kwargs
        kind = getattr(getattr(tier.client.connection_pool, "connection_class", None),
                       "__name__", "")
        #: (host, port) over TCP or TLS, or a Unix socket's path; the TLS settings, if any.
        self._addr: tuple[str, int] | str
        self._tls: ssl.SSLContext | None = None
        if kind in ("Connection", "SSLConnection") and "host" in ckw:
            self._addr = (ckw["host"], int(ckw.get("port", 6379)))
            if kind == "SSLConnection":
                self._tls = _tls_context(ckw)
        elif kind == "UnixDomainSocketConnection" and ckw.get("path"):
            self._addr = str(ckw["path"])
        else:
            raise UsageError(f"RedisTracking connects over TCP, TLS (rediss://) or a Unix "
                             f"socket, as redis-py's own connections do: not over a {kind or '?'}"
                             " (the L1 ttl still bounds other processes)")
        if interval <= 0:
            raise UsageError(f"RedisTracking interval must be > 0 s, not {interval}")
        self.cache = cache
        self.interval = float(interval)
        self.timeout = float(timeout if timeout is not None else tier.timeout or 0.25)
        self._auth = (ckw.get("username") or "default", ckw.get("password"))
        self._prefix = cache.prefix + ":"
        self._stop = threading.Event()
        self._rev: dict[str, dict[str, Any]] = {}  # class -> {redis key: ident}
        self._memo_seen: dict[str, tuple[int, int]] = {}
        #: Classes whose memo was cleared or replaced since L1 was last cleared.
        self._lost: set[str] = set()
        #: Whether L1 is trusted (the connection answers); False while blind.
        self.healthy = False
        #: Counters: pushes received, L1 entries dropped, whole clears, reconnects.
        self.pushes = self.dropped = self.clears = self.reconnects = 0
        self._thread = threading.Thread(target=self._run, name="cachelab-redis-tracking",
                                        daemon=True)
        cache._tracking = self
        self._clear()  # nothing read before tracking began is trusted past its ttl
        self._thread.start()

    def bound_s(self) -> float:
        """Seconds after a write returns within which no other process's L1 serves the older
        value (while this tracking runs): ``interval + timeout + interval / 2``."""
        return round(self.interval * 1.5 + self.timeout, 6)

    def tighten(self, cross: float | None, why: str) -> tuple[float | None, str]:
        """:meth:`TieredCache.staleness`'s ``cross_process_s`` and its ``why`` with this
        tracking: its bound, when tighter than the L1 ttl's."""
        bound = self.bound_s()
        if cross is not None and cross <= bound:
            return cross, why
        return bound, (f"Redis CLIENT TRACKING (RedisTracking) drops other processes' L1 "
                       f"entries within {bound:g} s of a write (ping interval + timeout + "
                       "half an interval; their L1 is cleared while its connection is blind), "
                       "when every process runs it")

    def close(self) -> None:
        """Stops the thread (within ``timeout``) and its connection; L1 is then bounded by its
        ttl again."""
        self._stop.set()
        self._thread.join(self.timeout + self.interval + 1.0)
        if getattr(self.cache, "_tracking", None) is self:
            self.cache._tracking = None

    # -- the thread ---------------------------------------------------------------------------

    def _clear(self) -> None:
        cache = self.cache
        with cache._admit:
            cache._epoch += 1
            if cache.l1 is not None:
                cache.l1.clear()
        self._lost.clear()
        self.clears += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._session()
            except (OSError, _Closed, UsageError) as e:
                if self.healthy or self.reconnects == 0:
                    _log.warning("redis tracking: %s; L1 cleared every %g s until it is back",
                                 e, self.interval)
            self.healthy = False
            self._clear()
            self.reconnects += 1
            self._stop.wait(self.interval)

    def _connect(self) -> socket.socket:
        """A connection to the tier's Redis (the TLS handshake done), within ``timeout`` for
        each step."""
        if isinstance(self._addr, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                sock.connect(self._addr)
            except OSError:
                sock.close()
                raise
            return sock
        sock = socket.create_connection(self._addr, timeout=self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                return self._tls.wrap_socket(sock, server_hostname=self._addr[0])
        except OSError:  # (ssl.SSLError among them: a certificate refused)
            sock.close()
            raise
        return sock

    def _session(self) -> None:
        sock = self._connect()
        try:
            sock.settimeout(self.interval / 2)
            reader = _Reader()
            hello: list[str] = ["HELLO", "3"]
            if self._auth[1]:
                hello += ["AUTH", self._auth[0], self._auth[1]]
            sock.sendall(_command(*hello) + _command(
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", self._prefix))
            handshake_by = time.monotonic() + self.timeout
            replies = 0  # of the two above
            sent: list[float] = []  # send times of the pings not answered yet
            next_ping = float("inf")
            next_clear = time.monotonic() + self.interval  # blind until a PONG: keep clearing
            while not self._stop.is_set():
                now = time.monotonic()
                if replies < 2 and now > handshake_by:
                    raise _Closed(f"no answer to HELLO / CLIENT TRACKING in {self.timeout:g} s")
                if now >= next_ping:
                    sock.sendall(_command("PING"))
                    sent.append(now)
                    next_ping = now + self.interval
                if sent and now - sent[0] > self.timeout:
                    raise _Closed(f"no PONG within {self.timeout:g} s")
                if not self.healthy and now >= next_clear:
                    self._clear()  # blind: nothing admitted meanwhile lives past the next
                    next_clear = now + self.interval
                try:
                    data = sock.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    raise _Closed("closed by the server")
                reader.feed(data)
                while (frame := reader.read()) is not None:
                    if isinstance(frame, tuple):
                        self._push(frame[1])
                    elif isinstance(frame, UsageError):
                        raise frame
                    elif replies < 2:
                        replies += 1
                        if replies == 2:
                            next_ping = 0.0  # at once: its PONG proves tracking is on
                    elif sent:
                        sent.pop(0)
                        if not self.healthy:
                            self._clear()  # pushes missed while blind
                            self.healthy = True
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    def _push(self, items: list[Any]) -> None:
        if not items or items[0] != b"invalidate":
            return
        self.pushes += 1
        keys = items[1] if len(items) > 1 else None
        if keys is None:  # FLUSHALL / FLUSHDB: everything
            self._clear()
            return
        cache = self.cache
        l1 = cache.l1
        drop: list[Any] = []
        whole = False
        for raw in keys:
            key = raw.decode("utf-8", "surrogateescape")
            if key.endswith(LEASE_SUFFIX):
                continue  # a lease key: no value changed
            found = self._l1_key(key)
            if found is False:
                whole = True
                break
            if found is not None:
                drop.append(found)
        with cache._admit:
            cache._epoch += 1
            if l1 is not None:
                if whole:
                    l1.clear()
                    self._lost.clear()
                    self.clears += 1
                else:
                    for k in drop:
                        l1.discard(k)
                    self.dropped += len(drop)

    def _l1_key(self, key: str) -> Any:
        """``(class name, ident)`` of a Redis key; None if this process never made it (so it
        is not in L1); False if it cannot tell (the class's key memo was cleared or replaced
        since: keys made before are unknown)."""
        name = key[len(self._prefix):].split(":", 1)[0].split("@", 1)[0]
        got = self.cache._keys._memos.get(name)
        if got is None:
            return None
        memo = got[1]
        rev = self._rev.setdefault(name, {})
        if key in rev:
            return (name, rev[key])
        now = (id(memo), len(memo))
        seen = self._memo_seen.get(name)
        if seen != now:
            if seen is not None and (seen[0] != now[0] or now[1] < seen[1]):
                self._lost.add(name)
                rev.clear()
            rev.update({k: i for i, k in dict(memo).items()})  # dict(): one atomic copy
            self._memo_seen[name] = now
            if key in rev:
                return (name, rev[key])
        return False if name in self._lost else None
