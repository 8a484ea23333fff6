"""The oldest Rust that builds cachelab is written once, as the workspace's ``rust-version`` in
Cargo.toml, and it is true: no crate in Cargo.lock's build (for this platform, with the tests'
dependencies) needs a newer one, every crate inherits it, and every "Rust N.M" in the README,
the docs and the scripts is that same version."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: "Rust 1.88", "Rust >= 1.85", "Rust ≥ 1.80": a version stated in prose or a message
STATED = re.compile(r"\bRust (?:>= ?|≥ ?)?(\d+\.\d+(?:\.\d+)?)")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _minimum() -> str:
    found = re.findall(r'(?m)^rust-version = "([0-9.]+)"$', (ROOT / "Cargo.toml").read_text())
    assert len(found) == 1, found
    return found[0]


def test_every_crate_inherits_the_workspace_rust_version() -> None:
    crates = sorted((ROOT / "crates").glob("*/Cargo.toml"))
    assert crates
    missing = [str(c.relative_to(ROOT)) for c in crates
               if "rust-version.workspace = true" not in c.read_text()]
    assert missing == []


def test_every_stated_rust_version_is_the_workspace_one() -> None:
    files = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "scripts").iterdir())]
    stated = [f"{f.relative_to(ROOT)}: Rust {v}" for f in files if f.is_file()
              for v in STATED.findall(f.read_text(encoding="utf-8")) if v != _minimum()]
    assert stated == []


@pytest.mark.skipif(shutil.which("cargo") is None, reason="no cargo on PATH")
def test_no_dependency_needs_a_newer_rust() -> None:
    host = re.search(r"(?m)^host: (\S+)$", subprocess.run(
        ["rustc", "-vV"], capture_output=True, text=True, check=True, timeout=60).stdout)
    assert host
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--offline",
         "--filter-platform", host[1]],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert meta.returncode == 0, meta.stderr[-2000:]
    doc = json.loads(meta.stdout)
    used = {node["id"] for node in doc["resolve"]["nodes"]}
    newer = sorted(f"{p['name']} {p['version']} needs {p['rust_version']}"
                   for p in doc["packages"]
                   if p["id"] in used and p.get("rust_version")
                   and _version(p["rust_version"]) > _version(_minimum()))
    assert newer == []
