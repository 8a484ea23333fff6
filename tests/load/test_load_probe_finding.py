"""The load section's probe finding (issue 31): the load connections' p99 as a multiple of the
probe's carries the ratio's ≥ 90 % interval, and is left out when that interval holds 1."""

from __future__ import annotations

from typing import Any

from cachelab.load.probe import probe_finding


def _entry(p50: int, p99: int, iv99: list[int] | None) -> dict[str, Any]:
    return {"count": 5000, "percentiles": {"50": p50, "99": p99},
            "intervals": {"ranges": {"50": [p50, p50], "99": iv99}}}


def _probe(p99: int, iv99: list[int]) -> dict[str, Any]:
    e = _entry(40_000, p99, iv99)
    return {"rate": 400, "totals": {"corrected": e, "uncorrected": e}}


def test_the_p99_ratio_carries_its_interval() -> None:
    load = {"corrected": _entry(50_000, 300_000, [280_000, 320_000])}
    said = probe_finding(_probe(100_000, [90_000, 110_000]), load, open_loop=True)
    # 300/100 = 3×, from 280/110 = 2.5× to 320/90 = 3.6×
    assert said.endswith("the load connections' p99, 300 µs, is 3× (≥ 90 % 2.5×–3.6×) it."), said


def test_a_p99_ratio_whose_interval_holds_one_is_left_out() -> None:
    load = {"corrected": _entry(50_000, 110_000, [90_000, 140_000])}
    said = probe_finding(_probe(100_000, [80_000, 130_000]), load, open_loop=True)
    assert "×" not in said, said
    assert said.endswith("the load connections' p99, 110 µs, cannot be told from it (their "
                         "intervals overlap)."), said
