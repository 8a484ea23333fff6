"""The comparison's result (schema ``cachelab.compare``, version 1): its JSON, its artifacts
(compare.json, compare.csv, the forest plot), its summary lines and its table for a
terminal."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab.answers import Answer
from cachelab.artifacts import write_json
from cachelab.compare.answers import compare_answers, value_text
from cachelab.compare.plots import compare_plot
from cachelab.tables import text_table, write_json_and_csv

__all__ = ["CSV_COLUMNS", "SCHEMA", "SCHEMA_VERSION", "CompareResult", "render", "summarize"]

SCHEMA = "cachelab.compare"
SCHEMA_VERSION = 1

#: The columns of compare.csv: a row per (item, metric, pair).
CSV_COLUMNS = ("item", "metric", "versus", "a", "b", "unit", "delta", "relative", "ci_low",
               "ci_high", "verdict", "direction")


@dataclass
class CompareResult:
    """Rows of (item, metric, pair) with values, relative change, interval and verdict."""

    kind: str
    names: list[str]
    sources: list[str]
    method: str
    rows: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    #: Letter -> the partial note of each result that stopped before the end.
    partial: dict[str, str] = field(default_factory=dict)
    created: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    #: Letter -> how far that result is trusted (``{"trust", "why"}``: its own card's worst
    #: mark, :func:`cachelab.compare.answers.side_trust`).
    trust: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), allow_nan=False)

    def csv_table(self) -> tuple[tuple[str, ...], list[list[Any]]]:
        """``compare.csv`` (and ``--format csv``): :data:`CSV_COLUMNS`, a row per (item,
        metric, pair)."""
        return CSV_COLUMNS, [["" if r[c] is None else r[c] for c in CSV_COLUMNS]
                             for r in self.rows]

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """Writes compare.json, compare.csv and (with ``plots``) compare.png/.svg into
        ``out_dir``; returns their paths."""
        paths = write_json_and_csv(self, Path(out_dir), "compare")
        if plots:
            paths += compare_plot(self, out_dir / "compare")
        return paths

    def answers(self) -> list[Answer]:
        """The answer card (:mod:`cachelab.answers`): each compared metric's change with its
        interval, certified only when both results are and the interval excludes no change."""
        return compare_answers(self.to_dict())

    def render(self) -> str:
        return render(self)


def summarize(r: CompareResult) -> list[str]:
    """A line per pair: how many rows are better, worse, the same or unclear, and the largest
    clear change."""
    out = []
    for pair in dict.fromkeys(row["versus"] for row in r.rows):
        rows = [x for x in r.rows if x["versus"] == pair]
        better = [x for x in rows if x["direction"] == "better"]
        worse = [x for x in rows if x["direction"] == "worse"]
        same = sum(1 for x in rows if x["verdict"] == "same")
        unclear = len(rows) - len(better) - len(worse) - same
        text = (f"{pair}: {len(better)} better, {len(worse)} worse, "
                + (f"{same} the same, " if same else "")
                + f"{unclear} without a clear difference")
        if rows:
            big = max((x for x in better + worse if x["relative"] is not None),
                      key=lambda x: abs(x["relative"]), default=None)
            if big is not None:
                text += (f"; largest: {big['item']} {big['metric']} "
                         f"{100 * big['relative']:+.0f} %")
        out.append(text + ".")
    return out


def name_line(names: list[str], partial: dict[str, str], i: int) -> str:
    """``A = before/profile.json``, with its partial note when it has one."""
    letter = chr(65 + i) if i < 26 else "?"
    note = partial.get(letter)
    return f"{letter} = {names[i].split(': ', 1)[-1]}" + (f" \u2014 {note}" if note else "")


def render(r: CompareResult) -> str:
    """The comparison as a text table."""
    header = ["item", "metric", "pair", "A", "other", "change", "interval", "verdict"]
    rows = []
    for x in r.rows:
        iv = ("—" if x["ci_low"] is None or x["ci_high"] is None
              else f"[{100 * x['ci_low']:+.1f}%, {100 * x['ci_high']:+.1f}%]")
        rows.append([x["item"], x["metric"], x["versus"], value_text(x["a"], x["unit"]),
                     value_text(x["b"], x["unit"]),
                     "—" if x["relative"] is None else f"{100 * x['relative']:+.1f}%", iv,
                     x["verdict"] + (f" ({x['direction']})" if x["direction"] else "")])
    lines = [*(name_line(r.names, r.partial, i) for i in range(len(r.names))), r.method, ""]
    lines += text_table(header, rows, left=3)
    lines.append("")
    lines += r.summary
    lines += [f"note: {w}" for w in r.warnings]
    return "\n".join(lines)
