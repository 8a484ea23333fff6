"""The glossary (issue 31: plain words for jargon, defined once): docs/glossary.md is the
module's, README and docs/report.md link to it, and the words the output prints are in it."""

from __future__ import annotations

from pathlib import Path

from cachelab.glossary import TERMS, markdown, used_in

ROOT = Path(__file__).resolve().parents[2]


def test_docs_glossary_is_the_module_s() -> None:
    assert (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8") == markdown(), (
        "docs/glossary.md differs from cachelab.glossary: write it with "
        "python -c 'import cachelab.glossary as g; "
        "open(\"docs/glossary.md\", \"w\").write(g.markdown())'")
    assert "docs/glossary.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "glossary.md" in (ROOT / "docs" / "report.md").read_text(encoding="utf-8")


def test_each_term_once_and_the_output_s_words_defined() -> None:
    names = [t.term for t in TERMS]
    assert len(names) == len(set(names))
    for word in ("certified", "indicative", "predicted", "not measured", "VALID / INVALID",
                 "stationary", "independent", "client saturated", "rate held", "precision ±",
                 "95 % interval", "n/a (k)", "floor", "p50/floor",
                 "corrected / uncorrected latency", "coordinated omission",
                 "open / closed loop", "steady window", "warm-up", "stall", "USL",
                 "α (contention)", "β (coherency)", "Nmax", "R(N) = N/X", "Amdahl", "none",
                 "lru:SIZE", "fixed:N", "prefetch", "the seed's findings", "miss ratio", "MRC",
                 "ketama", "modula", "rendezvous", "PARTIAL", "what to trust"):
        assert word in names, word
    found = {t.term for t in used_in("INVALID: not stationary → quiet it; p99 n/a (3)")}
    assert found == {"VALID / INVALID", "stationary", "n/a (k)", "p50, p99, p99.9"}, found
