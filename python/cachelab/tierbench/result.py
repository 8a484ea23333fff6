"""The benchmark's result (schema ``cachelab.tiers``, version 1): its JSON, its artifacts
(tiers.json, tiers.csv, the bar chart) and its table for a terminal."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab.artifacts import write_json
from cachelab.tables import text_table, write_csv

__all__ = ["CSV_COLUMNS", "SCHEMA", "SCHEMA_VERSION", "TiersResult", "render"]

SCHEMA = "cachelab.tiers"
SCHEMA_VERSION = 1

#: The columns of tiers.csv: a row per (shape, method).
CSV_COLUMNS = ("shape", "method", "reads", "wall_p50_us", "wall_p90_us", "wall_mean_us",
               "cpu_mean_us", "stored_bytes")


@dataclass
class TiersResult:
    created: str
    spec: dict[str, Any]
    store: str
    server: dict[str, Any]
    rows: list[dict[str, Any]]
    findings: list[dict[str, Any]] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    def row(self, shape: str, method: str) -> dict[str, Any]:
        for r in self.rows:
            if r["shape"] == shape and r["method"] == method:
                return r
        raise KeyError((shape, method))

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """Writes tiers.json, tiers.csv and (with ``plots``) tiers.png/.svg into ``out_dir``;
        returns their paths."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = [self.save(out_dir / "tiers.json")]
        write_csv(out_dir / "tiers.csv", CSV_COLUMNS,
                  [[r[c] for c in CSV_COLUMNS] for r in self.rows])
        paths.append(out_dir / "tiers.csv")
        if plots:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.tierbench.plots import tiers_plot

            paths += tiers_plot(self, out_dir / "tiers")
        return paths

    def render(self) -> str:
        return render(self)


def render(result: TiersResult) -> str:
    """The table and the findings, for a terminal."""
    lines = [f"Reading each shape {result.spec['reads']} times (store: {result.store}; "
             f"memcached {result.server['version']} at {result.server['address']})", ""]
    header = ["shape", "method", "p50 µs", "p90 µs", "CPU µs", "stored B", "vs memory"]
    rows = []
    for r in result.rows:
        ready = result.row(r["shape"], "memory ready")["wall_p50_us"] or 1e-9
        rows.append([r["shape"], r["method"], f"{r['wall_p50_us']:.2f}",
                     f"{r['wall_p90_us']:.2f}", f"{r['cpu_mean_us']:.2f}",
                     f"{r['stored_bytes']:,}" if r["stored_bytes"] else "—",
                     f"{r['wall_p50_us'] / ready:,.0f}×"])
    lines += text_table(header, rows, left=2)
    lines += ["", "The seed's findings on this machine:"]
    for f in result.findings:
        mark = "reproduces" if f["reproduces"] else "DOES NOT reproduce"
        lines.append(f"  [{mark}] {f['claim']} — {f['evidence']}")
    return "\n".join(lines)
