"""Small, safe pieces of HTML: escaped text, tables, figures embedded as data URIs, one page.

Everything the page needs is inside it: the CSS and the one script (``charts.js``) are inline,
static plots are ``<img>`` elements whose ``src`` is a ``data:`` URI (an SVG, or a PNG when
there is no SVG), and each interactive chart is a JSON spec in a ``<script
type="application/json">`` element beside its static image, drawn by the script. Each SVG
image stays a document of its own inside its data URI, so the ids matplotlib writes into every
figure cannot collide between figures. A Content-Security-Policy ``<meta>`` lets the page load
nothing from anywhere (images from ``data:`` only) and run only the script it carries (by its
hash: no eval, no inline event handlers).
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cachelab.page.charts import chart_json
from cachelab.page.charts import script as charts_script

__all__ = ["CSS", "PROSE", "answer_table", "csp", "esc", "figure", "figure_data_uri", "page",
           "table"]

CSS = """
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232b;
 margin:0 auto;max-width:1100px;padding:1.5em 2em 4em;overflow-wrap:break-word}
h1{font-size:1.7em;margin:.2em 0 .1em}h2{font-size:1.3em;margin:2em 0 .4em;
 border-bottom:1px solid #d5dbe3;padding-bottom:.2em}h3{font-size:1.05em;margin:1.4em 0 .3em}
p.sub{color:#5a6675;margin:0 0 1em}
.tbl{overflow-x:auto;max-width:100%;margin:.4em 0 1em}
table{border-collapse:collapse;font-size:.86em}
th,td{padding:.22em .6em;border-bottom:1px solid #e3e7ec;text-align:right;white-space:nowrap}
th{background:#f3f5f8;font-weight:600;white-space:normal;vertical-align:bottom}
td.l,th.l,td.t,th.t{text-align:left;white-space:normal}td.t{min-width:16em;max-width:40em}
tr.bad td{background:#fdecea}tr.good td{background:#eaf6ec}
figure{margin:.6em 0 1.2em}figure img{max-width:100%;height:auto;border:1px solid #e3e7ec}
figcaption{color:#5a6675;font-size:.85em}
ul.findings li{margin:.25em 0}
.note,.err{padding:.3em .7em;margin:.4em 0}
.note{color:#7a4b00;background:#fff7e6;border-left:3px solid #f0b400}
.err{color:#8a1c10;background:#fdecea;border-left:3px solid #d93025}
.ok{color:#1e6b2d}.fail{color:#a3211a;font-weight:600}
.mark{display:inline-block;font-weight:600;font-size:.92em;padding:0 .4em;border-radius:3px;
 white-space:nowrap}.mark.certified{background:#eaf6ec;color:#1e6b2d}
.mark.indicative{background:#fff7e6;color:#7a4b00}.mark.predicted{background:#eef2fb;
 color:#1f4e9c}.mark.not-measured{background:#fdecea;color:#8a1c10}
table.answer td{vertical-align:top}table.answer .why{display:block;color:#5a6675;
 font-size:.9em}
nav ol{columns:2;font-size:.9em}code{font-size:.9em;overflow-wrap:anywhere}
dl.env{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.1em 1em;font-size:.88em}
dl.env dt{color:#5a6675}dl.env dd{margin:0;overflow-wrap:anywhere}
figure.cl-live>img{display:none}figure.cl-live.cl-static>img{display:block}
figure.cl-live.cl-static>.cl-charts{display:none}
.cl-chart{margin:.2em 0 .8em;max-width:760px}.cl-chart svg{display:block;width:100%;height:auto;
 font-family:inherit;user-select:none;cursor:crosshair}
.cl-title{font-weight:600;font-size:.93em;text-align:center;margin:.2em 0 .1em}
.cl-legend{display:flex;flex-wrap:wrap;gap:.15em .4em;font-size:.82em}
.cl-key{font:inherit;border:1px solid #d5dbe3;background:#fff;border-radius:3px;
 padding:.05em .45em;cursor:pointer;display:inline-flex;align-items:center;gap:.35em;
 text-align:left}
.cl-key.off{opacity:.45;text-decoration:line-through}
.cl-swatch{display:inline-block;flex:none;width:14px;height:4px;border-radius:1px}
.cl-readout{font-size:.85em;min-height:1.3em;color:#1d232b;font-variant-numeric:tabular-nums}
.cl-tools{font-size:.8em;color:#5a6675;display:flex;flex-wrap:wrap;gap:.3em .8em;
 align-items:center}
.cl-toggle{font:inherit;border:1px solid #d5dbe3;background:#f3f5f8;border-radius:3px;
 cursor:pointer}
@media (max-width:640px){body{padding:1em .8em 3em}h1{font-size:1.45em}nav ol{columns:1}
 ul.findings{padding-left:1.2em}td.t{min-width:12em}}
"""


def esc(text: object) -> str:
    """``text`` as HTML text, quotes escaped too."""
    return html.escape(str(text), quote=True)


#: A column holding a cell longer than this (characters) is prose: left-aligned and wrapped
#: (``td.t``), so a long verdict or summary does not stretch its table across the page.
PROSE = 40


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    left: int = 1,
    row_classes: Sequence[str] | None = None,
    caption: str | None = None,
) -> str:
    """A table of escaped cells in a box that scrolls sideways when the table is wider than
    the page; the first ``left`` columns are left-aligned, a column with a cell longer than
    :data:`PROSE` characters is left-aligned and wraps, the others are right-aligned and keep
    each cell on one line."""
    rows = [[str(v) for v in row] for row in rows]
    prose = {j for row in rows for j, v in enumerate(row) if len(v) > PROSE}
    cls = [' class="l"' if i < left else ' class="t"' if i in prose else ""
           for i in range(max([len(header), *map(len, rows)]))]
    out = ['<div class="tbl"><table>']
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<tr>" + "".join(f"<th{c}>{esc(h)}</th>" for c, h in zip(cls, header)) + "</tr>")
    for i, row in enumerate(rows):
        rc = row_classes[i] if row_classes and i < len(row_classes) and row_classes[i] else ""
        attr = f' class="{esc(rc)}"' if rc else ""
        cells = "".join(f"<td{cls[j]}>{esc(v)}</td>" for j, v in enumerate(row))
        out.append(f"<tr{attr}>{cells}</tr>")
    out.append("</table></div>")
    return "\n".join(out)


def answer_table(rows: Iterable[tuple[str, str, str, str, str, str]]) -> str:
    """The answer card as a table: (question, link to its section, the link's text, value,
    trust mark, why) per row; the mark styled by its kind (``.mark.certified`` …), its
    reason under it."""
    out = ['<div class="tbl"><table class="answer">',
           '<tr><th class="l">question</th><th class="l">answer</th><th class="l">trust</th></tr>']
    for question, href, label, value, trust, why in rows:
        link = f' <a href="{esc(href)}">({esc(label)})</a>' if href else ""
        reason = f'<span class="why">{esc(why)}</span>' if why else ""
        out.append(f'<tr><td class="l">{esc(question)}{link}</td><td class="t">{esc(value)}'
                   f'</td><td class="l"><span class="mark {esc(trust.replace(" ", "-"))}">'
                   f"{esc(trust)}</span>{reason}</td></tr>")
    out.append("</table></div>")
    return "\n".join(out)


def _strip_prolog(svg: str) -> str:
    """The ``<svg>`` element alone: no XML declaration, no DOCTYPE (whose DTD URL a strict
    viewer might try to fetch)."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def figure_data_uri(path: Path) -> str:
    """A ``data:`` URI holding the image file at ``path`` (.svg or .png)."""
    if path.suffix.lower() == ".svg":
        body = _strip_prolog(path.read_text(encoding="utf-8")).encode("utf-8")
        return "data:image/svg+xml;base64," + base64.b64encode(body).decode("ascii")
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def figure(path: Path | None, caption: str, charts: Sequence[dict[str, Any]] = ()) -> str:
    """An embedded image with its caption (the caption is also the image's alt text), and
    the specs of the interactive charts that draw the same data (shown instead of the image
    when scripts run). Without ``path``, the charts alone (the caption must say where the
    numbers are with scripts off)."""
    live = "".join(f'<script type="application/json" class="cl-spec">{chart_json(c)}</script>'
                   for c in charts)
    cls = ' class="cl-fig"' if charts else ""
    box = f'<div class="cl-charts" hidden>{live}</div>' if charts else ""
    img = "" if path is None else f'<img alt="{esc(caption)}" src="{figure_data_uri(path)}">'
    return f"<figure{cls}>{box}{img}<figcaption>{esc(caption)}</figcaption></figure>"


def csp(script: str) -> str:
    """The page's Content-Security-Policy: nothing fetched, images from data: URIs only, inline
    styles, and no script but ``script`` (allowed by its SHA-256)."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
            f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'")


def page(title: str, subtitle: str, body: Iterable[str], script: str | None = None) -> str:
    """A complete HTML document with the inline stylesheet and, if given, the one inline
    ``script`` (run last, when the page's elements are all there)."""
    js = charts_script() if script is None else script
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp(js))}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="sub">{esc(subtitle)}</p>',
        *body,
        f"<script>{js}</script>" if js else "",
        "</body></html>",
        "",
    ])
