"""Load generation: :func:`load` runs a workload on memcached and returns a :class:`LoadResult`.

The workload is a :class:`LoadSpec`, built in Python, from command-line flags, or from a TOML
file (:meth:`LoadSpec.from_toml`). The run itself is Rust (``cachelab-load``) with the GIL
released: closed loop (``pipeline`` requests outstanding per connection) or open loop (a target
``rate`` with Poisson or evenly spaced arrivals per connection; latency counted from the
intended send time — the *corrected* histogram — and from the actual send — *uncorrected*).

The result (schema ``cachelab.load``, version 2, see ``docs/load.md``) holds the spec, a
per-interval time series, totals over the whole measured run (the headline: every interval
after the warm-up), the stalls (stretches of slow replies, timeouts and connections down),
the steady-state window as extra information, error counts by kind, the server's ``stats``
deltas and, for a server on this machine, its run-queue wait.

Rooms: ``spec`` (the workload and its parsers), ``engine`` (the run, and the one conversion
of the engine's outcome into the result), ``timeline`` (the verdicts that need the time
series: dead time, the rate held in every interval), ``footprint`` (what a run writes, for
the capacity check), ``result`` (the result and its artifacts), ``plots`` (its figure),
``section`` (its part of the report), ``merge`` (the agents' outcomes as one), ``agents``
(the run from many machines on a Ray cluster, docs/scale-out.md) and ``lives`` (a server's
counters over a run, per process when it restarted).
"""

from cachelab.load.agents import load_on_ray
from cachelab.load.engine import (
    DELTA_STATS,
    RATE_BACKLOG,
    load,
    result_from_outcome,
    server_deltas,
    server_view,
)
from cachelab.load.lives import restart_text, server_side
from cachelab.load.precision import parse_precision, run_intervals
from cachelab.load.result import (
    CSV_HEADER,
    SCHEMA,
    SCHEMA_VERSION,
    LoadResult,
    behind_headline,
    behind_lines,
    csv_rows,
    hlog_text,
    stopped_notes,
    stopped_text,
    unused_notes,
)
from cachelab.load.spec import (
    KEY_DISTS,
    LIMITS,
    MAX_PROBE_RATE,
    OPS,
    SIZE_DISTS,
    LoadSpec,
    memory_mb,
    parse_key_dist,
    parse_mix,
    parse_value_size,
)
from cachelab.load.verb import run

__all__ = [
    "CSV_HEADER",
    "DELTA_STATS",
    "KEY_DISTS",
    "LIMITS",
    "MAX_PROBE_RATE",
    "OPS",
    "RATE_BACKLOG",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SIZE_DISTS",
    "LoadResult",
    "LoadSpec",
    "behind_headline",
    "behind_lines",
    "csv_rows",
    "hlog_text",
    "load",
    "load_on_ray",
    "memory_mb",
    "parse_key_dist",
    "parse_mix",
    "parse_precision",
    "parse_value_size",
    "restart_text",
    "result_from_outcome",
    "run",
    "run_intervals",
    "server_deltas",
    "server_side",
    "server_view",
    "stopped_notes",
    "stopped_text",
    "unused_notes",
]
