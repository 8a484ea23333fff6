"""``cachelab report`` in a real headless browser (Chromium from the OS packages): the page loads
with no console errors and no network requests, every interactive chart draws (and with scripts
off every static plot paints something), hovering a point reads out the JSON's numbers, the
legend hides series, drag zooms and double-click resets, and the tables the browser builds
show the numbers in the JSON.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON
messages ending in NUL on file descriptors 3 and 4), so nothing but the standard library is
needed. Chromium is installed by scripts/install-system-deps.sh; without it these tests fail
and say so (set CACHELAB_SKIP_BROWSER=1 to skip them on purpose).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_report as tr

from cachelab.report import write_report
from cachelab.units import dur

# A headless Chromium for each case; the first test here also builds the saved results (a
# profile, a load run, tiers, a replay: minutes on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

results = tr.results  # the session-scoped fixtures: saved results written by each verb's writer
more = tr.more

STEP_TIMEOUT = 30.0  # seconds any one browser step may take


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium, its network cut off, driven over the DevTools pipe."""

    def __init__(self, binary: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="cachelab-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # in the child, before exec: our pipe ends become fds 3 and 4
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        argv = [binary, "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update",
                "--disable-default-apps", "--disable-domain-reliability", "--mute-audio",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
                "--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=1200,900",
                f"--user-data-dir={self._profile}", "--remote-debugging-pipe", "about:blank"]
        self._stderr = tempfile.TemporaryFile(prefix="cachelab-chromium-")  # noqa: SIM115
        # close_fds=False: fds 3 and 4 are made in preexec_fn and must survive until exec.
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=self._stderr,
                                      preexec_fn=fds, close_fds=False, start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    # -- protocol ----------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium exited: {self._stderr_tail()}")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             session: bool = True, timeout: float = STEP_TIMEOUT) -> dict[str, Any]:
        """Call ``method`` and return its result; events that arrive meanwhile are kept."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, timeout: float = STEP_TIMEOUT) -> dict[str, Any]:
        """The first event named ``method`` (already received or still to come)."""
        for ev in self.events:
            if ev["method"] == method:
                return ev
        deadline = time.monotonic() + timeout
        while True:
            ev = self._read_message(deadline)
            if "method" in ev:
                self.events.append(ev)
                if ev["method"] == method:
                    return ev

    def evaluate(self, expression: str) -> Any:
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression[:60]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    # -- set-up ------------------------------------------------------------------------------

    def open_page(self) -> None:
        """Attach to the first page and turn on the domains that report what it does."""
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": page["targetId"], "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                       "downloadThroughput": -1,
                                                       "uploadThroughput": -1})

    def load(self, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")
        # Every visible <img> decoded (or failed) before anything is measured.
        self.evaluate("Promise.all([...document.images].filter(i => i.offsetWidth)"
                      ".map(i => i.decode().catch(() => 0)))")

    def mouse(self, kind: str, x: float, y: float, *, clicks: int = 1,
              button: str = "left") -> None:
        """A real mouse event at viewport pixel (x, y): mouseMoved, mousePressed or
        mouseReleased."""
        params: dict[str, Any] = {"type": kind, "x": x, "y": y, "button": button}
        if kind != "mouseMoved":
            params["clickCount"] = clicks
        else:
            params["buttons"] = 0
        self.send("Input.dispatchMouseEvent", params)

    def click(self, x: float, y: float, clicks: int = 1) -> None:
        self.mouse("mouseMoved", x, y)
        for n in range(1, clicks + 1):
            self.mouse("mousePressed", x, y, clicks=n)
            self.mouse("mouseReleased", x, y, clicks=n)

    def shot(self, clip: dict[str, float]) -> str:
        clip = {k: clip[k] for k in ("x", "y", "width", "height")} | {"scale": 1}
        return self.send("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                    "captureBeyondViewport": True})["data"]

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").splitlines()
        return " | ".join(line.strip() for line in lines[-5:]) or "no output"

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(RuntimeError, TimeoutError, OSError):
                self.send("Browser.close", session=False, timeout=5)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for fd in (self._to_child, self._from_child):
            os.close(fd)
        self._stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    binary = _chromium()
    if binary is None:
        if os.environ.get("CACHELAB_SKIP_BROWSER") == "1":
            pytest.skip("CACHELAB_SKIP_BROWSER=1: the report is not checked in a browser")
        pytest.fail("chromium is not installed: run scripts/install-system-deps.sh (or "
                    "apt-get install -y chromium), or set CACHELAB_SKIP_BROWSER=1")
    b = Browser(binary)
    try:
        b.open_page()
        yield b
    finally:
        b.close()


IMAGES_JS = """[...document.images].map(i => {
    const r = i.getBoundingClientRect();
    return {alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
            x: r.left + window.scrollX, y: r.top + window.scrollY,
            width: r.width, height: r.height};
})"""

#: Each chart as drawn: its box on the page, its title, and per series how many marks (paths,
#: rects, circles) it drew with a non-zero size and whether it is shown.
CHARTS_JS = """window.cachelabCharts.map(c => {
    const r = c.svg.getBoundingClientRect();
    const series = [...c.svg.querySelectorAll('g.cl-series')].map(g => ({
        shown: g.getAttribute('display') !== 'none',
        marks: [...g.querySelectorAll('path, rect, circle')].filter(e => {
            const b = e.getBBox(); return b.width > 0 || b.height > 0; }).length}));
    return {title: c.spec.title, kind: c.spec.kind, series: series,
            x: r.left + window.scrollX, y: r.top + window.scrollY,
            width: r.width, height: r.height};
})"""


@pytest.fixture(scope="module")
def page(results: Path, more: Path, browser: Browser, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, Any]:
    """The report of every saved result, loaded in the browser: what it logged and fetched,
    its charts, images and tables as the browser sees them."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    write_report([results, more], out)
    url = out.resolve().as_uri()
    browser.load(url)
    charts = browser.evaluate(CHARTS_JS)
    images = browser.evaluate(IMAGES_JS)
    tables = browser.evaluate("""[...document.querySelectorAll('table')].map(t =>
        [...t.rows].map(r => [...r.cells].map(c => c.textContent.trim())))""")
    shots = [browser.shot(c) if c["width"] >= 1 and c["height"] >= 1 else None for c in charts]
    return {"url": url, "html": out.read_text(), "events": list(browser.events),
            "charts": charts, "images": images, "tables": tables, "shots": shots}


def _console_errors(events: list[dict[str, Any]]) -> list[str]:
    errors = []
    for ev in events:
        p = ev["params"]
        if ev["method"] == "Runtime.exceptionThrown":
            errors.append(str(p["exceptionDetails"].get("text")))
        elif ev["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert",
                                                                          "warning"):
            errors.append(str(p.get("args")))
        elif ev["method"] == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            errors.append(str(p["entry"].get("text")))
    return errors


def _requests(events: list[dict[str, Any]]) -> list[str]:
    """URLs the page asked for, but data: URIs (decoded in place: no request leaves)."""
    return [ev["params"]["request"]["url"] for ev in events
            if ev["method"] == "Network.requestWillBeSent"
            and not ev["params"]["request"]["url"].startswith("data:")]


def test_page_loads_without_console_errors(page: dict[str, Any]) -> None:
    assert _console_errors(page["events"]) == []
    assert any(ev["method"] == "Page.loadEventFired" for ev in page["events"])


def test_page_makes_no_network_requests(page: dict[str, Any]) -> None:
    # The page itself is read from disk; nothing else is requested.
    assert _requests(page["events"]) == [page["url"]]
    assert [ev for ev in page["events"] if ev["method"] == "Network.loadingFailed"] == []


def test_outside_requests_and_console_errors_are_caught(browser: Browser,
                                                        tmp_path: Path) -> None:
    """The checks above see a fetched image and a logged error (so they can fail)."""
    f = tmp_path / "bad.html"
    f.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">'
                 '<script>console.error("boom")</script></body></html>')
    browser.load(f.resolve().as_uri())
    assert _requests(browser.events) == [f.resolve().as_uri(), "http://example.invalid/x.png"]
    errors = _console_errors(browser.events)
    assert any("boom" in e for e in errors) and any("Failed to load" in e for e in errors)


def _painted(png_b64: str) -> tuple[float, int]:
    """Share of the pixels that are not (near) white, and the number of distinct colours."""
    import base64

    import matplotlib.image
    import numpy as np

    rgb = matplotlib.image.imread(io.BytesIO(base64.b64decode(png_b64)), format="png")[..., :3]
    ink = float((rgb.min(axis=2) < 0.9).mean())
    c = (rgb * 255).astype(np.uint32).reshape(-1, 3)
    colours = len(np.unique((c[:, 0] << 16) | (c[:, 1] << 8) | c[:, 2]))  # one int per colour
    return ink, colours


def test_every_chart_renders(page: dict[str, Any]) -> None:
    parsed = tr.parse(page["html"])
    specs = tr.specs_of(parsed)
    charts = page["charts"]
    # One chart drawn per spec on the page, in page order; 7 plots of `results`, and of `more`
    # the load (2 charts), tiers (2), replay, comparison and flat simulation.
    assert [c["title"] for c in charts] == [s["title"] for s in specs]
    assert len(charts) == 7 + 2 + 2 + 1 + 1 + 1 + 2  # + the two simulations compared
    for c, spec, shot in zip(charts, specs, page["shots"]):
        assert c["width"] > 300 and c["height"] > 150, c
        assert len(c["series"]) == len(spec["series"])
        # Every series with data drew marks of non-zero size.
        for s, drawn in zip(spec["series"], c["series"]):
            has_data = bool(s.get("points") or [v for v in s.get("values", []) if v is not None])
            assert drawn["shown"] and (drawn["marks"] > 0) == has_data, (c["title"], s["name"])
        ink, colours = _painted(shot)
        assert 0.01 < ink < 0.9, (c["title"], ink)
        assert colours > 8, (c["title"], colours)
    # With scripts on, the charts replace the static images (which stay in the page).
    assert len(page["images"]) == len(parsed.figures) - 1  # the replay's figure has none
    assert all(im["width"] == 0 for im in page["images"])


def test_static_plots_render_with_scripts_off(page: dict[str, Any], browser: Browser) -> None:
    browser.send("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.load(page["url"])
        images = browser.evaluate(IMAGES_JS)
        live = browser.evaluate("document.querySelectorAll('.cl-live, .cl-chart').length")
        shots = [browser.shot(im) for im in images]
        assert _console_errors(browser.events) == []
    finally:
        browser.send("Emulation.setScriptExecutionDisabled", {"value": False})
        browser.load(page["url"])
    assert live == 0
    figures = tr.parse(page["html"]).figures
    # Load and tiers draw two charts per figure; the replay's figure has no static image.
    assert len(images) == len(figures) - 1 == len(page["charts"]) - 3
    for im, shot in zip(images, shots):
        assert im["complete"] and im["w"] > 100 and im["h"] > 100, im
        assert im["width"] > 100 and im["height"] > 100, im  # laid out on the page
        ink, colours = _painted(shot)
        # A plot: axes, labels and lines, not a blank (or broken-image) box.
        assert 0.01 < ink < 0.9, (im["alt"], ink)
        assert colours > 8, (im["alt"], colours)


def _chart(browser: Browser, title_start: str) -> int:
    """The index of the first chart whose title starts so, scrolled to the middle of the
    viewport."""
    k = browser.evaluate(f"window.cachelabCharts.findIndex(c => "
                         f"c.spec.title.startsWith({json.dumps(title_start)}))")
    assert k >= 0, title_start
    browser.evaluate(f"window.cachelabCharts[{k}].svg.scrollIntoView({{block: 'center'}})")
    return k


def _hover(browser: Browser, k: int, series: int, point: int) -> dict[str, Any]:
    x, y = browser.evaluate(f"window.cachelabCharts[{k}].clientPoint({series}, {point})")
    browser.mouse("mouseMoved", x, y)
    return browser.evaluate(f"""(() => {{ const r = window.cachelabCharts[{k}].readout;
        return {{text: r.textContent, series: r.dataset.series, x: r.dataset.x,
                 y: r.dataset.y}}; }})()""")


def _legend(browser: Browser, k: int, series: int) -> None:
    """Click the legend entry of ``series`` in chart ``k``."""
    box = browser.evaluate(f"""(() => {{ const b = window.cachelabCharts[{k}].legend
        .querySelector('[data-series="{series}"]').getBoundingClientRect();
        return [b.left + b.width / 2, b.top + b.height / 2]; }})()""")
    browser.click(*box)


def test_hover_reads_out_the_json_numbers(page: dict[str, Any], browser: Browser,
                                          results: Path, more: Path) -> None:
    # The simulation: a strategy's point nearest p90 reads the JSON's median there.
    sim = json.loads((results / "simulate" / "simulate.json").read_text())
    s = next(s for s in sim["strategies"] if any(m > 0 for m in s["curve"]["median"]))
    c = s["curve"]
    j_json = min(range(len(c["percentile"])), key=lambda j: abs(c["percentile"][j] - 90.0))
    want = [100 - c["percentile"][j_json], c["median"][j_json]]
    specs = browser.evaluate("window.cachelabCharts.map(c => c.spec)")
    # The chart of this simulation (the page has others): the one that draws this point.
    k, i, j = next((k, i, j) for k, spec in enumerate(specs)
                   if spec["title"].startswith("Simulated latency increase")
                   for i, line in enumerate(spec["series"]) if line["name"] == s["strategy"]
                   for j, pt in enumerate(line["points"]) if pt == pytest.approx(want))
    browser.evaluate(f"window.cachelabCharts[{k}].svg.scrollIntoView({{block: 'center'}})")
    r = _hover(browser, k, i, j)
    assert r["series"] == str(i), (r, s["strategy"])
    assert float(r["x"]) == pytest.approx(want[0], rel=1e-9)
    assert float(r["y"]) == pytest.approx(want[1], rel=1e-9)
    p = f"{c['percentile'][j_json]:.4g}"
    assert r["text"].startswith(f"{s['strategy']} · p{p[:4]}") and r["text"].endswith(" %")
    # The USL fit: with the fitted curve hidden, hovering a measured point reads its N and X.
    fit = json.loads((results / "usl" / "usl.json").read_text())
    k = _chart(browser, "USL fit")
    _legend(browser, k, 1)
    r = _hover(browser, k, 0, 2)
    assert (float(r["x"]), float(r["y"])) == (pytest.approx(fit["n"][2]),
                                              pytest.approx(fit["x"][2]))
    _legend(browser, k, 1)
    # Tiers: a bar reads its method and its median wall time in µs.
    tiers = json.loads((more / "tiers" / "tiers.json").read_text())
    k = _chart(browser, "Reading one")
    row = [r for r in tiers["rows"] if r["shape"] == "record"][1]
    r = _hover(browser, k, 0, 1)
    assert r["x"] == row["method"] and float(r["y"]) == pytest.approx(row["wall_p50_us"])
    assert r["text"].startswith(f"{row['method']} · wall time") and r["text"].endswith(" µs")
    # Moving off the plot clears the readout.
    browser.mouse("mouseMoved", 1, 1)
    assert browser.evaluate(f"window.cachelabCharts[{k}].readout.dataset.y") is None


def test_legend_entry_hides_and_shows_its_series(page: dict[str, Any],
                                                  browser: Browser) -> None:
    k = _chart(browser, "Simulated latency increase")
    state = f"""[...window.cachelabCharts[{k}].svg.querySelectorAll('g.cl-series')]
        .map(g => g.getAttribute('display') !== 'none')"""
    n = len(browser.evaluate(state))
    assert browser.evaluate(state) == [True] * n
    _legend(browser, k, 0)
    assert browser.evaluate(state) == [False] + [True] * (n - 1)
    pressed = browser.evaluate(f"window.cachelabCharts[{k}].legend.querySelector("
                               "'[data-series=\"0\"]').getAttribute('aria-pressed')")
    assert pressed == "false"
    # The hidden series is not read out: hovering its point names another series.
    r = _hover(browser, k, 0, 0)
    assert r["series"] != "0"
    _legend(browser, k, 0)
    assert browser.evaluate(state) == [True] * n


def test_drag_zooms_and_double_click_resets(page: dict[str, Any], browser: Browser) -> None:
    k = _chart(browser, "USL fit")
    dom = f"window.cachelabCharts[{k}].dom"
    home = browser.evaluate(dom)
    box = browser.evaluate(f"""(() => {{ const r = window.cachelabCharts[{k}].svg
        .getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; }})()""")
    left, top, w, h = box
    y = top + h * 0.5
    browser.mouse("mouseMoved", left + w * 0.3, y)
    browser.mouse("mousePressed", left + w * 0.3, y)
    browser.mouse("mouseMoved", left + w * 0.6, y + 2)
    browser.mouse("mouseReleased", left + w * 0.6, y + 2)
    zoomed = browser.evaluate(dom)
    assert home["x"][0] < zoomed["x"][0] < zoomed["x"][1] < home["x"][1]
    assert zoomed["y"] == home["y"]  # a horizontal drag zooms x only
    browser.click(left + w * 0.5, y, clicks=2)
    assert browser.evaluate(dom) == home


def test_blank_image_is_caught(browser: Browser, tmp_path: Path) -> None:
    """The paint check fails on a white image (so the test above can fail)."""
    import base64

    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="300" height="200">'
           '<rect width="300" height="200" fill="white"/></svg>')
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    f = tmp_path / "blank.html"
    f.write_text(f'<!DOCTYPE html><html><body style="margin:0"><img src="{uri}"></body></html>')
    browser.load(f.resolve().as_uri())
    shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": {
        "x": 0, "y": 0, "width": 300, "height": 200, "scale": 1}})
    ink, colours = _painted(shot["data"])
    assert ink < 0.01 and colours <= 8


def test_tables_in_the_browser_match_the_json(page: dict[str, Any], results: Path) -> None:
    # The browser's tables are the ones written into the HTML, cell for cell...
    assert page["tables"] == tr.parse(page["html"]).tables
    # ...and show the JSON's numbers.
    data = json.loads((results / "profile" / "profile.json").read_text())
    cells = {c["value_size"]: c for c in data["cells"] if c["op"] == "get"}
    get_table = next(t for t in page["tables"] if t[0][1:] == ["100B", "10KB"]
                     and ["samples", "300", "300"] in t)  # the measured profile's
    by_row = {row[0]: row[1:] for row in get_table[1:]}
    for key in ("5", "50", "99", "99.9"):
        # A percentile the cell's 300 samples cannot pin down (no interval) is "n/a (k)",
        # k the samples beyond it; the others are the JSON's numbers.
        assert by_row[f"p{key}"] == [
            dur(c["percentiles"][key]) if c["intervals"][key] is not None
            else f"n/a ({int(c['samples'] * (1 - float(key) / 100) + 1e-9)})"
            for c in (cells[100], cells[10_000])]
    assert by_row["p99.9"] == ["n/a (0)", "n/a (0)"]
    sim = json.loads((results / "simulate" / "simulate.json").read_text())
    names = [s["strategy"] for s in sim["strategies"]]
    table = next(t for t in page["tables"]  # the page has other simulations' tables too
                 if t[0][0] == "strategy" and [r[0] for r in t[1:]] == names)
    for row, s in zip(table[1:], sim["strategies"]):
        hit = f"{100 * s['hit_ratio']:.1f}"
        assert any(c.startswith(hit) for c in row), (row, hit)


# -- the page on real screens -------------------------------------------------------------------

swept = tr.swept

#: What does not fit the screen as the browser lays the page out: the page's width against the
#: viewport's; every element (an SVG as a whole) and every line of text reaching past the
#: viewport's left or right edge but inside a box that scrolls sideways (itself on screen); SVG
#: text cut by the edge of its drawing; and every text (HTML or SVG) drawn under 9 px (an SVG
#: label's font size times the drawing's scale on screen). Counts of what was looked at too.
LAYOUT_JS = r"""(() => {
  const vw = document.documentElement.clientWidth;
  const past = r => r.right > vw + 1 || r.left < -1;
  const scrolls = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (/auto|scroll/.test(getComputedStyle(a).overflowX)) {
        return !past(a.getBoundingClientRect());
      }
    }
    return false;
  };
  const what = (el, text) => el.tagName.toLowerCase() +
    (el.getAttribute('class') ? '.' + el.getAttribute('class').trim().split(/\s+/).join('.') : '')
    + ' "' + (text === undefined ? el.textContent : text).trim().slice(0, 60) + '"';
  const overflow = [], small = [], cut = [];
  let elements = 0, texts = 0, svgTexts = 0;
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') { continue; }
    const r = el.getBoundingClientRect();
    if (!(r.width > 0 || r.height > 0)) { continue; }
    elements += 1;
    if (past(r) && !scrolls(el)) {
      overflow.push(what(el) + ` at ${Math.round(r.left)}..${Math.round(r.right)} px`);
    }
  }
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const el = n.parentElement, text = n.textContent.trim();
    if (!text || !el || el.closest('script, style, title')) { continue; }
    range.selectNodeContents(n);
    const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0);
    const svg = el.closest('svg');
    const box = svg ? el.getBoundingClientRect() : null;
    if (!rects.length && !(box && box.width > 0)) { continue; }
    texts += 1;
    let size = parseFloat(getComputedStyle(el).fontSize);
    if (svg) {
      svgTexts += 1;
      const m = el.getScreenCTM(), s = svg.getBoundingClientRect();
      size *= Math.hypot(m.a, m.b);
      if (box.left < s.left - 1 || box.right > s.right + 1 || box.top < s.top - 1 ||
          box.bottom > s.bottom + 1) { cut.push(what(el, text)); }
      if (past(box) && !scrolls(svg)) { overflow.push(what(el, text)); }
    } else if (rects.some(past) && !scrolls(el)) {
      overflow.push(what(el, text));
    }
    if (size < 9) { small.push(what(el, text) + ` ${size.toFixed(1)} px`); }
  }
  return {viewport: vw, inner: window.innerWidth, page: document.documentElement.scrollWidth,
          overflow: overflow, cut: cut, small: small, elements: elements, texts: texts,
          svg_texts: svgTexts};
})()"""

#: Per USL chart (a "measured" series beside "linear scaling γN"): the share of the plot's
#: height between its highest and lowest measured point, as drawn.
USL_SPAN_JS = r"""window.cachelabCharts.filter(c =>
    c.spec.series.some(s => s.name.startsWith('linear scaling'))).map(c => {
  const i = c.spec.series.findIndex(s => s.name === 'measured');
  const dots = [...c.svg.querySelectorAll(`g.cl-series[data-series="${i}"] circle`)]
    .map(e => { const r = e.getBoundingClientRect(); return r.top + r.height / 2; });
  const plot = c.svg.querySelector('.cl-frame').getBoundingClientRect();
  return {title: c.spec.title, points: dots.length,
          span: (Math.max(...dots) - Math.min(...dots)) / plot.height,
          inside: dots.every(y => y >= plot.top - 1 && y <= plot.bottom + 1)};
})"""


def _at_width(browser: Browser, url: str, width: int, js: str) -> Any:
    """``js`` evaluated on the page at ``url`` loaded in a viewport ``width`` px wide (a
    phone's, with its viewport meta honoured, below 600 px)."""
    browser.send("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
    try:
        browser.load(url)
        return browser.evaluate(js)
    finally:
        browser.send("Emulation.clearDeviceMetricsOverride")


@pytest.fixture(scope="module")
def full_page(results: Path, more: Path, swept: Path,
              tmp_path_factory: pytest.TempPathFactory) -> str:
    """The report of every saved result, a scale sweep and a run's table among them: its
    URL."""
    out = tmp_path_factory.mktemp("full") / "report.html"
    rep = write_report([results, more, swept], out)
    assert {"run", "profile", "load", "scale", "usl", "simulation", "tiers", "replay",
            "compare"} <= {s.kind for s in rep.sections}
    return out.resolve().as_uri()


@pytest.mark.parametrize("width", [390, 1400])
def test_page_fits_the_screen(browser: Browser, full_page: str, page: dict[str, Any],
                              width: int) -> None:
    """Issue 31: tables ran off the page (at 390 px cut after their third column) and chart
    labels were 5 px tall on a phone. Now: wide tables scroll in their own box, the page never
    sideways, and every label is at least 9 px."""
    try:
        r = _at_width(browser, full_page, width, LAYOUT_JS)
    finally:
        browser.load(page["url"])  # the page the other tests use, at the usual size
    assert r["viewport"] == r["inner"] == width
    # Something was looked at: the page's elements, its text and the charts' labels.
    assert r["elements"] > 500 and r["texts"] > 500 and r["svg_texts"] > 100, r
    assert r["overflow"] == [], r["overflow"][:10]
    assert r["page"] <= width
    assert r["cut"] == [], r["cut"][:10]
    assert r["small"] == [], r["small"][:10]


def test_usl_chart_shows_the_measured_points_across_its_height(
        browser: Browser, full_page: str, page: dict[str, Any], swept: Path) -> None:
    """Issue 31: the linear-scaling line climbed to 440k/s and squashed the measured 57-77k/s
    into the bottom fifth of the chart. The axes now follow the data (the line is clipped)."""
    try:
        charts = _at_width(browser, full_page, 1400, USL_SPAN_JS)
    finally:
        browser.load(page["url"])
    # The USL fit's chart and the scale sweep's (when its 3 points had a fit).
    has_fit = json.loads((swept / "scale" / "scale.json").read_text()).get("fit") is not None
    assert len(charts) == 1 + has_fit, charts
    for c in charts:
        assert c["points"] >= 3 and c["inside"], c
        assert c["span"] > 0.6, c


def test_layout_checks_catch_overflow_cut_and_small_text(browser: Browser,
                                                         tmp_path: Path) -> None:
    """The checks above see a table running off the page, a 7 px line, an SVG label cut by
    its drawing's edge (so they can fail), and let a wide table scroll in its own box."""
    f = tmp_path / "bad.html"
    def row(word: str) -> str:
        return "<tr>" + "".join(f"<td>{word} {i}</td>" for i in range(40)) + "</tr>"
    f.write_text(
        '<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
        '</head><body style="margin:0">'
        f'<div style="overflow-x:auto"><table>{row("scrolled")}</table></div>'
        f'<table style="white-space:nowrap">{row("overflowing")}</table>'
        '<p style="font-size:7px">too small to read</p>'
        '<svg width="200" height="50" viewBox="0 0 200 50"><text x="150" y="30" '
        'font-size="12">cut off at the edge</text></svg></body></html>')
    r = _at_width(browser, f.resolve().as_uri(), 390, LAYOUT_JS)
    assert r["page"] > 390
    assert any(o.startswith("table ") for o in r["overflow"]), r["overflow"]
    assert any(o.startswith('td "overflowing 39"') for o in r["overflow"]), r["overflow"]
    assert not any("scrolled" in o or o.startswith("div") for o in r["overflow"]), r["overflow"]
    assert [s.split(" px")[0] for s in r["small"]] == ['p "too small to read" 7.0']
    assert r["cut"] == ['text "cut off at the edge"']


@pytest.mark.parametrize("width", [390, 1400])
def test_an_axis_label_at_the_drawings_edge_stays_inside_it(browser: Browser, tmp_path: Path,
                                                           width: int) -> None:
    """The last x tick's label centred on it ran past a phone's narrow right margin ("10,000"
    cut, seen with a loaded machine's wider latencies)."""
    from cachelab.page.charts import axis
    from cachelab.page.html import figure, page

    spec = {"kind": "xy", "title": "a wide tick label at the right edge",
            "x": axis("requests/s"), "y": axis("latency", unit="µs"),
            "series": [{"name": "measured", "type": "line",
                        "points": [[0.0, 1.0], [50_000.0, 2.0], [97_000.0, 3.0]]}]}
    f = tmp_path / "edge.html"
    f.write_text(page("edge", "one chart", [figure(None, "a chart", [spec])]))
    r = _at_width(browser, f.resolve().as_uri(), width, LAYOUT_JS)
    assert r["svg_texts"] >= 5, r  # the chart was drawn, its ticks labelled
    assert r["cut"] == [], r["cut"][:10]
