"""Every link to a bench record resolves.

Records live in benches/runs/ (the newest of each bench) and benches/runs/archive/ (the
older ones). The docs, README, CHANGELOG, the bench scripts and the package's comments
point at them by path; moving a record must not leave a dangling one. Two forms are
checked: a markdown link whose target goes through a ``runs/`` folder (resolved against the
linking file's folder), and a path written out from the repository root
(``benches/runs/…``, resolved against the root; a record named without its ``.md`` is
accepted when the ``.md`` exists).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: markdown link targets through a runs/ folder: ](runs/X.md), ](../benches/runs/X.md)
LINK = re.compile(r"\]\(([^)\s#]*\bruns/[^)\s#]*)")
#: a record's path from the repository root, as prose and code comments write it
PATH = re.compile(r"\bbenches/runs/[A-Za-z0-9._/-]*[A-Za-z0-9_/]")


def _sources(root: Path) -> list[Path]:
    """The files whose links are checked."""
    files = [root / "README.md", root / "CHANGELOG.md", root / "benches" / "README.md"]
    files += sorted((root / "docs").rglob("*.md"))
    files += sorted((root / "benches").glob("*.py"))
    for tree in ("python", "tests"):
        files += sorted((root / tree).rglob("*.py"))
    this = Path(__file__).resolve()  # its examples are not links
    return [f for f in files if f.is_file() and f.resolve() != this]


def broken_links(root: Path) -> list[str]:
    """``file:line: target`` for every link to a bench record that does not resolve."""
    bad = []
    for path in _sources(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            targets = [(path.parent / t, t) for t in LINK.findall(line)]
            targets += [(root / t, t) for t in PATH.findall(line)]
            seen = set()
            for target, written in targets:
                if target.resolve() in seen:
                    continue  # [x](../benches/runs/X.md) holds both forms
                seen.add(target.resolve())
                if not (target.exists() or target.with_name(target.name + ".md").exists()):
                    bad.append(f"{path.relative_to(root)}:{number}: {written}")
    return bad


def test_every_link_to_a_bench_record_resolves() -> None:
    assert broken_links(ROOT) == []


def test_a_moved_record_is_found(tmp_path: Path) -> None:
    """The check itself: a record moved to the archive breaks both kinds of link to it,
    and the fixed links pass."""
    (tmp_path / "benches" / "runs" / "archive").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "benches" / "runs" / "archive" / "2026-01-01-x.md").write_text("# x\n")
    (tmp_path / "docs" / "a.md").write_text(
        "see [x](../benches/runs/2026-01-01-x.md)\nand benches/runs/2026-01-01-x.md\n")
    (tmp_path / "benches" / "README.md").write_text("[x](runs/2026-01-01-x.md)\n")
    assert broken_links(tmp_path) == [
        "benches/README.md:1: runs/2026-01-01-x.md",
        "docs/a.md:1: ../benches/runs/2026-01-01-x.md",
        "docs/a.md:2: benches/runs/2026-01-01-x.md",
    ]
    for name in ("docs/a.md", "benches/README.md"):
        f = tmp_path / name
        f.write_text(f.read_text().replace("runs/2026", "runs/archive/2026"))
    assert broken_links(tmp_path) == []
