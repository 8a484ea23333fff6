"""``cachelab replay``: run a request trace through the real :mod:`cachelab.tiered` cache on a
real memcached, and compare each request's measured added time with a prediction built the way
``simulate`` builds its own — plus the library's own costs, term by term.

Steps (:func:`replay`):

1. **Load the catalog** into memcached: every item as a value of its size (random bytes in the
   tiered cache's ``raw`` format), under a per-run prefix; everything is deleted at the end.
2. **Measure**: for each strategy, one :class:`~cachelab.tiered.TieredCache` per app instance
   (its own L1, one memcached connection per strategy), requests in time order. The training
   window is run first, untimed, to warm LRUs (``fixed:`` pins its hot set — the items most
   training requests touch, as the simulator picks them — and loads it before the
   evaluation). Each evaluated request runs in a request scope; at its first topic a prefetch
   strategy calls ``prefetch_tree(topic, children, depth)``; every touch is a ``get``. The
   request's added time is the wall time of all of that; the part inside L2 reads, the
   *think time* before each L2 read (how long since this process's previous read ended) and
   the cache's own counters (L2 calls per request, L1 hits) are recorded too.
3. **Model**, for each strategy:

   * the **memcached model**: a latency profile measured through the same read the tiered
     cache makes (the tier's ``get_list``, on the strategy's own connection, through the same
     :class:`~cachelab.replay.driver.GapTier`; gets at percentiles of the touched sizes, and
     for prefetch strategies multi-gets by key count at the catalog's mean size), with think
     time before each sample drawn from the gaps that strategy's reads had.
     ``profile_mode="interleaved"`` (default): a few after each of the strategy's requests;
     ``"slices"``: a slice's worth of samples after each of the ``slices`` slices.
     (:func:`cachelab.profile.profile_via_tier` measures the same outside replay.)
     The profile keeps the order its samples came in (a rank sequence, one segment per
     slice), and the simulator's draws within a request follow it (``sequence=False``:
     independent draws; the other prediction is computed too and reported as
     ``alternative``).
   * the **library's per-touch costs** (:func:`calibrate`; in ``interleaved`` mode one or two
     crafted requests after each of the strategy's requests, else after each slice),
     measured in this process on the same kind of L1 by timing crafted requests through the
     same request function: a request, a touch answered by the request scope, an L1 hit, the
     library part of a single-key get, and ``prefetch_tree`` (per call, per node walked, per
     key fetched).

4. **Predict** per request: ``simulate``'s memcached time (the simulator's ``request_costs``
   with the strategy's profile as its model, several seeded draws) plus the library
   terms — each unit cost times how often the request pays it, counted by the simulator
   itself (``request_costs`` gives each request's L1 hits, gets, multi-get keys and the items
   its prefetch walked). The real cache's own counters are checked against the simulator's:
   L1 hits in total, round trips in total and request by request.

What replay takes from the simulator rather than re-implementing it: how a strategy reads
(:func:`parse`, through ``_core.Strategy``), the fixed set (``_core.fixed_set``: the items
most training requests touch, ties by index, as the simulator pins them), prefetch walks
(``RequestTrace.descendants``) and every per-request count.

The package, one job per module: :mod:`~cachelab.replay.spec` (what to run),
:mod:`~cachelab.replay.driver` (the real tiered cache, request by request),
:mod:`~cachelab.replay.sampler` (each strategy's profile), :mod:`~cachelab.replay.calibrate`
(the library's unit costs), :mod:`~cachelab.replay.compare` (measured vs predicted),
:mod:`~cachelab.replay.result` (``replay.json``, ``replay.csv``, the table),
:mod:`~cachelab.replay.engine` (:func:`replay` itself) and :mod:`~cachelab.replay.verb`
(``run``, the verb's one entry).

Nothing is fitted to the measured request times: the profile and the unit costs come from
separate measurements in the same process and on the same server.
"""

from __future__ import annotations

from cachelab.replay.calibrate import TERMS, calibrate
from cachelab.replay.compare import PERCENTILES, TOLERANCE
from cachelab.replay.engine import (
    SERVER_THREADS,
    SYNTH_PRESET,
    SYNTHETIC,
    SYNTHETIC_LIMIT,
    SYNTHETIC_QUICK,
    load_trace,
    replay,
    synthetic,
)
from cachelab.replay.result import SCHEMA, SCHEMA_VERSION, ReplayResult, render
from cachelab.replay.spec import LIMITS, ReplaySpec, default_strategies, parse
from cachelab.replay.verb import run

__all__ = ["LIMITS", "PERCENTILES", "SCHEMA", "SCHEMA_VERSION", "SERVER_THREADS", "SYNTHETIC",
           "SYNTHETIC_LIMIT", "SYNTHETIC_QUICK", "SYNTH_PRESET", "TERMS",
           "TOLERANCE", "ReplayResult", "ReplaySpec", "calibrate", "default_strategies",
           "load_trace", "parse", "render", "replay", "run", "synthetic"]
