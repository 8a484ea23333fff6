"""Building the page: every artifact's section in page order, the findings gathered at the top,
the contents, the environment; written atomically (see :mod:`cachelab.report`)."""

from __future__ import annotations

import html
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import is_caveat
from cachelab.artifacts import KINDS, Artifact, atomic_file, find_artifacts
from cachelab.errors import InputError
from cachelab.glossary import used_in
from cachelab.page.html import answer_table, esc, page
from cachelab.page.section import Context, Section
from cachelab.profile import builtin
from cachelab.report.answers import answers_of, recorded
from cachelab.report.overview import environment
from cachelab.report.sections import build_section
from cachelab.units import PARTIAL, partial_note

__all__ = ["Report", "render_report", "write_report"]

#: Order of sections on the page.
_ORDER = ("run", "profile", "scale", "usl", "load", "size", "simulation", "replay", "tiers",
          "compare")


@dataclass
class Report:
    """A rendered page and what it holds."""

    html: str
    sections: list[Section]
    skipped: list[str] = field(default_factory=list)
    figures: list[tuple[Path, str]] = field(default_factory=list)


def _anchor(i: int, sec: Section) -> str:
    return f"s{i}-{sec.kind}"


def _order(a: Artifact) -> tuple[int, int, str]:
    """Kinds in page order; simulations with a measured model before those with a published
    one; then by path."""
    published = a.kind == "simulation" and (a.data.get("model") or {}).get("name") in \
        builtin.PROFILES
    return (_ORDER.index(a.kind) if a.kind in _ORDER else 99, int(published), str(a.path))


def render_report(
    paths: Iterable[str | Path],
    *,
    title: str = "cachelab report",
    redraw: bool = False,
    artifacts: Sequence[Artifact] | None = None,
    scratch: Path | None = None,
) -> Report:
    """Render every result found under ``paths`` (or the given ``artifacts``) into one page.

    Raises InputError when nothing renderable is found. Plots that must be re-drawn go to
    ``scratch`` (a temporary directory by default, removed afterwards — then ``figures`` of
    the result name files that no longer exist).
    """
    paths = [Path(p) for p in paths]
    skipped: list[str] = []
    arts = list(artifacts) if artifacts is not None else find_artifacts(paths, skipped)
    if not arts and skipped:  # only results that cannot be read: the first says why
        more = f" (and {len(skipped) - 1} more that cannot be read)" if len(skipped) > 1 else ""
        raise InputError(skipped[0] + more)
    if not arts:
        where = ", ".join(map(str, paths)) or "(no paths)"
        raise InputError(f"{where}: no cachelab results found (looked for JSON artifacts with a "
                         f"cachelab schema: {', '.join(sorted(KINDS))})")
    arts.sort(key=_order)
    own_tmp = scratch is None
    tmp = Path(tempfile.mkdtemp(prefix="cachelab-report-")) if own_tmp else scratch
    try:
        ctx = Context(scratch=tmp, redraw=redraw)
        sections = [marked(build_section(a, ctx), a.data) for a in arts]
        steps = recorded(arts)
        for a, sec in zip(arts, sections):
            sec.answers = sec.answers or answers_of(a, steps)
        html = _page(title, paths, sections, arts, skipped)
        return Report(html=html, sections=sections, skipped=skipped, figures=list(ctx.used))
    finally:
        if own_tmp:
            shutil.rmtree(tmp, ignore_errors=True)


#: What a partial result's section title ends in.
_SUFFIX = f" \u2014 {PARTIAL}"


def marked(sec: Section, data: dict[str, Any]) -> Section:
    """``sec``, saying so when its result is partial: its first note is the
    :func:`~cachelab.units.partial_note` (the verb's own, with its counts, or else one from
    the result's ``run``) and its title ends in PARTIAL — so the contents and the list at
    the top of the page show it too, whatever the verb's section does."""
    own = [n for n in sec.notes if n.startswith(PARTIAL)]
    run = data.get("run")
    note = own[0] if own else partial_note(run) if isinstance(run, dict) else None
    if note is None:
        return sec
    sec.notes = [note, *(n for n in sec.notes if n != note)]
    sec.title += _SUFFIX
    return sec


def _page(title: str, paths: Sequence[Path], sections: Sequence[Section],
          arts: Sequence[Artifact], skipped: Sequence[str]) -> str:
    body: list[str] = []
    answers = [(a.question, f"#{_anchor(i, s)}", s.kind, a.value, a.trust, a.why)
               for i, s in enumerate(sections) for a in s.answers]
    if answers:
        body.append('<h2 id="answer">Answer</h2>')
        body.append(answer_table(answers))
    partial = [(i, s, n) for i, s in enumerate(sections) for n in s.notes[:1]
               if n.startswith(PARTIAL)]
    if partial:
        body.append('<h2 id="partial">Partial results</h2><ul class="err">')
        body += [f'<li><a href="#{_anchor(i, s)}">{esc(s.title.removesuffix(_SUFFIX))}</a>: '
                 f"{esc(n)}</li>" for i, s, n in partial]
        body.append("</ul>")
    # What to trust: every section's verdicts and precision misses (its findings and notes
    # that say NOT or INVALID, each with its fix), once; the other findings below.
    caveats = [(i, s, c) for i, s in enumerate(sections)
               for c in dict.fromkeys([*s.findings, *s.notes]) if is_caveat(c)]
    if caveats:
        body.append('<h2 id="trust">What to trust</h2><ul class="err">')
        body += [f'<li>{esc(c)} <a href="#{_anchor(i, s)}">({esc(s.kind)})</a></li>'
                 for i, s, c in caveats]
        body.append("</ul>")
    findings = [(i, s, f) for i, s in enumerate(sections) for f in s.findings
                if not is_caveat(f)]
    if findings:
        body.append('<h2 id="findings">Findings</h2><ul class="findings">')
        body += [f'<li>{esc(f)} <a href="#{_anchor(i, s)}">({esc(s.kind)})</a></li>'
                 for i, s, f in findings]
        body.append("</ul>")
    failed = [s for s in sections for n in s.notes if n.startswith("step ")]
    if failed:
        body += [f'<p class="err">{esc(n)}</p>' for s in failed for n in s.notes
                 if n.startswith("step ")]
    body.append("<nav><h2>Contents</h2><ol>")
    body += [f'<li><a href="#{_anchor(i, s)}">{esc(s.title)}</a></li>'
             for i, s in enumerate(sections)]
    body.append('<li><a href="#environment">Environment</a></li>'
                '<li><a href="#glossary">Glossary</a></li></ol></nav>')
    for i, s in enumerate(sections):
        body.append(f'<section id="{_anchor(i, s)}"><h2>{esc(s.title)}</h2>')
        body.append(f'<p class="sub">from <code>{esc(s.source)}</code></p>')
        if s.findings:
            body.append('<ul class="findings">' + "".join(f"<li>{esc(f)}</li>"
                                                          for f in s.findings) + "</ul>")
        body += [f'<p class="note">{esc(n)}</p>' for n in s.notes]
        body += s.body
        body.append("</section>")
    body += environment(arts)
    if skipped:
        body.append("<h3>Files not included</h3><ul>")
        body += [f"<li>{esc(m)}</li>" for m in skipped]
        body.append("</ul>")
    body += glossary(body)
    if len(paths) > 2:
        where = f"{os.path.commonpath([str(p.resolve()) for p in paths])}"
    else:
        where = ", ".join(map(str, paths)) or "given artifacts"
    sub = (f"{len(sections)} result(s) from {where}; "
           f"rendered {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    return page(title, sub, body)


def glossary(body: Sequence[str]) -> list[str]:
    """The page's last section: the terms of :mod:`cachelab.glossary` its text uses, each
    with its meaning (`code` as code)."""
    text = html.unescape(re.sub(r"<[^>]*>", " ", re.sub(
        r"<script\b.*?</script>", " ", "\n".join(body), flags=re.S)))
    out = ['<h2 id="glossary">Glossary</h2>',
           "<p>The words this page uses, in plain words (docs/glossary.md has them all).</p>",
           '<dl class="env">']
    for t in used_in(text):
        meaning = re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(t.text))
        out.append(f"<dt>{esc(t.term)}</dt><dd>{meaning}</dd>")
    return [*out, "</dl>"]


def write_report(
    paths: Iterable[str | Path],
    out: str | Path,
    *,
    title: str = "cachelab report",
    redraw: bool = False,
    static_dir: str | Path | None = None,
) -> Report:
    """Render ``paths`` and write the page to ``out`` (atomically). With ``static_dir``, also
    copy every plot there as a PNG (for pasting into documents), numbered in page order."""
    out = Path(out)
    scratch = Path(tempfile.mkdtemp(prefix="cachelab-report-"))
    try:
        rep = render_report(paths, title=title, redraw=redraw, scratch=scratch)
        with atomic_file(out) as tmp:
            tmp.write_text(rep.html, encoding="utf-8")
        if static_dir is not None:
            _copy_static(rep, Path(static_dir))
        return rep
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _copy_static(rep: Report, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for i, (f, _caption) in enumerate(rep.figures, 1):
        png = f.with_suffix(".png")
        src = png if png.is_file() else f
        if src.is_file():
            with atomic_file(target / f"{i:02d}-{f.parent.name}-{src.name}") as tmp:
                shutil.copyfile(src, tmp)

