"""``cachelab report``: render saved results into one self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cachelab.cli import common
from cachelab.cli.common import EXIT_OK
from cachelab.report import write_report

DESCRIPTION = """\
Find every cachelab result (profile.json, load.json, scale.json, usl.json, simulate.json,
tiers.json, replay.json, run.json, compare.json: recognised by their schema, not their name)
in the given files and directories (searched recursively) and render them into one HTML page:
a section per result with its tables, its plots, plain-language findings and the warnings it
carries, plus the environment (machine, versions, commit, server command lines).

Plots are interactive: drawn in the page by one inline script from the data (hover for a
point's values, click a legend entry to hide its series, drag to zoom, double-click to reset).
Each keeps its static image (the SVG written beside the result, or re-drawn from the JSON),
shown with scripts off or by the figure's "static image" button. The page is self-contained:
inline CSS, data and script (allowed by hash in its Content-Security-Policy), images as data:
URIs, nothing fetched from the network.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "report", help="render saved results into one self-contained HTML page",
        description=DESCRIPTION,
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="DIR|FILE",
                   help="result files, or directories to search for them")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="the page to write (default: report.html in the first directory)")
    p.add_argument("--title", default="cachelab report", help="the page's title")
    p.add_argument("--redraw", action="store_true",
                   help="re-draw every plot from the JSON instead of using the SVGs beside it")
    p.add_argument("--static", type=Path, metavar="DIR",
                   help="also copy every plot into DIR as a PNG, for pasting into documents")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = args.out
    if out is None:
        first = args.paths[0]
        out = (first if first.is_dir() else first.parent) / "report.html"
    rep = write_report(args.paths, out, title=args.title, redraw=args.redraw,
                       static_dir=args.static)
    for msg in rep.skipped:
        print(f"cachelab: skipped {msg}", file=sys.stderr)
    kinds = ", ".join(s.kind for s in rep.sections)
    print(f"wrote {out} ({len(rep.sections)} section(s): {kinds}"
          + (f"; plots in {args.static}" if args.static else "") + ")")
    return EXIT_OK


__all__ = ["add_parser", "run"]
