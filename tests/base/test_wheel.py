"""The wheel ``make wheel`` builds works where there is no Rust: installed with pip into a fresh
virtualenv whose PATH has no cargo, rustc or rustup, it imports ``cachelab._core`` from the
wheel (not from this clone) and its console script runs a simulation on the embedded model.

The dependencies come from this environment (a ``.pth`` line) so the test needs no network;
``make wheel-check`` (scripts/wheel-check.sh) is the whole check, with the dependencies from
the registry and ``cachelab run --quick``: minutes, too long for the suite. The wheel is built
here only when cargo has nothing to compile (after ``make install``: seconds); otherwise the
test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the build may take: packaging fresh artifacts takes 5-10 s on a loaded machine.
BUILD_TIMEOUT = 300


def _stale() -> str | None:
    """Why building the wheel would compile (minutes) rather than package, or None."""
    maturin = Path(sys.executable).with_name("maturin")
    if not maturin.exists():
        return f"no maturin beside {sys.executable} (`make install` puts it there)"
    built, deps = (ROOT / "target" / "release" / f"lib_core.{ext}" for ext in ("so", "d"))
    if not (built.exists() and deps.exists()):
        return "no release build in target/ (`make install` makes it)"
    # cargo's own rule: the sources its dep-info lists, no newer than the library; and the
    # manifests (a changed [profile.release] recompiles every crate)
    listed = deps.read_text().split(": ", 1)[1].split()
    sources = [Path(p) for p in listed] + [ROOT / "Cargo.lock", ROOT / "Cargo.toml",
                                           *sorted((ROOT / "crates").glob("*/Cargo.toml"))]
    newest = max(sources, key=lambda p: p.stat().st_mtime if p.exists() else float("inf"))
    if not newest.exists() or newest.stat().st_mtime > built.stat().st_mtime:
        return f"target/release is older than {newest} (`make build`)"
    return None


def _without_rust(path: str) -> str:
    """PATH without the directories that hold a Rust toolchain."""
    tools = ("cargo", "rustc", "rustup")
    return os.pathsep.join(d for d in path.split(os.pathsep)
                           if d and not any(os.path.exists(os.path.join(d, t)) for t in tools))


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT + 200)
def test_wheel_installs_and_runs_without_rust(tmp_path: Path) -> None:
    reason = _stale()
    if reason:
        pytest.skip(reason)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [str(Path(sys.executable).with_name("maturin")), "build", "--quiet", "--release",
         "--interpreter", sys.executable, "--out", str(dist)],
        cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert built.returncode == 0, built.stderr[-3000:]
    wheels = list(dist.glob("cachelab-*.whl"))
    assert len(wheels) == 1, wheels
    # abi3 for every Python the package supports, glibc symbols checked (not linux_x86_64)
    assert "-cp39-abi3-manylinux_" in wheels[0].name, wheels[0].name

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYO3_PYTHON", "CARGO", "RUSTC")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{_without_rust(env.get('PATH', ''))}"
    assert shutil.which("cargo", path=env["PATH"]) is None
    assert shutil.which("rustc", path=env["PATH"]) is None
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
         "--no-index", str(wheels[0])], capture_output=True, text=True, env=env, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # numpy and the rest from this environment's site-packages (not this clone's python/),
    # after the wheel's own cachelab
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True,
                          env=env, timeout=60).stdout.strip()
    ours = [p for p in sys.path if Path(p).name == "site-packages"]
    Path(site, "deps-from-the-test.pth").write_text("".join(f"{p}\n" for p in ours))

    work = tmp_path / "work"
    work.mkdir()
    core = subprocess.run([str(python), "-c", "import cachelab._core as c; print(c.__file__)"],
                          capture_output=True, text=True, env=env, cwd=work, timeout=120)
    assert core.returncode == 0, core.stderr[-3000:]
    assert Path(core.stdout.strip()).is_relative_to(venv), core.stdout
    version = subprocess.run([str(venv / "bin" / "cachelab"), "--version"], capture_output=True,
                             text=True, env=env, cwd=work, timeout=120)
    assert version.returncode == 0, version.stderr[-3000:]
    assert version.stdout.startswith("cachelab "), version.stdout
    # the Rust simulator on the model shipped inside the package
    sim = subprocess.run([str(venv / "bin" / "cachelab"), "simulate", "--quick", "--out", "sim"],
                         capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert sim.returncode == 0, sim.stderr[-3000:]
    assert (work / "sim" / "simulate.json").is_file()
