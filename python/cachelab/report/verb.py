"""``cachelab.report.run``: the verb's one entry — the page of the results found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cachelab.progress import Progress
from cachelab.report.build import Report, write_report
from cachelab.target import Target

__all__ = ["ReportSpec", "run"]


@dataclass(frozen=True)
class ReportSpec:
    """The results to show (``paths``: files or directories), the page to write (``out``),
    its ``title``, whether to ``redraw`` the plots, and where to put them (``static_dir``)."""

    paths: Sequence[str | Path]
    out: str | Path
    title: str = "cachelab report"
    redraw: bool = False
    static_dir: str | Path | None = None


def run(spec: ReportSpec, target: Target | None = None, *,
        progress: Progress | None = None) -> Report:
    """Writes the page ``spec`` describes and returns what it holds (no server: ``target``
    and ``progress`` are unused). Raises OSError when the page cannot be written."""
    return write_report(spec.paths, spec.out, title=spec.title, redraw=spec.redraw,
                        static_dir=spec.static_dir)
