"""``cachelab report`` in a real headless browser (Chromium from the OS packages): the page loads
with no console errors and no network requests, every plot paints something, and the tables
the browser builds show the numbers in the JSON.

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
from cachelab.report.sections import dur

results = tr.results  # the module-scoped fixture: saved results written by each verb's writer

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
        # Every <img> decoded (or failed) before anything is measured.
        self.evaluate("Promise.all([...document.images].map(i => i.decode().catch(() => 0)))")

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


@pytest.fixture(scope="module")
def page(results: Path, browser: Browser, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, Any]:
    """The report of every saved result, loaded in the browser: what it logged and fetched,
    its images and its tables as the browser sees them."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    write_report([results], out)
    url = out.resolve().as_uri()
    browser.load(url)
    images = browser.evaluate("""[...document.images].map(i => {
        const r = i.getBoundingClientRect();
        return {alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
                x: r.left + window.scrollX, y: r.top + window.scrollY,
                width: r.width, height: r.height};
    })""")
    tables = browser.evaluate("""[...document.querySelectorAll('table')].map(t =>
        [...t.rows].map(r => [...r.cells].map(c => c.textContent.trim())))""")
    shots = []
    for im in images:
        if im["width"] >= 1 and im["height"] >= 1:
            clip = {k: im[k] for k in ("x", "y", "width", "height")} | {"scale": 1}
            shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                           "captureBeyondViewport": True})
            shots.append(shot["data"])
        else:
            shots.append(None)
    return {"url": url, "html": out.read_text(), "events": list(browser.events),
            "images": images, "tables": tables, "shots": shots}


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
    colours = len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    return ink, colours


def test_every_plot_renders(page: dict[str, Any]) -> None:
    images = page["images"]
    assert len(images) == 7  # as in test_report: 3 + 2 profile plots, simulation, USL fit
    for im, shot in zip(images, page["shots"]):
        assert im["complete"] and im["w"] > 100 and im["h"] > 100, im
        assert im["width"] > 100 and im["height"] > 100, im  # laid out on the page
        assert shot is not None
        ink, colours = _painted(shot)
        # A plot: axes, labels and lines, not a blank (or broken-image) box.
        assert 0.01 < ink < 0.9, (im["alt"], ink)
        assert colours > 8, (im["alt"], colours)


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
        assert by_row[f"p{key}"] == [dur(cells[100]["percentiles"][key]),
                                     dur(cells[10_000]["percentiles"][key])]
    sim = json.loads((results / "simulate" / "simulate.json").read_text())
    table = next(t for t in page["tables"] if t[0][0] == "strategy")
    assert [r[0] for r in table[1:]] == [s["strategy"] for s in sim["strategies"]]
    for row, s in zip(table[1:], sim["strategies"]):
        hit = f"{100 * s['hit_ratio']:.1f}"
        assert any(c.startswith(hit) for c in row), (row, hit)
