"""L2 over a memcached pool: :class:`MemcachedPool`; over a pool of Redis servers:
:class:`RedisPool` (the same routing, lanes and breakers, each member a
:class:`~cachelab.tiered.RedisTier`).

Each key lives on the member :func:`cachelab.pool.distribution` chooses — the member
libmemcached (pylibmc) or pymemcache's ``HashClient`` would choose with the same distribution
and member list (docs/pools.md) — so a cache over a pool shares memcached with applications
that use those clients. Each member is a :class:`~cachelab.tiered.MemcachedTier` (the Rust
client, one connection per thread, leases).

Used by a :class:`~cachelab.tiered.TieredCache`, every member gets a circuit breaker and a
queue of owed deletes of its own (a :class:`~cachelab.tiered.lanes.Lane`): a member that fails
``failures`` consecutive times (the cache's ``breaker`` settings) is *down* for
``reset_after`` seconds, then tried again. Its keys are **not** remapped to other members
while it is down: they are read past memcached (from the loader), their writes are queued as
deletes and sent when it is back. Remapping would let a member that comes back serve values
written before the outage, overwritten elsewhere meanwhile (docs/tiered.md, "Pools").

Used directly as a :class:`~cachelab.tiered.Tier`, a pool sends each key to its member and
splits multi-key calls (:meth:`get_multi`, :meth:`get_list`, :meth:`delete_many`) into one
call per member, in member order; a member's failure raises its ``ServerError`` (no breakers
here: those are the cache's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cachelab import pool as _pool
from cachelab.errors import UsageError
from cachelab.tiered.backends import Lease, MemcachedTier, Tier
from cachelab.tiered.redis import RedisTier
from cachelab.tls import TlsOptions

__all__ = ["MemcachedPool", "RedisPool"]


class MemcachedPool(Tier):
    """A memcached pool as one L2: ``servers`` are ``host:port[:weight]`` specs or
    :class:`cachelab.pool.Server` (in order: with ``modula`` the order decides where keys go),
    or the path of a servers file (:func:`cachelab.pool.read_servers_file`); ``distribution``
    one of :data:`cachelab.pool.DISTRIBUTIONS` (``ketama``, libmemcached's weighted ketama, by
    default). The other options are each member's :class:`~cachelab.tiered.MemcachedTier`'s;
    ``tier``, a function of a member's :class:`cachelab.pool.Server`, makes each member instead
    (any :class:`~cachelab.tiered.Tier`: :class:`RedisPool` makes RedisTiers).

    ::

        TieredCache(MemcachedPool(["10.0.0.1:11211", "10.0.0.2:11211:2"]), LRUMemory(...),
                    prefix="myapp", breaker=CircuitBreaker(failures=3, reset_after=1.0))
    """

    supports_leases = True
    delete_batch = 500

    def __init__(
        self, servers: Iterable[str | _pool.Server] | str | Path, *,
        distribution: str = "ketama", timeout: float = 0.25, connect_timeout: float = 0.25,
        leases: bool = True, tls: TlsOptions | None = None, item_size_max: int | None = None,
        tier: Callable[[_pool.Server], Tier] | None = None,
    ) -> None:
        if isinstance(servers, (str, Path)):
            members = _pool.read_servers_file(servers)
        else:
            members = [s if isinstance(s, _pool.Server) else _pool.parse_server(s)
                       for s in servers]
        if not members:
            raise UsageError("a memcached pool needs at least one server")
        #: The key -> member map (``cachelab.pool.distribution``); checks the members.
        self.distribution = _pool.distribution(distribution, members)
        self.servers: list[_pool.Server] = members
        self.timeout = timeout
        self.supports_leases = leases
        self._item_limit = item_size_max
        #: One tier per member, in the servers' order: ``tier(server)`` if given (a subclass's
        #: member of another kind: :class:`RedisPool`), else a MemcachedTier.
        self.members: list[Any] = [
            tier(s) if tier is not None else
            MemcachedTier(s.address, timeout=timeout, connect_timeout=connect_timeout,
                          leases=leases, tls=tls, item_size_max=item_size_max)
            for s in members]
        self._one = len(self.members) == 1

    def request_bound_s(self) -> float | None:
        """The longest one request to a member may take: its connect plus request timeout
        (every member has the same)."""
        return self.members[0].request_bound_s()

    @classmethod
    def from_file(cls, path: str | Path, **options: object) -> MemcachedPool:
        """A pool of the members listed in a servers file (one ``host:port[:weight]`` a line,
        ``#`` comments); ``options`` as for the constructor."""
        return cls(_pool.read_servers_file(path), **options)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        specs = ", ".join(s.spec for s in self.servers)
        return f"MemcachedPool([{specs}], distribution={self.distribution.kind!r})"

    # -- routing ----------------------------------------------------------------------------------

    def member_of(self, key: str) -> int:
        """The index (in :attr:`servers`) of the member that holds ``key``."""
        return 0 if self._one else self.distribution.server_for(key)

    def members_of(self, keys: list[str]) -> list[int]:
        """:meth:`member_of` for each of ``keys`` (one call into Rust)."""
        return [0] * len(keys) if self._one else self.distribution.servers_for(keys)

    def split(self, keys: list[str]) -> dict[int, list[int]]:
        """``{member: [positions in keys]}``, members in the order their first key comes."""
        groups: dict[int, list[int]] = {}
        for n, m in enumerate(self.members_of(keys)):
            g = groups.get(m)
            if g is None:
                groups[m] = [n]
            else:
                g.append(n)
        return groups

    def tier_for(self, key: str) -> Any:
        """The member tier that holds ``key``."""
        return self.members[self.member_of(key)]

    # -- Tier, each key on its member -------------------------------------------------------------

    def item_size_max(self) -> int | None:
        """The smallest limit among the members that answered (a value that fits it fits
        every member)."""
        if self._item_limit is not None:
            return self._item_limit
        limits = [lim for lim in (m.item_size_max() for m in self.members) if lim is not None]
        return min(limits) if limits else None

    def get_multi(self, keys: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for m, positions in self.split(keys).items():
            out.update(self.members[m].get_multi([keys[p] for p in positions]))
        return out

    def get_list(
        self, keys: list[str], strip: bytes | None = None,
    ) -> tuple[list[bytes | None], int, list[int], int]:
        values: list[bytes | None] = [None] * len(keys)
        others: list[int] = []
        found = stripped = 0
        for m, positions in self.split(keys).items():
            v, f, o, s = self.members[m].get_list([keys[p] for p in positions], strip)
            for p, x in zip(positions, v):
                values[p] = x
            others.extend(positions[j] for j in o)
            found += f
            stripped += s
        others.sort()
        return values, found, others, stripped

    def set(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        return self.tier_for(key).set(key, value, flags, ttl)

    def add(self, key: str, value: bytes, flags: int, ttl: int) -> bool:
        return self.tier_for(key).add(key, value, flags, ttl)

    def delete(self, key: str) -> bool:
        return self.tier_for(key).delete(key)

    def delete_many(self, keys: list[str]) -> None:
        for m, positions in self.split(keys).items():
            self.members[m].delete_many([keys[p] for p in positions])

    def incr_or_add(self, key: str) -> int:
        return self.tier_for(key).incr_or_add(key)

    def lease_get(self, key: str, lease_ttl: int) -> Lease:
        return self.tier_for(key).lease_get(key, lease_ttl)

    def lease_peek(self, key: str) -> Lease | None:
        return self.tier_for(key).lease_peek(key)

    def lease_set(self, key: str, value: bytes, flags: int, ttl: int, cas: int) -> bool:
        return self.tier_for(key).lease_set(key, value, flags, ttl, cas)

    def lease_release(self, key: str, cas: int) -> None:
        self.tier_for(key).lease_release(key, cas)

    def close(self) -> None:
        for m in self.members:
            m.close()


class RedisPool(MemcachedPool):
    """A client-side pool of Redis (or Valkey) servers as one L2, as :class:`MemcachedPool`
    is of memcached: ``servers`` are ``host:port[:weight]`` specs (or a servers file), each
    key on the member ``distribution`` picks, each member a
    :class:`~cachelab.tiered.RedisTier` (``redis://`` or, ``tls``, ``rediss://``; the same
    ``password``, ``username`` and ``db`` on every member; ``client_kwargs`` to each
    member's ``redis.Redis.from_url``, e.g. ``ssl_ca_certs``), a key's lease key on the key's
    member. Used by a :class:`~cachelab.tiered.TieredCache`, every member gets its own
    breaker and queue of owed deletes, and a down member's keys are read past Redis, never
    remapped: all as for :class:`MemcachedPool` (docs/tiered.md, "Pools").

    ::

        TieredCache(RedisPool(["10.0.0.1:6379", "10.0.0.2:6379"], password=secret),
                    LRUMemory(...), prefix="myapp", breaker=CircuitBreaker(3, 1.0))
    """

    name = "redis-pool"

    def __init__(
        self, servers: Iterable[str | _pool.Server] | str | Path, *,
        distribution: str = "ketama", timeout: float = 0.25, connect_timeout: float = 0.25,
        leases: bool = True, item_size_max: int | None = None, password: str | None = None,
        username: str | None = None, db: int = 0, tls: bool = False, **client_kwargs: Any,
    ) -> None:
        if not isinstance(db, int) or db < 0:
            raise UsageError(f"RedisPool db must be an int >= 0, not {db!r}")
        creds = ""
        if password is not None or username is not None:
            creds = f"{quote(username or '', safe='')}:{quote(password or '', safe='')}@"
        scheme = "rediss" if tls else "redis"

        def member(s: _pool.Server) -> RedisTier:
            return RedisTier(f"{scheme}://{creds}{s.address}/{db}", timeout=timeout,
                             connect_timeout=connect_timeout, leases=leases,
                             item_size_max=item_size_max, **client_kwargs)

        super().__init__(servers, distribution=distribution, timeout=timeout,
                         connect_timeout=connect_timeout, leases=leases,
                         item_size_max=item_size_max, tier=member)
        self.server, self.bound_words = self.members[0].server, self.members[0].bound_words

    def __repr__(self) -> str:
        specs = ", ".join(s.spec for s in self.servers)
        return f"RedisPool([{specs}], distribution={self.distribution.kind!r})"
