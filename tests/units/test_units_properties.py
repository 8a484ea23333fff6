"""Properties of the parsers and formatters in cachelab.units, over generated input.

* Sizes: ``format_size`` always parses back to the same number; every spelling of a size
  (prefix case, optional ``B``, blanks, fractions that come out whole) parses to its bytes;
  anything else raises UsageError, never another exception.
* Lists of sizes and counts round-trip and refuse bad input with UsageError.
* Durations: ``format_duration_ns`` shows a duration to within half its last decimal, in any
  spelling of the unit; ``pct_key`` reads back as the percentile it names.
* Numbers: ``num`` shows any finite number to its significant digits (from 1000 up, whole)
  and never in exponent form (issue 31: ``±3.2e+02 %``, ``γ = 1.578e+04`` on the page);
  ``p_value`` neither.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cachelab.errors import UsageError
from cachelab.units import (
    MISSING,
    format_duration_ns,
    format_size,
    ns_per_unit,
    num,
    p_value,
    parse_int_list,
    parse_size,
    parse_size_list,
    pct_key,
    pick_unit,
)

PROPERTIES = settings(max_examples=150, deadline=None, database=None)

#: Sizes a cache can have: up to 2^63 bytes.
SIZES = st.integers(1, 2**63)
PREFIXES = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2,
            "gi": 1024**3}


def _random_case(draw: st.DrawFn, text: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c for c in text)


@PROPERTIES
@given(n=SIZES)
def test_format_size_parses_back(n: int) -> None:
    text = format_size(n)
    assert parse_size(text) == n
    assert re.fullmatch(r"\d+(B|KB|MB|GB|KiB|MiB|GiB)", text)


def test_zero_bytes_parse_back_when_allowed() -> None:
    assert parse_size(format_size(0), allow_zero=True) == 0
    with pytest.raises(UsageError):
        parse_size(format_size(0))


@PROPERTIES
@given(count=st.integers(1, 10**12), prefix=st.sampled_from(sorted(PREFIXES)),
       data=st.data())
def test_every_spelling_of_a_size_parses_to_its_bytes(count: int, prefix: str,
                                                      data: st.DataObject) -> None:
    blank = data.draw(st.sampled_from(["", " ", "  "]))
    unit = _random_case(data.draw, prefix + data.draw(st.sampled_from(["", "b"])))
    outer = data.draw(st.sampled_from(["", " ", "\t"]))
    assert parse_size(f"{outer}{count}{blank}{unit}{outer}") == count * PREFIXES[prefix]


@PROPERTIES
@given(whole=st.integers(0, 10**6), tenths=st.integers(1, 9),
       prefix=st.sampled_from(["k", "m", "g", "ki", "mi", "gi"]))
def test_a_fraction_parses_when_it_comes_out_whole(whole: int, tenths: int, prefix: str) -> None:
    bytes_ = whole * PREFIXES[prefix] + tenths * PREFIXES[prefix] / 10
    text = f"{whole}.{tenths}{prefix}"
    if bytes_ == int(bytes_):
        assert parse_size(text) == int(bytes_)
    else:
        with pytest.raises(UsageError, match="not a whole number of bytes"):
            parse_size(text)


@PROPERTIES
@given(n=SIZES)
def test_a_negative_size_is_refused(n: int) -> None:
    with pytest.raises(UsageError, match="negative"):
        parse_size(f"-{format_size(n)}")


@PROPERTIES
@given(text=st.text(max_size=16) | st.from_regex(r"\s*-?[\d.]{0,6}\s*[kKmMgGiIbBxX]{0,3}\s*",
                                                  fullmatch=True))
def test_any_text_is_a_size_or_a_usage_error(text: str) -> None:
    try:
        n = parse_size(text)
    except UsageError as e:
        assert repr(text) in str(e)
    else:
        assert isinstance(n, int) and n >= 1


def test_sizes_beyond_28_digits_parse_back() -> None:
    """Decimal's default context has 28 digits; a longer size must not come back rounded."""
    n = 1234567890123456789012345678901
    assert parse_size(str(n)) == n
    assert parse_size(f"{n}Ki") == n * 1024


@PROPERTIES
@given(sizes=st.lists(SIZES, min_size=1, max_size=6, unique=True))
def test_a_list_of_sizes_round_trips(sizes: list[int]) -> None:
    assert parse_size_list(",".join(format_size(n) for n in sizes)) == sizes


@PROPERTIES
@given(sizes=st.lists(SIZES, min_size=1, max_size=5), data=st.data())
def test_a_repeated_size_is_refused(sizes: list[int], data: st.DataObject) -> None:
    again = data.draw(st.sampled_from(sizes))
    texts = [format_size(n) for n in sizes] + [str(again)]
    with pytest.raises(UsageError, match="duplicate size"):
        parse_size_list(",".join(texts))


@PROPERTIES
@given(counts=st.lists(st.integers(0, 10**9), min_size=1, max_size=6, unique=True),
       minimum=st.integers(0, 10))
def test_a_list_of_counts_round_trips_or_names_the_low_one(counts: list[int],
                                                           minimum: int) -> None:
    text = ", ".join(map(str, counts))
    if min(counts) >= minimum:
        assert parse_int_list(text, minimum=minimum) == counts
    else:
        with pytest.raises(UsageError, match="below the minimum"):
            parse_int_list(text, minimum=minimum)


@PROPERTIES
@given(text=st.text(alphabet=st.sampled_from("0123456789,-. kKx"), max_size=16)
       | st.text(max_size=10))
def test_any_text_is_a_list_or_a_usage_error(text: str) -> None:
    for parse in (parse_size_list, parse_int_list):
        try:
            out = parse(text)
        except UsageError:
            continue
        assert out and all(isinstance(v, int) for v in out)


# -- durations --------------------------------------------------------------------------------

UNITS = {"ns": ("ns",), "µs": ("µs", "us", "\u03bcs"), "ms": ("ms",), "s": ("s",)}
DURATIONS = st.floats(0, 1e15, allow_nan=False)


@PROPERTIES
@given(ns=DURATIONS, unit=st.sampled_from(sorted(UNITS)), data=st.data())
def test_a_duration_is_shown_to_within_half_its_last_decimal(ns: float, unit: str,
                                                             data: st.DataObject) -> None:
    spelling = data.draw(st.sampled_from(UNITS[unit]))
    text = format_duration_ns(ns, spelling)
    assert text == format_duration_ns(ns, unit)
    decimals = len(text.partition(".")[2])
    shown = float(text) * ns_per_unit(spelling)
    assert math.isclose(shown, ns, abs_tol=0.5 * 10**-decimals * ns_per_unit(unit) * (1 + 1e-9),
                        rel_tol=1e-12)


@PROPERTIES
@given(ns=st.sampled_from([math.inf, -math.inf, math.nan]), unit=st.sampled_from(sorted(UNITS)))
def test_a_duration_that_is_not_finite_is_missing(ns: float, unit: str) -> None:
    assert format_duration_ns(ns, unit) == MISSING


@PROPERTIES
@given(unit=st.text(max_size=4).filter(lambda u: u not in {s for v in UNITS.values() for s in v}))
def test_an_unknown_duration_unit_is_refused(unit: str) -> None:
    with pytest.raises(ValueError, match="unknown duration unit"):
        ns_per_unit(unit)


@PROPERTIES
@given(values=st.lists(st.floats(allow_nan=True) | st.none(), max_size=8))
def test_pick_unit_always_names_a_unit(values: list) -> None:
    assert pick_unit(values) in ("µs", "ms", "s")


@PROPERTIES
@given(p=st.floats(0, 100))
def test_pct_key_reads_back_as_its_percentile(p: float) -> None:
    key = pct_key(p)
    assert float(key) == p and "e" not in key.lower()


@PROPERTIES
@given(p=st.floats(allow_nan=True).filter(lambda p: not 0 <= p <= 100))
def test_pct_key_refuses_what_is_not_a_percentile(p: float) -> None:
    with pytest.raises(ValueError):
        pct_key(p)


@PROPERTIES
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15),
       st.integers(1, 6))
def test_num_shows_its_digits_and_never_an_exponent(x: float, digits: int) -> None:
    text = num(x, digits)
    assert re.fullmatch(r"-?[0-9]{1,3}(,[0-9]{3})*(\.[0-9]+)?", text), text
    back = float(text.replace(",", ""))
    if abs(x) >= 999.5:
        assert back == pytest.approx(x, abs=0.5)  # whole from 1000 up
    else:
        assert back == pytest.approx(float(f"{x:.{digits}g}"), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize(("x", "digits", "text"), [
    (410.3, 2, "410"), (530.0, 2, "530"), (100.0, 2, "100"), (8.94, 2, "8.9"),
    (15781.2, 4, "15,781"), (999.6, 3, "1,000"), (1.2e-5, 3, "0.000012"), (0.0146, 3, "0.0146"),
    (0.5891646842317878, 3, "0.589"), (0.0, 3, "0"), (-0.004567, 3, "-0.00457")])
def test_num_examples(x: float, digits: int, text: str) -> None:
    assert num(x, digits) == text


@PROPERTIES
@given(st.floats(0.0, 1.0))
def test_p_value_never_shows_an_exponent(p: float) -> None:
    text = p_value(p)
    assert re.fullmatch(r"p (< 0\.0001|[01](\.[0-9]+)?)", text), text
