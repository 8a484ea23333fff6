"""``cachelab.load.run``: the verb's one entry. Where the run comes from (this machine or
Ray agents) and what it drives (a server, a pool, a proxy with the servers behind it, a
private memcached, pool or proxy) are decided here, from the spec and the target."""

from __future__ import annotations

import dataclasses
from typing import Any

from cachelab.load.agents import measure_on_ray
from cachelab.load.engine import measure
from cachelab.load.result import LoadResult
from cachelab.load.spec import LoadSpec
from cachelab.progress import Progress
from cachelab.resp import RespLogin
from cachelab.target import Target, TargetLike, as_target
from cachelab.tls import TlsOptions
from cachelab.units import format_duration_ns

__all__ = ["run"]


def run(spec: LoadSpec, target: TargetLike = None, *,
        progress: Progress | None = None) -> LoadResult:
    """Runs ``spec`` against ``target`` (default: a private memcached; a spec's own
    ``servers`` or ``private_pool`` when the target names none) and returns the result.
    ``progress`` shows the run (its rate, p99 and errors in the label). Raises as
    :func:`cachelab.load.load` does (:class:`~cachelab.errors.Interrupted` with the partial
    result on Ctrl-C). A spec that does not go with the target's pool settings or private
    pool (``--private-proxy --distribution modula``) is refused first, before anything
    starts."""
    spec, target = settle(spec, as_target(target))
    spec.check()
    on_progress = None if progress is None else _shown_on(progress)
    if target.ray is not None:
        return measure_on_ray(spec, target, on_progress=on_progress)
    return measure(spec, target, on_progress=on_progress)


def settle(spec: LoadSpec, target: Target) -> tuple[LoadSpec, Target]:
    """The spec and target of one run: the target's pool settings and private pool in the
    spec (recorded with the result), and the spec's own servers or private pool (a TOML
    spec's) as the target when it names none."""
    spec = target.with_pool(spec)
    if target.resp is not None:  # a redis:// server: RESP, and TLS for rediss://
        spec = dataclasses.replace(spec, protocol="resp", tls=spec.tls or (
            TlsOptions() if target.resp.tls else None))
    elif spec.protocol == "resp":  # --protocol resp with HOST:PORT
        target = dataclasses.replace(target, resp=RespLogin())
    if target.private_pool is not None:
        spec = dataclasses.replace(spec, private_pool=target.private_pool,
                                   private_proxy=target.private_proxy)
    elif target.private and (spec.servers or spec.private_pool is not None):
        target = dataclasses.replace(
            target, servers=tuple(spec.servers or ()), private_pool=spec.private_pool,
            private_proxy=bool(spec.private_proxy))
    return spec, target


def _shown_on(bar: Progress) -> Any:
    """The engine's ``on_progress`` moving ``bar``: done and total, and the last interval's
    rate, p99 and errors in its label."""

    def on_progress(p: Any) -> None:
        bar.total = p.total
        if p.last_rate:
            bar.label = (f"load {p.last_rate / 1000:.1f}k/s "
                         f"p99 {format_duration_ns(p.last_p99_ns, 'µs')}µs"
                         + (f" errors {p.errors}" if p.errors else ""))
        bar.update(p.done)

    return on_progress
