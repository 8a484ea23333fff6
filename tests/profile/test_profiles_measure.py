"""Measuring (cachelab.profile.measure): with no server, a private memcached sized for the
spec, started from the options given, and stopped after."""

from __future__ import annotations

from cachelab.profile import ProfileSpec, profile
from cachelab.servers import ServerOptions


def test_a_private_server_is_started_from_the_options_with_room_for_the_values() -> None:
    spec = ProfileSpec(samples=3, warmup=0, sizes=(2 * 1024 * 1024,), key_counts=(),
                       concurrency=3)
    p = profile(spec, server_options=ServerOptions(memory_mb=8, threads=2))
    argv = p.server["argv"]
    assert p.server["private"] is True and p.server["address"].startswith("127.0.0.1:")
    assert argv[argv.index("-t") + 1] == "2"
    assert argv[argv.index("-I") + 1] == "4m"
    assert argv[argv.index("-m") + 1] == "32"  # 8 asked, but 2 x 4 MiB x (3 + 1) needed
    assert [c.samples for c in p.cells_of("get")] == [3]
    assert p.problems() == {}


def test_server_facts_are_recorded_with_a_given_server(memcached) -> None:  # noqa: ANN001
    spec = ProfileSpec(samples=2, warmup=0, sizes=(10,), key_counts=())
    p = profile(spec, server=memcached.address, server_facts={"private": True, "argv": ["x"]})
    assert p.server["address"] == memcached.address
    assert (p.server["private"], p.server["argv"]) == (True, ["x"])
    assert list(p.server) == ["address", "transport", "private", "argv", "version", "settings"]
    assert p.server["transport"] == "tcp" and p.tls_cost is None
