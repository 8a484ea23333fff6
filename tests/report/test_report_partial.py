"""The report of a partial result says so: its section's title, its first note (with the real
sample counts), the headings of its tables, and a list at the top of the page; a complete
result's section says nothing of the kind."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from cachelab.cli import run as cli
from cachelab.servers import PrivateMemcached
from partial_runs import interrupted_profile, sigint_when_busy


def sections(page: str) -> dict[str, str]:
    """Section id -> its HTML."""
    return dict(re.findall(r'<section id="([^"]+)">(.*?)</section>', page, re.S))


def texts(tag: str, fragment: str, cls: str | None = None) -> list[str]:
    """The text of every ``tag`` (of class ``cls``) in ``fragment``."""
    attrs = f' class="{cls}"' if cls else ""
    return [html.unescape(re.sub(r"<[^>]+>", "", t))
            for t in re.findall(rf"<{tag}{attrs}>(.*?)</{tag}>", fragment, re.S)]


def partial_list(page: str) -> list[str]:
    """The items of the "Partial results" list at the top of the page."""
    m = re.search(r'<h2 id="partial">Partial results</h2><ul class="err">(.*?)</ul>', page, re.S)
    return texts("li", m[1]) if m else []


def test_a_partial_profile_is_marked_everywhere_on_the_page(
        memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    partial = interrupted_profile(memcached.address, tmp_path / "partial")
    assert cli(["profile", "--server", memcached.address, "--samples", "200", "--warmup", "0",
                "--sizes", "1,1K", "--keys", "1,10", "--no-plots", "--format", "json", "--out",
                str(tmp_path / "complete")]) == 0
    assert cli(["report", str(tmp_path / "partial"), str(tmp_path / "complete"), "--out",
                str(tmp_path / "report.html")]) == 0
    capsys.readouterr()
    page = (tmp_path / "report.html").read_text()

    kept = sorted(c["samples"] for c in partial["cells"])
    counts = f"{kept[0]:,}" if kept[0] == kept[-1] else f"{kept[0]:,}\u2013{kept[-1]:,}"
    by_source = {("partial" if "partial/profile.json" in s else "complete"): (anchor, s)
                 for anchor, s in sections(page).items()}
    anchor, sec = by_source["partial"]
    (title,) = texts("h2", sec)
    assert title.endswith("\u2014 PARTIAL"), title
    note = texts("p", sec, "note")[0]
    assert note.startswith("PARTIAL (interrupted after "), note
    assert note.endswith(f"; samples per cell: {counts} of 1,000,000 asked)"), note
    assert f"samples per cell: {counts} of 1,000,000 asked" in " ".join(texts("p", sec))
    assert all(h.startswith("PARTIAL: ") for h in texts("h3", sec)) and texts("h3", sec)
    assert "1000000 samples per cell" not in page

    _, done = by_source["complete"]
    assert "PARTIAL" not in done
    assert "200 samples per cell after 0 warm-up" in done

    (item,) = partial_list(page)
    assert item.endswith(note) and f'href="#{anchor}"' in page.split("Partial results")[1]


@pytest.mark.slow
def test_an_interrupted_load_is_marked_by_the_report(memcached: PrivateMemcached,
                                                     tmp_path: Path) -> None:
    out = tmp_path / "load"
    p = sigint_when_busy(["load", "--server", memcached.address, "--duration", "60",
                          "--warmup", "0", "--no-prefill", "--no-plots", "--format", "json",
                          "--out", out], memcached.address, gets=2000, cwd=tmp_path)
    assert p.returncode == 130, p.stderr
    assert json.loads((out / "load.json").read_text())["run"]["cancelled"] is True
    assert cli(["report", str(out), "--out", str(tmp_path / "report.html")]) == 0
    page = (tmp_path / "report.html").read_text()
    ((_, sec),) = sections(page).items()
    assert texts("h2", sec)[0].endswith("\u2014 PARTIAL")
    assert texts("p", sec, "note")[0].startswith("PARTIAL (interrupted after ")
    assert len(partial_list(page)) == 1
