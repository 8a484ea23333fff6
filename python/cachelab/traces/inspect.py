"""``trace inspect``: what a trace holds — sizes, working set, popularity skew, page weight.

:func:`inspect_request_trace` summarises a :class:`RequestTrace`; :func:`inspect_path` any
trace file (flat key traces are summarised by the Rust core). The result is the
``cachelab.trace-inspect`` JSON object documented in docs/traces.md.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from cachelab.artifacts import atomic_file
from cachelab.tables import table_text
from cachelab.traces.formats import detect_format, is_request_format, load_flat, load_request_trace
from cachelab.traces.request import RequestTrace
from cachelab.units import human_bytes

__all__ = [
    "INSPECT_SCHEMA",
    "inspect_path",
    "inspect_request_trace",
    "nearest_rank",
    "render_inspection",
    "top_share",
    "write_inspection",
    "zipf_alpha",
]

INSPECT_SCHEMA = "cachelab.trace-inspect"
INSPECT_VERSION = 1
#: The file ``cachelab trace inspect --out DIR`` writes.
INSPECT_FILE = "trace-inspect.json"

#: Percentiles of the per-request distributions.
PER_REQUEST_PERCENTILES = (50, 90, 99)


def zipf_alpha(desc_counts: np.ndarray) -> float | None:
    """α of ``log f = c - α log r`` fitted by least squares to a descending frequency list at
    log-spaced ranks (1, then every 10^(1/20), deduplicated), so the long tail does not
    outvote the head. None with fewer than 3 such ranks. The same definition as the flat
    traces' inspect in the Rust core."""
    ranks: list[int] = []
    r = 1.0
    step = 10.0 ** (1.0 / 20.0)
    while int(r) <= len(desc_counts):
        if not ranks or ranks[-1] != int(r):
            ranks.append(int(r))
        r *= step
    if len(ranks) < 3:
        return None
    x = np.log(np.array(ranks, dtype=np.float64))
    y = np.log(np.asarray(desc_counts, dtype=np.float64)[np.array(ranks) - 1])
    mx, my = x.mean(), y.mean()
    return float(-((x - mx) * (y - my)).sum() / ((x - mx) ** 2).sum())


def top_share(desc_counts: np.ndarray, total: int) -> float:
    """Share of ``total`` going to the most popular 1 % of keys (at least one key)."""
    if total == 0 or len(desc_counts) == 0:
        return 0.0
    top = max(1, math.ceil(len(desc_counts) / 100))
    return float(np.asarray(desc_counts[:top], dtype=np.int64).sum() / total)


def nearest_rank(values: np.ndarray, p: float) -> int:
    """The ``p``-th percentile by nearest rank: the smallest value with at least p % of the
    values at or below it. ``values`` must be sorted ascending and non-empty."""
    rank = max(1, math.ceil(p / 100 * len(values)))
    return int(values[rank - 1])


def _distribution(values: np.ndarray) -> dict[str, Any]:
    if len(values) == 0:
        return {"mean": None, **{f"p{p}": None for p in PER_REQUEST_PERCENTILES}, "max": None}
    s = np.sort(values)
    return {
        "mean": round(float(s.mean()), 3),
        **{f"p{p}": nearest_rank(s, p) for p in PER_REQUEST_PERCENTILES},
        "max": int(s[-1]),
    }


def inspect_request_trace(trace: RequestTrace) -> dict[str, Any]:
    """Counts, working set, popularity skew and per-request/per-route figures of a trace.

    Popularity counts every touch (an item touched twice in a request counts twice).
    """
    n_items, n_req, n_touch = trace.n_items, trace.n_requests, trace.n_touches
    counts = np.bincount(trace.touch_items, minlength=n_items) if n_items else np.zeros(0, int)
    touched = counts > 0
    desc = np.sort(counts[touched])[::-1]
    per_request = trace.touches_per_request()
    first = trace.first_touch_mask()
    distinct = np.bincount(trace.request_of_touch()[first], minlength=n_req) if n_req else (
        np.zeros(0, dtype=np.int64)
    )
    route_counts = np.bincount(trace.route, minlength=len(trace.route_names))
    route_touches = np.bincount(trace.route, weights=per_request, minlength=len(trace.route_names))
    routes = {
        name: {
            "requests": int(route_counts[i]),
            "mean_items": round(float(route_touches[i] / route_counts[i]), 3)
            if route_counts[i] else None,
        }
        for i, name in sorted(enumerate(trace.route_names), key=lambda x: -route_counts[x[0]])
    }
    kinds: dict[str, dict[str, int]] = {}
    for code, name in enumerate(trace.kind_names):
        sel = trace.item_kinds == code
        kinds[name] = {
            "items": int(sel.sum()),
            "bytes": int(trace.item_sizes[sel].sum()),
            "touched": int((sel & touched).sum()),
        }
    t = trace.time
    return {
        "kind": "request",
        "requests": n_req,
        "catalog_items": n_items,
        "catalog_bytes": int(trace.item_sizes.sum()),
        "touches": n_touch,
        "first_touches": int(first.sum()),
        "unique_keys_touched": int(touched.sum()),
        "working_set_bytes": int(trace.item_sizes[touched].sum()),
        "zipf_alpha": zipf_alpha(desc),
        "top1pct_share": top_share(desc, n_touch),
        "items_per_request": _distribution(per_request),
        "distinct_items_per_request": _distribution(distinct),
        "routes": routes,
        "item_kinds": kinds,
        "instances": int(len(np.unique(trace.instance))),
        "time": {
            "first_s": float(t.min()) if n_req else None,
            "last_s": float(t.max()) if n_req else None,
            "ordered": bool(np.all(np.diff(t) >= 0)),
        },
        "base_ms": {
            "p50": float(np.median(trace.base_ms)) if n_req else None,
            "p99": float(np.sort(trace.base_ms)[math.ceil(0.99 * n_req) - 1]) if n_req else None,
        },
        "generator": trace.generator,
    }


def inspect_path(path: str | os.PathLike[str], format: str | None = None) -> dict[str, Any]:
    """Inspects any trace file; the result carries the schema, path and format."""
    fmt = detect_format(path, format)
    head = {"schema": INSPECT_SCHEMA, "schema_version": INSPECT_VERSION, "path": str(path),
            "format": fmt}
    if is_request_format(fmt):
        return {**head, **inspect_request_trace(load_request_trace(path, fmt))}
    flat = load_flat(path, fmt)
    return {**head, "kind": "flat", **dict(flat.inspect()), "doubts": flat.doubts}


def write_inspection(result: dict[str, Any], out_dir: str | os.PathLike[str]) -> Path:
    """Writes ``out_dir/trace-inspect.json`` (the JSON ``cachelab trace inspect`` prints),
    atomically; returns its path."""
    path = Path(out_dir) / INSPECT_FILE
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return path


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def render_inspection(d: dict[str, Any]) -> str:
    """The human view of an inspection."""
    lines = [f"{d['path']} ({d['format']}, {d['kind']} trace)"]
    if d.get("doubts"):
        lines.append(f"warning: {d['doubts']}")
    rows: list[tuple[str, str]] = []
    skip = {"schema", "schema_version", "path", "format", "kind", "doubts", "routes",
            "item_kinds", "generator", "items_per_request", "distinct_items_per_request", "time",
            "base_ms"}
    for k, v in d.items():
        if k in skip or isinstance(v, (dict, list)):
            continue
        text = _fmt(v)
        if k.endswith("_bytes") and isinstance(v, int):
            text += f" ({human_bytes(v)})"
        rows.append((k.replace("_", " "), text))
    if d["kind"] == "request":
        for key, label in (("items_per_request", "items per request"),
                           ("distinct_items_per_request", "distinct items per request")):
            dist = d[key]
            rows.append((label, "  ".join(f"{k} {_fmt(v)}" for k, v in dist.items())))
        t = d["time"]
        rows.append(("time span", f"{_fmt(t['first_s'])} s .. {_fmt(t['last_s'])} s"
                     + ("" if t["ordered"] else " (not in time order)")))
        rows.append(("base latency", f"p50 {_fmt(d['base_ms']['p50'])} ms  "
                     f"p99 {_fmt(d['base_ms']['p99'])} ms"))
    for k, v in d.items():
        if isinstance(v, dict) and k not in {"routes", "item_kinds", "generator", "time",
                                             "base_ms", "items_per_request",
                                             "distinct_items_per_request"}:
            text = "  ".join(f"{a} {_fmt(b)}" for a, b in v.items())
            rows.append((k.replace("_", " "), text or "—"))
    width = max(len(label) for label, _ in rows)
    lines += [f"{label.ljust(width)}  {text}" for label, text in rows]
    if d["kind"] == "request" and d["routes"]:
        lines += ["", table_text(["route", "requests", "share", "mean items"], [
            [name, _fmt(r["requests"]), f"{r['requests'] / max(d['requests'], 1):.1%}",
             _fmt(r["mean_items"])]
            for name, r in d["routes"].items()
        ])]
    if d["kind"] == "request" and d["item_kinds"]:
        lines += ["", table_text(["item kind", "items", "touched", "bytes"], [
            [name, _fmt(k["items"]), _fmt(k["touched"]), human_bytes(k["bytes"])]
            for name, k in d["item_kinds"].items()
        ])]
    return "\n".join(lines)
