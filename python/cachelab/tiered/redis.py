"""L2 on Redis (or Valkey): :class:`RedisTier`, over redis-py (``pip install 'cachelab[redis]'``).

::

    cache = TieredCache(RedisTier("redis://:secret@127.0.0.1:6379/0"), LRUMemory(), prefix="app")

The same interface and guarantees as :class:`~cachelab.tiered.MemcachedTier`: every request
bounded (``connect_timeout`` + ``timeout``, redis-py's retries off), redis-py's errors raised as
:class:`cachelab.errors.ServerError` subclasses (``TimeoutError`` → ``ServerTimeout``,
``ConnectionError`` → ``ConnectionClosed`` or, for TLS, ``TlsHandshakeFailed``,
``ResponseError`` → ``ServerReplyError``), so the
cache falls back to the loader exactly as with memcached.

**Leases.** A miss asks for ``SET <key> lease <token> NX PX <lease_ttl ms>`` (the lease lives in
a key of its own: ``<key>`` followed by ``" lease"``, a space no cache key holds). The winner's
fill is stored only if that lease key still holds its token — and every write of the key
(``set``, ``delete``, ``delete_many``) removes the lease key in the same step, so a ``put`` or
``invalidate`` that comes in between makes the racing fill fail, as memcached's CAS does.
Check-and-store is one Lua script (``EVAL``), not WATCH/MULTI: one round trip whatever
happens (WATCH/GET/MULTI/EXEC is two at least, pins a pooled connection between them, and
must be retried on a conflict), atomic on the server, so one request's timeout bounds it.
``EVAL`` with the script's text each time, not ``EVALSHA``: a restarted server (or a failover)
has an empty script cache, and ``EVALSHA`` would then cost a second request (``NOSCRIPT``) —
the scripts are a few hundred bytes.

**Stale-while-revalidate claims** (``get_cas``/``set_cas``): the version of a key is its
content — the CAS is the first 60 bits of the SHA-1 of the value, which the script computes
with ``redis.sha1hex`` and compares. A ``put`` writes different bytes (its stamp holds the
time), an ``invalidate`` removes them, a claim rewrites the stamp: each changes the version, as
memcached's CAS changes. A claim keeps the key's expiry (``SET ... KEEPTTL``): the hard TTL
does not move. Lease tokens are 61-bit numbers with bit 60 set, content versions are below
2**60, so one ``lease_set``/``lease_release`` takes either, as memcached's one CAS does.

**Flags.** memcached's client flags have no Redis twin, and none is needed: the tiered cache
reads a value's format from the header its writer put in front of it
(:mod:`cachelab.tiered.codecs`), never from the flags (memcached's multi-get does not return
them either); the flags are only a courtesy to other memcached tools. RedisTier drops them
(``get_cas`` answers 0).

**A Redis Cluster** (:meth:`RedisTier.cluster`, or a ``redis.cluster.RedisCluster`` given):
each key on its slot's master through redis-py's routing; a key's lease key is in the key's
slot (:func:`cluster_lease_key`: ``{<key>} lease``), so the scripts above, which name both in
``KEYS``, run on one node; multi-key reads and deletes go as single-key commands in one
pipeline per master (:meth:`RedisTier._pipelined` says why), following ``MOVED``/``ASK`` at
most ``redirects`` times; :meth:`RedisTier.request_bound_s` counts the redirections and
redis-py's slot map reads.

TTLs are seconds (``EX``); 0 stores without expiry, as in memcached. (memcached reads a TTL
over 30 days as a Unix time; Redis does not: give TTLs under 30 days.)
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import itertools
import secrets
import time
from typing import Any
from urllib.parse import urlsplit

from cachelab.errors import (
    ConnectionClosed,
    ProtocolError,
    ServerReplyError,
    ServerTimeout,
    ServerUnreachable,
    TlsHandshakeFailed,
    UsageError,
)
from cachelab.tiered.backends import Lease, Tier, ValueTooLarge

__all__ = ["LEASE_SUFFIX", "RedisTier", "cluster_lease_key"]

#: What a key's lease key adds to it (a space: never in a cache key, which is a valid
#: memcached key).
LEASE_SUFFIX = " lease"
#: Lease tokens have this bit set; content versions (``get_cas``) are below it.
_LEASE_BIT = 1 << 60
#: Values up to this size fit any Redis (``proto-max-bulk-len`` is at least 1 MB).
_SMALLEST_LIMIT = 1 << 20

# KEYS[1] the key, KEYS[2] its lease key. A reply of {1, value} is a hit, {2} a won lease, {3}
# someone else's lease.
_LEASE_GET = """
local v = redis.call('GET', KEYS[1])
if v then return {1, v} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2} end
return {3}
"""

# Whether ARGV[1] ('L' a lease token, 'C' a content version) ARGV[2] is still the key's.
_OWNED = """
local function owned()
  if ARGV[1] == 'L' then return redis.call('GET', KEYS[2]) == ARGV[2] end
  local v = redis.call('GET', KEYS[1])
  return v ~= false and string.sub(redis.sha1hex(v), 1, 15) == ARGV[2]
end
"""

# Stores ARGV[3] with TTL ARGV[4] (0: none) if owned(); the lease goes.
_LEASE_SET = _OWNED + """
if not owned() then return 0 end
if tonumber(ARGV[4]) > 0 then
  redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
else
  redis.call('SET', KEYS[1], ARGV[3])
end
redis.call('DEL', KEYS[2])
return 1
"""

# Frees a lease (its lease key), or a claim (the key itself), if still owned().
_LEASE_RELEASE = _OWNED + """
if not owned() then return 0 end
if ARGV[1] == 'L' then return redis.call('DEL', KEYS[2]) end
return redis.call('DEL', KEYS[1])
"""

# The value and its milliseconds to live (-1: no expiry), or nil.
_GET_CAS = """
local v = redis.call('GET', KEYS[1])
if not v then return false end
return {v, redis.call('PTTL', KEYS[1])}
"""

# Rewrites the value if its content version is still ARGV[1], keeping its expiry.
_SET_CAS = """
local v = redis.call('GET', KEYS[1])
if not v or string.sub(redis.sha1hex(v), 1, 15) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
"""

# A plain store (ARGV[2]: TTL, 0 none; ARGV[3] '1': only if absent) that removes the key's
# lease in the same step, so a fill racing it is not stored over it.
_SET = """
local ok
if tonumber(ARGV[2]) > 0 then
  if ARGV[3] == '1' then ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2])
  else ok = redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
else
  if ARGV[3] == '1' then ok = redis.call('SET', KEYS[1], ARGV[1], 'NX')
  else ok = redis.call('SET', KEYS[1], ARGV[1]) end
end
if not ok then return 0 end
redis.call('DEL', KEYS[2])
return 1
"""


def _bounded(redis: Any, what: str, timeout: float, connect_timeout: float) -> dict[str, Any]:
    """redis-py's keyword arguments for a client whose every request is bounded: ``timeout``
    per request, ``connect_timeout`` per connect, no retries, and no ``CLIENT SETINFO`` on
    connect (one request less in a connect's bound)."""
    if timeout <= 0 or connect_timeout <= 0:
        raise UsageError(f"{what} timeout and connect_timeout must be > 0 s "
                         f"(got {timeout}, {connect_timeout})")
    kw: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": connect_timeout,
                          "retry": redis.retry.Retry(redis.backoff.NoBackoff(), 0)}
    if "driver_info" in inspect.signature(redis.Redis.__init__).parameters:
        kw["driver_info"] = None
    else:  # redis-py 5 and 6
        kw["lib_name"] = kw["lib_version"] = None
    return kw


def _version(value: bytes) -> int:
    """A value's content version: the first 60 bits of its SHA-1 (``redis.sha1hex``'s first
    15 hex digits)."""
    return int(hashlib.sha1(value).hexdigest()[:15], 16)  # noqa: S324 - a version, not a secret


def _lease_key(key: str) -> str:
    return key + LEASE_SUFFIX


def _hash_tag(key: str) -> str | None:
    """What Redis Cluster hashes of ``key`` when it has a hash tag (the text between its
    first ``{`` and the first ``}`` after it, if not empty), else None (the whole key)."""
    i = key.find("{")
    if i < 0:
        return None
    j = key.find("}", i + 1)
    return key[i + 1:j] if j > i + 1 else None


@functools.lru_cache(maxsize=1024)
def _slot_tag(slot: int) -> str:
    """A short text without ``}`` whose CRC16 hash slot is ``slot`` (found by counting up;
    16,384 tries on average)."""
    from redis.crc import key_slot  # deferred: redis-py is optional

    for n in itertools.count():
        tag = format(n, "x")
        if key_slot(tag.encode()) == slot:
            return tag
    raise AssertionError("unreachable")


def cluster_lease_key(key: str) -> str:
    """``key``'s lease key on a Redis Cluster: one in ``key``'s hash slot, so that a script
    naming both (in ``KEYS``) runs on the master holding the slot. ``key`` followed by
    :data:`LEASE_SUFFIX` if ``key`` has a hash tag (the lease key has the same one); else
    ``{key} lease`` (its tag is all of ``key``); else — a key holding ``}`` without a tag,
    e.g. ``a{}b`` — ``{<t>}key lease`` with ``<t>`` a short text of ``key``'s slot. A space
    is in every form, in no cache key."""
    if _hash_tag(key) is not None:
        return key + LEASE_SUFFIX
    if "}" not in key:
        return "{" + key + "}" + LEASE_SUFFIX
    from redis.crc import key_slot  # deferred: redis-py is optional

    return "{" + _slot_tag(key_slot(key.encode())) + "}" + key + LEASE_SUFFIX


def _import_redis() -> Any:
    try:
        import redis  # deferred on purpose: redis-py is optional (cachelab[redis])
    except ImportError as e:
        raise UsageError("RedisTier needs redis-py, which is not installed: "
                         "pip install 'cachelab[redis]'") from e
    return redis


class RedisTier(Tier):
    """Redis (or Valkey) through redis-py, from a ``redis://`` / ``rediss://`` URL (made here
    with ``timeout`` for every request and ``connect_timeout`` for every connect and TLS
    handshake, redis-py's retries off; ``client_kwargs`` go to ``redis.Redis.from_url``, e.g.
    ``ssl_ca_certs``) or a user's ``redis.Redis`` client (used as it is: its own timeouts and
    retries then make :meth:`request_bound_s`, which is None if it has no socket timeout).
    Thread-safe (redis-py's connection pool). Leases as the module docstring says."""

    supports_leases = True
    name = "redis"
    server, bound_words = "Redis", "request_bound_s(): the connect, its AUTH/SELECT and the request"
    #: Keys per ``UNLINK`` of :meth:`delete_many` (two names each: the key and its lease).
    delete_batch = 500

    def __init__(self, url: Any, *, timeout: float = 0.25, connect_timeout: float = 0.25,
                 leases: bool = True, item_size_max: int | None = None,
                 **client_kwargs: Any) -> None:
        redis = _import_redis()
        self._errors = redis.exceptions
        self.supports_leases = leases
        self._item_limit = item_size_max
        self._lease = _lease_key
        #: The Redis Cluster client, if this tier is over a cluster (see :meth:`cluster`).
        self.cluster_client: Any = None
        from redis.cluster import RedisCluster  # deferred: redis-py is optional

        if isinstance(url, RedisCluster):
            if client_kwargs:
                raise UsageError(f"RedisTier: {sorted(client_kwargs)} apply to a URL, not to a "
                                 "client (make the client with them)")
            self._over_cluster(url, owned=False)
            return
        if isinstance(url, str):
            scheme = urlsplit(url).scheme
            if scheme not in ("redis", "rediss"):
                raise UsageError(f"RedisTier url {self._safe(url)!r} is not redis://HOST:PORT[/DB]"
                                 " or rediss://... (TLS)")
            kw = _bounded(redis, "RedisTier", timeout, connect_timeout)
            kw.update(client_kwargs)
            self.client = redis.Redis.from_url(url, **kw)
            self._owned = True
        elif client_kwargs:
            raise UsageError(f"RedisTier: {sorted(client_kwargs)} apply to a URL, not to a "
                             "client (make the client with them)")
        elif isinstance(url, redis.Redis):
            self.client = url
            self._owned = False
        else:
            raise UsageError(f"RedisTier takes a redis:// URL, a redis.Redis or a "
                             f"redis.cluster.RedisCluster client, not {type(url).__name__}")
        ckw = self.client.connection_pool.connection_kwargs
        self.timeout = ckw.get("socket_timeout")
        self.connect_timeout = ckw.get("socket_connect_timeout") or self.timeout
        self.address = (f"{ckw.get('host', ckw.get('path', '?'))}:{ckw.get('port', '')}"
                        f"/{ckw.get('db', 0)}")

    @classmethod
    def cluster(cls, url: str, *, timeout: float = 0.25, connect_timeout: float = 0.25,
                redirects: int = 2, leases: bool = True, item_size_max: int | None = None,
                **client_kwargs: Any) -> RedisTier:
        """A tier over the Redis Cluster that the seed node of ``url``
        (``redis://[:password@]HOST:PORT`` or ``rediss://...``) is a master of: a
        ``redis.cluster.RedisCluster`` made with ``timeout`` for every request,
        ``connect_timeout`` for every connect, redis-py's retries off, and at most
        ``redirects`` ``MOVED``/``ASK`` redirections followed per call (redis-py follows 15);
        ``client_kwargs`` go to ``RedisCluster.from_url``. Reads the slot map now
        (``CLUSTER SLOTS`` from the seed): raises :class:`~cachelab.errors.ServerUnreachable`
        if that fails. Keys, leases and claims as the module docstring says."""
        redis = _import_redis()
        from redis.cluster import RedisCluster  # deferred: redis-py is optional

        if urlsplit(url).scheme not in ("redis", "rediss"):
            raise UsageError(f"RedisTier.cluster url {cls._safe(url)!r} is not "
                             "redis://HOST:PORT or rediss://... (TLS): a seed node")
        kw = _bounded(redis, "RedisTier.cluster", timeout, connect_timeout)
        if not isinstance(redirects, int) or redirects < 0:
            raise UsageError(f"RedisTier.cluster redirects must be an int >= 0, not {redirects!r}")
        kw.update(client_kwargs)
        try:
            client = RedisCluster.from_url(url, **kw)
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as x:
            raise ServerUnreachable(f"redis cluster {cls._safe(url)}: "
                                    f"{str(x).replace(url, cls._safe(url))}") from None
        client.RedisClusterRequestTTL = 1 + redirects
        tier = cls(client, leases=leases, item_size_max=item_size_max)
        tier._owned = True
        return tier

    def _over_cluster(self, client: Any, *, owned: bool) -> None:
        self.cluster_client = self.client = client
        self._owned = owned
        self._lease = cluster_lease_key
        ckw = client.nodes_manager.connection_kwargs
        self.timeout = ckw.get("socket_timeout")
        self.connect_timeout = ckw.get("socket_connect_timeout") or self.timeout
        seeds = sorted(client.nodes_manager.startup_nodes)
        self.address = "cluster " + ",".join(seeds[:3]) + (",..." if len(seeds) > 3 else "")
        self.name = "redis-cluster"
        self.server = "Redis Cluster master"
        self.bound_words = ("request_bound_s(): a call's redirections, each a connect, its "
                            "handshake and the request, and a slot map refresh")

    @staticmethod
    def _safe(url: str) -> str:
        """``url`` without its password."""
        parts = urlsplit(url)
        if parts.password is None:
            return url
        return url.replace(f":{parts.password}@", ":***@", 1)

    def __repr__(self) -> str:
        return f"RedisTier({self.address!r}, timeout={self.timeout})"

    def request_bound_s(self) -> float | None:
        """The longest one call may take: the connect (``connect_timeout``, and one
        ``timeout`` per request redis-py sends on a new connection — AUTH or HELLO, SELECT,
        CLIENT SETINFO — before this one) plus the request (``timeout``), times the attempts
        redis-py makes (1 + its retries) plus its backoff between them. None when redis-py
        has no socket timeout (it would wait forever).

        Over a cluster (:meth:`cluster`): a call makes up to ``1 + redirects`` attempts
        (redis-py's ``RedisClusterRequestTTL``), each a connect, its handshake, ``ASKING``
        and the request, or 0.05 s asleep after a ``TRYAGAIN``; a failed attempt (timeout,
        refused) makes redis-py read the slot map again (``CLUSTER SLOTS``, one connect and
        request per node at most, the failed node last) before the call raises, and so does
        every 5th ``MOVED`` (``reinitialize_steps``); one more such read is what a call may
        wait for another thread's (they take turns); a ``CLUSTERDOWN`` sleeps 0.25 s first.
        A multi-key call (:meth:`get_list`, :meth:`delete_many`) sends one pipeline per
        master, one after the other, and follows redirections the same number of times: up
        to ``1 + redirects`` rounds of at most one pipeline per node each (0.05 s asleep
        between two after a ``TRYAGAIN``), and one slot map read after a failure. The bound
        is the
        larger of the two, times redis-py's attempts (1 + its retries: 0 from
        :meth:`cluster`)."""
        t, c = self.timeout, self.connect_timeout
        if not isinstance(t, (int, float)) or not isinstance(c, (int, float)):
            return None
        if self.cluster_client is not None:
            return self._cluster_bound(t, c)
        ckw = self.client.connection_pool.connection_kwargs
        return self._bound(t, c, ckw, ckw.get("retry"))

    def _cluster_bound(self, t: float, c: float) -> float:
        cc = self.cluster_client
        ckw = cc.nodes_manager.connection_kwargs
        request = c + t * (1 + self._handshake(ckw))
        nodes = max(1, len(cc.nodes_manager.startup_nodes), len(cc.nodes_manager.nodes_cache))
        refresh = nodes * request
        attempts = max(1, int(cc.RedisClusterRequestTTL))
        steps = max(1, int(getattr(cc, "reinitialize_steps", 5) or 5))
        one = attempts * (request + t + 0.05) + (2 + attempts // steps) * refresh + 0.25
        multi = attempts * (nodes * request + 0.05) + 2 * refresh  # (ASKING: in the pipeline)
        retry = cc.retry
        retries = retry.get_retries() if retry is not None else 0
        backoff = getattr(getattr(retry, "_backoff", None), "_cap", 0.0) or 0.0
        return round(max(one, multi) * (1 + retries) + backoff * retries, 6)

    @staticmethod
    def _handshake(ckw: dict[str, Any]) -> int:
        """Requests redis-py sends on a new connection before the caller's."""
        handshake = 0
        if ckw.get("password") or ckw.get("username") or ckw.get("protocol") in (3, "3"):
            handshake += 1
        if ckw.get("db"):
            handshake += 1
        if ckw.get("client_name"):
            handshake += 1
        driver = ckw.get("driver_info", ckw.get("lib_name"))
        if driver is not None:
            handshake += 2
        return handshake

    def _bound(self, t: float, c: float, ckw: dict[str, Any], retry: Any) -> float:
        once = c + t * (1 + self._handshake(ckw))
        retries = retry.get_retries() if retry is not None else 0
        backoff = getattr(getattr(retry, "_backoff", None), "_cap", 0.0) or 0.0
        return round(once * (1 + retries) + backoff * retries, 6)

    # -- the calls ----------------------------------------------------------------------------

    def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        """``client.<method>(*args, **kw)``, redis-py's errors raised as ServerErrors."""
        return self._run(getattr(self.client, method), *args, **kw)

    def _run(self, fn: Any, *args: Any, **kw: Any) -> Any:
        """``fn(*args, **kw)``, redis-py's errors raised as ServerErrors."""
        e = self._errors
        try:
            return fn(*args, **kw)
        except e.RedisClusterException as x:  # no slot map, or keys in two slots
            raise ConnectionClosed(f"redis {self.address}: {x}") from x
        except e.TimeoutError as x:
            raise ServerTimeout(f"redis {self.address}: {x}") from x
        except e.AuthenticationError as x:
            raise ServerUnreachable(f"redis {self.address}: {x}") from x
        except e.ConnectionError as x:
            if "certificate" in str(x).lower() or "ssl" in str(x).lower():
                raise TlsHandshakeFailed(f"redis {self.address}: {x}") from x
            raise ConnectionClosed(f"redis {self.address}: {x}") from x
        except e.ResponseError as x:
            raise ServerReplyError(f"redis {self.address}: {x}") from x
        except e.RedisError as x:
            raise ProtocolError(f"redis {self.address}: {x}") from x

    def _eval(self, script: str, key: str, *args: Any) -> Any:
        return self._call("eval", script, 2, key, self._lease(key), *args)

    # -- a cluster's multi-key calls ------------------------------------------------------------

    def _pipelined(self, command: str, keys: list[str]) -> list[Any]:
        """``command <key>`` for each of ``keys``, one pipeline per master (one round trip
        each, masters one after the other). A key answered with ``MOVED`` (its slot's new
        owner noted in the slot map), ``ASK`` (sent again after ``ASKING``) or ``TRYAGAIN``
        is sent again in a next round, ``1 + redirects`` rounds at most.

        One command per key, not one ``MGET`` per slot: keys spread over 16,384 slots, so a
        call's keys are in as many slots as there are keys, and pipelined single-key
        commands cost the same round trips — but a slot being migrated answers a multi-key
        command ``TRYAGAIN`` as long as its keys are split between the two nodes, a
        single-key one never (it is ``ASK``-ed to the node holding it). Our own pipelines,
        not redis-py's ``mget_nonatomic``: redis-py's cluster pipeline sends each command
        that met a timeout or a redirection again alone, with its own redirections and slot
        map reads, so its time grows with the number of keys; here it grows with the number
        of masters only. A master that fails raises (after the slot map is read again, the
        failed node last, as redis-py does)."""
        cc, e = self.cluster_client, self._errors
        nm = cc.nodes_manager
        slot = cc.keyslot
        out: list[Any] = [None] * len(keys)
        todo: dict[int, str | None] = dict.fromkeys(range(len(keys)))  # -> the ASK target
        last: Exception | None = None
        for _ in range(max(1, int(cc.RedisClusterRequestTTL))):
            if not todo:
                break
            by_node: dict[str, tuple[Any, list[tuple[int, bool]]]] = {}
            for n, ask in todo.items():
                node = nm.get_node(node_name=ask) if ask else None
                if node is None:
                    node, ask = nm.get_node_from_slot(slot(keys[n])), None
                by_node.setdefault(node.name, (node, []))[1].append((n, ask is not None))
            todo = {}
            for name, (node, jobs) in by_node.items():
                pipe = cc.get_redis_connection(node).pipeline(transaction=False)
                for n, asking in jobs:
                    if asking:
                        pipe.execute_command("ASKING")
                    pipe.execute_command(command, keys[n])
                try:
                    replies = iter(pipe.execute(raise_on_error=False))
                except (e.ConnectionError, e.TimeoutError):
                    # the slot map read again (a failover's new master), the error kept
                    with contextlib.suppress(e.RedisError, e.RedisClusterException):
                        nm.initialize(last_failed_node_name=name)
                    raise
                for n, asking in jobs:
                    if asking:
                        next(replies)
                    got = next(replies)
                    if isinstance(got, e.AskError):
                        todo[n], last = f"{got.host}:{got.port}", got
                    elif isinstance(got, e.MovedError):
                        nm.move_slot(got)
                        todo[n], last = None, got
                    elif isinstance(got, e.TryAgainError):
                        todo[n], last = None, got
                    elif isinstance(got, Exception):
                        raise got
                    else:
                        out[n] = got
            if todo and isinstance(last, e.TryAgainError):
                time.sleep(0.05)
        if todo:
            raise e.ResponseError(f"{command}: still redirected after "
                                  f"{cc.RedisClusterRequestTTL} attempts ({last})")
        return out

    def _mget(self, keys: list[str]) -> list[bytes | None]:
        if self.cluster_client is None:
            return self._call("mget", keys)  # type: ignore[no-any-return]
        return self._run(self._pipelined, "GET", keys)  # type: ignore[no-any-return]

    def _read_item_size_max(self) -> int:
        got = self._call("config_get", "proto-max-bulk-len")
        return int(got["proto-max-bulk-len"])

    def check_size(self, key: str, value: bytes) -> None:
        """Raises :class:`ValueTooLarge` over Redis's ``proto-max-bulk-len`` (512 MB unless
        set lower; read once with ``CONFIG GET``, which a managed Redis may refuse: then
        the server's own refusal says it)."""
        if len(value) <= _SMALLEST_LIMIT:
            return
        limit = self.item_size_max()
        if limit is not None and len(value) > limit:
            raise ValueTooLarge(key, len(value), limit, server="redis")

    def get_multi(self, keys: list[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        return {k: v for k, v in zip(keys, self._mget(keys)) if v is not None}

    def get_list(
        self, keys: list[str], strip: bytes | None = None,
    ) -> tuple[list[bytes | None], int, list[int], int]:
        if not keys:
            return [], 0, [], 0
        values = self._mget(keys)
        others: list[int] = []
        found = stripped = 0
        cut = len(strip) if strip else 0
        for n, v in enumerate(values):
            if v is None:
                continue
            found += 1
            if cut and v[:cut] == strip:
                stripped += len(v)
                values[n] = v[cut:]
            else:
                others.append(n)
        return values, found, others, stripped

    def _store(self, key: str, value: bytes, ttl: int, only_new: bool) -> bool:
        self.check_size(key, value)
        try:
            return bool(self._eval(_SET, key, value, max(int(ttl), 0), "1" if only_new else "0"))
        except ServerReplyError as x:
            if "max bulk" in str(x) or "too large" in str(x).lower():
                raise ValueTooLarge(key, len(value), None, server="redis") from x
            raise

    def set(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        return self._store(key, value, ttl, False)

    def add(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        return self._store(key, value, ttl, True)

    def delete(self, key: str) -> bool:
        if self.cluster_client is not None:  # two single-key UNLINKs (see _pipelined)
            return any(self._run(self._pipelined, "UNLINK", [key, self._lease(key)]))
        return bool(self._call("unlink", key, self._lease(key)))

    def delete_many(self, keys: list[str]) -> None:
        # One UNLINK for the keys and their leases: one round trip.
        if not keys:
            return
        if self.cluster_client is None:
            self._call("unlink", *keys, *map(_lease_key, keys))
            return
        # one UNLINK per key and per lease key (see _pipelined), one pipeline per master
        self._run(self._pipelined, "UNLINK", [*keys, *map(self._lease, keys)])

    def incr_or_add(self, key: str) -> int:
        return int(self._call("incr", key))

    # -- leases -------------------------------------------------------------------------------

    def lease_get(self, key: str, lease_ttl: int) -> Lease:
        token = _LEASE_BIT | secrets.randbits(60)
        got = self._eval(_LEASE_GET, key, token, int(lease_ttl * 1000))
        if got[0] == 1:
            return Lease(value=got[1]) if got[1] else Lease()
        if got[0] == 2:
            return Lease(win=True, cas=token)
        return Lease(filling=True)

    def lease_peek(self, key: str) -> Lease | None:
        value, lease = self._mget([key, self._lease(key)])
        if value:
            return Lease(value=value)
        if lease is not None:
            return Lease(filling=True)
        return None if value is None else Lease()

    @staticmethod
    def _owner_args(cas: int) -> tuple[str, str]:
        return ("L", str(cas)) if cas >= _LEASE_BIT else ("C", format(cas, "015x"))

    def lease_set(self, key: str, value: bytes, flags: int, ttl: int, cas: int) -> bool:
        self.check_size(key, value)
        try:
            return bool(self._eval(_LEASE_SET, key, *self._owner_args(cas), value,
                                   max(int(ttl), 0)))
        except ServerReplyError as x:
            if "max bulk" in str(x) or "too large" in str(x).lower():
                raise ValueTooLarge(key, len(value), None, server="redis") from x
            raise

    def lease_release(self, key: str, cas: int) -> None:
        self._eval(_LEASE_RELEASE, key, *self._owner_args(cas))

    def get_cas(self, key: str) -> tuple[bytes, int, int, int] | None:
        got = self._eval(_GET_CAS, key)
        if not got or not got[0]:
            return None
        value, pttl = got
        # Seconds left, rounded up: Redis expires to the millisecond (memcached's whole-second
        # clock is why a claim wants 2 s left), and a claim keeps the expiry (KEEPTTL).
        return value, 0, _version(value), (-1 if pttl < 0 else -(-int(pttl) // 1000))

    def set_cas(self, key: str, value: bytes, flags: int, ttl: int, cas: int) -> int | None:
        self.check_size(key, value)
        if cas >= _LEASE_BIT or not self._eval(_SET_CAS, key, format(cas, "015x"), value):
            return None
        return _version(value)

    def close(self) -> None:
        """Closes the client's connections if this tier made it (a client given is left to
        its owner)."""
        if self._owned:
            self.client.close()
