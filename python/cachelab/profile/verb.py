"""``cachelab.profile.run``: the verb's one entry. One server (or a private memcached), a
pool (each member profiled in rounds, :mod:`cachelab.profile.pool`) or a proxy with the
servers behind it: decided here, from the target."""

from __future__ import annotations

from typing import Any

from cachelab.errors import UsageError
from cachelab.profile.cluster import profile_cluster
from cachelab.profile.measure import profile
from cachelab.profile.model import LatencyProfile
from cachelab.profile.pool import ROUNDS, PoolProfile, profile_pool
from cachelab.profile.spec import ProfileSpec
from cachelab.progress import Progress
from cachelab.resp import RespLogin
from cachelab.target import Target, TargetLike, as_target

__all__ = ["run"]

#: The flag of each pool setting, for the refusals below.
_FLAGS = {"member_failure_limit": "--member-failure-limit", "member_retry": "--member-retry",
          "distribution": "--distribution"}


def run(spec: ProfileSpec | None = None, target: TargetLike = None, *,
        progress: Progress | None = None, rounds: int = ROUNDS) -> LatencyProfile | PoolProfile:
    """Profiles ``target`` (default: a private memcached; a private redis-server for a spec
    whose protocol is ``resp``) with ``spec``: one server (a Redis or Valkey when the target
    has a RESP login, ``target.resp``: one server, a pool or twemproxy in redis mode), a pool
    (every member in ``rounds`` rounds, their order rotated; a
    :class:`~cachelab.profile.pool.PoolProfile`), or through a proxy. ``progress`` shows it.
    Raises as :func:`cachelab.profile.measure.profile` and
    :func:`~cachelab.profile.pool.profile_pool` do."""
    spec = spec or ProfileSpec()
    target = as_target(target)
    track = None if progress is None else progress.track
    if target.resp is not None or spec.protocol == "resp":
        login = target.resp or RespLogin()
        if target.cluster:  # each master on its own, its keys under a hash tag of its slots
            _refuse(target, spec, "a Redis Cluster (each master is profiled on its own)")
            if progress is not None:
                progress.label = "profile cluster"
            return profile_cluster(spec, list(target.servers), login, rounds=rounds,
                                   on_progress=track)
        if target.proxy is not None:  # twemproxy in redis mode, the Redis servers behind it
            _refuse(target, spec, "through a proxy (the proxy places the keys)", proxy=True)
            return profile(spec, server=target.proxy, on_progress=track,
                           behind=target.behind, resp=login)
        if target.is_pool:  # each member on its own, in rounds, as for memcached
            _refuse(target, spec, "a pool (each member is profiled on its own)")
            if progress is not None:
                progress.label = "profile pool"
            return profile_pool(spec, list(target.servers),
                                distribution=target.pool.get("distribution") or "ketama",
                                rounds=rounds, on_progress=track, resp=login)
        _refuse(target, spec, "a Redis or Valkey (one server)")
        return profile(spec, server=target.address, server_options=target.options,
                       server_facts=target.facts or None, on_progress=track,
                       resp=target.resp)
    if target.proxy is not None:
        _refuse(target, spec, "through a proxy (the proxy places the keys)", proxy=True)
        return profile(spec, server=target.proxy, server_options=target.options,
                       on_progress=track, behind=target.behind)
    if target.is_pool:
        _refuse(target, spec, "a pool (each member is profiled on its own)", tls=True)
        if progress is not None:
            progress.label = "profile pool"
        return profile_pool(spec, list(target.servers),
                            distribution=target.pool.get("distribution") or "ketama",
                            rounds=rounds, on_progress=track)
    return profile(spec, server=target.address, server_options=target.options,
                   server_facts=target.facts or None, on_progress=track)


def _refuse(target: Target, spec: ProfileSpec, what: str, *, tls: bool = False,
            proxy: bool = False) -> None:
    """UsageError for a setting profiling ``what`` would not use: the member failure
    settings, TLS when ``tls``, and through a proxy the distribution."""
    given: list[tuple[str, Any]] = [(_FLAGS[k], target.pool.get(k))
                                    for k in ("member_failure_limit", "member_retry")]
    if tls:
        given.append(("--tls", spec.tls))
    if proxy:
        given.append(("--distribution", target.pool.get("distribution")))
    named = [flag for flag, value in given if value]
    if named:
        raise UsageError(f"{named[0]}: not for profiling {what}")
