"""The benchmark's result (schema ``cachelab.tiers``, version 1): its JSON, its artifacts
(tiers.json, tiers.csv, the bar chart) and its table for a terminal."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import write_json
from cachelab.tables import text_table, write_json_and_csv
from cachelab.tiers.answers import tiers_answers
from cachelab.units import of_asked, partial_note

__all__ = ["CSV_COLUMNS", "SCHEMA", "SCHEMA_VERSION", "TiersResult", "partial_text", "reads_text",
           "render"]

SCHEMA = "cachelab.tiers"
SCHEMA_VERSION = 1

#: The columns of tiers.csv: a row per (shape, method).
CSV_COLUMNS = ("shape", "method", "reads", "wall_p50_us", "wall_p90_us", "wall_mean_us",
               "cpu_mean_us", "stored_bytes")


@dataclass
class TiersResult:
    """The benchmark's rows and findings; ``run`` says whether it went to the end
    (``elapsed_s``; ``cancelled``: stopped by a signal; ``aborted``: why it gave up) — cut
    short, the rows hold the rounds every method finished."""

    created: str
    spec: dict[str, Any]
    store: str
    server: dict[str, Any]
    rows: list[dict[str, Any]]
    findings: list[dict[str, Any]] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    def row(self, shape: str, method: str) -> dict[str, Any]:
        for r in self.rows:
            if r["shape"] == shape and r["method"] == method:
                return r
        raise KeyError((shape, method))

    def csv_table(self) -> tuple[tuple[str, ...], list[list[Any]]]:
        """``tiers.csv`` (and ``--format csv``): :data:`CSV_COLUMNS`, a row per (shape,
        method)."""
        return CSV_COLUMNS, [[r[c] for c in CSV_COLUMNS] for r in self.rows]

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """Writes tiers.json, tiers.csv and (with ``plots``) tiers.png/.svg into ``out_dir``;
        returns their paths."""
        out_dir = Path(out_dir)
        paths = write_json_and_csv(self, out_dir, "tiers")
        if plots:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.tiers.plots import tiers_plot

            paths += tiers_plot(self, out_dir / "tiers")
        return paths

    def render(self) -> str:
        return render(self)

    def answers(self) -> list[Answer]:
        """The answer card: per shape the fastest read and the fastest through memcached,
        each against the store (:func:`~cachelab.tiers.answers.tiers_answers`)."""
        return tiers_answers(self.to_dict())

    def problems(self) -> dict[str, int]:
        """None to report: a benchmark's findings are its verdicts."""
        return {}


def render(result: TiersResult) -> str:
    """The table and the findings, for a terminal; a run cut short says so first."""
    d = {"spec": result.spec, "rows": result.rows, "run": result.run}
    partial = partial_text(d)
    lines = [partial] if partial else []
    lines += [f"Reading each shape {reads_text(d)} (store: {result.store}; "
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
    if not result.rows:
        lines.append("  (no round of reads finished: nothing measured)")
        return "\n".join(lines)
    lines += ["", "The seed's findings on this machine:"]
    for f in result.findings:
        mark = "reproduces" if f["reproduces"] else "DOES NOT reproduce"
        lines.append(f"  [{mark}] {f['claim']} — {f['evidence']}")
    return "\n".join(lines)


def reads_text(d: dict[str, Any]) -> str:
    """How many times each method was read: "200 times", or for a run cut short the reads it
    kept, "13 times (of 40 asked)"."""
    asked = (d.get("spec") or {}).get("reads")
    if not partial_note(d.get("run")):
        return f"{asked} times"
    return f"{_kept_reads(d):,} times (of {asked:,} asked)"


def partial_text(d: dict[str, Any]) -> str | None:
    """The :func:`~cachelab.units.partial_note` of a run cut short (``tiers.json``'s ``run``),
    with the reads each method kept of those asked: "PARTIAL (interrupted after 2.1 s; reads
    per method: 13 of 40 asked)"; None for a complete run."""
    return partial_note(d.get("run"), "reads per method: "
                        + of_asked([_kept_reads(d)], (d.get("spec") or {}).get("reads")))


def _kept_reads(d: dict[str, Any]) -> int:
    """The reads every method kept (its rows' fewest; 0 without rows)."""
    return min((int(r.get("reads", 0)) for r in d.get("rows") or []), default=0)
