"""The answers at the top of the report: each section's result's answer card
(:mod:`cachelab.answers`), gathered into one table above the findings.

Where a section's answers come from, first found first:

1. the section's own ``answers`` (a verb's ``section()`` may fill them);
2. :data:`CARDS`, the kind's card from the artifact's data;
3. the result read back (its class's ``from_dict``, else its fields: :data:`RESULTS`) and
   its ``answers()`` — so a result that gains an ``answers()`` is picked up here without
   touching this module;
4. the card a run recorded for the step that wrote the artifact (``run.json``'s
   ``steps[].answers``: what the result's ``answers()`` gave when it was made).

A run's own section answers for the steps that have no section: a failed or skipped step is
*not measured*, with why."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import Artifact, from_fields
from cachelab.compare.answers import compare_answers
from cachelab.errors import CachelabError
from cachelab.load import LoadResult
from cachelab.profile import LatencyProfile
from cachelab.replay import ReplayResult
from cachelab.report.overview import step_answers
from cachelab.scale.result import ScaleResult
from cachelab.simulate import SimulationResult
from cachelab.simulate.answers import flat_answers, request_answers
from cachelab.size.sizing import SizeResult
from cachelab.tiers import TiersResult
from cachelab.usl import UslFit

__all__ = ["CARDS", "RESULTS", "answers_of", "recorded"]

#: Kind -> the card made from the artifact's data, where no result object is needed.
CARDS: dict[str, Callable[[Artifact], list[Answer]]] = {
    "compare": lambda a: compare_answers(a.data),
    "simulation": lambda a: _simulation_card(a.data),
}


def _simulation_card(d: dict[str, Any]) -> list[Answer]:
    """A ``simulate.json``'s card from its data (its result objects do not read back): flat
    or request level; KeyError for another shape (the run's record is used instead)."""
    if d.get("mode") == "flat":
        return flat_answers(d)
    if "strategies" in d:
        return request_answers(d)
    raise KeyError("mode")

#: Kind -> the result class its data reads back into (``from_dict`` when it has one, else
#: its dataclass fields), whose ``answers()`` is the card.
RESULTS: dict[str, type] = {
    "profile": LatencyProfile, "load": LoadResult, "scale": ScaleResult, "usl": UslFit,
    "size": SizeResult, "simulation": SimulationResult, "replay": ReplayResult,
    "tiers": TiersResult,
}

#: What reading a result or making its card may raise on data it does not fit.
_BAD = (CachelabError, KeyError, TypeError, ValueError, IndexError, AttributeError)


def _read(art: Artifact) -> Any:
    cls = RESULTS.get(art.kind)
    if cls is None:
        return None
    if hasattr(cls, "from_dict"):
        return cls.from_dict(art.data, str(art.path))
    return from_fields(cls, art.data, str(art.path)) if is_dataclass(cls) else None


def recorded(arts: Sequence[Artifact]) -> dict[Path, list[Answer]]:
    """The cards runs recorded for their steps, by the directory of the step's artifacts."""
    out: dict[Path, list[Answer]] = {}
    for a in arts:
        if a.kind != "run":
            continue
        for s in a.data.get("steps") or []:
            if s.get("dir") and s.get("answers"):
                out[(a.directory / s["dir"]).resolve()] = [
                    Answer.from_dict(x) for x in s["answers"]]
    return out


def _run_card(art: Artifact) -> list[Answer]:
    """A run's section: the steps that left no result to answer for themselves."""
    return [x for s in art.data.get("steps") or [] if s.get("status") in ("failed", "skipped")
            and not s.get("answers") for x in step_answers(s)]


def answers_of(art: Artifact, steps: dict[Path, list[Answer]]) -> list[Answer]:
    """The card of one artifact (see the module's docstring for where it comes from; empty
    when there is none). ``steps``: :func:`recorded`."""
    if art.kind == "run":
        return _run_card(art)
    try:
        if art.kind in CARDS:
            return CARDS[art.kind](art)
        result = _read(art)
        card = getattr(result, "answers", None)
        if callable(card):
            return list(card())
    except _BAD:
        pass  # a result this card cannot read: the run's record, or no card
    return steps.get(art.directory.resolve(), [])
