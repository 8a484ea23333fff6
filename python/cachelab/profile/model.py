"""The latency profile (:class:`LatencyProfile`): the artifact documented in
``docs/artifacts.md`` (schema ``cachelab.latency-profile``, version 1), its files
(:meth:`~LatencyProfile.write`) and its tables (:meth:`~LatencyProfile.render`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import check_schema, write_json
from cachelab.errors import InputError
from cachelab.profile.answers import profile_answers
from cachelab.profile.cell import TABLE_ROWS, Cell
from cachelab.profile.precise import precision_percentile, samples_fix
from cachelab.profile.render import render_profile
from cachelab.tables import write_json_and_csv
from cachelab.units import partial_note

SCHEMA = "cachelab.latency-profile"
SCHEMA_VERSION = 1

#: The columns of ``profile.csv``: one row per cell.
CSV_HEADER = ["op", "value_size", "keys", "samples", "errors", "mismatches", "misses",
              *(f"p{k}_ns" for k in TABLE_ROWS[:-1]), "max_ns"]


@dataclass
class LatencyProfile:
    """A latency profile: measured by :func:`profile` or loaded by :func:`load_profile`."""

    name: str
    source: str  # "measured" or "published"
    created: str
    cells: list[Cell]
    server: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    published: dict[str, Any] | None = None
    #: The order the samples were taken in, when it was kept (:func:`rank_sequence`):
    #: ``{"ranks": [...], "segments": [...], "lag1": r}`` — each sample's rank within its own
    #: cell (a quantile in [0, 1)), in time order, cut into segments of back-to-back sampling.
    sequence: dict[str, Any] | None = None
    #: With TLS: the cost of TLS next to plain TCP (:mod:`cachelab.profile.tlscost`).
    tls_cost: dict[str, Any] | None = None
    #: Through a proxy: the servers behind it, each ``{"address", "server"}`` with its
    #: ``stats`` deltas over the whole run, as ``load.json``'s ``behind``.
    behind: list[dict[str, Any]] | None = None
    #: Run length by precision (``profile --precision``): ``{"target", "percentile",
    #: "cap_samples", "batches"}``, each cell's own verdict in its ``precision``; None
    #: without a target.
    precision: dict[str, Any] | None = None

    def cells_of(self, op: str) -> list[Cell]:
        return [c for c in self.cells if c.op == op]

    @property
    def floor(self) -> Cell | None:
        return next(iter(self.cells_of("floor")), None)

    def failed_checks(self) -> dict[str, str]:
        """``precision``: the cells that did not reach ``--precision`` (the verdict
        ``--fail-on precision`` checks), named."""
        missed = [c for c in self.cells if c.precision is not None
                  and not c.precision.get("reached")]
        if not missed:
            return {}
        names = ", ".join(f"{c.op} {c.label}" for c in missed[:5]) + \
            (f" and {len(missed) - 5} more" if len(missed) > 5 else "")
        # (a profile saved before the run-level precision record: no target to write a fix
        # from)
        fix = ("" if not self.precision else " → " + samples_fix(
            missed, float(self.precision["target"]), int(self.precision["cap_samples"]),
            precision_percentile(self.precision)))
        what = (f" (p{precision_percentile(self.precision)} within "
                f"±{100 * float(self.precision['target']):g} %)" if self.precision else "")
        return {"precision": f"precision NOT reached in {len(missed)} of {len(self.cells)} "
                f"cell(s){what}: {names}{fix}"}

    def problems(self) -> dict[str, int]:
        """Counts ``--fail-on problems`` fails on: errors, mismatches, misses, keys left behind,
        and the items a server cachelab did not start evicted during the run."""
        out = {
            "errors": sum(sum(c.errors.values()) for c in self.cells),
            "mismatches": sum(c.mismatches for c in self.cells),
            "misses": sum(c.misses for c in self.cells),
            "leftover_keys": int(self.run.get("leftover_keys", 0)),
            "user_items_lost": int(self.run.get("user_items_lost") or 0),
        }
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "source": self.source,
            "created": self.created,
            "unit": "ns",
            "server": self.server,
            "client": self.client,
            "environment": self.environment,
            "run": self.run,
            "cells": [_cell_dict(c) for c in self.cells],
        }
        if self.published is not None:
            d["published"] = self.published
        if self.sequence is not None:
            d["sequence"] = self.sequence
        if self.tls_cost is not None:
            d["tls_cost"] = self.tls_cost
        if self.behind is not None:
            d["behind"] = self.behind
        if self.precision is not None:
            d["precision"] = self.precision
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "profile") -> LatencyProfile:
        check_schema(d, SCHEMA, SCHEMA_VERSION, "latency profile", where)
        cells = d.get("cells")
        if not isinstance(cells, list):
            raise InputError(f"{where}: 'cells' must be a list")
        return cls(
            name=str(d.get("name", "")),
            source=str(d.get("source", "measured")),
            created=str(d.get("created", "")),
            cells=[Cell.from_dict(c, where) for c in cells],
            server=dict(d.get("server", {})),
            client=dict(d.get("client", {})),
            environment=dict(d.get("environment", {})),
            run=dict(d.get("run", {})),
            published=d.get("published"),
            sequence=_check_sequence(d.get("sequence"), where),
            tls_cost=d.get("tls_cost"),
            behind=d.get("behind"),
            precision=d.get("precision"),
        )

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    def csv_rows(self) -> list[list[Any]]:
        """The rows of ``profile.csv`` (under :data:`CSV_HEADER`), one per cell."""
        return [
            [c.op, c.value_size, c.keys, c.samples, sum(c.errors.values()), c.mismatches,
             c.misses, *(c.percentiles.get(k, "") for k in TABLE_ROWS)]
            for c in self.cells
        ]

    def csv_table(self) -> tuple[list[str], list[list[Any]]]:
        """``profile.csv`` (and ``--format csv``): :data:`CSV_HEADER`, one row per cell."""
        return CSV_HEADER, self.csv_rows()

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """``profile.json``, ``profile.csv`` and, with ``plots``, the figures
        (``get-by-size``, ``set-by-size``, ``multiget-by-keys``, PNG and SVG) in ``out_dir``."""
        out = Path(out_dir)
        written = write_json_and_csv(self, out, "profile")
        if plots:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.profile.plots import write_plots

            written += write_plots(self.name, self.cells, out)
        return written

    def answers(self) -> list[Answer]:
        """The answer card (:mod:`cachelab.answers`): a small get's and set's p50 and p99 and
        the cost of each extra multi-get key, with their intervals and trust marks."""
        return profile_answers(self, partial_note(self.run) if isinstance(self.run, dict)
                               else None)

    def render(self) -> str:
        """The human report: a header, the floor, and one table per operation (with its
        ``p50/floor`` row when the floor was measured)."""
        return render_profile(self)


def _cell_dict(c: Cell) -> dict[str, Any]:
    """A cell as stored: without ``precision`` when the run had no target (as before)."""
    d = asdict(c)
    if d["precision"] is None:
        del d["precision"]
    return d


def _check_sequence(seq: Any, where: str) -> dict[str, Any] | None:
    """A profile's ``sequence`` as stored, checked (None when absent)."""
    if seq is None:
        return None
    ranks = seq.get("ranks") if isinstance(seq, Mapping) else None
    segments = seq.get("segments") if isinstance(seq, Mapping) else None
    if not isinstance(ranks, list) or not isinstance(segments, list) or not ranks:
        raise InputError(f"{where}: 'sequence' needs non-empty 'ranks' and 'segments' lists")
    bad = next((u for u in ranks if not isinstance(u, (int, float)) or not 0 <= u < 1), None)
    if bad is not None:
        raise InputError(f"{where}: sequence ranks must be numbers in [0, 1), got {bad!r}")
    if any(not isinstance(n, int) or n < 1 for n in segments) or sum(segments) != len(ranks):
        raise InputError(f"{where}: sequence segments must be positive whole numbers adding "
                         f"up to the {len(ranks)} ranks")
    return dict(seq)
