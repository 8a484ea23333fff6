"""Pointed at something that is not a memcached, every verb says so in one line naming the
address and what it answered (issue 16: it said ``protocol error: invalid frame: bare newline
at byte 15``), and a silent service is named with the deadline it missed."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from clitools import InProcess, one_error_line
from fakes import FakeServer

VERBS = [
    ["profile", "--quick"],
    ["load", "--duration", "1"],
    ["scale", "--quick"],
    ["tiers", "--quick"],
]


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass


@pytest.fixture
def http_service() -> Iterator[str]:
    """A real HTTP server (the standard library's) on a free loopback port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("argv", VERBS, ids=lambda a: a[0])
def test_an_http_server_is_named_as_not_a_memcached(cli: InProcess, argv: list[str],
                                                    http_service: str, tmp_path: Path) -> None:
    p = cli(*argv, "--server", http_service, "--out", tmp_path / "o")
    assert p.returncode == 3, p.stderr
    line = one_error_line(p)
    # http.server answers a line it cannot parse with its HTML error page.
    assert line.startswith(f"cachelab: error: {http_service} is not a memcached: it answered '"), \
        line
    assert "memcached's text protocol was expected" in line


@pytest.mark.parametrize("argv", VERBS[:2], ids=lambda a: a[0])
def test_a_silent_service_is_named_with_the_deadline(
        cli: InProcess, argv: list[str], fake_server: Callable[[str], FakeServer],
        tmp_path: Path) -> None:
    silent = fake_server("silent")
    p = cli(*argv, "--server", silent.address, "--out", tmp_path / "o")
    assert p.returncode == 3, p.stderr
    line = one_error_line(p)
    assert re.fullmatch(rf"cachelab: error: {silent.address}: no reply within \d+(ms|s)", line), \
        line
