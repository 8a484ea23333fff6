"""What every benchmark script shares: dated records in runs/, tool versions, markdown tables.

The scripts run as ``python benches/NAME.py``, so this directory is on ``sys.path`` and they
``import records``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RUNS = Path(__file__).resolve().parent / "runs"
ARCHIVE = RUNS / "archive"


def record_base(name: str, day: str) -> Path:
    """``runs/<day>-<name>`` (no suffix), or ``…-2``, ``-3`` … when a .md or .json of that
    name exists in runs/ or runs/archive/ (where the older records of each bench go: runs/
    keeps the newest one per bench)."""
    RUNS.mkdir(parents=True, exist_ok=True)
    base, n = f"{day}-{name}", 2
    while any((d / f"{base}{s}").exists() for d in (RUNS, ARCHIVE) for s in (".md", ".json")):
        base, n = f"{day}-{name}-{n}", n + 1
    return RUNS / base


def write_record(name: str, day: str, markdown: str, data: Any) -> Path:
    """Writes the markdown record and the raw JSON beside it; returns the .md path."""
    base = record_base(name, day)
    md = base.with_suffix(".md")
    md.write_text(markdown.rstrip("\n") + "\n")
    base.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    return md


def tool_version(argv: list[str]) -> str:
    """The first line ``argv`` prints, or "unknown"."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
        return out.splitlines()[0].strip() if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def markdown_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A left-aligned markdown table, one string per line."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    return [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]


def header(title: str, script: str, argv: list[str], facts: list[str]) -> tuple[list[str], str]:
    """A record's first lines — ``# title (when)``, the command, ``facts`` (one bullet each),
    then the commit, Python, CPUs and load average — and the commit."""
    import os
    import sys
    from datetime import datetime, timezone

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=RUNS.parent.parent).stdout.strip()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return ([f"# {title} ({when})", "", f"- command: `python benches/{script} {' '.join(argv)}`",
             *(f"- {f}" for f in facts),
             f"- commit {commit}; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs; load "
             f"average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}", ""],
            commit)


def median_range(vals: Sequence[float], fmt: str = "{:.1f}") -> str:
    """The median of ``vals`` and their range, ``12.3 (11.0–14.2)``: the median alone for one
    value, "—" for none."""
    if not vals:
        return "—"
    med = fmt.format(statistics.median(vals))
    return med if len(vals) == 1 else f"{med} ({fmt.format(min(vals))}–{fmt.format(max(vals))})"


def memtier_argv(path: str, protocol: list[str], address: str, *, conns: int, pipeline: int,
                 keys: int, seconds: int, size: int, json_out: Path) -> list[str]:
    """memtier_benchmark's command line for the load benches: one thread, ``conns``
    connections, gets only of ``size``-byte values over keys 1..``keys`` at random,
    ``seconds`` long, its figures to ``json_out``; ``protocol`` its protocol flags
    (``["-P", "memcache_text"]``, ``["--protocol", "redis"]``)."""
    host, port = address.rsplit(":", 1)
    return [path, *protocol, "-s", host, "-p", port, "-t", "1", "-c", str(conns),
            f"--pipeline={pipeline}", "--ratio=0:1", "--key-prefix=memtier-",
            "--key-minimum=1", f"--key-maximum={keys}", "--key-pattern=R:R",
            f"--test-time={seconds}", "-d", str(size), "--hide-histogram",
            f"--json-out-file={json_out}"]
