"""The ``size`` verb: the memory a cache needs for a hit ratio, from a trace or a live capture.

``run`` (the LRU miss-ratio curve by bytes of the trace, the smallest memory that reaches the
asked hit ratio, and for a capture the predicted-vs-observed check against the server's own
counters) returns a :class:`SizeResult`; docs/simulation.md, "Sizing".
"""

from __future__ import annotations

from cachelab.size.sizing import SizeResult, SizeSpec, size
from cachelab.size.verb import run

__all__ = ["SizeResult", "SizeSpec", "run", "size"]
