"""``cachelab.tiers.run``: the verb's one entry — the storage-tier benchmark on the
target's memcached (or a private one)."""

from __future__ import annotations

from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.target import TargetLike, as_target, recorded
from cachelab.tiers.engine import tiers
from cachelab.tiers.result import TiersResult
from cachelab.tiers.spec import TiersSpec

__all__ = ["run"]


def run(spec: TiersSpec | None = None, target: TargetLike = None, *,
        progress: Progress | None = None) -> TiersResult:
    """Runs the benchmark ``spec`` against ``target``'s one server (default: a private
    memcached); ``progress`` counts the reads. Raises as :func:`cachelab.tiers.tiers`."""
    target = as_target(target)
    if target.is_pool or target.proxy is not None:
        raise UsageError("tiers measures one server: give one --server")
    result = tiers(spec, server=target.address, server_options=target.options,
                   on_progress=None if progress is None
                   else lambda done, _total: progress.update(done))
    result.server.update(recorded(target))
    return result
