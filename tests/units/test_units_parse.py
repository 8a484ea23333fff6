"""Tests of cachelab.units: parsing and formatting sizes, counts and durations."""

from __future__ import annotations

import math

import pytest

from cachelab.errors import UsageError
from cachelab.units import (
    MISSING,
    format_duration_ns,
    format_size,
    human_bytes,
    ns_per_unit,
    parse_int_list,
    parse_size,
    parse_size_list,
    pick_unit,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1),
        ("10B", 10),
        ("10b", 10),
        ("1K", 1000),
        ("1KB", 1000),
        ("1k", 1000),
        ("1kb", 1000),
        ("1Ki", 1024),
        ("1KiB", 1024),
        ("4kib", 4096),
        ("M", None),  # no number: rejected below
        ("1M", 10**6),
        ("1MB", 10**6),
        ("1Mi", 2**20),
        ("1MiB", 2**20),
        ("2G", 2 * 10**9),
        ("1Gi", 2**30),
        ("1.5K", 1500),
        ("0.5KiB", 512),
        (".5K", 500),
        (" 100 ", 100),
        ("100 KB", 100_000),
    ],
)
def test_parse_size(text: str, expected: int | None) -> None:
    if expected is None:
        with pytest.raises(UsageError):
            parse_size(text)
    else:
        assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1X", "1KK", "1 K B", "1e3", "1.5.1", "K1", "+1"])
def test_parse_size_rejects_malformed_input_and_says_what_is_allowed(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_size(text)
    message = str(info.value)
    assert repr(text) in message
    assert "1.5K" in message and "KiB" in message  # the examples of what is allowed
    assert "\n" not in message


def test_parse_size_rejects_negative_sizes() -> None:
    with pytest.raises(UsageError, match="negative"):
        parse_size("-1K")


def test_parse_size_rejects_fractional_bytes() -> None:
    with pytest.raises(UsageError, match=r"1\.5 is not a whole number of bytes"):
        parse_size("1.5")
    with pytest.raises(UsageError, match=r"1000\.5 is not a whole number"):
        parse_size("1.0005K")


def test_parse_size_zero_only_when_allowed() -> None:
    with pytest.raises(UsageError, match="at least 1 byte"):
        parse_size("0")
    with pytest.raises(UsageError, match="at least 1 byte"):
        parse_size("0KB")
    assert parse_size("0", allow_zero=True) == 0
    assert parse_size("0B", allow_zero=True) == 0


def test_parse_size_list_keeps_order() -> None:
    assert parse_size_list("1,10,100,1K,10K,100K,1M") == [1, 10, 100, 1000, 10_000, 10**5, 10**6]
    assert parse_size_list(" 1KiB , 1K ") == [1024, 1000]


@pytest.mark.parametrize(
    ("text", "named"),
    [("1,,10", "item 2"), ("1,10,", "item 3"), ("", "item 1"), ("1, ,2", "item 2")],
)
def test_parse_size_list_rejects_empty_items(text: str, named: str) -> None:
    with pytest.raises(UsageError, match="empty size") as info:
        parse_size_list(text)
    assert named in str(info.value)


def test_parse_size_list_rejects_duplicates_by_value() -> None:
    with pytest.raises(UsageError) as info:
        parse_size_list("1K,10K,1000")
    message = str(info.value)
    assert "duplicate" in message and "'1000'" in message and "'1K'" in message


def test_parse_size_list_names_the_bad_item() -> None:
    with pytest.raises(UsageError, match="'1Q'"):
        parse_size_list("1,1Q,3")


def test_parse_int_list() -> None:
    assert parse_int_list("1,3,5,10,100") == [1, 3, 5, 10, 100]
    assert parse_int_list(" 0, 2 ", minimum=0) == [0, 2]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1,,3", "empty count"),
        ("1,x,3", "'x'"),
        ("1,2.5", "'2.5'"),
        ("1,1K", "'1K'"),
        ("1,0", "below the minimum of 1"),
        ("-3", "below the minimum of 1"),
        ("5,3,5", "duplicate count '5'"),
    ],
)
def test_parse_int_list_errors(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_int_list(text)
    assert fragment in str(info.value)


def test_parse_int_list_custom_minimum() -> None:
    with pytest.raises(UsageError, match="below the minimum of 2"):
        parse_int_list("2,1", minimum=2)


@pytest.mark.parametrize(
    ("n", "label"),
    [
        (0, "0B"),
        (1, "1B"),
        (10, "10B"),
        (100, "100B"),
        (1000, "1KB"),
        (10_000, "10KB"),
        (100_000, "100KB"),
        (10**6, "1MB"),
        (10**9, "1GB"),
        (1024, "1KiB"),
        (4096, "4KiB"),
        (2**20, "1MiB"),
        (2**30, "1GiB"),
        (1536, "1536B"),
        (1001, "1001B"),
        (1_500_000, "1500KB"),
    ],
)
def test_format_size(n: int, label: str) -> None:
    assert format_size(n) == label


def test_format_size_round_trips_through_parse_size() -> None:
    for n in [*range(1, 3000), 10**6, 2**20, 3 * 10**9, 5 * 2**30, 1_024_000, 123_456_789]:
        assert parse_size(format_size(n)) == n


def test_format_size_rejects_negative() -> None:
    with pytest.raises(ValueError):
        format_size(-1)


@pytest.mark.parametrize(
    ("ns", "unit", "text"),
    [
        (2_340_000, "ms", "2.34"),
        (11_160_000, "ms", "11.16"),
        (234_900_000, "ms", "234.90"),
        (85_300, "µs", "85.3"),
        (85_300, "us", "85.3"),
        (934_000, "µs", "934.0"),
        (12_500_000_000, "s", "12.50"),
        (850.4, "ns", "850"),
        (0, "ms", "0.00"),
    ],
)
def test_format_duration_ns(ns: float, unit: str, text: str) -> None:
    assert format_duration_ns(ns, unit) == text


def test_format_duration_ns_non_finite_is_missing() -> None:
    assert format_duration_ns(math.nan, "ms") == MISSING == "\u2014"
    assert format_duration_ns(math.inf, "µs") == MISSING


def test_format_duration_ns_unknown_unit() -> None:
    with pytest.raises(ValueError, match="unknown duration unit 'min'"):
        format_duration_ns(1.0, "min")


def test_ns_per_unit() -> None:
    assert [ns_per_unit(u) for u in ("ns", "µs", "us", "ms", "s")] == [1, 1e3, 1e3, 1e6, 1e9]


def test_pick_unit_uses_the_median() -> None:
    assert pick_unit([]) == "µs"
    assert pick_unit([50_000, 200_000, 999_999]) == "µs"
    assert pick_unit([1_000_000]) == "ms"
    # One huge outlier does not change the unit; the median decides.
    assert pick_unit([100_000, 200_000, 5e9]) == "µs"
    assert pick_unit([2e6, 3e6, 1e5]) == "ms"
    assert pick_unit([10e9]) == "ms"
    assert pick_unit([10.5e9]) == "s"
    assert pick_unit([math.nan, 2e6]) == "ms"  # non-finite values are ignored


def test_pick_unit_accepts_any_iterable() -> None:
    assert pick_unit(v * 1e6 for v in (1, 2, 3)) == "ms"


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"), (999, "999 B"), (999.6, "1 kB"), (66_600_000, "66.6 MB"),
    (999_499, "999 kB"), (999_500, "1 MB"), (999_600_000, "1 GB"), (2**30, "1.07 GB"),
    (1.5e12, "1.5 TB"),
])
def test_human_bytes_has_three_digits_and_never_an_exponent(n: float, text: str) -> None:
    """Just under a unit, three significant digits would read 1e+03 of the smaller one: the
    larger unit is used from there."""
    assert human_bytes(n) == text
