"""What a replay keeps in memcached (:func:`replay_writes`), for the check that it fits a
server cachelab did not start (:mod:`cachelab.capacity`): the whole catalog — every item at its
size plus the ``raw`` format's 2-byte header, under ``cachelab:<run>:item:<index>`` — and, for
each strategy, the values its latency profile reads (4 per get size, and the multi-get keys
at the catalog's mean size), kept until the end of the run."""

from __future__ import annotations

from typing import Any

from cachelab.capacity import Writes
from cachelab.profile import tier_cell_writes
from cachelab.replay.driver import Workload, windows
from cachelab.replay.sampler import pool_bytes, profile_cells
from cachelab.replay.spec import ReplaySpec, default_strategies, parse

__all__ = ["RAW_HEADER", "replay_writes"]

#: Bytes the tiered cache's ``raw`` format puts before each value.
RAW_HEADER = 2
#: ``cachelab:`` and 12 hex digits, the run's key prefix.
_PREFIX = 21


def replay_writes(trace: Any, spec: ReplaySpec, work: Workload | None = None) -> Writes:
    """The catalog and every strategy's profile values (``work``: the trace's
    :class:`~cachelab.replay.driver.Workload`, when already built)."""
    work = work or Workload.of(trace)
    w = Writes("replay", "items (the catalog and profile values)",
               sizes_flag="start memcached with a larger -I, or leave out --server to replay "
               "on a private memcached sized for the trace",
               shrink="replay a trace with a smaller catalog (--requests does not shrink the "
               "synthetic one), or leave out --server to replay on a private memcached sized "
               "for it")
    sizes = trace.item_sizes
    key_len = _PREFIX + 6 + len(str(max(0, trace.n_items - 1)))
    for size in sizes.tolist():
        w.add(int(size) + RAW_HEADER, 1, key_len)
    _, _, evaluated = windows(trace, spec.train)
    mean = max(1, int(round(float(sizes.mean())))) if len(sizes) else 1
    for s in spec.strategies or default_strategies(trace.n_items):
        cells = profile_cells(work, parse(s).prefetch_depth, evaluated)
        for size, count in tier_cell_writes(cells["sizes"], cells["key_counts"], mean,
                                            pool_bytes(trace)):
            w.add(size, count, _PREFIX + 24)
    return w
