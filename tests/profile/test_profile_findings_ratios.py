"""The profile's Findings (issue 31): a ratio carries its interval, from both ends of its cells'
95 % intervals (at least 90 % when both hold), or is left out when that interval holds 1 — two
quick runs said "1MB get 3.6× slower" and then 19× with nothing to tell them apart."""

from __future__ import annotations

import re
from typing import Any

from cachelab.profile.section import findings


def _cell(op: str, p50: float, iv50: list[int] | None, *, size: int = 1000, keys: int = 1,
          p99: float | None = None, iv99: list[int] | None = None) -> dict[str, Any]:
    p99 = p99 if p99 is not None else 3 * p50
    intervals = {"50": iv50, "99": iv99} if iv50 is not None or iv99 is not None else {}
    return {"op": op, "value_size": size, "keys": keys, "samples": 2000,
            "percentiles": {"50": p50, "99": p99}, "intervals": intervals}


def _profile(*cells: dict[str, Any], source: str = "measured") -> dict[str, Any]:
    return {"name": "t", "source": source, "cells": list(cells)}


def test_a_ratio_whose_interval_holds_one_is_left_out() -> None:
    # 1 MB get p50 110 µs (95 % 60–160 µs) vs 1 KB 100 µs (95 % 70–130 µs): 1.1×, but
    # anywhere from 0.46× to 2.3× — the run cannot tell which is slower.
    d = _profile(_cell("get", 100_000, [70_000, 130_000], size=1000),
                 _cell("get", 110_000, [60_000, 160_000], size=1_000_000),
                 _cell("multiget", 100_000, [60_000, 200_000], keys=1),
                 _cell("multiget", 150_000, [50_000, 250_000], keys=2))
    said = " ".join(findings(d))
    assert "slower than a" not in said, said
    assert "beats" not in said, said
    # The multi-get's time stays; only its ratios go.
    assert "A 2-key multi-get takes" in said and "2-key multi-get takes 150 µs at p50, " \
        not in said, said


def test_a_ratio_the_intervals_separate_carries_its_interval() -> None:
    d = _profile(_cell("get", 50_000, [48_000, 52_000], size=1000,
                       p99=120_000, iv99=[110_000, 130_000]),
                 _cell("get", 180_000, [170_000, 190_000], size=1_000_000),
                 _cell("multiget", 50_000, [48_000, 52_000], keys=1),
                 _cell("multiget", 200_000, [190_000, 210_000], keys=100))
    got = findings(d)
    slower = next(f for f in got if "slower than a" in f)
    # 180/50 = 3.6×, from 170/52 = 3.3× to 190/48 = 4×.
    assert re.search(r"is 3\.6× \(≥ 90 % 3\.3×–4×\) slower than a 1KB get", slower), slower
    tail = next(f for f in got if "the p99 is" in f)
    assert re.search(r"the p99 is 2\.4× \(≥ 90 % 2\.1×–2\.7×\) the p50", tail), tail
    beats = next(f for f in got if "beats" in f)
    # 100 × 50 / 200 = 25×, from 100 × 48 / 210 = 23× to 100 × 52 / 190 = 27×.
    assert re.search(r"beats 100 separate gets by about 25× \(≥ 90 % 23×–27×\)", beats), beats


def test_a_measured_ratio_without_intervals_is_left_out_a_published_one_says_so() -> None:
    cells = (_cell("get", 50_000, None, size=1000), _cell("get", 180_000, None, size=1_000_000))
    assert not any("slower than a" in f for f in findings(_profile(*cells)))
    published = next(f for f in findings(_profile(*cells, source="published"))
                     if "slower than a" in f)
    assert "3.6× (published figures: no interval)" in published, published
