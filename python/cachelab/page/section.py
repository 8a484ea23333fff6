"""What every report section is made of: the :class:`Section` a verb's ``section()`` returns,
the :class:`Context` sections share, and the helpers that embed figures and chart specs.

A section is built from the artifact's JSON alone: its tables, its plots (the SVGs the verb
wrote beside the JSON when they are there, else re-drawn from the JSON, each with the spec of
an interactive chart of the same data: :mod:`cachelab.page.charts`), short plain-language
findings, and notes — the warnings and limits the result carries, errors it counted — so the
page says what the numbers can and cannot support.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import Artifact
from cachelab.page.html import figure
from cachelab.units import partial_note

__all__ = ["ChartSpecs", "Context", "Section", "chart_specs", "env_notes", "figures"]


@dataclass
class Context:
    """What section builders share: a scratch directory for re-drawn plots."""

    scratch: Path
    redraw: bool = False  # re-draw plots even when SVGs are found beside the JSON
    #: Every figure embedded, in order: (file, caption), for the static copy.
    used: list[tuple[Path, str]] = field(default_factory=list)
    #: How many interactive chart specs the page holds.
    charts: int = 0
    _count: int = 0

    def figure(self, path: Path, caption: str, charts: Sequence[dict[str, Any]] = ()) -> str:
        self.used.append((path, caption))
        self.charts += len(charts)
        return figure(path, caption, charts)

    def new_dir(self) -> Path:
        self._count += 1
        d = self.scratch / f"plots-{self._count}"
        d.mkdir(parents=True, exist_ok=True)
        return d


@dataclass
class Section:
    """A rendered section: its title, HTML body, findings, notes (plain text) and answers."""

    title: str
    kind: str
    source: Path
    body: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: int = 0
    #: The result's answer card (:mod:`cachelab.answers`), shown first on the page; left
    #: empty, the report fills it from the result (:mod:`cachelab.report.answers`).
    answers: list[Answer] = field(default_factory=list)

    def add_figures(self, figs: Sequence[str]) -> None:
        """Append embedded figures (the HTML :func:`figures` returns) and count them."""
        self.body += figs
        self.figures += len(figs)


ChartSpecs = dict[str, "list[dict[str, Any]] | dict[str, Any] | None"]


def figures(art: Artifact, ctx: Context, names: Sequence[tuple[str, str]],
           redraw: Callable[[Path], list[Path]] | None,
           charts: ChartSpecs | None = None) -> list[str]:
    """Figures for ``names`` ((file base name, caption) pairs): the SVGs (or PNGs) beside the
    artifact when every one is there and the artifact has its verb's own file name, else
    whatever ``redraw(dir)`` draws from the JSON. ``charts`` maps a base name to the chart
    spec(s) drawn with that figure."""
    charts = charts or {}

    def specs(base: str) -> list[dict[str, Any]]:
        c = charts.get(base)
        return [] if c is None else [c] if isinstance(c, dict) else list(c)

    beside: list[tuple[Path, str]] = []
    default_names = {"run.json", "profile.json", "load.json", "scale.json", "usl.json",
                     "simulate.json", "size.json", "tiers.json", "replay.json", "compare.json"}
    if not ctx.redraw and art.path.name in default_names:
        for base, caption in names:
            for ext in (".svg", ".png"):
                f = art.directory / (base + ext)
                if f.is_file():
                    beside.append((f, caption))
                    break
    if (names and len(beside) == len(names)) or redraw is None:
        return [ctx.figure(f, c, specs(f.stem)) for f, c in beside]
    # Drawing needs matplotlib (deferred: ~0.4 s to import); the page embeds SVGs only.
    from cachelab.plots.figure import svg_only

    with svg_only():
        drawn = redraw(ctx.new_dir())
    captions = dict(names)
    out = []
    for f in drawn:
        if f.suffix == ".svg":
            out.append(ctx.figure(f, captions.get(f.stem, f.stem), specs(f.stem)))
    return out


def chart_specs(build: Callable[[], ChartSpecs], sec: Section) -> ChartSpecs:
    """The chart specs ``build`` makes; a result the charts cannot read keeps its static
    plots and gets a note instead of failing the section."""
    try:
        return build()
    except (KeyError, TypeError, ValueError, IndexError) as e:
        sec.notes.append(f"no interactive chart: missing or bad field ({type(e).__name__}: {e})")
        return {}


def env_notes(d: dict[str, Any], done: str = "") -> list[str]:
    """Notes from a result's ``run``: whether it is partial (:func:`partial_note`, with
    ``done``, how far it got) and keys it left behind."""
    run = d.get("run") or {}
    partial = partial_note(run, done)
    notes = [partial] if partial else []
    if run.get("leftover_keys"):
        notes.append(f"{run['leftover_keys']} key(s) written could not be deleted")
    return notes
