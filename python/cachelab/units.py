"""Parse and format the sizes, counts and durations that appear on the command line and in tables.

Sizes use SI prefixes for K, M and G (``1K`` = 1000) and IEC prefixes for Ki, Mi and Gi
(``1Ki`` = 1024); a trailing ``B`` is optional and letters are case-insensitive::

    >>> parse_size("1.5K"), parse_size("4KiB"), parse_size_list("1,10,1M")
    (1500, 4096, [1, 10, 1000000])
    >>> format_size(1000), format_size(1024), format_size(1536)
    ('1KB', '1KiB', '1536B')

All of cachelab's formatting of numbers lives here too: :func:`pct_key` (the text of a
percentile, the key of every percentile mapping), :func:`us`, :func:`dur`, :func:`pct`,
:func:`num` and :func:`times` for tables and reports; and the one wording of an incomplete
result, :func:`partial_note` (with :func:`of_asked` for its counts), so a table header, a
``--show``, a report section and a comparison all say it alike::

    >>> partial_note({"cancelled": True, "elapsed_s": 3.6},
    ...              "samples per cell: " + of_asked([1372, 10000], 10000))
    'PARTIAL (interrupted after 3.6 s; samples per cell: 1,372–10,000 of 10,000 asked)'

Durations are measured in nanoseconds and shown in one unit per table, chosen by
:func:`pick_unit`.  :func:`format_duration_ns` prints the bare number with a fixed number of
decimals per unit, so a column lines up and the unit is named once, in the title:

    ====  ========  ==========================
    unit  decimals  example
    ====  ========  ==========================
    ns    0         ``850``
    µs    1         ``85.3``, ``934.0``
    ms    2         ``2.34``, ``11.16``, ``234.90`` (as in the seed's appendix)
    s     2         ``12.50``
    ====  ========  ==========================
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Iterable, Mapping
from decimal import Decimal, localcontext
from typing import Any

from cachelab.errors import UsageError

__all__ = [
    "MISSING",
    "PARTIAL",
    "byte_unit",
    "check_limit",
    "dur",
    "flag_text",
    "format_duration_ns",
    "format_size",
    "human_bytes",
    "limit",
    "limited",
    "limits_of",
    "ns_per_unit",
    "num",
    "of_asked",
    "p_value",
    "parse_int_list",
    "parse_size",
    "parse_size_list",
    "partial_note",
    "pct",
    "pct_key",
    "per_second",
    "pick_unit",
    "share",
    "times",
    "us",
]

#: What a table shows for a value that was not measured (or is not a finite number).
MISSING = "\u2014"

#: The word every header, section title and comparison puts on an incomplete result.
PARTIAL = "PARTIAL"

_MICRO = "\u00b5s"  # "µs" with MICRO SIGN, the spelling used everywhere in cachelab output

_PREFIXES: dict[str, int] = {
    "": 1,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "ki": 1024,
    "mi": 1024**2,
    "gi": 1024**3,
}

_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*([kmg]i?)?b?", re.IGNORECASE)

_SIZE_HELP = (
    "expected a whole number of bytes such as 100, 10B, 1.5K, 4KiB or 1M "
    "(K/M/G are powers of 1000, Ki/Mi/Gi powers of 1024)"
)

# Largest unit first, SI before IEC: the first exact match names the size.
_SIZE_LABELS: tuple[tuple[int, str], ...] = (
    (1000**3, "GB"),
    (1024**3, "GiB"),
    (1000**2, "MB"),
    (1024**2, "MiB"),
    (1000, "KB"),
    (1024, "KiB"),
)

# unit -> (nanoseconds per unit, decimals shown)
_DURATION_UNITS: dict[str, tuple[float, int]] = {
    "ns": (1.0, 0),
    _MICRO: (1e3, 1),
    "ms": (1e6, 2),
    "s": (1e9, 2),
}
_UNIT_ALIASES = {"us": _MICRO, "\u03bcs": _MICRO}  # ASCII "us" and GREEK SMALL LETTER MU


def parse_size(text: str, *, allow_zero: bool = False) -> int:
    """Return the number of bytes that ``text`` names, e.g. ``"1.5K"`` -> 1500.

    Raises :class:`~cachelab.errors.UsageError` for malformed, negative or fractional sizes,
    and for zero unless ``allow_zero`` is true.
    """
    stripped = text.strip()
    if stripped.startswith("-"):
        raise UsageError(f"invalid size {text!r}: must not be negative; {_SIZE_HELP}")
    match = _SIZE_RE.fullmatch(stripped)
    if match is None:
        raise UsageError(f"invalid size {text!r}: {_SIZE_HELP}")
    number, prefix = match.group(1), (match.group(2) or "").lower()
    with localcontext() as exact:  # enough digits that the product is never rounded
        exact.prec = len(number) + 12
        value = Decimal(number) * _PREFIXES[prefix]
    if value != value.to_integral_value():
        raise UsageError(
            f"invalid size {text!r}: {value.normalize():f} is not a whole number of bytes"
        )
    if value == 0 and not allow_zero:
        raise UsageError(f"invalid size {text!r}: must be at least 1 byte")
    return int(value)


def parse_size_list(text: str) -> list[int]:
    """Parse comma-separated sizes such as ``"1,10,100,1K,10K,100K,1M"``, keeping their order.

    Every item must be a valid non-zero :func:`parse_size` size; empty items and duplicates
    (``"1K,1000"`` counts as a duplicate) raise :class:`~cachelab.errors.UsageError`.
    """
    sizes: list[int] = []
    seen: dict[int, str] = {}
    for item in _split_list(text, "size"):
        size = parse_size(item)
        if size in seen:
            raise UsageError(f"duplicate size {item!r} in list {text!r} (same as {seen[size]!r})")
        seen[size] = item
        sizes.append(size)
    return sizes


def parse_int_list(text: str, *, minimum: int = 1) -> list[int]:
    """Parse comma-separated whole numbers such as ``"1,3,5,10,100"``, keeping their order.

    Items must be plain decimal integers no smaller than ``minimum``; empty items, anything
    else, and duplicates raise :class:`~cachelab.errors.UsageError`.
    """
    counts: list[int] = []
    for item in _split_list(text, "count"):
        if not re.fullmatch(r"-?\d+", item):
            raise UsageError(
                f"invalid count {item!r} in list {text!r}: expected whole numbers "
                f">= {minimum} separated by commas"
            )
        count = int(item)
        if count < minimum:
            raise UsageError(f"count {item!r} in list {text!r} is below the minimum of {minimum}")
        if count in counts:
            raise UsageError(f"duplicate count {item!r} in list {text!r}")
        counts.append(count)
    return counts


def _split_list(text: str, what: str) -> list[str]:
    """Split a comma-separated list into stripped items, rejecting empty ones."""
    items = [item.strip() for item in text.split(",")]
    for position, item in enumerate(items, start=1):
        if not item:
            raise UsageError(
                f"empty {what} (item {position}) in list {text!r}: "
                f"separate {what}s with single commas"
            )
    return items


def format_size(n: int) -> str:
    """Label a byte count the way the seed's tables do: ``1000`` -> ``"1KB"``.

    Exact multiples of a unit use it (largest unit first, SI before IEC, so ``1024`` ->
    ``"1KiB"`` and ``2**20`` -> ``"1MiB"``); anything else is plain bytes (``1536`` ->
    ``"1536B"``).  The result always parses back to ``n`` with :func:`parse_size`.
    """
    if n < 0:
        raise ValueError(f"a size cannot be negative: {n}")
    if n > 0:
        for unit, suffix in _SIZE_LABELS:
            if n % unit == 0:
                return f"{n // unit}{suffix}"
    return f"{n}B"


def ns_per_unit(unit: str) -> float:
    """How many nanoseconds one ``unit`` (``"ns"``, ``"µs"``/``"us"``, ``"ms"``, ``"s"``) is."""
    return _duration_unit(unit)[0]


def format_duration_ns(ns: float, unit: str) -> str:
    """Format a duration in nanoseconds as a bare number in ``unit``, for a table cell.

    The number of decimals is fixed per unit (see the module docstring), so a column of values
    lines up: ``format_duration_ns(2_340_000, "ms")`` -> ``"2.34"``,
    ``format_duration_ns(85_300, "µs")`` -> ``"85.3"``.  ``None``-like gaps are the caller's
    business, but a NaN or infinite value is shown as :data:`MISSING`.
    """
    scale, decimals = _duration_unit(unit)
    if not math.isfinite(ns):
        return MISSING
    return f"{ns / scale:.{decimals}f}"


def pick_unit(values_ns: Iterable[float]) -> str:
    """Choose the display unit for a set of durations in nanoseconds.

    Returns ``"µs"`` when the median of the finite values is below 1 ms, ``"s"`` when it is
    above 10 s, and ``"ms"`` otherwise.  With no finite values at all it returns ``"µs"``.
    """
    finite = [float(v) for v in values_ns if v is not None and math.isfinite(v)]
    if not finite:
        return _MICRO
    median = statistics.median(finite)
    if median < 1e6:
        return _MICRO
    if median > 1e10:
        return "s"
    return "ms"


def _duration_unit(unit: str) -> tuple[float, int]:
    try:
        return _DURATION_UNITS[_UNIT_ALIASES.get(unit, unit)]
    except KeyError:
        raise ValueError(
            f"unknown duration unit {unit!r}; expected one of {', '.join(_DURATION_UNITS)}"
        ) from None


# -- formatting for tables and reports ---------------------------------------------------


def dur(ns: float | None) -> str:
    """A duration in ns, in the unit that keeps 3 significant digits readable."""
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "—"
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if abs(v) < 100 else f"{v:.0f} {unit}"
    return f"{ns:.0f} ns"


def pct(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage."""
    if x is None or not math.isfinite(float(x)):
        return "—"
    v = 100 * float(x)
    if v != 0 and abs(v) < 0.1:
        return f"{v:.2f} %"
    return f"{v:.{digits}f} %"


def num(x: float | None, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, never in exponent form: ``0.589``, ``410``
    (not ``4.1e+02``), ``0.000012``; from 1000 up, whole with thousands separators
    (``15,781``)."""
    if x is None or not math.isfinite(float(x)):
        return "—"
    v = float(f"{float(x):.{digits}g}") if abs(float(x)) < 1000 else float(x)
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    text = f"{v:.{max(0, digits - 1 - math.floor(math.log10(abs(v))))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def p_value(p: float) -> str:
    """A test's p-value as read: ``p 0.035``, ``p 0.0012``, ``p < 0.0001`` (never an
    exponent)."""
    return "p < 0.0001" if p < 1e-4 else f"p {num(p, 2)}"


def times(a: float, b: float) -> str:
    """``a / b`` as "4.2×"."""
    if not b:
        return "—"
    r = a / b
    return f"{r:.2g}×" if r < 10 else f"{r:.0f}×"


def pct_key(p: float) -> str:
    """The canonical text of percentile ``p``: ``5.0`` -> ``"5"``, ``99.9`` -> ``"99.9"``.

    It is the shortest decimal that reads back as ``p``, never in exponent form, and is used as
    a row name and as the key of percentile mappings throughout cachelab.
    """
    if not 0.0 <= p <= 100.0:  # also rejects NaN
        raise ValueError(f"a percentile must be between 0 and 100, not {p!r}")
    return format(Decimal(repr(float(p))).normalize(), "f")


def us(ns: float | None) -> str:
    """A duration in ns as µs with one decimal, for tables whose header names the unit."""
    return "—" if ns is None else f"{ns / 1000:.1f}"


def share(x: float | None) -> str:
    """A fraction as a compact percentage whose digits follow its size: ``1345%``, ``63.4%``,
    ``6.09%``."""
    if x is None:
        return "\u2014"
    if x >= 10:
        return f"{100 * x:.0f}%"
    if x >= 0.1:
        return f"{100 * x:.1f}%"
    return f"{100 * x:.2f}%"


def per_second(rate: float) -> str:
    """A rate with an SI prefix: ``0.5/s``, ``42/s``, ``1.3k/s``, ``2.0M/s``."""
    for prefix, scale in (("M", 1e6), ("k", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.1f}{prefix}/s"
    return f"{rate:.0f}/s" if rate >= 10 else f"{rate:.1f}/s"


#: SI byte units, largest first.
_BYTE_UNITS = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))


def byte_unit(n: float) -> tuple[str, float]:
    """The unit :func:`human_bytes` shows ``n`` bytes in, and its size: ``("MB", 1e6)``; the
    larger unit from where three significant digits would round up to 1,000 of the smaller."""
    for unit, scale in _BYTE_UNITS:
        if n >= 0.9995 * scale:
            return unit, scale
    return "B", 1.0


def human_bytes(n: float) -> str:
    """Bytes with an SI prefix and three significant digits: ``66.6 MB``, ``1 GB`` (never
    ``1e+03 MB``); below a kilobyte, whole bytes."""
    unit, scale = byte_unit(n)
    if unit == "B":
        return f"{n:.0f} B"
    return f"{n / scale:.3g} {unit}"


# -- incomplete results ------------------------------------------------------------------


def of_asked(done: Iterable[int], asked: int | None) -> str:
    """Counts actually reached against the one asked for: ``"6,711 of 50,000 asked"``, or the
    smallest and largest when they differ (``"1,372–10,000 of 10,000 asked"``), so an
    interrupted run shows what its numbers rest on instead of what was requested."""
    counts = sorted(int(n) for n in done)
    if not counts:
        text = "0"
    elif counts[0] == counts[-1]:
        text = f"{counts[0]:,}"
    else:
        text = f"{counts[0]:,}\u2013{counts[-1]:,}"
    return text if asked is None else f"{text} of {int(asked):,} asked"


def partial_note(run: Mapping[str, Any] | None, done: str = "") -> str | None:
    """How a result that did not run to the end says so, the same everywhere; None when it
    did. ``run`` is the result's ``run`` object: ``cancelled`` (stopped by Ctrl-C or SIGTERM),
    ``aborted`` (why it gave up, e.g. the server went away) and ``elapsed_s``; ``done`` says
    how far it got (:func:`of_asked`). ``"PARTIAL (interrupted after 3.6 s; samples per cell:
    6,711 of 50,000 asked)"``, ``"PARTIAL (gave up after 1.2 s: server closed the
    connection)"``."""
    run = run or {}
    aborted, cancelled = run.get("aborted"), run.get("cancelled")
    if not aborted and not cancelled:
        return None
    elapsed = run.get("elapsed_s")
    after = "" if elapsed is None else f" after {dur(float(elapsed) * 1e9)}"
    reason = str(aborted).removeprefix("gave up: ")  # the engines' own wording starts so
    why = f"gave up{after}: {reason}" if aborted else f"interrupted{after}"
    return f"{PARTIAL} ({why}" + (f"; {done}" if done else "") + ")"


def limited(default: Any, lo: float, hi: float, *, above: bool = False, below: bool = False,
            unit: str = "") -> Any:
    """A spec dataclass field that only Python checks, with its range written beside it, once:
    ``repeats: int = limited(1, 1, 100)``. The range has the shape of the engine's
    (``_core.LOAD_LIMITS``: ``{"lo", "hi", "above", "unit"}``), so a command-line flag reads
    it alike (``cli.common.limit_range``); :func:`limits_of` collects a class's ranges and
    :func:`check_limit` refuses a value out of one in the engine's words. ``above`` leaves
    out ``lo``, ``below`` leaves out ``hi`` (a share below 1)."""
    return dataclasses.field(default=default, metadata={
        "limit": limit(lo, hi, above=above, below=below, unit=unit)})


def limit(lo: float, hi: float, *, above: bool = False, below: bool = False,
          unit: str = "") -> dict[str, Any]:
    """A range written in Python, in the engine's shape (see :func:`limited`); ``below``
    (Python's only: the engine's ranges include their top) only when set."""
    return {"lo": lo, "hi": hi, "above": above, "unit": unit, **({"below": True} if below else {})}


def limits_of(cls: type) -> dict[str, dict[str, Any]]:
    """``{field: range}`` of the fields of the dataclass ``cls`` declared with :func:`limited`."""
    return {f.name: f.metadata["limit"] for f in dataclasses.fields(cls)
            if "limit" in f.metadata}


def check_limit(name: str, limit: Mapping[str, Any], value: Any, *,
                dashes: bool = True) -> None:
    """Raises UsageError unless ``value`` is in ``limit``, as the engine refuses one of its
    fields: ``private-pool must be a whole number from 2 to 64, not 1`` (``dashes``: the
    field named as its flag, else as written, for a parameter given by name as in ``trace
    synth --set duration_s=...``). A whole-number range takes an ``int`` only (not a bool)."""
    lo, hi, above, below = limit["lo"], limit["hi"], limit["above"], limit.get("below", False)
    whole = isinstance(lo, int)
    ok = (isinstance(value, int) if whole else isinstance(value, (int, float))) and \
        not isinstance(value, bool) and math.isfinite(value) and \
        (value > lo if above else value >= lo) and (value < hi if below else value <= hi)
    if ok:
        return
    of = f" of {limit['unit']}" if limit["unit"] else ""
    if whole:
        rule = f"a whole number{of} from {lo} to {hi}"
    elif above and below:
        rule = f"a number{of} above {_end(lo)} and below {_end(hi)}"
    elif below:
        rule = f"a number{of} at least {_end(lo)} and below {_end(hi)}"
    elif above:
        rule = f"a number{of} above {_end(lo)} and at most {_end(hi)}"
    else:
        rule = f"a number{of} from {_end(lo)} to {_end(hi)}"
    raise UsageError(f"{name.replace('_', '-') if dashes else name} must be {rule}, "
                     f"not {value!r}")


def _end(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def flag_text(value: Any, *, size: bool = False) -> str:
    """A spec field's default as a flag's ``--help`` shows it, in the flag's own syntax:
    ``10000``, ``1`` (not ``1.0``), ``0.5``, ``get=90,set=10`` for shares, ``1,2,4`` for a
    list; ``size``: byte counts as sizes (``1,10,1K,1M``). Each parses back, with the flag's
    own parser, to ``value``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={_end(100 * v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ",".join(flag_text(v, size=size) for v in value)
    if size and isinstance(value, int) and value > 0:
        return format_size(value).removesuffix("B")
    if isinstance(value, float):
        return _end(value)
    return str(value)
