"""What ``trace synth``, ``inspect`` and ``convert`` report (``trace capture`` returns its
:class:`~cachelab.traces.capture.CaptureResult`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachelab.artifacts import atomic_file
from cachelab.traces.formats import render_conversion
from cachelab.traces.inspect import render_inspection, write_inspection
from cachelab.traces.synth import render_synth_summary

__all__ = ["TraceSummary"]

#: Each subcommand's human view of its summary.
_RENDER: dict[str, Callable[[dict[str, Any]], str]] = {
    "synth": render_synth_summary,
    "inspect": render_inspection,
    "convert": render_conversion,
}


@dataclass
class TraceSummary:
    """A subcommand's summary: ``kind`` (``synth``, ``inspect`` or ``convert``), the JSON it
    prints (``doc``) and the trace it wrote (``written``; None for ``inspect``, which writes
    its summary with :meth:`write` when asked)."""

    kind: str
    doc: dict[str, Any]
    written: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return self.doc

    def render(self) -> str:
        return _RENDER[self.kind](self.doc)

    def write(self, out_dir: str | Path) -> list[Path]:
        """``out_dir/trace-inspect.json`` (an inspection's JSON)."""
        return [write_inspection(self.doc, out_dir)]

    def save(self, path: str | Path) -> Path:
        """The JSON at ``path``, atomically."""
        with atomic_file(path) as tmp:
            tmp.write_text(json.dumps(self.doc, indent=1) + "\n", encoding="utf-8")
        return Path(path)
