"""``cachelab report``: one self-contained page from saved artifacts — it parses, has a section
per artifact, embeds every plot inline, fetches nothing, and its tables show the JSON's numbers."""

from __future__ import annotations

import base64
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cachelab.profiles import ProfileSpec, load_profile, profile
from cachelab.report import find_artifacts, render_report, write_report
from cachelab.report.sections import dur
from clitools import cachelab

USL_DATA = Path(__file__).parent / "data" / "usl" / "specsdm91.csv"
VOID = {"meta", "img", "br", "hr", "link", "input"}



class Page(HTMLParser):
    """Checks nesting as it goes; collects sections, images, links and table rows."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.sections: list[str] = []
        self.images: list[str] = []
        self.hrefs: list[str] = []
        self.scripts = 0
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("id") or "")
        if tag == "img":
            self.images.append(a.get("src") or "")
        if tag == "a":
            self.hrefs.append(a.get("href") or "")
        if tag == "script":
            self.scripts += 1
        if tag == "table":
            self.tables.append([])
        if tag == "tr":
            self.tables[-1].append([])
        if tag in ("td", "th"):
            self._cell = []
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    p.close()
    assert not p.errors, p.errors[:5]
    assert p.stack == [], p.stack
    return p


def check_self_contained(html: str, page: Page) -> None:
    assert page.scripts == 0
    assert all(h.startswith("#") for h in page.hrefs), page.hrefs
    without_images = re.sub(r'src="data:[^"]*"', 'src=""', html)
    assert "http://" not in without_images and "https://" not in without_images
    assert "<link" not in html and "@import" not in html
    for src in page.images:
        assert src.startswith(("data:image/svg+xml;base64,", "data:image/png;base64,")), src[:40]
        body = base64.b64decode(src.split(",", 1)[1])
        if src.startswith("data:image/svg+xml"):
            svg = body.decode()
            assert svg.startswith("<svg") and "<!DOCTYPE" not in svg
            # Namespace declarations name URIs; nothing may be fetched from one.
            assert not re.search(r'(?:href|src)="(?:https?:)?//', svg)
            assert "url(http" not in svg
        else:
            assert body[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, memcached) -> Path:  # noqa: ANN001
    """A directory of saved results: a measured profile, the published profile, a simulation
    and a USL fit, each written by its verb's own writer (with SVGs beside the JSON)."""
    from cachelab import traces
    from cachelab.cli.profile import write_artifacts as write_profile
    from cachelab.cli.simulate import write_artifacts as write_simulation
    from cachelab.cli.usl import write_artifacts as write_usl
    from cachelab.simulation import SimulateSpec, simulate
    from cachelab.usl import fit_csv

    root = tmp_path_factory.mktemp("results")
    spec = ProfileSpec.quick(sizes=(100, 10_000), key_counts=(1, 10), samples=300, seed=1)
    write_profile(profile(spec, server=memcached.address), root / "profile")
    write_profile(load_profile("appengine-2017"), root / "published")
    trace = traces.synthesize(traces.SynthParams(requests=2_000))
    sim = simulate(trace, SimulateSpec(draws=2, strategies=("none", "lru:100", "fixed:100")))
    write_simulation(sim, root / "simulate")
    write_usl(fit_csv(USL_DATA, "load", "throughput", bootstrap=100), root / "usl")
    (root / "notes.json").write_text('{"not": "a cachelab result"}')
    return root


def test_page_has_a_section_per_artifact_with_inline_plots(results: Path) -> None:
    rep = render_report([results])
    page = parse(rep.html)
    kinds = sorted(s.kind for s in rep.sections)
    assert kinds == ["profile", "profile", "simulation", "usl"]
    assert sorted(re.sub(r"^s\d+-", "", s) for s in page.sections) == kinds
    # A plot per operation of each profile (the published one has no set cells), one for the
    # simulation, one for the fit; all inline.
    assert [s.figures for s in rep.sections if s.kind == "profile"] == [3, 2]
    assert len(page.images) == 3 + 2 + 1 + 1
    check_self_contained(rep.html, page)
    assert "Environment" in rep.html and "commit" in rep.html


def test_tables_show_the_numbers_in_the_json(results: Path) -> None:
    data = json.loads((results / "profile" / "profile.json").read_text())
    page = parse(render_report([results / "profile"]).html)
    get_table = next(t for t in page.tables if t[0][1:] == ["100B", "10KB"])
    cells = {c["value_size"]: c for c in data["cells"] if c["op"] == "get"}
    by_row = {row[0]: row[1:] for row in get_table[1:]}
    for key in ("5", "50", "99", "99.9"):
        assert by_row[f"p{key}"] == [dur(cells[100]["percentiles"][key]),
                                     dur(cells[10_000]["percentiles"][key])]
    assert by_row["samples"] == ["300", "300"]
    sim = json.loads((results / "simulate" / "simulate.json").read_text())
    page = parse(render_report([results / "simulate"]).html)
    table = next(t for t in page.tables if t[0][0] == "strategy")
    assert [r[0] for r in table[1:]] == [s["strategy"] for s in sim["strategies"]]
    for row, s in zip(table[1:], sim["strategies"]):
        p90 = next(b["median"] for b in s["percentiles"] if b["percentile"] == 90.0)
        assert row[2] == f"{100 * p90:.1f} %" or row[2] == f"{100 * p90:.2f} %"


def test_plots_are_redrawn_from_the_json_when_absent(results: Path, tmp_path: Path) -> None:
    for sub in ("profile", "simulate"):
        (tmp_path / sub).mkdir()
        shutil.copy(results / sub / f"{'simulate' if sub == 'simulate' else 'profile'}.json",
                    tmp_path / sub)
    assert not list(tmp_path.rglob("*.svg"))
    rep = render_report([tmp_path])
    page = parse(rep.html)
    assert len(page.images) == 4
    check_self_contained(rep.html, page)


def test_cli_writes_the_page_and_a_static_copy(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    p = cachelab("report", results, "--out", out, "--static", tmp_path / "png")
    assert p.returncode == 0, p.stderr
    assert f"wrote {out}" in p.stdout
    parse(out.read_text())
    pngs = sorted((tmp_path / "png").iterdir())
    assert len(pngs) == 7 and all(f.read_bytes()[:4] == b"\x89PNG" for f in pngs)


def test_write_report_then_find_artifacts_skips_foreign_json(results: Path,
                                                              tmp_path: Path) -> None:
    skipped: list[str] = []
    arts = find_artifacts([results], skipped)
    assert "notes.json" not in {a.path.name for a in arts} and skipped == []
    bad = tmp_path / "old"
    bad.mkdir()
    (bad / "profile.json").write_text('{"schema": "cachelab.latency-profile", '
                                      '"schema_version": 99}')
    shutil.copytree(results / "usl", tmp_path / "usl")
    rep = write_report([tmp_path], tmp_path / "report.html")
    assert [s.kind for s in rep.sections] == ["usl"]
    assert len(rep.skipped) == 1 and "version 99" in rep.skipped[0]
    assert "version 99" in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize("setup, expect", [
    (lambda d: d / "missing", "no such file or directory"),
    (lambda d: d, "no cachelab results found"),
    (lambda d: (d / "x.json").write_text('{"schema": "cachelab.scale",\n  oops}') and d / "x.json",
     "x.json:2: not valid JSON"),
])
def test_bad_inputs_exit_2_with_one_line(tmp_path: Path, setup, expect: str) -> None:  # noqa: ANN001
    target = setup(tmp_path)
    p = cachelab("report", target, "--out", tmp_path / "r.html")
    assert p.returncode == 2
    assert expect in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "r.html").exists()
