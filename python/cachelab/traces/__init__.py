"""Traces: request traces (a content catalog plus requests touching its items) and flat key traces.

    >>> from cachelab.traces import SynthParams, synthesize, save_request_trace, inspect_path
    >>> trace = synthesize(SynthParams(requests=1000, seed=7))
    >>> save_request_trace(trace, "day.jsonl")                     # doctest: +SKIP
    >>> inspect_path("day.jsonl")["zipf_alpha"]                     # doctest: +SKIP

Formats and the synthetic model are documented in docs/traces.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cachelab._lazy import exports

if TYPE_CHECKING:
    from cachelab.traces.formats import (
        FLAT_FORMATS,
        REQUEST_FORMATS,
        convert,
        detect_format,
        flat_accesses,
        format_name,
        is_request_format,
        load_flat,
        load_request_trace,
        save_request_trace,
        write_flat_csv,
    )
    from cachelab.traces.inspect import inspect_path, inspect_request_trace
    from cachelab.traces.request import SCHEMA, SCHEMA_VERSION, RequestTrace
    from cachelab.traces.synth import SynthParams, synthesize

# Names load on first use: reading a flat trace (cachelab.traces.names) imports no numpy
# (see cachelab._lazy).
__getattr__, __dir__ = exports(__name__, {
    "cachelab.traces.formats": (
        "FLAT_FORMATS", "REQUEST_FORMATS", "convert", "detect_format", "flat_accesses",
        "format_name", "is_request_format", "load_flat", "load_request_trace",
        "save_request_trace", "write_flat_csv",
    ),
    "cachelab.traces.inspect": ("inspect_path", "inspect_request_trace"),
    "cachelab.traces.request": ("SCHEMA", "SCHEMA_VERSION", "RequestTrace"),
    "cachelab.traces.synth": ("SynthParams", "synthesize"),
})

__all__ = [
    "FLAT_FORMATS",
    "REQUEST_FORMATS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "RequestTrace",
    "SynthParams",
    "convert",
    "detect_format",
    "flat_accesses",
    "format_name",
    "inspect_path",
    "inspect_request_trace",
    "is_request_format",
    "load_flat",
    "load_request_trace",
    "save_request_trace",
    "synthesize",
    "write_flat_csv",
]
