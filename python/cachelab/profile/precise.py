"""Run length by precision for a profile (``profile --precision 5%``): each cell is sampled
until the 95 % interval (:mod:`cachelab.intervals`, the cell's ``intervals``) of its targeted
percentile (the spec's ``precision_percentile``: p99 by default, p50 for ``--quick``) has a
relative half-width ((high − low) / 2 / value) at or below the target, with the spec's
``samples`` per cell as the cap.

The engine (``_core.profile_run``) is run in batches, each with the sizes and key counts whose
cells have not reached the target yet; a batch's cells are merged into the ones before
(histograms merged, counts added). The first batch takes :func:`first_batch` samples per cell
(enough for the percentile to be certifiable, :func:`cachelab.intervals.samples_to_certify`,
within :data:`MIN_FIRST_BATCH`–:data:`FIRST_BATCH`, never past the cap); each next one what
the widest open cell's half-width says it needs (the half-width shrinks as 1 / √n), times
:data:`MARGIN`, at least a quarter and at most twice the samples so far, never past the cap. A
get and a set of one size share their samples, so a size goes on while either of its cells is
open. The floor (measured in every round of every batch) is a cell too: when it alone is open,
the smallest cell rides along to carry it.

Each batch is a new run of the engine: its own connections and warm-up (the spec's
``warmup``), keys under ``<prefix>:b<batch>`` after the first, deleted at its end. The cells of
different batches are not interleaved with one another the way one batch's are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import cachelab._core as _core
from cachelab.intervals import relative_half_width, samples_to_certify, within
from cachelab.load.precision import round_up
from cachelab.profile.cell import Cell, with_percentiles
from cachelab.units import num

__all__ = ["DEFAULT_PERCENTILE", "FIRST_BATCH", "MARGIN", "MIN_FIRST_BATCH", "cell_precision",
           "first_batch", "next_batch", "not_reached", "precision_line", "precision_percentile",
           "precision_text", "run_until_precise", "samples_fix", "wider"]

#: The most samples per cell in the first batch (a p99's needs 5,000 to be certifiable; the
#: batches after it grow towards that when its interval says so).
FIRST_BATCH = 1_000
#: The fewest samples per cell in the first batch (a p50's is certifiable from 100).
MIN_FIRST_BATCH = 500
#: The predicted samples are taken this much larger, so that the next check usually passes.
MARGIN = 1.2
#: The percentile (a cell's ``percentiles``/``intervals`` key) targeted when the run's
#: record does not say (profiles saved before ``precision_percentile``).
DEFAULT_PERCENTILE = "99"

#: A raw cell's identity across batches.
CellKey = tuple[str, int, int]


def precision_percentile(precision: Mapping[str, Any] | None) -> str:
    """The percentile a run's precision record targets (``"99"`` for a record that does not
    say)."""
    return str((precision or {}).get("percentile") or DEFAULT_PERCENTILE)


def cell_half_width(cell: Cell, percentile: str = DEFAULT_PERCENTILE) -> float | None:
    """The relative half-width of ``cell``'s interval at ``percentile``; None without one."""
    return relative_half_width(cell.intervals.get(percentile), cell.percentiles.get(percentile))


def cell_precision(cell: Cell, target: float,
                   percentile: str = DEFAULT_PERCENTILE) -> dict[str, Any]:
    """A cell's ``precision``: ``{"half_width": h or None, "reached": bool}`` at
    ``percentile``."""
    hw = cell_half_width(cell, percentile)
    return {"half_width": None if hw is None else round(hw, 5),
            "reached": within(hw, target)}


def _key(raw: Mapping[str, Any]) -> CellKey:
    return str(raw["op"]), int(raw["value_size"]), int(raw["keys"])


def _merge_cells(into: dict[CellKey, dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    """Adds a batch's raw cells to ``into`` (by op, size and key count)."""
    for c in cells:
        k = _key(c)
        old = into.get(k)
        if old is None:
            into[k] = dict(c)
            continue
        hists = [h for h, n in ((old["histogram"], old["samples"]),
                                (c["histogram"], c["samples"])) if n]
        old["histogram"] = _core.hist_merge(hists) if hists else old["histogram"]
        old["samples"] = int(old["samples"]) + int(c["samples"])
        errors = dict(old.get("errors") or {})
        for kind, n in dict(c.get("errors") or {}).items():
            errors[kind] = errors.get(kind, 0) + n
        old["errors"] = errors
        for name in ("mismatches", "misses"):
            old[name] = int(old.get(name, 0)) + int(c.get(name, 0))


def next_batch(n: int, widest: float | None, target: float, left: int) -> int:
    """Samples per open cell for the next batch, from ``n`` so far and the widest open
    cell's half-width (None: no interval yet, so double)."""
    want = n if widest is None else math.ceil(n * ((widest / target) ** 2 - 1) * MARGIN)
    return max(1, min(left, max(n // 4, min(want, 2 * n))))


def first_batch(cap: int, percentile: str) -> int:
    """Samples per cell in the first batch: what makes ``percentile`` certifiable, within
    :data:`MIN_FIRST_BATCH`–:data:`FIRST_BATCH`, at most ``cap``."""
    return min(cap, max(MIN_FIRST_BATCH, min(FIRST_BATCH, samples_to_certify(float(percentile)))))


def run_until_precise(
    spec_dict: dict[str, Any], target: float, cap: int,
    run_batch: Callable[[dict[str, Any]], dict[str, Any]],
    percentile: str = DEFAULT_PERCENTILE,
) -> dict[str, Any]:
    """Runs ``run_batch`` (the engine, on a spec dict as ``_core.profile_run`` takes it) in
    batches until every cell's ``percentile`` is within ``target`` or has ``cap`` samples;
    returns the
    merged raw outcome, as one run's, with ``precision`` added: ``{"target", "percentile",
    "cap_samples", "batches", "cells": {(op, size, keys): cell precision}}``. A batch that
    was cancelled, gave up or was stopped (``evicting``) ends it."""
    sizes, counts = list(spec_dict["sizes"]), list(spec_dict["key_counts"])
    merged: dict[CellKey, dict[str, Any]] = {}
    total: dict[str, Any] = {}
    n, batch, batches = 0, first_batch(cap, percentile), 0
    while True:
        one = {**spec_dict, "sizes": sizes, "key_counts": counts, "samples": batch,
               "seed": (int(spec_dict["seed"]) + batches) % 2**63,
               "prefix": spec_dict["prefix"] + (f":b{batches}" if batches else "")}
        raw = run_batch(one)
        batches += 1
        n += batch
        _merge_cells(merged, raw["cells"])
        _add_run(total, raw)
        if raw["cancelled"] or raw["aborted"] or raw.get("evicting"):
            break
        status = {k: cell_precision(with_percentiles(Cell.from_dict(c, "profile run"),
                                                     intervals=True), target, percentile)
                  for k, c in merged.items()}
        open_ = [k for k, s in status.items() if not s["reached"]]
        sizes = [s for s in spec_dict["sizes"]
                 if any(k[0] in ("get", "set") and k[1] == s for k in open_)]
        counts = [c for c in spec_dict["key_counts"]
                  if any(k[0] == "multiget" and k[2] == c for k in open_)]
        if open_ and not sizes and not counts:  # the floor alone: the smallest cell carries it
            sizes = spec_dict["sizes"][:1]
            counts = [] if sizes else spec_dict["key_counts"][:1]
        if not open_ or n >= cap:
            break
        widths = [status[k]["half_width"] for k in open_]
        widest = None if any(w is None for w in widths) else max(widths)
        batch = next_batch(n, widest, target, cap - n)
    total["cells"] = sorted(merged.values(), key=lambda c: _order(_key(c), spec_dict))
    total["precision"] = {"target": target, "percentile": percentile, "cap_samples": cap,
                          "batches": batches}
    return total


def _order(k: CellKey, spec_dict: Mapping[str, Any]) -> tuple[int, int]:
    """A cell's place in the engine's order: floor, get, set by size, multi-get by count."""
    ops = {"floor": 0, "get": 1, "set": 2, "multiget": 3}
    at = (list(spec_dict["key_counts"]).index(k[2]) if k[0] == "multiget"
          else list(spec_dict["sizes"]).index(k[1]) if k[0] in ("get", "set") else 0)
    return ops.get(k[0], 4), at


def _add_run(total: dict[str, Any], raw: Mapping[str, Any]) -> None:
    """Adds one batch's run facts to the total: times and key counts add up, the first
    batch's server facts are kept, a cancel or a reason to give up is carried."""
    if not total:
        total.update({k: v for k, v in raw.items() if k != "cells"})
        return
    for name in ("elapsed_s", "leftover_keys", "cleaned_up_keys"):
        total[name] = total[name] + raw[name]
    total["cancelled"] = bool(total["cancelled"] or raw["cancelled"])
    total["aborted"] = total["aborted"] or raw["aborted"]
    total["evicting"] = bool(total.get("evicting") or raw.get("evicting"))


def not_reached(cells: list[Cell]) -> list[Cell]:
    """The cells of a profile run by precision that did not reach it."""
    return [c for c in cells if c.precision is not None and not c.precision["reached"]]


def precision_line(precision: Mapping[str, Any] | None, cells: list[Cell]) -> str | None:
    """The profile's precision, one line, the worst first: "precision NOT reached in 3 of 16
    cells (p99 within ±5 %, cap 10000 samples): get 1 MB ±8.1 %, …" or "precision: every
    cell's p50 reached (p50 within ±5 %, ...)"; None for a run without a target."""
    if not precision:
        return None
    target = 100 * float(precision["target"])
    pct = precision_percentile(precision)
    measured = [c for c in cells if c.precision is not None]
    missed = not_reached(measured)
    how = (f"p{pct} within ±{target:g} %, cap {precision['cap_samples']} samples per cell, "
           f"{precision['batches']} batch(es)")
    if not missed:
        return f"precision: every cell's p{pct} reached ({how})"
    named = ", ".join((c.label if c.op == "floor" else f"{c.op} {c.label}") + " " + (
        f"±{num(100 * c.precision['half_width'], 2)} %" if c.precision["half_width"] is not None
        else "no interval") for c in missed[:6]) + (" …" if len(missed) > 6 else "")
    return (f"precision NOT reached in {len(missed)} of {len(measured)} cells ({how}): "
            f"{named} → "
            + samples_fix(missed, float(precision["target"]), int(precision["cap_samples"]),
                          pct))


def samples_fix(missed: list[Cell], target: float, cap: int,
                percentile: str = DEFAULT_PERCENTILE) -> str:
    """The change that would let every missed cell reach ``target``: a ``--samples`` cap from
    the widest cell's half-width (an interval narrows as 1/√n; a cell without an interval
    has too few samples beyond its ``percentile``: four times the cap, and at least what
    certifies it), or a wider target."""
    needs = [cap + 1]
    for c in missed:
        hw = c.precision["half_width"]
        needs.append(max(4 * cap, samples_to_certify(float(percentile)))
                     if hw is None or not c.samples
                     else math.ceil(c.samples * (hw / target) ** 2 * MARGIN))
    return f"`--samples {round_up(max(needs))}` (what the widest cell needs){wider(missed, target)}"


def wider(missed: list[Cell], target: float) -> str:
    """", or a wider `--precision 9%`": a target the widest missed cell met (empty when no
    missed cell has an interval)."""
    widths = [c.precision["half_width"] for c in missed if c.precision["half_width"] is not None]
    if not widths:
        return ""
    return f", or a wider `--precision {math.ceil(100 * max(widths) * 1.1):g}%`"


def precision_text(cell: Cell) -> str:
    """A cell's precision in a table: "±3.2 %", "NOT ±8.1 %" (not reached), "NOT (n/a)"
    (no interval), or "—" without a target or samples."""
    p = cell.precision
    if not p or not cell.samples:
        return "—"
    hw = "n/a" if p["half_width"] is None else f"±{num(100 * p['half_width'], 2)} %"
    return hw if p["reached"] else f"NOT {hw}"
