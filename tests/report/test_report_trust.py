"""The report's "What to trust" block under the Answer table: every section's verdicts and
precision misses, each with its fix, said once (not again in the Findings list); and its
Glossary section: the terms of :mod:`cachelab.glossary` the page uses (issue 31)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from cachelab.glossary import TERMS
from cachelab.report import render_report
from cards import fake_sweep


def _between(page: str, start: str, end: str) -> str:
    i = page.index(start)
    return page[i:page.index(end, i)]


def test_the_verdicts_are_under_the_answer_and_the_glossary_ends_the_page(
        tmp_path: Path) -> None:
    # A sweep whose client saturated from N = 8: its latencies are INVALID there.
    fake_sweep(saturated_from=8, bootstrap=0).save(tmp_path / "scale.json")
    page = render_report([tmp_path]).html
    heads = re.findall(r'<h2 id="([a-z]+)"', page)
    assert heads[:2] == ["answer", "trust"], heads
    trust = html.unescape(_between(page, '<h2 id="trust">', "</ul>"))
    verdict = next(li for li in trust.split("<li>")[1:] if "INVALID" in li)
    assert verdict.startswith("Latencies INVALID (percentiles shown, not certified): "), trust
    assert " → " in verdict, verdict  # with its fix
    findings = html.unescape(_between(page, '<h2 id="findings">', "</ul>"))
    assert "INVALID" not in findings and "highest measured throughput" in findings, findings
    # The glossary is last, and holds the terms the page uses, not the others.
    assert heads[-1] == "glossary", heads
    glossary = html.unescape(page[page.index('<h2 id="glossary">'):])
    terms = re.findall(r"<dt>(.*?)</dt>", glossary)
    for term in ("VALID / INVALID", "USL", "Nmax", "client saturated", "what to trust",
                 "certified"):
        assert term in terms, terms
    assert "ketama" not in terms and "prefetch" not in terms, terms
    assert len(terms) == len(set(terms)) and set(terms) <= {t.term for t in TERMS}
