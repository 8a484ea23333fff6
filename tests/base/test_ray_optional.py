"""Ray is optional: cachelab imports and runs without it, and ``--ray`` without it exits 2
saying how to get it (tests/ray/ has the tests on a real cluster)."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Run before the command: makes ``import ray`` fail as if Ray were not installed.
_NO_RAY = "import sys; sys.modules['ray'] = None; "


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _NO_RAY + code], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.slow
def test_cachelab_imports_without_ray_and_does_not_load_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, cachelab, cachelab.cli, cachelab.load, "
         "cachelab.simulate, cachelab.scale, cachelab.simulate.fanout; "
         "print('ray' in sys.modules)"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("argv", [
    ["load", "--ray", "--agents", "2", "--server", "127.0.0.1:1"],
    ["simulate", "--ray", "--quick"],
    ["scale", "--ray", "--vary", "agents", "--server", "127.0.0.1:1"],
])
@pytest.mark.slow
def test_ray_flag_without_ray_exits_2_with_the_install_hint(argv: list[str]) -> None:
    done = _python(f"from cachelab.cli import main; sys.exit(main({argv!r}))")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert "pip install 'cachelab[ray]'" in done.stderr


@pytest.mark.slow
def test_agents_without_ray_flag_is_refused() -> None:
    done = _python("from cachelab.cli import main; "
                   "sys.exit(main(['load', '--agents', '2', '--server', '127.0.0.1:1']))")
    assert done.returncode == 2 and "--agents needs --ray" in done.stderr
