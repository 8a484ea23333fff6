"""The README's sizing workflow ends on a page with the answer: a capture, ``size`` and a flat
``simulate`` into one directory, then ``report`` of it — the size result has its section (the
answers first, the hit-ratio curve as a chart, formatted numbers), nothing is left under
"Files not included", no heading is empty and no number is a raw float."""

from __future__ import annotations

import html
import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cachelab import _core
from cachelab.servers import PrivateMemcached
from cachelab.traces.capture import CaptureSpec, capture
from cachelab.units import human_bytes, pct
from clitools import InProcess


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A look-aside zipf workload's capture on a private 8 MB memcached (a few seconds)."""
    path = tmp_path_factory.mktemp("sizing") / "day" / "trace.capture.parquet"
    path.parent.mkdir()
    with PrivateMemcached(memory_mb=8, threads=2) as mc:
        done = threading.Event()
        worker = threading.Thread(target=capture, args=(CaptureSpec(mc.address, duration=60),
                                                        path), kwargs={"stop": done.is_set})
        worker.start()
        try:
            time.sleep(0.3)
            rng = np.random.default_rng(2)
            p = np.arange(1, 3_001, dtype=float) ** -0.9
            value = b"v" * 3000
            with _core.Client(mc.address) as c:
                for k in rng.choice(3_000, size=6_000, p=p / p.sum()):
                    key = f"z:{int(k)}"
                    if c.get(key) is None:
                        c.set(key, value)
                    if int(k) % 50 == 0:
                        time.sleep(0)  # let the capture keep up
            time.sleep(0.3)
        finally:
            done.set()
            worker.join(30)
    assert not worker.is_alive() and path.is_file()
    return path


def sections(page: str) -> dict[str, str]:
    """Section id -> its HTML."""
    return dict(re.findall(r'<section id="([^"]+)">(.*?)</section>', page, re.S))


def visible(fragment: str) -> str:
    """The text a reader sees: no chart specs (JSON), no image data, tags gone."""
    fragment = re.sub(r"<script.*?</script>", " ", fragment, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<img[^>]*>", " ", fragment)))


def raw_floats(text: str) -> list[str]:
    """Numbers shown with more than 4 significant digits after a decimal point, and numbers in
    exponent form."""
    long = [m for m in re.findall(r"\d[\d,]*\.\d+", text)
            if len(m.replace(",", "").replace(".", "").lstrip("0")) > 4]
    return long + re.findall(r"\d(?:\.\d+)?[eE][+-]?\d+", text)


@pytest.mark.slow
def test_the_sizing_workflow_ends_on_a_page_with_the_answer(
        cli: InProcess, captured: Path) -> None:
    where = captured.parents[1]
    cap = captured.relative_to(where)
    p = cli("size", cap, "--out", "sized", "--format", "json", cwd=where)
    assert p.returncode == 0, p.stderr
    p = cli("simulate", cap, "--policies", "lru,s3fifo", "--unit", "bytes", "--sizes",
            "1MB,2MB", "--out", "sized", "--format", "json", cwd=where)
    assert p.returncode == 0, p.stderr
    p = cli("report", "sized", "--format", "json", cwd=where)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["skipped"] == [] and sorted(summary["sections"]) == ["simulation", "size"]
    page = (where / "sized" / "report.html").read_text()
    assert "Files not included" not in page and "not a cachelab result" not in page

    # No heading is empty, or ends on a colon with nothing after it.
    for h in re.findall(r"<h[1-3][^>]*>(.*?)</h[1-3]>", page, re.S):
        text = visible(h).strip()
        assert text and not text.endswith(":"), h

    d = json.loads((where / "sized" / "size.json").read_text())
    by_kind = {k.split("-", 1)[1]: v for k, v in sections(page).items()}
    size_html, sim_html = by_kind["size"], by_kind["simulation"]
    shown = visible(size_html)
    # The answers first, with their numbers formatted as the tables do.
    findings = [visible(f).strip() for f in
                re.findall(r'<ul class="findings">(.*?)</ul>', size_html, re.S)[0].split("<li>")
                if f.strip()]
    assert findings[0].startswith("Memory for a hit ratio:")
    one = next(r for r in d["at_memory"] if r["multiple"] == 1.0)
    assert findings[1].startswith(f"At the server's {human_bytes(d['memory'])} an LRU gets "
                                  f"{pct(one['hit_ratio'])}"), findings
    assert d["check"] is not None and f"the server had {pct(d['check']['observed'])}" in \
        findings[1]
    for t in d["targets"]:
        need = "out of reach" if t["bytes"] is None else f"needs {human_bytes(t['bytes'])}"
        assert need in findings[0]
    assert "Doubling it to" in findings[1] or "More memory buys nothing" in findings[1]
    # Formatted numbers only, in the size section and in the simulation's beside it.
    assert raw_floats(shown) == [], raw_floats(shown)
    assert raw_floats(visible(sim_html)) == [], raw_floats(visible(sim_html))
    assert "Lowest miss ratio: at 1 MB" in visible(sim_html)

    # The curve as an interactive chart (beside the static plot size drew).
    specs = [json.loads(s) for s in re.findall(
        r'<script type="application/json" class="cl-spec">(.*?)</script>', size_html, re.S)]
    assert len(specs) == 1 and "<img" in size_html
    spec = specs[0]
    assert spec["title"].startswith("Memory for a hit ratio")
    # Memory in the unit that reads best for the largest size shown: 1 to 1,000 of them.
    scale = {"kB": 1e3, "MB": 1e6, "GB": 1e9}[spec["x"]["unit"]]
    largest = max(d["curve"]["bytes"] + [r["bytes"] for r in d["at_memory"]])
    assert spec["x"]["scale"] == "log" and 1 <= largest / scale < 1000
    assert spec["y"]["format"] == "percent"
    curve = next(s for s in spec["series"] if s["name"] == "LRU hit ratio")
    want = [(b / scale, 1 - m) for b, m in zip(d["curve"]["bytes"], d["curve"]["miss_ratio"])
            if b > 0]
    assert len(curve["points"]) == len(want)
    for (gx, gy), (wx, wy) in zip(curve["points"], want):
        assert gx == pytest.approx(wx, rel=1e-9) and gy == pytest.approx(wy, rel=1e-9)
    assert [m["x"] for m in spec["marks"]] == [pytest.approx(d["memory"] / scale)]
