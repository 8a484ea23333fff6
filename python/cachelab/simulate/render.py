"""The tables ``cachelab simulate`` prints: request-level strategies, and flat miss ratios."""

from __future__ import annotations

from typing import Any

from cachelab.simulate.flat import FlatSimulation
from cachelab.simulate.summary import band_at
from cachelab.simulate.terms import terms_text
from cachelab.tables import table_text
from cachelab.units import share

__all__ = ["PERCENTILES", "SLOWED", "render_flat", "render_request"]

#: Percentiles of the fractional increase shown in tables.
PERCENTILES = ("50", "75", "90", "95", "99", "99.9")

#: Thresholds of "slowed by at least", as fractions.
SLOWED = ("0.1", "0.25", "0.5")


def _median(s: dict[str, Any], field_: str, key: str, at: str) -> float:
    band = band_at(s, field_, key, float(at))
    if band is None:
        raise KeyError(f"{s['strategy']}: no {field_} band at {at}")
    return band["median"]


def render_request(d: dict[str, Any]) -> str:
    """A request-level ``simulate.json`` as tables: per strategy the median fractional
    increase at each percentile, the shares slowed, hit ratio, round trips and bytes; then
    the routes that hurt most under the strategy with the lowest p90."""
    strategies = d["strategies"]
    first = strategies[0] if strategies else {"counts": {}}
    title = (
        f"Added latency per request, as a share of its base latency "
        f"(model {d['model']['name']}"
        + ("; a request's calls follow the profile's sample order"
           if d["model"].get("draws") == "sequence" else "")
        + f"; median of {d['spec']['draws']} draws; "
        f"{first['counts'].get('requests', 0):,} requests evaluated)"
    )
    header = ["strategy", *(f"p{p}" for p in PERCENTILES), "\u226510%", "\u226525%",
              "\u226550%", "hit", "RT/req", "KB/req"]
    rows = []
    for s in strategies:
        rows.append([
            s["strategy"],
            *(share(_median(s, "percentiles", "percentile", p)) for p in PERCENTILES),
            *(share(_median(s, "slowed", "threshold", t)) for t in SLOWED),
            share(s["hit_ratio"]),
            f"{s['round_trips_per_request']:.2f}",
            f"{s['bytes_per_request'] / 1000:.1f}",
        ])
    parts = [title, table_text(header, rows), *terms_text(strategies)]
    best = min(strategies, key=lambda s: _median(s, "percentiles", "percentile", "90"),
               default=None)
    if best is not None and best.get("routes"):
        routes = sorted(best["routes"], key=lambda r: -r["total_added_ms"])[:8]
        total = sum(r["total_added_ms"] for r in best["routes"]) or 1.0
        parts.append(
            f"Which requests hurt most under {best['strategy']} (the lowest p90), by added time"
        )
        parts.append(table_text(
            ["route", "requests", "mean added ms", "mean increase", "share of added time"],
            [[str(r["route"]), f"{r['requests']:,}", f"{r['mean_added_ms']:.2f}",
              share(r["mean_increase"]), share(r["total_added_ms"] / total)] for r in routes],
        ))
    parts.append(
        "Percentages are added memcached time / base request latency; hit = share of first "
        "touches served in process (prefetched items not counted); RT = memcached round trips. "
        "Bands over the draws are in simulate.json and simulate.csv."
    )
    return "\n\n".join(parts)


def render_flat(d: dict[str, Any], sim: FlatSimulation) -> str:
    """A flat ``simulate.json`` as tables: the trace, miss ratio (and byte miss ratio in
    bytes) per policy by capacity, and every tenth point of the LRU curve."""
    t = d["trace"]
    unit = d["unit"]
    head = (
        f"{t['source']}: {t['requests']:,} requests, {t['unique_keys']:,} unique keys, "
        f"working set {t['working_set_bytes']:,} bytes"
    )
    by = {(r.policy, r.capacity): r for r in sim.results}
    policies = sim.policies()
    title = "Miss ratio (byte miss ratio)" if unit == "bytes" else "Miss ratio"
    rows = []
    for cap in dict.fromkeys(d["capacities"]):
        row = [f"{cap:,}"]
        for p in policies:
            r = by[(p, cap)]
            cell = f"{r.miss_ratio:.4f}"
            if unit == "bytes":
                cell += f" ({r.byte_miss_ratio:.4f})"
            row.append(cell)
        rows.append(row)
    parts = [head, f"{title} by capacity in {unit}", table_text([unit, *policies], rows)]
    mrc = d.get("mrc")
    if mrc:
        kind = "exact" if mrc["exact"] else f"SHARDS, rate {mrc['sample_rate']:g}"
        points = list(zip(mrc["capacities"], mrc["miss_ratios"]))
        step = max(1, len(points) // 10)
        parts.append(f"LRU miss-ratio curve ({kind}, {len(points)} points; every {step}th shown)")
        parts.append(table_text([unit, "miss ratio"],
                            [[f"{c:,}", f"{m:.4f}"] for c, m in points[::step]]))
    return "\n\n".join(parts)
