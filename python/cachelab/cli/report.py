"""``cachelab report``: render saved results into one self-contained HTML page."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import cachelab.report as lib
from cachelab.artifacts import os_error_text
from cachelab.cli import common
from cachelab.cli.common import EXIT_OK, EXIT_PROBLEMS
from cachelab.errors import UsageError

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
    p.add_argument("--out", metavar="FILE|DIR",
                   help="the page to write, or a directory (one that exists, or any path "
                   "ending in /) to write report.html into (default: report.html in the first "
                   "directory); checked before anything is read")
    p.add_argument("--title", default="cachelab report", help="the page's title")
    p.add_argument("--redraw", action="store_true",
                   help="re-draw every plot from the JSON instead of using the SVGs beside it")
    p.add_argument("--static", type=Path, metavar="DIR",
                   help="also copy every plot into DIR as a PNG, for pasting into documents")
    p.set_defaults(func=run)


def page_path(args: argparse.Namespace) -> Path:
    """Where the page goes, checked: ``--out`` as a file, or ``report.html`` in ``--out`` when
    that is a directory (or ends in a slash), or in the first directory given."""
    if args.out is None:
        first = args.paths[0]
        out = (first if first.is_dir() else first.parent) / "report.html"
    elif args.out.endswith(("/", os.sep)) or Path(args.out).is_dir():
        common.check_out_dir(Path(args.out), files=("report.html",))
        return Path(args.out) / "report.html"
    else:
        out = Path(args.out)
        if out.is_file() and out.suffix.lower() not in (".html", ".htm"):
            raise UsageError(f"--out {out}: is an existing file that is not a page (.html); "
                             "not overwriting it")
    common.check_out_file(out, "--out")
    return out


def run(args: argparse.Namespace) -> int:
    out = page_path(args)
    if args.static is not None:
        common.check_out_dir(args.static, "--static")
    try:
        rep = lib.run(lib.ReportSpec(args.paths, out, title=args.title, redraw=args.redraw,
                                     static_dir=args.static))
    except OSError as e:
        # Checked writable above, so the disk filled or the directory went meanwhile; the
        # results the page shows are untouched, so running report again makes it.
        print(f"cachelab: error: cannot write {os_error_text(e, out)}", file=sys.stderr)
        return EXIT_PROBLEMS
    for msg in rep.skipped:
        print(f"cachelab: skipped {msg}", file=sys.stderr)
    kinds = ", ".join(s.kind for s in rep.sections)
    print(f"wrote {out} ({len(rep.sections)} section(s): {kinds}"
          + (f"; plots in {args.static}" if args.static else "") + ")")
    return EXIT_OK


__all__ = ["add_parser", "run"]
