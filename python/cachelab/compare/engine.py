"""Comparing saved results: :func:`compare` finds the result in each path, checks they are of
one kind and measured alike, and hands them to the comparison of that kind."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import cachelab.environment as environment
from cachelab.artifacts import Artifact, created_now, find_artifacts, read_artifact
from cachelab.compare.answers import side_trust
from cachelab.compare.load import compare_loads, partial_load
from cachelab.compare.profiles import compare_profiles, partial_profile
from cachelab.compare.result import CompareResult, summarize
from cachelab.compare.scale import compare_scales
from cachelab.compare.simulation import compare_simulations
from cachelab.compare.spec import LIMITS
from cachelab.compare.tiers import compare_tiers
from cachelab.errors import CachelabError, InputError, UsageError
from cachelab.scale.result import partial_text
from cachelab.tiers.result import partial_text as tiers_partial
from cachelab.units import check_limit, partial_note

__all__ = ["COMPARERS", "compare", "compare_artifacts", "load_for_compare"]

_KIND_NAMES = {"profile": "latency profile", "load": "load result", "scale": "scale result",
               "simulation": "simulation result", "usl": "USL fit", "tiers": "tiers result",
               "replay": "replay result", "run": "run summary", "compare": "comparison"}

#: Result kind -> the comparison of results of that kind.
COMPARERS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "profile": compare_profiles,
    "load": compare_loads,
    "scale": compare_scales,
    "simulation": compare_simulations,
    "tiers": compare_tiers,
}

#: Result kind -> its partial note with how far it got; others: from their ``run`` alone.
PARTIAL_NOTES: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "profile": partial_profile,
    "load": partial_load,
    "scale": partial_text,
    "tiers": tiers_partial,
}

_METHODS = {
    "profile": "Latency percentiles per cell; intervals: bootstrap over each HdrHistogram.",
    "load": "Measured-run throughput (Welch interval over the time-series intervals) and "
            "latency percentiles (bootstrap over the HdrHistogram).",
    "scale": "Mean throughput at each N; intervals: Welch's t over the repeats.",
    "simulation": "Request-level: medians over latency draws; intervals: the min–max bands "
                  "paired least and most favourably. Flat: miss ratios are deterministic, so "
                  "differences are exact.",
    "tiers": "Read time per shape and method: percentiles with a bootstrap over each "
             "HdrHistogram; CPU per read: means, no interval; stored bytes: exact.",
}


def load_for_compare(path: str | Path) -> Artifact:
    """The one result in ``path``: a result file, or a directory holding exactly one
    comparable result (a run's directory is not one: name its step directories)."""
    p = Path(path)
    if p.is_file():
        return read_artifact(p)
    if not p.exists():
        raise UsageError(f"{p}: no such file or directory")
    skipped: list[str] = []
    found = [a for a in find_artifacts([p], skipped) if a.kind in COMPARERS]
    direct = [a for a in found if a.path.parent == p]
    pick = direct or found
    if len(pick) == 1:
        return pick[0]
    if not pick and skipped:  # a result that cannot be read (bad JSON, a bad field): why
        raise InputError(skipped[0])
    if not pick:
        raise UsageError(f"{p}: no profile, load, scale, simulation or tiers result found")
    listing = ", ".join(str(a.path) for a in pick[:4]) + (" …" if len(pick) > 4 else "")
    raise UsageError(f"{p}: holds {len(pick)} results ({listing}); name one of them")


def _label(a: Artifact, i: int) -> str:
    return f"{chr(65 + i)}: {a.path.parent.name}/{a.path.name}" if i < 26 else str(a.path)


def compare_artifacts(arts: Sequence[Artifact], *, resamples: int = 2000, level: float = 0.95,
                      seed: int = 0, allow_different: bool = False) -> CompareResult:
    """Compare already loaded results (the first is the baseline)."""
    if len(arts) < 2:
        raise UsageError("compare needs at least two results")
    if len(arts) > 26:
        raise UsageError("compare takes at most 26 results")
    check_limit("resamples", LIMITS["resamples"], resamples)
    check_limit("level", LIMITS["level"], level)
    kinds = [a.kind for a in arts]
    if len(set(kinds)) > 1:
        listing = ", ".join(f"{a.path} is a {_KIND_NAMES.get(a.kind, a.kind)}" for a in arts)
        raise UsageError(f"cannot compare results of different kinds: {listing}")
    kind = kinds[0]
    if kind not in COMPARERS:
        raise UsageError(f"comparing {_KIND_NAMES.get(kind, kind)}s is not supported; compare "
                         "profiles, load results, scale results, simulations or tiers results")
    rng = np.random.default_rng(seed)
    problems: list[str] = []
    warnings: list[str] = []
    try:
        rows = COMPARERS[kind](arts, rng, resamples, level, problems, warnings)
        partial = _partial(arts)
        trust = {chr(65 + i): side_trust(a) for i, a in enumerate(arts)}
    except CachelabError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # The schemas (cachelab.schemas) check every field the comparisons read, so this is
        # a field they do not know of yet: still one line naming the files, not a traceback.
        raise InputError(f"{', '.join(str(a.path) for a in arts)}: cannot compare them: a "
                         f"field is missing or of an unexpected type ({type(e).__name__}: "
                         f"{e})") from None
    if problems:
        msg = f"incompatible {_KIND_NAMES[kind]}s: {'; '.join(problems)}"
        if not allow_different:
            raise UsageError(msg + " (--allow-different compares them anyway)")
        warnings.insert(0, msg)
    names = [_label(a, i) for i, a in enumerate(arts)]
    warnings[:0] = [f"{k} is {note}: it stopped before the end, so it covers less than "
                    "was asked" for k, note in partial.items()]
    result = CompareResult(
        kind=kind, names=names, sources=[str(a.path) for a in arts],
        method=_METHODS[kind] + f" Level {level:g}, {resamples} resamples, seed {seed}.",
        rows=rows, warnings=warnings, partial=partial,
        settings={"resamples": resamples, "level": level, "seed": seed,
                  "allow_different": allow_different},
        created=created_now(), environment=environment.facts(),
        trust=trust,
    )
    result.summary = summarize(result)
    return result


def _partial(arts: Sequence[Artifact]) -> dict[str, str]:
    """Letter -> partial note of each result that stopped before the end (a Ctrl-C, a server
    that went away)."""
    out = {}
    for i, a in enumerate(arts):
        note = PARTIAL_NOTES.get(a.kind, lambda d: partial_note(d.get("run")))(a.data)
        if note:
            out[chr(65 + i)] = note
    return out


def compare(paths: Sequence[str | Path], **options: Any) -> CompareResult:
    """Compare the results at ``paths`` (files, or directories holding one result each); the
    first is the baseline. Options: ``resamples``, ``level``, ``seed``, ``allow_different``."""
    return compare_artifacts([load_for_compare(p) for p in paths], **options)
