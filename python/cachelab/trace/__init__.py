"""The ``trace`` verb: synthesize, inspect and convert traces, and capture a live memcached's
key stream (docs/traces.md). ``run(spec, target)`` does what the spec's kind says
(:class:`SynthSpec`, :class:`InspectSpec`, :class:`CaptureFileSpec`, :class:`ConvertSpec`)
and returns a :class:`TraceSummary` (a capture: its ``CaptureResult``). The trace formats,
the synthetic model and the capture itself are the shared library :mod:`cachelab.traces`.

    >>> from cachelab import trace
    >>> from cachelab.traces.capture import CaptureSpec
    >>> trace.run(trace.CaptureFileSpec(CaptureSpec(duration=60), "day.capture.parquet"),
    ...           "10.0.0.5:11211")                            # doctest: +SKIP
"""

from __future__ import annotations

from cachelab.trace.result import TraceSummary
from cachelab.trace.spec import CaptureFileSpec, ConvertSpec, InspectSpec, SynthSpec, TraceSpec
from cachelab.trace.verb import capture_servers, run

__all__ = ["CaptureFileSpec", "ConvertSpec", "InspectSpec", "SynthSpec", "TraceSpec",
           "TraceSummary", "capture_servers", "run"]
