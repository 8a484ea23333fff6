"""``cachelab report``: render saved results into one self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import cachelab.report as lib
from cachelab.artifacts import os_error_text
from cachelab.cli import common, output

#: The page ``report`` writes into ``--out``.
PAGE = "report.html"

DESCRIPTION = """\
Find every cachelab result (profile.json, load.json, scale.json, usl.json, simulate.json,
size.json, tiers.json, replay.json, run.json, compare.json: recognised by their schema, not
their name)
in the given files and directories (searched recursively) and render them into one HTML page:
a section per result with its tables, its plots, plain-language findings and the warnings it
carries, plus the environment (machine, versions, commit, server command lines).

Plots are interactive: drawn in the page by one inline script from the data (hover for a
point's values, click a legend entry to hide its series, drag to zoom, double-click to reset).
Each keeps its static image (the SVG written beside the result, or re-drawn from the JSON),
shown with scripts off or by the figure's "static image" button. The page is self-contained:
inline CSS, data and script (allowed by hash in its Content-Security-Policy), images as data:
URIs, nothing fetched from the network.

--out is a directory (created if missing) that gets report.html; a --out ending in .html
(the page itself, as before) still works, with a deprecation line on stderr.
"""

EXAMPLES = """\
cachelab report study/                          # writes study/report.html
cachelab report a/profile.json b/load.json --out page --title "before the upgrade"
cachelab report sweep/ --out page --static png --redraw   # plots also as PNGs in png/
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "report", help="render saved results into one self-contained HTML page",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="DIR|FILE",
                   help="result files, or directories to search for them")
    p.add_argument("--title", default="cachelab report", help="the page's title")
    p.add_argument("--redraw", action="store_true",
                   help="re-draw every plot from the JSON instead of using the SVGs beside it")
    p.add_argument("--static", type=Path, metavar="DIR",
                   help="also copy every plot into DIR as a PNG, for pasting into documents")
    output.add_output_options(
        p, "report", out_help=f"write {PAGE} into this directory, created if missing and "
        "checked before anything is read (default: the first directory given, or the first "
        "file's)")
    p.set_defaults(func=run)


def page_path(args: argparse.Namespace) -> Path:
    """Where the page goes, checked: ``report.html`` in ``--out`` (a directory), or in the
    first directory given; a ``--out`` ending in ``.html``/``.htm`` is the page itself
    (deprecated: one line on stderr)."""
    if args.out is None:
        first = args.paths[0]
        out = (first if first.is_dir() else first.parent) / PAGE
    elif _a_page(args.out):
        out = args.out
    else:
        output.check_out_dir(args.out, files=(PAGE,))
        return args.out / PAGE
    output.check_out_file(out, "--out")
    return out


def _a_page(out: Path) -> bool:
    """Whether ``--out`` names the page itself (``.html``/``.htm``), the deprecated form."""
    return out.suffix.lower() in (".html", ".htm") and not out.is_dir()


def run(args: argparse.Namespace) -> int:
    page = page_path(args)
    if args.static is not None:
        output.check_out_dir(args.static, "--static")
    try:
        rep = lib.run(lib.ReportSpec(args.paths, page, title=args.title, redraw=args.redraw,
                                     static_dir=args.static))
    except OSError as e:
        # Checked writable above, so the disk filled or the directory went meanwhile; the
        # results the page shows are untouched, so running report again makes it.
        print(f"cachelab: error: cannot write {os_error_text(e, page)}", file=sys.stderr)
        return output.EXIT_WRITE
    if args.out is not None and _a_page(args.out):  # said once the page is written
        print(f"cachelab: --out {args.out} (a page) is deprecated: --out is a directory that "
              f"gets {PAGE}", file=sys.stderr)
    summary = {"page": str(page), "sections": [s.kind for s in rep.sections],
               "skipped": list(rep.skipped), "static": str(args.static) if args.static else None}
    return output.finish(args, _Summary(summary), None, verb="report", written=page)


class _Summary:
    """What ``report`` made, for :func:`~cachelab.cli.output.finish`: the page, its sections
    and the inputs skipped (each said on stderr)."""

    def __init__(self, d: dict[str, Any]) -> None:
        self.d = d
        self.warnings = [f"skipped {m}" for m in d["skipped"]]

    def to_dict(self) -> dict[str, Any]:
        return self.d

    def render(self) -> str:
        d = self.d
        return (f"{len(d['sections'])} section(s): {', '.join(d['sections'])}"
                + (f"; plots in {d['static']}" if d["static"] else ""))


__all__ = ["add_parser", "page_path", "run"]
