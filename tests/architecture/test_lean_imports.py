"""Flat simulation starts lean: importing it loads no numpy, pandas, pyarrow or scipy.

The packages' public names load on first use (cachelab._lazy), so ``import
cachelab.simulate.flat`` costs tens of milliseconds rather than the ~0.3 CPU-s the whole
library's imports take; the flat-simulation bench (benches/flat_sim.py) counts start-up in
its time. Each package's ``__all__`` must still resolve, name by name.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib", "cachelab.load")


@pytest.mark.parametrize("module", ["cachelab.simulate.flat", "cachelab.traces.names"])
def test_flat_simulation_imports_nothing_heavy(module: str) -> None:
    code = (f"import sys, {module}; "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.split() == []


def test_flat_simulation_defers_what_only_files_and_captures_need() -> None:
    """Simulating a file by path reads no CSV and resolves no trace names: ``csv``,
    ``pathlib`` and the trace package load when a result is written or a capture is read."""
    later = ("csv", "pathlib", "cachelab.traces")
    code = ("import sys, cachelab.simulate.flat; "
            f"print(' '.join(m for m in {later!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.split() == []


@pytest.mark.parametrize("package", ["cachelab", "cachelab.simulate", "cachelab.traces"])
def test_every_lazy_name_resolves(package: str) -> None:
    pkg = importlib.import_module(package)
    missing = [n for n in pkg.__all__ if getattr(pkg, n, None) is None]
    assert missing == []
    assert set(pkg.__all__) <= set(dir(pkg))
    with pytest.raises(AttributeError, match="no_such_name"):
        pkg.no_such_name  # noqa: B018
