"""Tests of cachelab.plots.latency: inverted-percentile plots written as PNG and SVG."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from cachelab.plots.latency import (
    FLOOR_LABEL,
    inverted_percentile_plot,
    inverted_percentile_points,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def lognormal_series(
    label: str, median_ns: float, seed: int
) -> tuple[str, list[tuple[float, float]]]:
    """A plausible latency distribution sampled at the default plot percentiles."""
    samples = median_ns * np.random.default_rng(seed).lognormal(0.0, 0.4, 5000)
    percentiles = inverted_percentile_points()
    return label, list(zip(percentiles, np.percentile(samples, percentiles).tolist()))


SERIES = [
    lognormal_series("1B", 1.4e6, 1),
    lognormal_series("1KB", 1.8e6, 2),
    lognormal_series("1MB", 9.0e6, 3),
]


def test_points_default() -> None:
    points = inverted_percentile_points()
    assert len(points) == 81  # 4 decades x 20 + 1
    assert points[0] == 0.0
    assert points[-1] == 99.99
    assert points == sorted(points) and len(set(points)) == len(points)
    assert {90.0, 99.0, 99.9} <= set(points)
    inverted = np.array([100.0 - p for p in points])
    ratios = inverted[:-1] / inverted[1:]
    assert np.allclose(ratios, 10 ** (1 / 20), rtol=1e-6)


def test_points_custom() -> None:
    assert inverted_percentile_points(per_decade=1) == [0.0, 90.0, 99.0, 99.9, 99.99]
    # 1.7 decades at (at least) one point per decade: three evenly spaced points.
    start, middle, end = inverted_percentile_points(50.0, 1.0, per_decade=1)
    assert (start, end) == (50.0, 99.0)
    assert middle == pytest.approx(100.0 - math.sqrt(50.0))
    assert inverted_percentile_points(10.0, 0.001, per_decade=2)[-1] == 99.999


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_inverted": 101.0},
        {"min_inverted": 0.0},
        {"max_inverted": 1.0, "min_inverted": 1.0},
        {"per_decade": 0},
    ],
)
def test_points_reject_bad_arguments(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        inverted_percentile_points(**kwargs)  # type: ignore[arg-type]


def test_plot_writes_png_and_svg(tmp_path: Path) -> None:
    out_base = tmp_path / "plots" / "by-size"
    paths = inverted_percentile_plot(
        SERIES, title="Get latency by value size", out_base=out_base, floor_ns=0.9e6
    )
    png, svg = paths
    assert paths == [tmp_path / "plots" / "by-size.png", tmp_path / "plots" / "by-size.svg"]

    assert png.read_bytes().startswith(PNG_SIGNATURE)
    pixels = imread(png)
    assert pixels.shape[0] > 400 and pixels.shape[1] > 700  # 8x5 inches at 120 dpi
    assert float(np.var(pixels[..., :3])) > 1e-3  # not a blank image

    text = svg.read_text(encoding="utf-8")
    for index, (label, _points) in enumerate(SERIES):
        assert re.search(rf'<g id="cachelab-series-{index}">\s*<path ', text)
        assert f">{label}</text>" in text  # legend entry
    assert text.count("<path ") >= len(SERIES)
    assert f">{FLOOR_LABEL}</text>" in text
    assert ">Get latency by value size</text>" in text
    assert ">latency (ms)</text>" in text
    for tick in ("p50", "p99", "p99.9", "p99.99", ">0.01<"):
        assert tick in text


def test_plot_is_deterministic(tmp_path: Path) -> None:
    first = inverted_percentile_plot(SERIES[:1], title="t", out_base=tmp_path / "a")
    second = inverted_percentile_plot(SERIES[:1], title="t", out_base=tmp_path / "b")
    assert first[1].read_bytes() == second[1].read_bytes()
    assert first[0].read_bytes() == second[0].read_bytes()


def test_inside_svg_only_a_plot_is_its_svg_alone(tmp_path: Path) -> None:
    """A page re-drawing plots from the JSON embeds SVGs only: no PNG is drawn for it, and the
    SVG is the one drawn beside a PNG."""
    from cachelab.plots.figure import svg_only

    both = inverted_percentile_plot(SERIES[:2], title="t", out_base=tmp_path / "a" / "p")
    with svg_only():
        alone = inverted_percentile_plot(SERIES[:2], title="t", out_base=tmp_path / "b" / "p")
    assert alone == [tmp_path / "b" / "p.svg"]
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["p.svg"]
    assert alone[0].read_bytes() == both[1].read_bytes()
    again = inverted_percentile_plot(SERIES[:2], title="t", out_base=tmp_path / "c" / "p")
    assert len(again) == 2 and again[0].is_file()  # both again once outside


def test_plot_unit_and_ylabel(tmp_path: Path) -> None:
    series = [("loopback", [(0.0, 20_000.0), (50.0, 40_000.0), (99.0, 90_000.0)])]
    svg = inverted_percentile_plot(
        series, title="t", out_base=tmp_path / "p", ylabel="get latency"
    )[1]
    assert ">get latency (µs)</text>" in svg.read_text(encoding="utf-8")
    svg = inverted_percentile_plot(series, title="t", out_base=tmp_path / "q", unit="ms")[1]
    assert ">latency (ms)</text>" in svg.read_text(encoding="utf-8")


def test_plot_keeps_dots_in_the_base_name(tmp_path: Path) -> None:
    png, svg = inverted_percentile_plot(SERIES[:1], title="t", out_base=tmp_path / "run.v2")
    assert (png.name, svg.name) == ("run.v2.png", "run.v2.svg")
    assert png.is_file() and svg.is_file()


def test_plot_skips_unplottable_latencies(tmp_path: Path) -> None:
    series = [("odd", [(0.0, 0.0), (50.0, 2e6), (90.0, math.nan), (99.0, 5e6)])]
    png, _svg = inverted_percentile_plot(series, title="t", out_base=tmp_path / "odd")
    assert png.stat().st_size > 0


def test_plot_with_no_series(tmp_path: Path) -> None:
    png, svg = inverted_percentile_plot([], title="nothing yet", out_base=tmp_path / "empty")
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    assert ">nothing yet</text>" in svg.read_text(encoding="utf-8")


@pytest.mark.parametrize("percentile", [-1.0, 100.0])
def test_plot_rejects_percentiles_outside_0_100(tmp_path: Path, percentile: float) -> None:
    with pytest.raises(ValueError, match="'bad'"):
        inverted_percentile_plot(
            [("bad", [(50.0, 1e6), (percentile, 2e6)])], title="t", out_base=tmp_path / "x"
        )


def test_plot_leaves_pyplot_alone(tmp_path: Path) -> None:
    plt = pytest.importorskip("matplotlib.pyplot")
    backend = plt.get_backend()
    inverted_percentile_plot(SERIES[:1], title="t", out_base=tmp_path / "p")
    assert plt.get_backend() == backend
    assert plt.get_fignums() == []
