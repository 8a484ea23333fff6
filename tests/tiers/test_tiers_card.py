"""tiers' answer card (issue 31): per shape the fastest read and the fastest through memcached,
each with its p50's 95 % interval and its effect against the store — a ratio with its ≥ 90 %
interval, or "no clear difference" when that interval holds 1; certified for a complete run,
indicative for one cut short."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cachelab import _core
from cachelab.answers import CERTIFIED, INDICATIVE
from cachelab.servers import PrivateMemcached
from cachelab.tiers.result import TiersResult
from clitools import InProcess


def _row(shape: str, method: str, centre_us: float, spread: float = 0.02) -> dict[str, Any]:
    # 200 reads spread evenly ±spread about the centre: the p50's interval is narrow.
    ns = [int(centre_us * 1000 * (1 - spread + 2 * spread * i / 199)) for i in range(200)]
    w = sorted(ns)
    return {"shape": shape, "method": method, "reads": len(w), "wall_p50_us": w[100] / 1000,
            "wall_p90_us": w[180] / 1000, "wall_mean_us": sum(w) / len(w) / 1000,
            "cpu_mean_us": 1.0, "stored_bytes": 0, "histogram": _core.hist_from_values(w)}


def _result(rows: list[dict[str, Any]], *, cancelled: bool = False) -> TiersResult:
    return TiersResult(created="now", spec={"reads": 200}, store="sqlite",
                       server={"address": "x", "version": "1.6"}, rows=rows,
                       run={"elapsed_s": 1.0, "cancelled": cancelled, "aborted": None})


def test_the_card_gives_the_fastest_read_and_memcached_s_against_the_store() -> None:
    rows = [_row("record", "store", 50), _row("record", "memcached raw", 20),
            _row("record", "memcached + msgpack", 150), _row("record", "memory ready", 0.5),
            # the list: memcached and the store within each other's spread
            _row("list", "store", 800, spread=0.3), _row("list", "memcached + msgpack", 820, 0.3),
            _row("list", "memory ready", 1.0)]
    by = {a.question: a for a in _result(rows).answers()}
    fastest = by["fastest, record"]
    assert fastest.value.startswith("memory ready p50 500 ns (95 % ")
    assert re.search(r", 100× \(≥ 90 % [\d.]+×–[\d.]+×\) faster than the store's 50 µs$",
                     fastest.value), fastest.value
    assert fastest.trust == CERTIFIED
    # memcached raw (bytes, not decoded) is no way to read the record, though the fastest.
    mc = by["best via memcached, record"]
    assert mc.value.startswith("memcached + msgpack p50 150 µs (95 % ")
    assert re.search(r"; the store's 50 µs is 3× \(≥ 90 % 2\.9\d×–3\.0\d×\) faster$", mc.value), \
        mc.value
    assert re.search(r"; no clear difference from the store's \d+ µs$",
                     by["best via memcached, list"].value), by["best via memcached, list"]


def test_a_run_cut_short_is_indicative() -> None:
    rows = [_row("record", "store", 50), _row("record", "memcached + msgpack", 150)]
    answers = _result(rows, cancelled=True).answers()
    assert answers and all((a.trust, a.why) == (INDICATIVE, "PARTIAL") for a in answers)


def test_the_table_opens_with_the_card(memcached: PrivateMemcached, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    p = InProcess(capsys)("tiers", "--quick", "--server", memcached.address, "--no-plots",
                          "--format", "table", "--out", tmp_path / "t")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "answer:", p.stdout
    card = lines[1:lines.index("")]
    for q in ("fastest, record", "best via memcached, record", "fastest, list",
              "best via memcached, list"):
        line = next(x for x in card if x.strip().startswith(q + "  "))
        assert re.search(r" p50 \S+ \S+ \(95 % \S+ \S+–\S+ \S+\)", line), line
        assert line.endswith(f"— {CERTIFIED}"), line  # complete, 40 reads: intervals
