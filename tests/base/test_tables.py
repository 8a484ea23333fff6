"""Tests of cachelab.tables: percentile tables in the seed's appendix layout, and CSV output."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from cachelab.tables import (
    DEFAULT_ROWS,
    MAX_ROW,
    PERCENTILES,
    percentile_table,
    write_csv,
)
from cachelab.units import pct_key

# Two columns of the seed's "Fetch latency by size" table in nanoseconds (the 1B "max" is made up).
MS = 1e6
SEED_1B = dict(
    zip(DEFAULT_ROWS, [x * MS for x in (1.38, 1.72, 2.34, 3.71, 4.66, 5.33, 10.56, 34.59, 61.0)])
)
SEED_1MB = dict(
    zip(DEFAULT_ROWS, [x * MS for x in (8.29, 9.88, 11.16, 12.65, 14.22, 15.46, 21.09, 42.84)])
)
assert "max" not in SEED_1MB  # left missing on purpose


def body_lines(table: str) -> list[str]:
    """Every line after the title."""
    return table.splitlines()[1:]


def test_pct_key() -> None:
    assert [pct_key(p) for p in PERCENTILES] == ["5", "25", "50", "75", "90", "95", "99", "99.9"]
    assert pct_key(50) == "50"
    assert pct_key(99.99) == "99.99"
    assert pct_key(0.0) == "0"
    assert pct_key(100.0) == "100"
    assert pct_key(1e-5) == "0.00001"


@pytest.mark.parametrize("bad", [-1.0, 100.5, math.nan])
def test_pct_key_rejects_out_of_range(bad: float) -> None:
    with pytest.raises(ValueError):
        pct_key(bad)


def test_default_rows() -> None:
    assert DEFAULT_ROWS == ("5", "25", "50", "75", "90", "95", "99", "99.9", MAX_ROW)
    assert MAX_ROW == "max"


def test_table_layout() -> None:
    table = percentile_table(
        "Get latency by value size", [("1B", SEED_1B), ("1MB", SEED_1MB)], unit="ms"
    )
    lines = table.splitlines()
    assert lines[0] == "Get latency by value size (ms)"
    assert lines[1].split() == ["%ile", "1B", "1MB"]
    assert set(lines[2]) == {"-", " "}
    rows = [line.split() for line in lines[3:]]
    assert [row[0] for row in rows] == list(DEFAULT_ROWS)
    assert rows[2] == ["50", "2.34", "11.16"]
    assert rows[7] == ["99.9", "34.59", "42.84"]
    assert rows[8] == ["max", "61.00", "\u2014"]  # missing value
    assert not table.endswith("\n")


def test_table_lines_have_equal_width_and_numbers_are_right_aligned() -> None:
    table = percentile_table("t", [("1B", SEED_1B), ("1MB", SEED_1MB)], unit="ms")
    lines = body_lines(table)
    assert len({len(line) for line in lines}) == 1
    # Right alignment: every cell of a column ends at the same position as its header.
    header = lines[0]
    end_of_1mb = header.index("1MB") + len("1MB")
    assert end_of_1mb == len(header)
    for line in lines[2:]:
        assert line[end_of_1mb - 1] != " "
    assert "\x1b" not in table


def test_table_picks_the_unit_when_not_given() -> None:
    micro = {"50": 85_300.0, "99": 240_000.0}
    table = percentile_table("Get latency", [("local", micro)], rows=["50", "99"])
    assert table.splitlines()[0] == "Get latency (µs)"
    assert table.splitlines()[3].split() == ["50", "85.3"]
    assert "(ms)" in percentile_table("Get latency", [("1B", SEED_1B)])


def test_table_custom_rows_and_column_labels() -> None:
    columns = [(f"{n} key{'s' if n > 1 else ''}", {"50": n * 1e6, "99": n * 2e6}) for n in (1, 3)]
    table = percentile_table("Multi-get latency", columns, rows=["50", "99", "99.9"], unit="ms")
    lines = body_lines(table)
    assert lines[0].split() == ["%ile", "1", "key", "3", "keys"]
    assert lines[0].endswith("  1 key  3 keys")
    assert [line.split()[0] for line in lines[2:]] == ["50", "99", "99.9"]
    assert lines[-1].split() == ["99.9", "\u2014", "\u2014"]


def test_table_none_and_nan_are_missing() -> None:
    table = percentile_table("t", [("a", {"50": None, "99": math.nan})], rows=["50", "99"])
    assert [line.split()[1] for line in body_lines(table)[2:]] == ["\u2014", "\u2014"]


def test_table_footer_and_caption() -> None:
    table = percentile_table(
        "t",
        [("1B", SEED_1B), ("1MB", SEED_1MB)],
        unit="ms",
        footer=[("samples", ["10000", "10000"]), ("errors", ["0", "12"])],
        caption="Latency of a single get, in milliseconds.",
    )
    lines = table.splitlines()
    assert lines[-1] == "Latency of a single get, in milliseconds."
    table_lines = lines[1:-1]
    assert len({len(line) for line in table_lines}) == 1
    assert table_lines[-3] == table_lines[1]  # the same rule above the footer
    assert table_lines[-2].split() == ["samples", "10000", "10000"]
    assert table_lines[-1].split() == ["errors", "0", "12"]
    assert table_lines[-4].startswith("max ")


def test_table_footer_must_match_columns() -> None:
    with pytest.raises(ValueError, match="footer row 'samples'"):
        percentile_table("t", [("1B", SEED_1B)], footer=[("samples", ["1", "2"])])


def test_long_caption_is_wrapped() -> None:
    caption = "word " * 40
    table = percentile_table("t", [("1B", SEED_1B)], caption=caption)
    caption_lines = table.splitlines()[3 + len(DEFAULT_ROWS) :]  # after title, header, rule, rows
    assert len(caption_lines) > 1
    assert all(len(line) <= 72 for line in caption_lines)


def test_write_csv(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "latency.csv"
    write_csv(target, ["size", "p50_ns"], [("1B", 2340000), ("1KB", 2710000.5), ("a,b", "x\ny")])
    raw = target.read_bytes()
    assert raw.startswith(b"size,p50_ns\r\n1B,2340000\r\n")
    assert b"\r\r\n" not in raw
    with target.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows == [["size", "p50_ns"], ["1B", "2340000"], ["1KB", "2710000.5"], ["a,b", "x\ny"]]
