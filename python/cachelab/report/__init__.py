"""One self-contained HTML page from saved results: :func:`render_report`, :func:`write_report`.

The page needs nothing but itself to view: inline CSS, every plot twice — an interactive chart
drawn by the page's one inline script (``charts.js``) from a JSON spec built from the artifact
(:mod:`cachelab.page.charts`), and the static figure as a ``data:`` URI (the SVG each verb
wrote beside its JSON, or re-drawn from the JSON), shown with scripts off — no fonts, no links
out, and a Content-Security-Policy that allows nothing else. It has a section per artifact
(tables, plots, findings, notes), the findings of every section gathered at the top, and the
environment the results were measured in.

    from cachelab.report import write_report
    write_report(["cachelab-out/run-20250101-120000"], "report.html")
"""

from __future__ import annotations

from cachelab.report.build import Report, render_report, write_report
from cachelab.report.verb import ReportSpec, run

__all__ = ["Report", "ReportSpec", "render_report", "run", "write_report"]
