"""Fixtures of the ``cachelab.tiered`` tests (the servers are in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tiered_helpers import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store.sqlite")
    for i in range(50):
        s.write(i, f"body of {i} " * 20, i)
    yield s
    s.db.close()
