"""Private memcached servers (cachelab.servers) and the fake servers in tests/fakes.py."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import cachelab
from cachelab import servers
from cachelab.errors import MemcachedNotInstalled, ServerUnreachable, UsageError
from cachelab.servers import PrivateMemcached, find_memcached
from fakes import FakeServer, ValueCorrupter

FakeFactory = Callable[[str], FakeServer]


# -- helpers: raw protocol over plain sockets -------------------------------------------------


def _connect(server: PrivateMemcached | FakeServer, timeout: float = 2.0) -> socket.socket:
    if isinstance(server, PrivateMemcached) and server.socket_path is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(server.socket_path)
        return sock
    host, _, port = server.address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def _read_until(sock: socket.socket, end: bytes) -> bytes:
    data = b""
    while not data.endswith(end):
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    return data


def _ask(server: PrivateMemcached | FakeServer, request: bytes, end: bytes = b"\r\n") -> bytes:
    with _connect(server) as sock:
        sock.sendall(request)
        return _read_until(sock, end)


def _stats(server: PrivateMemcached, group: str = "") -> dict[str, str]:
    reply = _ask(server, f"stats {group}".strip().encode() + b"\r\n", b"END\r\n")
    lines = reply.decode().split("\r\n")
    return dict(line.split(" ", 2)[1:] for line in lines if line.startswith("STAT "))


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (dead, not yet reaped by its new parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


# -- private servers ---------------------------------------------------------------------------


def test_server_answers_version_and_stores_values(memcached: PrivateMemcached) -> None:
    assert memcached.address == f"127.0.0.1:{memcached.port}"
    assert (memcached.host, memcached.socket_path) == ("127.0.0.1", None)
    assert memcached.version and memcached.version[0].isdigit()
    assert _ask(memcached, b"version\r\n") == f"VERSION {memcached.version}\r\n".encode()
    assert _ask(memcached, b"set test_servers:tcp 5 0 3\r\nabc\r\n") == b"STORED\r\n"
    reply = _ask(memcached, b"get test_servers:tcp\r\n", b"END\r\n")
    assert reply == b"VALUE test_servers:tcp 5 3\r\nabc\r\nEND\r\n"


def test_unix_socket_server_works(memcached_unix: PrivateMemcached) -> None:
    path = memcached_unix.socket_path
    assert path is not None and Path(path).is_socket()
    assert memcached_unix.address == f"unix:{path}"
    assert (memcached_unix.host, memcached_unix.port) == (None, None)
    assert _ask(memcached_unix, b"set test_servers:unix 0 0 2\r\nhi\r\n") == b"STORED\r\n"
    reply = _ask(memcached_unix, b"get test_servers:unix\r\n", b"END\r\n")
    assert reply == b"VALUE test_servers:unix 0 2\r\nhi\r\nEND\r\n"


def test_stop_ends_and_reaps_the_process_and_is_idempotent(
    fresh_memcached: PrivateMemcached,
) -> None:
    pid = fresh_memcached.pid
    assert pid is not None and _alive(pid)
    fresh_memcached.stop()
    with pytest.raises(ProcessLookupError):  # also a zombie would still be found
        os.kill(pid, 0)
    with pytest.raises(ChildProcessError):  # already reaped by stop()
        os.waitpid(pid, os.WNOHANG)
    assert fresh_memcached.pid is None and not fresh_memcached.running
    fresh_memcached.stop()
    assert "stopped" in repr(fresh_memcached)


def test_stopped_server_can_start_again(fresh_memcached: PrivateMemcached) -> None:
    fresh_memcached.stop()
    fresh_memcached.start()
    assert fresh_memcached.running
    assert _ask(fresh_memcached, b"version\r\n").startswith(b"VERSION ")


def test_stop_removes_the_socket_directory() -> None:
    with PrivateMemcached(unix_socket=True) as server:
        assert server.socket_path is not None
        directory = Path(server.socket_path).parent
        assert directory.is_dir()
    assert not directory.exists()


def test_missing_binary_raises_a_one_line_hint(tmp_path: Path) -> None:
    with pytest.raises(MemcachedNotInstalled) as info:
        PrivateMemcached(binary=str(tmp_path / "memcached")).start()
    message = str(info.value)
    assert "\n" not in message
    assert "apt-get install -y memcached" in message


def test_find_memcached_looks_at_the_environment_then_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = find_memcached()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CACHELAB_MEMCACHED", real)
    assert find_memcached() == real
    monkeypatch.setenv("CACHELAB_MEMCACHED", str(tmp_path / "memcached"))
    with pytest.raises(MemcachedNotInstalled):
        find_memcached()
    monkeypatch.delenv("CACHELAB_MEMCACHED")
    with pytest.raises(MemcachedNotInstalled):
        find_memcached()
    assert find_memcached(real) == real


def test_options_reach_the_server() -> None:
    server = PrivateMemcached(memory_mb=16, threads=2, item_size_max="2m", extra_args=["-c", "321"])
    with server:
        settings = _stats(server, "settings")
        assert server.argv[-2:] == ["-c", "321"]
    assert settings["maxbytes"] == str(16 * 1024 * 1024)
    assert settings["num_threads"] == "2"
    assert settings["item_size_max"] == str(2 * 1024 * 1024)
    assert settings["maxconns"] == "321"
    assert settings["udpport"] == "0"


def test_two_servers_at_once_get_different_ports() -> None:
    with PrivateMemcached(memory_mb=8) as first, PrivateMemcached(memory_mb=8) as second:
        assert first.port != second.port
        assert _stats(first)["pid"] == str(first.pid)
        assert _stats(second)["pid"] == str(second.pid)


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset is not installed")
def test_cpus_pin_the_server() -> None:
    with PrivateMemcached(memory_mb=8, cpus="0") as server:
        assert server.argv[1:3] == ["-c", "0"]
        status = Path(f"/proc/{server.pid}/status").read_text()
    assert "Cpus_allowed_list:\t0\n" in status


def test_start_retries_when_the_port_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken: int = squatter.getsockname()[1]
        ports = iter([taken, taken])
        free_port = servers.free_port
        monkeypatch.setattr(servers, "free_port",
                            lambda host="127.0.0.1": next(ports, None) or free_port(host))
        with PrivateMemcached(memory_mb=8) as server:
            assert server.port != taken
            assert _stats(server)["pid"] == str(server.pid)


def test_a_bad_option_fails_fast_naming_the_error() -> None:
    started = time.monotonic()
    with pytest.raises(ServerUnreachable) as info:
        PrivateMemcached(extra_args=["--no-such-option"]).start()
    assert time.monotonic() - started < 2
    message = str(info.value)
    assert "\n" not in message
    assert "no-such-option" in message


_OWNER = """
import time
from cachelab.servers import PrivateMemcached
print(PrivateMemcached(memory_mb=8).start().pid, flush=True)
time.sleep(60)
"""


def test_server_does_not_outlive_a_killed_owner() -> None:
    source = str(Path(cachelab.__file__).resolve().parent.parent)
    paths = [source, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, env=env)
    try:
        assert owner.stdout is not None
        assert select.select([owner.stdout], [], [], 10)[0], "the owner did not start a server"
        pid = int(owner.stdout.readline())
        assert _alive(pid)
        owner.kill()  # SIGKILL: no atexit, no cleanup of any kind
        owner.wait()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"memcached {pid} outlived its killed owner")


# -- fake servers ------------------------------------------------------------------------------


def test_fake_silent_never_answers(fake_server: FakeFactory) -> None:
    with _connect(fake_server("silent"), timeout=0.2) as sock:
        sock.sendall(b"version\r\n")
        with pytest.raises(socket.timeout):
            sock.recv(1)


def test_fake_close_closes_at_once(fake_server: FakeFactory) -> None:
    with _connect(fake_server("close")) as sock, contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b""


def test_fake_garbage_answers_every_line(fake_server: FakeFactory) -> None:
    reply = _ask(fake_server("garbage"), b"version\r\nget a\r\n", b"garbage\r\nHELLO garbage\r\n")
    assert reply == b"HELLO garbage\r\n" * 2


def test_fake_half_close_ends_its_side_only(fake_server: FakeFactory) -> None:
    with _connect(fake_server("half-close")) as sock:
        sock.sendall(b"get a\r\n")
        assert sock.recv(1) == b""
        sock.sendall(b"get b\r\n")  # our side is still open


def test_fake_rejects_unknown_behaviors() -> None:
    for behavior in ("loud", "corrupt", "silent:127.0.0.1:1"):
        with pytest.raises(ValueError):
            FakeServer(behavior)


def test_fake_corrupt_flips_the_first_byte_of_each_value(
    memcached: PrivateMemcached, fake_server: FakeFactory
) -> None:
    proxy = fake_server(f"corrupt:{memcached.address}")
    assert _ask(proxy, b"set test_servers:corrupt 7 0 5\r\nhello\r\n") == b"STORED\r\n"
    got = _ask(proxy, b"get test_servers:corrupt\r\n", b"END\r\n")
    assert got == b"VALUE test_servers:corrupt 7 5\r\n" + bytes([ord("h") ^ 1]) + b"ello\r\nEND\r\n"
    meta = _ask(proxy, b"mg test_servers:corrupt v\r\nmn\r\n", b"MN\r\n")
    assert meta == b"VA 5\r\n" + bytes([ord("h") ^ 1]) + b"ello\r\nMN\r\n"
    real = _ask(memcached, b"get test_servers:corrupt\r\n", b"END\r\n")
    assert real == b"VALUE test_servers:corrupt 7 5\r\nhello\r\nEND\r\n"
    assert proxy.values_corrupted >= 2


def test_fake_corrupt_serves_concurrent_connections(
    memcached: PrivateMemcached, fake_server: FakeFactory
) -> None:
    proxy = fake_server(f"corrupt:{memcached.address}")
    _ask(memcached, b"set test_servers:many 0 0 3\r\nxyz\r\n")
    clients = [_connect(proxy) for _ in range(20)]
    try:
        for sock in clients:
            sock.sendall(b"get test_servers:many\r\n")
        for sock in clients:
            assert _read_until(sock, b"END\r\n") == b"VALUE test_servers:many 0 3\r\nyyz\r\nEND\r\n"
    finally:
        for sock in clients:
            sock.close()


def test_value_corrupter_follows_the_stream_byte_by_byte() -> None:
    tricky = b"\r\nVALUE b 0 1\r\n"  # data that looks like a header
    stream = (
        b"VALUE a 0 %d 99\r\n%s\r\n" % (len(tricky), tricky)
        + b"VALUE empty 0 0\r\n\r\nVA 2 f1\r\nok\r\nHD\r\nEND\r\n"
    )
    expected = (
        b"VALUE a 0 %d 99\r\n\x0c%s\r\n" % (len(tricky), tricky[1:])
        + b"VALUE empty 0 0\r\n\r\nVA 2 f1\r\nnk\r\nHD\r\nEND\r\n"
    )
    corrupter = ValueCorrupter()
    assert b"".join(corrupter.feed(stream[i : i + 1]) for i in range(len(stream))) == expected
    assert corrupter.flipped == 2
    assert ValueCorrupter().feed(stream) == expected


def test_a_private_memcached_listens_on_another_loopback_address_when_asked():
    with PrivateMemcached(host="127.0.0.3", memory_mb=8, threads=1) as mc:
        assert mc.address.startswith("127.0.0.3:")
        assert mc.host == "127.0.0.3"
        with socket.create_connection(("127.0.0.3", mc.port), timeout=2) as sock:
            sock.sendall(b"version\r\n")
            assert sock.recv(100).startswith(b"VERSION ")
        # Only there: the same port on 127.0.0.1 has nobody listening.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", mc.port), timeout=2).close()


def test_a_private_memcached_refuses_a_non_loopback_host():
    with pytest.raises(UsageError, match="loopback"):
        PrivateMemcached(host="10.0.0.1")
