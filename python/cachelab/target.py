"""What a verb drives: one :class:`Target`, built once from the shared flags (the CLI's
``target_from``) and handed to every verb that touches a server.

A target is one of

* a server (``host:port`` or ``unix:/path``): :attr:`Target.servers` holds its address;
* a pool (``host:port[:weight]`` members, :attr:`Target.servers`), with its key distribution
  and member failure settings (None: the verb's, or its spec's, defaults);
* a proxy (twemproxy, :attr:`Target.proxy`) with the servers behind it
  (:attr:`Target.servers`: their stats are read and their room checked);
* a private memcached cachelab starts from :attr:`Target.options` (no server given), or a
  private redis-server when the target speaks RESP (:class:`~cachelab.servers.PrivateRedis`);
* a private pool of :attr:`Target.private_pool` memcached servers (load's failure drills),
  optionally behind a private twemproxy (:attr:`Target.private_proxy`) — redis-servers
  when the target speaks RESP;
* any of the servers given as Redis or Valkey (:attr:`Target.resp`, the login: a
  ``redis://`` or ``rediss://`` URL given as the server, or ``--protocol resp``);
* a Redis Cluster (:attr:`Target.cluster`): the servers given are seed nodes; its masters,
  read from the first seed that answers, are driven as a pool whose keys go by hash slot;

optionally driven from Ray agents (:attr:`Target.ray`). :meth:`Target.open` opens it —
starts the private server, pool or proxy, stops them when the block ends — and yields the
:class:`Live` target: the address(es) to drive, the members, the servers behind a proxy,
the facts recorded with the result. The room check (:mod:`cachelab.capacity`), the eviction
watch and the stats deltas read :meth:`Live.checked`: the servers that hold the keys.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import cachelab._core as _core
from cachelab.errors import CachelabError, ServerUnreachable, UsageError
from cachelab.pool import parse_server
from cachelab.proxies import PrivateTwemproxy
from cachelab.raycluster import RayOptions
from cachelab.resp import RespLogin, is_url, parse_url
from cachelab.servers import (
    DEFAULT_THREADS,
    PrivateMemcached,
    PrivateRedis,
    ServerOptions,
    private_pool,
    private_redis_pool,
    serve,
)
from cachelab.tls import TlsOptions, core_tls

__all__ = ["POOL_SETTINGS", "Live", "Target", "TargetLike", "as_target", "recorded"]

#: The pool settings a target may carry (the CLI's ``--distribution``,
#: ``--member-failure-limit``, ``--member-retry``), by their spec field names.
POOL_SETTINGS = ("distribution", "member_failure_limit", "member_retry")


@dataclass(frozen=True)
class Target:
    """What a verb drives (see the module's description). The default, ``Target()``, is a
    private memcached with the default :class:`~cachelab.servers.ServerOptions`."""

    #: The servers given, in order: one address, a pool's members, or the servers behind
    #: :attr:`proxy`; empty for a private server or pool.
    servers: tuple[str, ...] = ()
    #: A proxy (``host:port``) every request goes to; :attr:`servers` are behind it.
    proxy: str | None = None
    #: The private memcached (or each private pool member) to start when none is given.
    options: ServerOptions = field(default_factory=ServerOptions)
    #: The pool settings given (``distribution``, ``member_failure_limit``,
    #: ``member_retry``): they override a spec's.
    pool: Mapping[str, Any] = field(default_factory=dict)
    #: A private pool of this many servers, started for the run (load's failure drills).
    private_pool: int | None = None
    #: With :attr:`private_pool`: a private twemproxy in front of it.
    private_proxy: bool = False
    #: Drive it from Ray agents (load, scale) or fan out on Ray (simulate).
    ray: RayOptions | None = None
    #: What a result records about a server the caller opened and hands on (``run``'s
    #: private memcached, to each step: ``{"private": True, "argv": [...]}``; see
    #: :meth:`Live.handed`): a verb records them, and treats the server as its own private
    #: one (no room check), but neither starts nor stops it.
    facts: Mapping[str, Any] = field(default_factory=dict)
    #: The servers speak RESP (Redis, Valkey): the login each connection sends (user,
    #: password, database; TLS for ``rediss://``). None: memcached. Servers given as
    #: ``redis://`` URLs set it (and are kept as ``host:port``).
    resp: RespLogin | None = None
    #: The servers given are seed nodes of a Redis Cluster (``load --cluster``): its masters
    #: are read from them when the target opens, and keys go to each slot's master.
    cluster: bool = False

    def __post_init__(self) -> None:
        urls = [s for s in self.servers if is_url(s)]
        if urls:
            if len(urls) != len(self.servers):
                raise UsageError("give every server as a redis:// URL, or none")
            parsed = [parse_url(u) for u in urls]
            logins = {login for _, login in parsed}
            if len(logins) > 1:
                raise UsageError("the redis:// servers of a pool share one login: give "
                                 "each the same user, password, database and scheme")
            if self.proxy is not None and parsed[0][1].tls:
                raise UsageError("twemproxy speaks no TLS: give rediss:// servers without "
                                 "--proxy, or redis:// ones behind it")
            if self.proxy is not None and parsed[0][1].db is not None:
                raise UsageError("a RESP run through a proxy cannot choose a database: "
                                 "twemproxy closes the connection on SELECT (set redis_db in "
                                 "its pool's configuration instead)")
            object.__setattr__(self, "servers", tuple(a for a, _ in parsed))
            object.__setattr__(self, "resp", parsed[0][1])
        object.__setattr__(self, "servers", tuple(self.servers))
        unknown = sorted(set(self.pool) - set(POOL_SETTINGS))
        if unknown:
            raise UsageError(f"pool setting {unknown[0]!r}: expected one of "
                             f"{', '.join(POOL_SETTINGS)}")
        if self.proxy is not None and not self.servers:
            raise UsageError("a proxy needs the servers behind it, so their stats can be read")
        if self.private_pool is not None and (self.servers or self.proxy):
            raise UsageError("--private-pool starts its own servers: give it without "
                             "--server, --servers-file or --socket")
        if self.private_pool is not None and (self.ray is not None or self.proxy):
            raise UsageError("--private-pool is for a local run straight to the pool: not with "
                             "--ray or --proxy")
        if self.private_proxy and self.private_pool is None:
            raise UsageError("--private-proxy goes with --private-pool")
        if self.cluster:
            self._check_cluster()

    def _check_cluster(self) -> None:
        """A Redis Cluster target's contradictions, each refused in one line."""
        if self.proxy is not None:
            raise UsageError("--cluster sends each request to its slot's master itself: "
                             "not with --proxy")
        if "distribution" in self.pool:
            raise UsageError("--cluster places keys by hash slot, as the cluster does: not "
                             "with --distribution")
        if self.private_pool is not None or not self.servers:
            raise UsageError("--cluster needs a seed node of the cluster: --server "
                             "redis://HOST:PORT (its masters are read from it)")
        if self.resp is not None and self.resp.db not in (None, 0):
            raise UsageError(f"a Redis Cluster has only database 0, not {self.resp.db}: "
                             "drop the /DB from the URL")
        if self.resp is None:  # a HOST:PORT seed: a cluster speaks RESP
            object.__setattr__(self, "resp", RespLogin())

    @classmethod
    def of(cls, server: str | Sequence[str] | None = None, *,
           behind: Sequence[str] | None = None,
           options: ServerOptions | None = None, **more: Any) -> Target:
        """The target of the library's older calls: ``server`` (an address, a pool's members,
        or None for a private one) and ``behind`` (``server`` is then a proxy)."""
        opts = options or ServerOptions()
        if behind is not None:
            if server is None or (not isinstance(server, str) and len(server) != 1):
                raise UsageError("a run through a proxy sends to the proxy alone: give one "
                                 "server (the proxy) and the servers behind it")
            proxy = server if isinstance(server, str) else server[0]
            return cls(servers=tuple(behind), proxy=proxy, options=opts, **more)
        given = () if server is None else (server,) if isinstance(server, str) else server
        return cls(servers=tuple(given), options=opts, **more)

    # -- what it is ----------------------------------------------------------------------------

    @property
    def private(self) -> bool:
        """Whether cachelab starts what is driven (no server and no proxy given)."""
        return not self.servers and self.proxy is None

    @property
    def is_pool(self) -> bool:
        """Whether requests are spread over several members by the client (not a proxy)."""
        return self.proxy is None and (len(self.servers) > 1 or bool(self.private_pool))

    @property
    def address(self) -> str | None:
        """The one address requests go to: the proxy, the one server; None for a pool or a
        private server."""
        if self.proxy is not None:
            return self.proxy
        return self.servers[0] if len(self.servers) == 1 else None

    @property
    def members(self) -> list[str] | None:
        """The servers given, as the library's older ``server=`` took them: None (private),
        ``[address]``, or a pool's members; behind a proxy, the servers behind it."""
        return list(self.servers) if self.servers else None

    @property
    def behind(self) -> list[str] | None:
        """The servers behind :attr:`proxy` (None without one)."""
        return list(self.servers) if self.proxy is not None else None

    def server(self) -> str | list[str] | None:
        """What the library's older ``server=`` argument took: the proxy, one address, a
        pool's members, or None."""
        if self.proxy is not None:
            return self.proxy
        if len(self.servers) == 1:
            return self.servers[0]
        return list(self.servers) or None

    def with_pool(self, spec: Any) -> Any:
        """``spec`` (a dataclass with the pool fields) with this target's pool settings."""
        return dataclasses.replace(spec, **self.pool) if self.pool else spec

    def local(self) -> Target:
        """This target without Ray: what each agent, or a run on this machine, opens."""
        return dataclasses.replace(self, ray=None)

    # -- opening it ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def open(self, *, memory_mb: int = 0, threads: int | None = None,
             default_threads: int = DEFAULT_THREADS, item_size_max: str | None = None,
             spares: int = 0, proxy: Mapping[str, Any] | None = None,
             cpus: str | None = None) -> Iterator[Live]:
        """Opens the target for a run: a private memcached (with at least ``memory_mb``, and
        ``threads``/``item_size_max``/``default_threads`` as :func:`~cachelab.servers.serve`
        takes them), or a private pool (:attr:`private_pool` servers, and ``spares`` more
        for members added during the run) with, when :attr:`private_proxy`, a private
        twemproxy in front of it made with the keywords ``proxy`` (PrivateTwemproxy's);
        ``cpus`` pins the private memcached (``taskset -c`` style; ``scale`` on a small
        machine, :mod:`cachelab.scale.pinning`); stopped when the block ends, also on an
        error or Ctrl-C. A server, pool or proxy that was given is yielded as it is."""
        if self.cluster:
            yield self._open_cluster()
            return
        with contextlib.ExitStack() as stack:
            owned: list[PrivateMemcached] = []
            spare: list[str] = []
            given, hidden = list(self.servers), None
            twemproxy = None
            if self.proxy is not None:
                given, hidden = [self.proxy], list(self.servers)
            if self.private_pool is not None:
                # over RESP, private redis-servers (the drills stop, kill and restart them)
                start = private_redis_pool if self.resp is not None else private_pool
                owned = stack.enter_context(start(
                    self.private_pool + spares, self.options, memory_mb=memory_mb))
                given = [mc.address for mc in owned[:self.private_pool]]
                spare = [mc.address for mc in owned[self.private_pool:]]
                if self.private_proxy:
                    twemproxy = stack.enter_context(PrivateTwemproxy(
                        owned[:self.private_pool] if self.resp is None else given,
                        **dict(proxy or {}),
                        **({"redis": True} if self.resp is not None else {})))
                    hidden, given = given, [twemproxy.address]
            first = _address(given[0]) if given else None
            if first is None and self.resp is not None:  # a private Redis
                redis = stack.enter_context(PrivateRedis(
                    memory_mb=max(self.options.memory_mb, memory_mb),
                    extra_args=self.options.extra_args))
                yield Live(address=redis.address, given=[], pid=redis.pid,
                           facts={**self.facts, "private": True, "argv": redis.argv})
                return
            served = stack.enter_context(serve(
                first, self.options, memory_mb=memory_mb, threads=threads,
                default_threads=default_threads, item_size_max=item_size_max, cpus=cpus))
            facts = {**served.facts, **self.facts}
            if owned:
                facts.update(private=True, argv=owned[0].argv)
            yield Live(address=served.address, given=given, behind=hidden, pid=served.pid,
                       facts=facts, private=served.private, owned=owned, spares=spare,
                       proxy=twemproxy)


    def _open_cluster(self) -> Live:
        """The cluster's masters as a pool (:attr:`Live.slots`: the slots each serves), read
        from the first seed that answers; a ServerUnreachable naming each seed otherwise."""
        login = self.resp or RespLogin()
        failures = []
        for seed in self.servers:
            try:
                masters = cluster_masters(seed, login)
            except CachelabError as e:
                failures.append(f"{seed}: {e}")
                continue
            slots = [(start, end, i) for i, (_, ranges) in enumerate(masters)
                     for start, end in ranges]
            return Live(address=masters[0][0], given=[a for a, _ in masters],
                        facts={**self.facts, "private": False,
                               "cluster": {"seed": seed, "masters": len(masters)}},
                        slots=slots)
        raise ServerUnreachable("could not read the cluster's slot map: " + "; ".join(failures))


def cluster_masters(seed: str, login: RespLogin, *,
                    timeout: float = 2.0) -> list[tuple[str, list[tuple[int, int]]]]:
    """A Redis Cluster's masters, from ``seed`` (``host:port``): each one's ``host:port``
    and the slot ranges it serves (inclusive), in the order of their first slot."""
    tls = core_tls(TlsOptions()) if login.tls else None
    try:
        return list(_core.load_cluster_masters(
            seed, user=login.user, password=login.password, connect_timeout=timeout,
            timeout=timeout, tls=tls))
    except CachelabError:
        raise
    except Exception as e:  # (a binding error that is not one of ours)
        raise ServerUnreachable(str(e)) from None


#: What a verb's ``target`` argument takes: a :class:`Target`, an address, a pool's members,
#: or None (a private memcached).
TargetLike = Union["Target", str, Sequence[str], None]


def as_target(target: TargetLike) -> Target:
    """A verb's ``target`` argument as a :class:`Target`: None (a private memcached), an
    address (``"127.0.0.1:11211"``), a pool's members, or a Target as it is."""
    if target is None:
        return Target()
    if isinstance(target, Target):
        return target
    return Target.of(target)


@dataclass
class Live:
    """An opened :class:`Target`: what a run sends to while the block of
    :meth:`Target.open` lasts."""

    #: The first address requests go to (the one server, the proxy, a pool's first member,
    #: the private memcached).
    address: str
    #: The servers given or started, as the engine takes them (``host:port[:weight]``; the
    #: proxy alone through one); empty for a private memcached.
    given: list[str]
    #: The servers behind a proxy (None without one).
    behind: list[str] | None = None
    #: The private memcached's pid (None for a server we were given, or a private pool).
    pid: int | None = None
    #: What the result records about the server (``private``, the private ``argv``).
    facts: dict[str, Any] = field(default_factory=lambda: {"private": False})
    #: The private memcached itself (None otherwise).
    private: PrivateMemcached | None = None
    #: The private pool's servers (the only ones a failure drill may touch), spares last.
    owned: list[PrivateMemcached] = field(default_factory=list)
    #: The spare private servers' addresses (``--add new``).
    spares: list[str] = field(default_factory=list)
    #: The private twemproxy (None otherwise).
    proxy: PrivateTwemproxy | None = None
    #: A Redis Cluster: the slot ranges each master of :attr:`given` serves, as
    #: ``(start, end, index)`` (None otherwise).
    slots: list[tuple[int, int, int]] | None = None

    def handed(self) -> Target:
        """This opened server as the target of the calls made inside the block (``run``'s
        steps): its address and :attr:`facts`, so a private one is recorded as private,
        started and stopped by the block alone."""
        return Target(servers=(self.address,), facts=dict(self.facts))

    @property
    def addresses(self) -> list[str]:
        """Every address requests go to: the members given, else the one served."""
        return self.given or [self.address]

    @property
    def checked(self) -> list[str]:
        """The servers that hold the keys, whose room is checked, evictions watched and
        stats read: the servers behind a proxy, else the ones driven."""
        return self.behind or self.addresses


def recorded(target: Target) -> dict[str, Any]:
    """What a result's ``server`` records from a server handed on (:attr:`Target.facts`):
    whether it is private, and the private server's command line."""
    return {k: v for k, v in target.facts.items() if k in ("private", "argv")}


def _address(member: str) -> str:
    """A member's address without its weight (``unix:/path``, or what does not parse, as
    given: the engine refuses it in its own words)."""
    try:
        return parse_server(member).address
    except UsageError:
        return member
