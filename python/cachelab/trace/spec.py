"""The specs of ``cachelab trace``'s subcommands, one each: what :func:`cachelab.trace.run`
does is the spec's kind (synth, inspect, capture, convert)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Union

from cachelab.traces.synth import DEFAULT_PRESET, SYNTH_PART, SynthParams

if TYPE_CHECKING:
    from cachelab.tls import TlsOptions
    from cachelab.traces.capture import CaptureSpec

__all__ = ["CaptureFileSpec", "ConvertSpec", "InspectSpec", "SynthSpec", "TraceSpec"]


@dataclass(frozen=True)
class SynthSpec:
    """``trace synth``: the synthetic trace of ``params`` written to ``path`` (JSONL or
    Parquet: ``format``, else from the name), made ``part`` requests at a time (the trace
    is the same whatever ``part``); ``preset`` is the shape it started from, as reported."""

    params: SynthParams
    path: Path
    format: str | None = None
    part: int = SYNTH_PART
    preset: str = DEFAULT_PRESET


@dataclass(frozen=True)
class InspectSpec:
    """``trace inspect``: the summary of the trace at ``path`` (``format``, else from the
    name)."""

    path: Path
    format: str | None = None


@dataclass(frozen=True)
class CaptureFileSpec:
    """``trace capture``: the key stream of the target's memcached (or each member of its
    pool), as ``capture`` says (duration, caps, sampling, the reader), into the capture file
    ``path``. The servers come from the target; a ``capture`` that names its own is used
    when no target is given."""

    capture: CaptureSpec
    path: Path
    #: TLS to a ``rediss://`` server (a Redis capture; memcached's stream is plain TCP).
    tls: TlsOptions | None = None


@dataclass(frozen=True)
class ConvertSpec:
    """``trace convert``: ``src`` rewritten as ``dst`` (formats from the names unless
    given)."""

    src: Path
    dst: Path
    from_format: str | None = None
    to_format: str | None = None


#: What :func:`cachelab.trace.run` takes.
TraceSpec = Union[SynthSpec, InspectSpec, CaptureFileSpec, ConvertSpec]
