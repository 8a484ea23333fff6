"""Fixtures of the ``cachelab.tiered`` tests (the servers are in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tiered_helpers import Store

from cachelab.tiered import RedisTier

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests here make a fresh cache per test and rely on its random prefix to share
    nothing with the others, so the warning about it (``RandomPrefixWarning``, an error under
    ``filterwarnings = error``) is expected: ignored here, and tested where it is the point."""
    mark = pytest.mark.filterwarnings("ignore::cachelab.tiered.RandomPrefixWarning")
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(mark)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store.sqlite")
    for i in range(50):
        s.write(i, f"body of {i} " * 20, i)
    yield s
    s.db.close()


@pytest.fixture(autouse=True)
def _redis_tiers_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Closes every :class:`RedisTier` the test made, at its end. A cache's ``close()``
    leaves its tier open (it may be shared), and a redis-py client dropped open closes its
    sockets when collected — in a cycle, after the socket's own finalizer has warned:
    ``ResourceWarning``, an error here, raised in whichever later test the collector ran."""
    made: list[Any] = []
    init = RedisTier.__init__

    def recorded(self: RedisTier, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(RedisTier, "__init__", recorded)
    yield
    for t in made:
        t.close()
