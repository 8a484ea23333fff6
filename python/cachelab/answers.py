"""The answer card: the few numbers that answer a verb's question, each with its 95 % interval
and a one-word trust mark, printed first (issue 31, "Answers first").

A result offers ``answers() -> list[Answer]``; the CLI's output door prints
:func:`card_lines` above the result's own table, ``run`` gathers its steps' answers into one
card, and the report opens with them. The trust marks, best first:

- **certified** — measured, every check of the measurement passed, and (when a precision was
  asked for) its interval is within it;
- **indicative** — measured, but a check failed or the precision was not reached: the number
  is what happened, not what the system does; the card says why, and the line that says
  INVALID or NOT below it says what would fix it;
- **predicted** — computed by a model or a simulation from measured inputs, not measured;
- **not measured** — the answer is missing (no fit, a failed step): the card says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cachelab.units import num, times

__all__ = ["CERTIFIED", "INDICATIVE", "NOT_MEASURED", "PREDICTED", "TRUST", "Answer",
           "card_lines", "interval_text", "is_caveat", "leading_alarms", "ratio_bounds",
           "ratio_text", "spans_one", "trust_layout", "trust_of", "with_card"]

CERTIFIED = "certified"
INDICATIVE = "indicative"
PREDICTED = "predicted"
NOT_MEASURED = "not measured"
#: The trust marks, best first.
TRUST = (CERTIFIED, INDICATIVE, PREDICTED, NOT_MEASURED)


@dataclass(frozen=True)
class Answer:
    """One line of the card: what it answers, the number (with its interval in the text),
    how far to trust it, and why not further (empty when certified)."""

    #: What the line answers, in a few words: "get 1 KB", "peak throughput".
    question: str
    #: The answer: "p50 54.6 µs (95 % 52.1–57.0), p99 120 µs (110–135)".
    value: str
    #: One of :data:`TRUST`.
    trust: str
    #: Why the mark is not *certified*, in a few words ("client saturated").
    why: str = ""

    def __post_init__(self) -> None:
        if self.trust not in TRUST:
            raise ValueError(f"trust must be one of {', '.join(TRUST)}, not {self.trust!r}")

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Answer:
        return cls(question=str(d["question"]), value=str(d["value"]), trust=str(d["trust"]),
                   why=str(d.get("why") or ""))


def trust_of(reasons: Iterable[str]) -> tuple[str, str]:
    """(mark, why) of a measurement: *certified* without reasons, else *indicative* with the
    first (worst) reason."""
    first = next(iter(reasons), None)
    return (CERTIFIED, "") if first is None else (INDICATIVE, first)


def interval_text(value: str, interval: Sequence[str] | None) -> str:
    """"54.6 µs (95 % 52.1–57.0)", or the value alone without an interval."""
    if not interval:
        return value
    return f"{value} (95 % {interval[0]}–{interval[1]})"


def ratio_bounds(a: float, a_iv: Sequence[float] | None, b: float,
                 b_iv: Sequence[float] | None) -> tuple[float, float] | None:
    """The interval of the ratio ``a / b`` from the 95 % intervals of ``a`` and ``b``: from
    both ends, ``a_low / b_high`` to ``a_high / b_low``. Both intervals hold at once with at
    least 90 % (Bonferroni), so this one covers the ratio with at least 90 % — wider than an
    exact one, never narrower. None without both intervals (or with a bound at 0)."""
    if not a_iv or not b_iv or b_iv[0] <= 0 or b_iv[1] <= 0:
        return None
    return a_iv[0] / b_iv[1], a_iv[1] / b_iv[0]


def spans_one(bounds: Sequence[float] | None) -> bool:
    """Whether a ratio's interval holds 1 (the two may be equal): a finding that one is
    faster or larger than the other is then not shown."""
    return bounds is not None and bounds[0] <= 1.0 <= bounds[1]


def ratio_text(a: float, b: float, bounds: Sequence[float] | None) -> str:
    """"3.6× (≥ 90 % 3.1×–4.2×)" (:func:`ratio_bounds`), or "3.6× (no interval)"."""
    if bounds is None:
        return f"{times(a, b)} (no interval)"
    digits = 2  # more where two digits would show a narrow interval as one number
    while digits < 4 and num(bounds[0], digits) == num(bounds[1], digits):
        digits += 1
    return (f"{times(a, b)} (≥ 90 % {num(bounds[0], digits)}×–"
            f"{num(bounds[1], digits)}×)")


def card_lines(answers: Sequence[Answer], title: str = "answer") -> list[str]:
    """The card as text: a title line, then one line per answer — the question, the value
    and the trust mark with its reason — aligned; nothing without answers."""
    if not answers:
        return []
    width = max(len(a.question) for a in answers)
    lines = [f"{title}:"]
    for a in answers:
        mark = a.trust + (f" ({a.why})" if a.why else "")
        lines.append(f"  {a.question.ljust(width)}  {a.value}  — {mark}")
    return lines


def _alarm(line: str) -> bool:
    """Whether a line belongs to a table's leading block of verdicts and alarms: it starts
    with a word in capitals (PARTIAL, INVALID, VALID:, WARNING:, SERVER RESTARTED), is
    indented under one, or is a precision verdict."""
    if not line.strip():
        return False
    first = _first_word(line)
    return (line[0].isspace() or line.startswith("precision ")
            or (len(first) > 1 and first.isupper()))


def _first_word(line: str) -> str:
    """A line's first word without its trailing colon or comma ("" for a blank line)."""
    return (line.split() or [""])[0].rstrip(":,")


def _caveat(line: str) -> bool:
    """Whether a line of a table's body is a verdict said after its figures: not indented,
    and a WARNING:, a precision miss, or a NOT or INVALID with its ``→ fix`` ("target rate
    200000/s NOT held: … → fix")."""
    if not line.strip() or line[0].isspace():
        return False
    return (line.startswith(("WARNING:", "precision NOT"))
            or (" → " in line and is_caveat(line)))


def is_caveat(line: str) -> bool:
    """Whether a sentence (a report's finding or note) is a verdict to weigh the numbers by:
    it says NOT or INVALID (in capitals), as a precision miss or a failed check does, with
    its fix after the arrow."""
    words = set(line.split(" → ", 1)[0].replace(":", " ").replace(",", " ").split())
    return bool(words & {"NOT", "INVALID"})


def leading_alarms(text: str) -> int:
    """How many of ``text``'s first lines are its verdicts and alarms (the capital-word
    heuristic of :func:`with_card`, for a result that does not declare them)."""
    lines = text.splitlines()
    at = 0
    while at < len(lines) and _alarm(lines[at]):
        at += 1
    return at


#: First words of leading lines that tell what happened, not what went wrong (a drill's
#: membership change, a VALID verdict): never the headline while an alarm follows them.
_NEWS = ("DRILL", "VALID")


def _headline(alarms: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the headline, the other alarm lines): the headline is the first line that is an
    alarm (not :data:`_NEWS`; else the first line) with its indented continuation lines;
    the others keep their order."""
    groups: list[list[str]] = []
    for line in alarms:
        if groups and line[:1].isspace():
            groups[-1].append(line)
        else:
            groups.append([line])
    if not groups:
        return [], []
    worst = next((g for g in groups if _first_word(g[0]) not in _NEWS), groups[0])
    return worst, [line for g in groups if g is not worst for line in g]


def trust_layout(alarms: Sequence[str], answers: Sequence[Answer], rest: Sequence[str],
                 warnings: Iterable[str] = (), title: str = "answer") -> list[str]:
    """The layout of every table that has a card (issue 31, "Answers first"): the headline
    (the first of ``alarms``, with its indented continuation lines) — the worst is read
    first —, then the card, then ``what to trust:`` with every other alarm and verdict line
    (unchanged, each keeping its ``→ fix``) and the ``warnings`` (``warning: …``), then a
    blank line and ``rest``. No block without caveats; ``alarms`` and ``rest`` alone without
    a card or warnings."""
    card = card_lines(answers, title)
    said = [f"warning: {w}" for w in warnings]
    if not card and not said:
        return [*alarms, *rest]
    headline, others = _headline(alarms)
    caveats = [*others, *said]
    block = ["what to trust:", *(f"  {c}" for c in caveats)] if caveats else []
    # A warning the table also closes with ("warning: …", "note: …") is said once, here.
    twice = {f"{word}: {w}" for w in warnings for word in ("warning", "note")}
    rest = [line for line in rest if line.strip() not in twice]
    while rest and not rest[0].strip():
        rest.pop(0)
    while rest and not rest[-1].strip():
        rest.pop()
    return [*headline, *card, *block, *([""] if rest else []), *rest]


def with_card(text: str, answers: Sequence[Answer], warnings: Iterable[str] = ()) -> str:
    """``text`` (a result's table) laid out by :func:`trust_layout`: its headline, the card,
    the "what to trust:" block (its other leading verdicts and alarms, the verdicts its body
    says after the figures — a WARNING:, a NOT or INVALID with its fix — and ``warnings``),
    then the rest. Its leading alarms are found by :func:`leading_alarms`. Without answers
    or warnings the text is unchanged."""
    warnings = list(warnings)
    if not answers and not warnings:
        return text
    lines = text.splitlines()
    at = leading_alarms(text)
    later = [line for line in lines[at:] if _caveat(line)]
    rest: list[str] = []
    for line in lines[at:]:  # the verdicts said after the figures join the block
        if line not in later and (line.strip() or (rest and rest[-1].strip())):
            rest.append(line)
    return "\n".join(trust_layout([*lines[:at], *later], answers, rest, warnings))
