"""``cachelab simulate`` on a flat key trace: miss ratios by policy and size, LRU curves."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from cachelab import flatsim
from cachelab.artifacts import write_json
from cachelab.cli import EXIT_OK
from cachelab.errors import UsageError
from cachelab.simulation import SCHEMA, SCHEMA_VERSION
from cachelab.tables import text_table
from cachelab.units import parse_size


def parse_sizes(text: str) -> list[int | float]:
    """``1000,1MiB,0.1%`` -> ``[1000, 1048576, 0.001]``: counts and sizes as they are, a
    percentage as that share of the trace's working set."""
    out: list[int | float] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.endswith("%"):
            try:
                share = float(part[:-1]) / 100.0
            except ValueError:
                raise UsageError(f"--sizes: {part!r} is not a percentage") from None
            if not 0.0 < share <= 1.0:
                raise UsageError(f"--sizes: {part} must be above 0 % and at most 100 %")
            out.append(share)
        else:
            out.append(parse_size(part))
    if not out:
        raise UsageError("--sizes: give at least one size, e.g. 0.1%,1%,10% or 1000,10000")
    return out


def _policies(text: str | None) -> list[str]:
    if text is None:
        return list(flatsim.DEFAULT_POLICIES)
    known = flatsim.policies()
    chosen = [p.strip().lower() for p in text.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in known]
    if unknown or not chosen:
        raise UsageError(
            f"--policies: unknown {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(known)}"
        )
    return chosen


def run(args: argparse.Namespace, fmt: str, out: Path) -> int:
    if args.strategies is not None:
        raise UsageError("--strategies: only for request traces; flat traces take --policies")
    if args.shards is not None and not args.mrc:
        raise UsageError("--shards: only with --mrc")
    if args.shards is not None and not 0.0 < args.shards <= 1.0:
        raise UsageError(f"--shards must be in (0, 1], got {args.shards}")
    if args.threads < 0:
        raise UsageError(f"--threads must be 0 (all cores) or more, got {args.threads}")
    policies = _policies(args.policies)
    sizes = parse_sizes(args.sizes) if args.sizes else list(flatsim.DEFAULT_SIZES)

    started = time.perf_counter()
    trace = flatsim.load_trace(args.trace, args.trace_format)
    info = trace.inspect()
    capacities = flatsim.resolve_sizes(trace, sizes, args.unit, inspection=info)
    sim = flatsim.simulate_flat(trace, policies, capacities, args.unit, threads=args.threads)
    curve = None
    if args.mrc:
        curve = flatsim.miss_ratio_curve(trace, args.unit, sample_rate=args.shards)
    elapsed = time.perf_counter() - started

    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "mode": "flat",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "trace": {"source": str(args.trace), **info},
        "unit": args.unit,
        "policies": policies,
        "capacities": capacities,
        "elapsed_s": round(elapsed, 3),
        "results": [r.to_dict() for r in sim.results],
    }
    if curve is not None:
        doc["mrc"] = curve.to_dict()

    write_json(out / "simulate.json", doc)
    sim.write_csv(out / "simulate.csv")
    if curve is not None:
        curve.write_csv(out / "simulate-mrc.csv")
    if not args.no_plots:
        from cachelab.plots.mrc import miss_ratio_plot

        name = Path(args.trace).name
        miss_ratio_plot(sim, curve, title=f"Miss ratio by cache size: {name}",
                        out_base=out / "simulate-miss-ratio")
        if args.unit == "bytes":
            miss_ratio_plot(sim, curve, title=f"Byte miss ratio by cache size: {name}",
                            out_base=out / "simulate-byte-miss-ratio", byte_ratio=True)

    if fmt == "json":
        print(json.dumps(doc, indent=1))
    else:
        print(render(doc, sim))
    print(f"wrote {out}", file=sys.stderr)
    return EXIT_OK


def render(doc: dict[str, Any], sim: flatsim.FlatSimulation) -> str:
    t = doc["trace"]
    unit = doc["unit"]
    head = (
        f"{t['source']}: {t['requests']:,} requests, {t['unique_keys']:,} unique keys, "
        f"working set {t['working_set_bytes']:,} bytes"
    )
    by = {(r.policy, r.capacity): r for r in sim.results}
    policies = sim.policies()
    title = "Miss ratio (byte miss ratio)" if unit == "bytes" else "Miss ratio"
    rows = []
    for cap in dict.fromkeys(doc["capacities"]):
        row = [f"{cap:,}"]
        for p in policies:
            r = by[(p, cap)]
            cell = f"{r.miss_ratio:.4f}"
            if unit == "bytes":
                cell += f" ({r.byte_miss_ratio:.4f})"
            row.append(cell)
        rows.append(row)
    parts = [head, f"{title} by capacity in {unit}", "\n".join(text_table([unit, *policies], rows))]
    mrc = doc.get("mrc")
    if mrc:
        kind = "exact" if mrc["exact"] else f"SHARDS, rate {mrc['sample_rate']:g}"
        points = list(zip(mrc["capacities"], mrc["miss_ratios"]))
        step = max(1, len(points) // 10)
        parts.append(f"LRU miss-ratio curve ({kind}, {len(points)} points; every {step}th shown)")
        parts.append("\n".join(text_table(
            [unit, "miss ratio"], [[f"{c:,}", f"{m:.4f}"] for c, m in points[::step]])))
    return "\n\n".join(parts)
