"""``cachelab report``: one self-contained page from saved artifacts — it parses, has a section
per artifact, embeds every plot inline (a static image and the spec of an interactive chart of
the same data), runs no script but its own, fetches nothing, and its tables and chart specs
show the JSON's numbers."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest

from cachelab import load as load_lib
from cachelab import replay as replay_lib
from cachelab import tiers as tiers_lib
from cachelab import traces
from cachelab.artifacts import find_artifacts
from cachelab.compare import compare
from cachelab.page.charts import chart_json, script
from cachelab.profile import ProfileSpec, load_profile, profile
from cachelab.report import render_report, write_report
from cachelab.run import RunSpec, run_study
from cachelab.scale import ScaleSpec, scale
from cachelab.simulate import SimulateSpec, simulate
from cachelab.units import dur
from cachelab.usl import UslFit, fit_csv
from clitools import InProcess, cachelab

#: The first test to use ``results`` or ``more`` builds them (a profile, a load run, tiers, a
#: replay: minutes on a loaded machine), inside its own timeout.
pytestmark = pytest.mark.timeout(600)

USL_DATA = Path(__file__).parents[1] / "data" / "usl" / "specsdm91.csv"
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
        #: (attributes, text) of every <script>; names of inline event-handler attributes.
        self.script_elements: list[tuple[dict[str, str | None], str]] = []
        self.handlers: list[str] = []
        self.csp: list[str] = []
        #: Per <figure>: the number of <img> and the chart specs (parsed) inside it.
        self.figures: list[dict[str, list]] = []
        self._script: tuple[dict[str, str | None], list[str]] | None = None

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
            self._script = (a, [])
        self.handlers += [k for k in a if k.lower().startswith("on")]
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp.append(a.get("content") or "")
        if tag == "figure":
            self.figures.append({"images": [], "specs": []})
        if tag == "img" and "figure" in self.stack:
            self.figures[-1]["images"].append(a.get("src") or "")
        if tag == "table":
            self.tables.append([])
        if tag == "tr":
            self.tables[-1].append([])
        if tag in ("td", "th"):
            self._cell = []
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            attrs, text = self._script[0], "".join(self._script[1])
            self.script_elements.append((attrs, text))
            if attrs.get("type") == "application/json" and "figure" in self.stack:
                self.figures[-1]["specs"].append(json.loads(text))
            self._script = None
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script[1].append(data)
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
    # One script runs: the page's own, inline, allowed by its hash and nothing else; every
    # other <script> is a chart spec (JSON, never run). No inline event handlers, no eval.
    code = [(a, t) for a, t in page.script_elements if a.get("type") != "application/json"]
    assert len(code) == 1 and code[0][0] == {}, [a for a, _ in code]
    js = code[0][1]
    assert "eval(" not in js and "Function(" not in js and "setTimeout(\"" not in js
    assert page.handlers == []
    digest = base64.b64encode(hashlib.sha256(js.encode()).digest()).decode()
    assert len(page.csp) == 1
    policy = dict((d.strip().split(" ", 1) + [""])[:2] for d in page.csp[0].split(";"))
    assert policy["default-src"] == "'none'" and policy["img-src"] == "data:"
    assert policy["script-src"] == f"'sha256-{digest}'"
    assert page.scripts == 1 + sum(len(f["specs"]) for f in page.figures)
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


@pytest.fixture(scope="session")  # shared with test_report_browser.py
def results(tmp_path_factory: pytest.TempPathFactory, memcached) -> Path:  # noqa: ANN001
    """A directory of saved results: a measured profile, the published profile, a simulation
    and a USL fit, each written by its verb's own writer (with SVGs beside the JSON)."""
    root = tmp_path_factory.mktemp("results")
    spec = ProfileSpec.quick(sizes=(100, 10_000), key_counts=(1, 10), samples=300, seed=1)
    profile(spec, server=memcached.address).write(root / "profile")
    load_profile("appengine-2017").write(root / "published")
    trace = traces.synthesize(traces.SynthParams(requests=2_000))
    sim = simulate(trace, SimulateSpec(draws=2, strategies=("none", "lru:100", "fixed:100")))
    sim.write(root / "simulate")
    fit_csv(USL_DATA, "load", "throughput", bootstrap=100).write(root / "usl")
    (root / "notes.json").write_text('{"not": "a cachelab result"}')
    return root


TRACES = Path(__file__).parents[1] / "data" / "traces"


@pytest.fixture(scope="session")
def more(tmp_path_factory: pytest.TempPathFactory, results: Path, memcached) -> Path:  # noqa: ANN001
    """The other kinds, small: a closed-loop load run, a storage-tiers run, a replay, a
    comparison of two simulations and a flat (miss-ratio) simulation, each written as its verb
    writes it (without plots where the verb allows: the report re-draws them)."""
    root = tmp_path_factory.mktemp("more")
    r = load_lib.load(load_lib.LoadSpec(duration=1.5, warmup=0.5, interval=0.25, connections=1,
                                        key_space=200), server=memcached.address)
    r.write(root / "load", plots=False)
    tiers_lib.tiers(tiers_lib.TiersSpec(reads=3, warmup=1, record_bytes=5_000, list_items=50),
                    server=memcached.address).save(root / "tiers" / "tiers.json")
    small = traces.synthesize(traces.SynthParams(
        requests=300, domains=2, subjects_per_domain=2.0, topics_per_subject=3.0,
        tutorials_per_topic=3.0, items_per_tutorial=4.0, instances=3))
    replay_lib.replay(small, replay_lib.ReplaySpec(strategies=("none", "lru:10"),
                                                   profile_samples=50, profile_warmup=5,
                                                   draws=2),
                      server=memcached.address).save(root / "replay" / "replay.json")
    trace = traces.synthesize(traces.SynthParams(requests=1_000))
    sims = []
    for model in ("appengine-2017", str(results / "profile" / "profile.json")):
        sim = simulate(trace, SimulateSpec(model=model, draws=2, strategies=("none", "lru:50")))
        sims.append(sim.save(root / "sims" / f"sim{len(sims)}" / "simulate.json"))
    compare(sims).save(root / "compare" / "compare.json")
    p = cachelab("simulate", TRACES / "cloudPhysicsIO.oracleGeneral.bin", "--policies",
                 "lru,fifo", "--sizes", "500,2000,5000", "--mrc", "--out", root / "flat")
    assert p.returncode == 0, p.stderr
    return root


@pytest.fixture(scope="session")
def swept(tmp_path_factory: pytest.TempPathFactory, memcached) -> Path:  # noqa: ANN001
    """A small scale sweep (3 points, each run until its p99 is within ±5 % or 0.4 s: the
    table's widest shape) and a run of one step (the run's table), as their verbs write
    them: a few seconds."""
    root = tmp_path_factory.mktemp("swept")
    scale(ScaleSpec(points=[1, 2, 3], repeats=1, warmup=0.1, settle=0.1, window=0.3,
                    interval=0.1, bootstrap=50, precision=0.05, workload={"key_space": 500}),
          server=memcached.address).write(root / "scale")
    run_study(RunSpec(quick=True, steps=("simulate",), requests=300, report=False,
                      precision=None), root / "run", server=memcached.address,
              log=lambda _line: None)
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
    # Every plot is also an interactive chart: one spec per figure, beside its static image.
    assert len(page.figures) == 7
    assert all(len(f["images"]) == 1 and len(f["specs"]) == 1 for f in page.figures)
    titles = [f["specs"][0]["title"] for f in page.figures]
    assert sum(t.startswith("get latency by value size") for t in titles) == 2
    assert sum(t.startswith("multi-get latency") for t in titles) == 2
    assert any(t.startswith("set latency") for t in titles)
    assert any(t.startswith("Simulated latency increase") for t in titles)
    assert "USL fit" in titles


def specs_of(page: Page) -> list[dict]:
    return [s for f in page.figures for s in f["specs"]]


def test_chart_specs_hold_the_numbers_in_the_json(results: Path) -> None:
    page = parse(render_report([results / "simulate", results / "usl"]).html)
    usl_spec, sim_spec = specs_of(page)  # page order: the fit, then the simulation
    sim = json.loads((results / "simulate" / "simulate.json").read_text())
    drawn = {s["name"]: s for s in sim_spec["series"]}
    for s in sim["strategies"]:
        c = s["curve"]
        want = [[100 - p, m] for p, m in zip(c["percentile"], c["median"]) if m > 0]
        if not want:  # nothing above zero cannot be shown on a log axis (as in the SVG)
            assert s["strategy"] not in drawn
            continue
        got = drawn[s["strategy"]]["points"]
        assert len(got) == len(want)
        for (gx, gy), (wx, wy) in zip(got, want):
            assert gx == pytest.approx(wx, rel=1e-9) and gy == pytest.approx(wy, rel=1e-9)
    assert sim_spec["x"]["scale"] == sim_spec["y"]["scale"] == "log"
    assert sim_spec["x"]["format"] == "invpct" and sim_spec["y"]["format"] == "percent"
    fit = json.loads((results / "usl" / "usl.json").read_text())
    measured = next(s for s in usl_spec["series"] if s["name"] == "measured")
    assert measured["points"] == [[pytest.approx(n), pytest.approx(x)]
                                  for n, x in zip(fit["n"], fit["x"])]
    curve = next(s for s in usl_spec["series"] if s["name"].startswith("USL fit"))
    assert all(lo <= y <= hi for (_, y), (_, lo, hi) in zip(curve["points"], curve["band"]))
    # The fitted curve passes through the JSON's fitted values at the measured N.
    f = UslFit.from_dict(fit, "usl.json")
    assert [p["x"] for p in f.predict(fit["n"])] == pytest.approx(fit["fitted"], rel=1e-6)


def test_profile_chart_values_are_the_histogram_percentiles(results: Path) -> None:
    page = parse(render_report([results / "profile"]).html)
    get = next(s for s in specs_of(page) if s["title"].startswith("get latency"))
    data = json.loads((results / "profile" / "profile.json").read_text())
    cells = {c["value_size"]: c for c in data["cells"] if c["op"] == "get"}
    unit = get["y"]["unit"]
    scale = {"µs": 1e3, "ms": 1e6, "s": 1e9}[unit]
    assert get["y"]["label"] == f"latency ({unit})"
    for series, size in zip(get["series"], (100, 10_000)):
        at = {round(x, 6): y for x, y in series["points"]}
        for key in ("90", "99", "99.9"):  # x = 100 - p: the decades are sampled exactly
            assert at[round(100 - float(key), 6)] == pytest.approx(
                cells[size]["percentiles"][key] / scale, rel=1e-6)


def test_chart_json_cannot_end_its_script_element() -> None:
    spec = {"title": "</script><script>alert(1)</script><!-- & \u2028", "x": 1}
    text = chart_json(spec)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == spec
    with pytest.raises(ValueError):
        chart_json({"y": float("nan")})


def test_the_chart_script_ships_with_the_package() -> None:
    assert resources.files("cachelab.page").joinpath("charts.js").is_file()
    js = script()
    assert "cachelabCharts" in js and "</script" not in js.lower()


def test_tables_show_the_numbers_in_the_json(results: Path) -> None:
    data = json.loads((results / "profile" / "profile.json").read_text())
    page = parse(render_report([results / "profile"]).html)
    get_table = next(t for t in page.tables if t[0][1:] == ["100B", "10KB"])
    cells = {c["value_size"]: c for c in data["cells"] if c["op"] == "get"}
    by_row = {row[0]: row[1:] for row in get_table[1:]}
    for key in ("5", "50", "99", "99.9"):
        # A percentile the cell's 300 samples cannot pin down (no interval) is "n/a (k)",
        # k the samples beyond it; the others are the JSON's numbers.
        assert by_row[f"p{key}"] == [
            dur(c["percentiles"][key]) if c["intervals"][key] is not None
            else f"n/a ({int(c['samples'] * (1 - float(key) / 100) + 1e-9)})"
            for c in (cells[100], cells[10_000])]
    assert by_row["p99.9"] == ["n/a (0)", "n/a (0)"]
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
    assert [len(f["specs"]) for f in page.figures] == [1, 1, 1, 1]


def test_cli_writes_the_page_and_a_static_copy(
        cli: InProcess, results: Path, tmp_path: Path) -> None:
    out = tmp_path / "r"
    p = cli("report", results, "--out", out, "--static", tmp_path / "png", "--format", "table")
    assert p.returncode == 0, p.stderr
    assert f"wrote {out / 'report.html'}" in p.stdout
    parse((out / "report.html").read_text())
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
def test_bad_inputs_exit_2_with_one_line(
        cli: InProcess, tmp_path: Path, setup, expect: str) -> None:  # noqa: ANN001
    target = setup(tmp_path)
    p = cli("report", target, "--out", tmp_path / "r.html")
    assert p.returncode == 2
    assert expect in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "r.html").exists()


def test_every_kind_gets_its_charts(more: Path) -> None:
    rep = render_report([more])
    page = parse(rep.html)
    check_self_contained(rep.html, page)
    assert sorted(s.kind for s in rep.sections) == ["compare", "load", "replay", "simulation",
                                                    "simulation", "simulation", "tiers"]
    assert all(not n.startswith("no interactive chart") for s in rep.sections for n in s.notes)
    # A static image beside every chart, but the replay's (no verb draws one: its table has
    # the numbers).
    replay = [f for f in page.figures if f["specs"][0]["title"].startswith("Replay")]
    assert len(replay) == 1 and replay[0]["images"] == []
    assert all(len(f["images"]) == 1 and f["specs"] for f in page.figures if f not in replay)
    by_title = {s["title"]: s for s in specs_of(page)}

    load = json.loads((more / "load" / "load.json").read_text())
    thr = by_title["throughput over time"]["series"][0]
    assert [y for _, y in thr["points"]] == pytest.approx(
        [iv["throughput"] for iv in load["intervals"]])
    lat = by_title["latency over time"]
    assert [s["name"] for s in lat["series"]] == ["p50 (uncorrected)", "p99 (uncorrected)",
                                                  "p99.9 (uncorrected)"]

    tiers = json.loads((more / "tiers" / "tiers.json").read_text())
    bars = [s for s in specs_of(page) if s["kind"] == "bars" and s["title"].startswith("Read")]
    assert len(bars) == 2  # one per data shape, as the static figure's panels
    for spec in bars:
        rows = [r for r in tiers["rows"] if r["method"] in spec["categories"]
                and spec["title"].endswith(("record", "records"))]
        shape = "record" if spec["title"].endswith("record") else "list"
        rows = [r for r in tiers["rows"] if r["shape"] == shape]
        assert spec["categories"] == [r["method"] for r in rows]
        assert spec["series"][0]["values"] == pytest.approx([r["wall_p50_us"] for r in rows])
        assert spec["series"][1]["values"] == pytest.approx([r["cpu_mean_us"] for r in rows])

    replay = json.loads((more / "replay" / "replay.json").read_text())
    spec = by_title["Replay: measured vs predicted added latency"]
    drawn = {s["name"]: dict((round(100 - x, 6), y) for x, y in s["points"])
             for s in spec["series"]}
    for s in replay["strategies"]:
        for k, v in s["increase"].items():
            assert drawn[f"{s['strategy']} measured"][float(k)] == pytest.approx(v["measured"])
            assert drawn[f"{s['strategy']} predicted"][float(k)] == pytest.approx(v["predicted"])

    cmp = json.loads((more / "compare" / "compare.json").read_text())
    spec = next(s for s in specs_of(page) if s["title"].endswith("change relative to A"))
    rows = [r for r in cmp["rows"] if r["relative"] is not None]
    assert len(spec["categories"]) == len({(r["item"], r["metric"]) for r in rows})
    got = sorted(v for s in spec["series"] for v in s["values"] if v is not None)
    assert got == pytest.approx(sorted(r["relative"] for r in rows))

    flat = json.loads((more / "flat" / "simulate.json").read_text())
    spec = by_title["Miss ratio by cache size"]
    lru = next(s for s in spec["series"] if s["name"] == "lru")
    assert lru["points"] == [[r["capacity"], pytest.approx(r["miss_ratio"])]
                             for r in sorted(flat["results"], key=lambda r: r["capacity"])
                             if r["policy"] == "lru"]
    assert any(s["name"].startswith("LRU miss-ratio curve") for s in spec["series"])


class _Text(HTMLParser):
    """The text a reader sees: every text node outside <script> and <style>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inside = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.inside += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self.inside -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self.inside and data.strip():
            self.text.append(data.strip())


def test_numbers_on_the_page_have_no_exponent(results: Path, more: Path, swept: Path) -> None:
    """Issue 31: the page read ``NOT ±3.2e+02 %``, ``[4.92e-05, 0.00016]`` and
    ``γ = 1.578e+04``. No text a reader sees (the page's, and the titles, axis labels, legend
    entries, marks and categories the charts draw) holds a number in exponent form."""
    rep = render_report([results, more, swept])
    reader = _Text()
    reader.feed(rep.html)
    texts = list(reader.text)
    for spec in specs_of(parse(rep.html)):
        texts += [spec["title"], spec["x"]["label"], (spec.get("y") or {}).get("label", "")]
        texts += [s["name"] for s in spec["series"]] + [str(c) for c in spec.get("categories", [])]
        texts += [m.get("label", "") for m in spec.get("marks", [])]
    assert len(texts) > 1000
    assert [t for t in texts if re.search(r"\d[eE][+-]\d", t)] == []
