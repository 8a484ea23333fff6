"""Scalability sweeps: :func:`scale` measures throughput at a series of loads N with the load
engine (:mod:`cachelab.load`) and fits the Universal Scalability Law (:mod:`cachelab.usl`).

N is one of (``vary``):

* ``connections`` (default): closed-loop client connections, one request outstanding each;
* ``threads``: client threads, each with ``connections_per_thread`` connections;
* ``server-threads``: worker threads (``-t N``) of a private memcached, restarted per point,
  driven by a fixed number of client connections.

Each run warms up, lets the engine find the steady state, then takes a fixed measuring window
of whole intervals from the steady-state start. Repeats run in interleaved order (all points,
then all points again, alternately ascending and descending) so slow drift of the machine
cancels instead of bending the curve. The result (schema ``cachelab.scale`` v1) is written by
:meth:`ScaleResult.write` (``scale.json``, ``scale.csv``, plots) and read back by
:func:`read_scale_result`.

Rooms: ``spec`` (the sweep's plan), ``sweep`` (running it and fitting), ``result`` (the
result and its artifacts), ``plots`` (its figures), ``section`` (its part of the report).
"""

from cachelab.scale.result import (
    CSV_HEADER,
    SCHEMA,
    SCHEMA_VERSION,
    ScaleResult,
    csv_rows,
    read_scale_result,
)
from cachelab.scale.spec import LIMITS, VARY, ScaleSpec
from cachelab.scale.sweep import PERCENTILES, measure_window, scale
from cachelab.scale.verb import run

__all__ = ["CSV_HEADER", "LIMITS", "PERCENTILES", "SCHEMA", "SCHEMA_VERSION", "VARY", "ScaleResult",
           "ScaleSpec", "csv_rows", "measure_window", "read_scale_result", "run", "scale"]
