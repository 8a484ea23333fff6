"""``simulate --drill LOAD.json``: the hit-ratio dip a failure drill's membership change
should cause, predicted for each distribution, beside what the live run measured (docs/pools.md,
"Failure drills").

The prediction runs the load's own key stream — its key distribution, op mix, seed and
read-through setting, and in each interval as many of the workload's requests as the run
answered (its refill sets taken out) — over the pool's membership as it changed, with the
route tables the load engine itself uses (``_core.load_predict``: the client crate's
distributions over the very keys ``<prefix>:<index>`` the run sent). Each member is a cache
that never evicts. So the difference between a distribution's prediction and the live run is
what the prediction leaves out: timing within an interval, the run's connections drawing keys
in their own order, evictions, and members that failed for real (``--fail`` is not simulated:
only ``--add`` and ``--remove``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import cachelab._core as _core
from cachelab.answers import Answer
from cachelab.artifacts import created_now, read_json, write_json
from cachelab.errors import InputError
from cachelab.load import LoadResult, LoadSpec
from cachelab.load.drill import dip
from cachelab.pool import DISTRIBUTIONS
from cachelab.simulate.answers import drill_answers
from cachelab.tables import write_json_and_csv

__all__ = ["SCHEMA", "DrillPrediction", "predict_drill"]

SCHEMA = "cachelab.drill-prediction"
SCHEMA_VERSION = 1

#: The distributions predicted besides the run's own, unless asked for others.
DEFAULT_DISTRIBUTIONS = ("ketama", "modula")


@dataclass
class DrillPrediction:
    """The predicted and measured hit ratio per interval, and each event's dip."""

    created: str
    source: str
    distribution: str  # the run's
    interval_s: float
    events: list[dict[str, Any]]
    #: Per interval: ``start_s``, ``measured`` hit ratio, ``predicted`` by distribution.
    intervals: list[dict[str, Any]]
    #: Per event: its dip measured and predicted by distribution (points), and the
    #: difference of the run's distribution's prediction from the measurement.
    dips: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    def csv_table(self) -> tuple[list[str], list[list[Any]]]:
        """``drill-prediction.csv`` (and ``--format csv``): per interval, its start, the
        measured hit ratio and the one predicted by each distribution (empty: none)."""
        dists = list(self.intervals[0]["predicted"]) if self.intervals else []
        return (["start_s", "measured", *(f"predicted_{d}" for d in dists)],
                [[r["start_s"], r["measured"], *(r["predicted"][d] for d in dists)]
                 for r in self.intervals])

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """``drill-prediction.json`` and ``drill-prediction.csv`` (:meth:`csv_table`)."""
        del plots  # a table, no figure
        return write_json_and_csv(self, Path(out_dir), "drill-prediction")

    def answers(self) -> list[Answer]:
        """The answer card: each membership change's dip, measured and predicted
        (:func:`~cachelab.simulate.answers.drill_answers`)."""
        return drill_answers(self.to_dict())

    def render(self) -> str:
        lines = [f"failure drill of {self.source} ({self.distribution}): hit ratio per "
                 f"{self.interval_s:g} s interval, measured and predicted by distribution"]
        dists = list(self.intervals[0]["predicted"]) if self.intervals else []
        for d in self.dips:
            parts = ", ".join(f"{k} {v:.1f}" for k, v in d["predicted"].items())
            lines.append(
                f"{d['event']}: dip measured {d['measured']:.1f} points; predicted {parts}"
                + (f" (the run's {self.distribution}: "
                   f"{d['difference']:+.1f} points from the measurement)"
                   if d.get("difference") is not None else ""))
        lines.append(f"  {'from s':>7} {'measured':>9}" + "".join(f" {k:>14}" for k in dists))
        for r in self.intervals:
            lines.append(f"  {r['start_s']:>7.1f} {_pct(r['measured']):>9}"
                         + "".join(f" {_pct(r['predicted'][k]):>14}" for k in dists))
        return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _load(source: LoadResult | Mapping[str, Any] | str | Path) -> tuple[LoadResult, str]:
    if isinstance(source, LoadResult):
        return source, "the run"
    if isinstance(source, Mapping):
        return LoadResult.from_dict(source), "the run"
    path, data = read_json(source, "load.json")
    return LoadResult.from_dict(data, where=str(path)), str(path)


def predict_drill(source: LoadResult | Mapping[str, Any] | str | Path,
                  distributions: Sequence[str] | None = None) -> DrillPrediction:
    """The prediction for a load run with a membership change (a result, its dict, or the
    path of its load.json or directory), for the run's distribution and ``distributions``
    (default ketama and modula). InputError for a run without ``--add``/``--remove``."""
    result, name = _load(source)
    drill = result.drill or {}
    route = drill.get("route")
    if not route or not route.get("changes"):
        raise InputError(f"{name}: no membership change to predict (a load run with --add or "
                         "--remove writes one; --fail alone is not simulated)")
    known = {f.name for f in fields(LoadSpec)}
    spec = LoadSpec(**{k: v for k, v in result.spec.items() if k in known})
    spec.add, spec.remove, spec.fail, spec.private_pool, spec.servers = [], [], [], None, None
    spec.duration, spec.requests = 1.0, None
    core = spec.to_core(route["servers"][0][0], "predict")
    core.update(servers=[tuple(m) for m in route["servers"]],
                changes=[tuple(c) for c in route["changes"]],
                prefix=route["prefix"], seed=route["seed"], prefill=route["prefill"])
    refills = spec.on_miss == "set"
    requests = [max(0, sum(iv["ops"].values()) - (iv["misses"] if refills else 0))
                for iv in result.intervals]
    wanted = [route["distribution"], *[d for d in (distributions or DEFAULT_DISTRIBUTIONS)
                                       if d != route["distribution"]]]
    for d in wanted:
        if d not in DISTRIBUTIONS:
            raise InputError(f"distribution {d!r} is not one of: {', '.join(DISTRIBUTIONS)}")
    predicted: dict[str, list[float | None]] = {}
    for d in wanted:
        core["distribution"] = d
        predicted[d] = [h / k if k else None for k, h in _core.load_predict(core, requests)]
    rows = []
    for i, iv in enumerate(result.intervals):
        keys = iv["hits"] + iv["misses"]
        rows.append({"start_s": iv["start_s"],
                     "measured": round(iv["hits"] / keys, 5) if keys else None,
                     "predicted": {d: None if p[i] is None else round(p[i], 5)
                                   for d, p in predicted.items()}})
    interval = float(result.spec["interval"])
    dips = []
    for at, member, kind in sorted(route["changes"]):
        address = route["servers"][member][0]
        measured = dip([{"start_s": r["start_s"], "hit_ratio": r["measured"]} for r in rows],
                       at, interval)
        by = {d: dip([{"start_s": r["start_s"], "hit_ratio": r["predicted"][d]}
                      for r in rows], at, interval) for d in wanted}
        if measured is None:
            continue
        dips.append({
            "event": f"{kind} {address} at {at:g} s", "at_s": at,
            "measured": measured["points"],
            "predicted": {d: (v["points"] if v else None) for d, v in by.items()},
            "difference": (round(by[wanted[0]]["points"] - measured["points"], 2)
                           if by[wanted[0]] else None)})
    return DrillPrediction(created=created_now(), source=name,
                           distribution=route["distribution"], interval_s=interval,
                           events=drill.get("events") or [], intervals=rows, dips=dips)
