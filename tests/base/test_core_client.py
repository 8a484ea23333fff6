"""``cachelab._core``: the blocking Client against a real memcached and against faults, and the
histogram helpers."""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from cachelab import _core, errors
from cachelab.servers import PrivateMemcached
from fakes import FakeServer

FakeFactory = Callable[[str], FakeServer]


@pytest.fixture
def client(memcached: PrivateMemcached) -> Iterator[_core.Client]:
    with _core.Client(memcached.address) as c:
        yield c


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses."""
    return f"cachelab-test:{uuid.uuid4().hex}:"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- commands against a real server -------------------------------------------------------------


def test_set_get_delete(client: _core.Client, prefix: str) -> None:
    key = prefix + "a"
    assert client.get(key) is None
    assert client.set(key, b"hello") is True
    assert client.get(key) == b"hello"
    assert client.get(key.encode()) == b"hello"  # bytes keys work too
    assert client.set(key, b"again", flags=7, exptime=300) is True
    assert client.get(key) == b"again"
    assert client.delete(key) is True
    assert client.delete(key) is False
    assert client.get(key) is None


def test_values_are_binary_safe(client: _core.Client, prefix: str) -> None:
    tricky = b"\r\nEND\r\nVALUE x 0 1\r\n\x00\xff" + os.urandom(300_000) + b"\r\n"
    assert client.set(prefix + "bin", tricky)
    assert client.get(prefix + "bin") == tricky
    assert client.set(prefix + "empty", b"")
    assert client.get(prefix + "empty") == b""
    client.delete(prefix + "bin")
    client.delete(prefix + "empty")


def test_get_multi(client: _core.Client, prefix: str) -> None:
    values = {f"{prefix}{i}": os.urandom(i * 10) for i in range(1, 6)}
    for k, v in values.items():
        assert client.set(k, v)
    missing = prefix + "missing"
    got = client.get_multi([*values, missing])
    assert got == {k.encode(): v for k, v in values.items()}
    assert client.get_multi([missing]) == {}
    for k in values:
        assert client.delete(k)


def test_add(client: _core.Client, prefix: str) -> None:
    key = prefix + "add"
    assert client.add(key, b"first") is True
    assert client.add(key, b"second") is False
    assert client.get(key) == b"first"
    client.delete(key)


def test_touch(client: _core.Client, prefix: str) -> None:
    key = prefix + "touch"
    assert client.touch(key, 100) is False
    client.set(key, b"v")
    assert client.touch(key, 100) is True
    assert client.get(key) == b"v"
    client.delete(key)


def test_incr_decr(client: _core.Client, prefix: str) -> None:
    key = prefix + "n"
    assert client.incr(key, 1) is None
    assert client.decr(key, 1) is None
    client.set(key, b"10")
    assert client.incr(key, 5) == 15
    assert client.decr(key, 3) == 12
    assert client.decr(key, 100) == 0  # memcached stops at zero
    assert client.get(key) == b"0 "  # decr pads a shorter number with spaces, in place
    client.set(key, b"not a number")
    with pytest.raises(errors.ServerReplyError):
        client.incr(key, 1)
    assert client.get(key) == b"not a number"  # the connection is still usable
    client.delete(key)


def test_stats_and_version(client: _core.Client, memcached: PrivateMemcached) -> None:
    stats = client.stats()
    assert stats["pid"] == str(memcached.pid)
    assert stats["version"] == memcached.version
    assert int(stats["curr_connections"]) >= 1
    settings = client.stats("settings")
    assert settings["tcpport"] == str(memcached.port)
    assert client.version() == memcached.version


def test_meta_commands(client: _core.Client, prefix: str) -> None:
    key = prefix + "meta"
    assert client.meta_get(key) == ("EN", "", None)
    assert client.meta_set(key, b"abc") == ("HD", "", None)
    assert client.meta_get(key) == ("VA", "", b"abc")
    status, flags, value = client.meta_get(key, "v s f")
    assert (status, value) == ("VA", b"abc")
    assert set(flags.split()) == {"s3", "f0"}
    assert client.meta_set(key, b"xy", "F5 T0")[0] == "HD"
    status, flags, value = client.meta_get(key, "v f")
    assert (status, flags, value) == ("VA", "f5", b"xy")
    assert client.get(key) == b"xy"  # the same item the text protocol sees
    assert client.meta_noop() is None
    assert client.meta_delete(key) == ("HD", "", None)
    assert client.meta_delete(key) == ("NF", "", None)
    assert client.meta_get(key) == ("EN", "", None)


def test_unix_socket(memcached_unix: PrivateMemcached, prefix: str) -> None:
    with _core.Client(memcached_unix.address) as c:
        assert c.version() == memcached_unix.version
        assert c.set(prefix + "u", b"over a socket")
        assert c.get(prefix + "u") == b"over a socket"
        assert c.delete(prefix + "u")


def test_a_closed_client_raises(memcached: PrivateMemcached) -> None:
    c = _core.Client(memcached.address)
    c.close()
    with pytest.raises(errors.ConnectionClosed):
        c.version()
    with _core.Client(memcached.address) as c2:
        assert c2.version()
    with pytest.raises(errors.ConnectionClosed):
        c2.version()


# -- keys and flags that could inject commands ------------------------------------------------


@pytest.mark.parametrize(
    "bad_key",
    ["a b", "x\r\nflush_all", "x\nflush_all", "tab\tkey", "nul\x00", "", "k" * 251, b"a\x7fb"],
    ids=["space", "crlf-injection", "lf-injection", "tab", "nul", "empty", "251-bytes", "del"],
)
def test_invalid_keys_are_refused_before_sending(
    client: _core.Client, prefix: str, bad_key: str | bytes
) -> None:
    sentinel = prefix + "sentinel"
    client.set(sentinel, b"still here")
    for call in (
        lambda: client.get(bad_key),
        lambda: client.set(bad_key, b"v"),
        lambda: client.delete(bad_key),
        lambda: client.get_multi([sentinel, bad_key]),
        lambda: client.meta_get(bad_key),
        lambda: _core.validate_key(bad_key),
    ):
        with pytest.raises(errors.InvalidKey) as err:
            call()
        assert type(err.value) is errors.InvalidKey
        assert isinstance(err.value, errors.UsageError)
    # Nothing reached the server: the item is still there and the connection still in step.
    assert client.get(sentinel) == b"still here"
    assert client.delete(sentinel)


def test_a_250_byte_key_is_fine(client: _core.Client) -> None:
    key = "k" * 242 + uuid.uuid4().hex[:8]
    assert len(key) == 250
    _core.validate_key(key)
    assert client.set(key, b"v")
    assert client.get(key) == b"v"
    assert client.delete(key)


@pytest.mark.parametrize("flags", ["q", "v q", "v\r\nflush_all", "v 1x"])
def test_bad_meta_flags_are_refused(client: _core.Client, prefix: str, flags: str) -> None:
    with pytest.raises(errors.UsageError):
        client.meta_get(prefix + "k", flags)
    with pytest.raises(errors.UsageError):
        client.meta_set(prefix + "k", b"v", flags)
    with pytest.raises(errors.UsageError):
        client.meta_delete(prefix + "k", flags)
    assert client.meta_noop() is None  # still in step
    assert client.get(prefix + "k") is None


# -- faults -----------------------------------------------------------------------------------


def test_silent_server_times_out_promptly(fake_server: FakeFactory) -> None:
    fake = fake_server("silent")
    with _core.Client(fake.address, timeout=0.2) as c:
        started = time.monotonic()
        with pytest.raises(errors.ServerTimeout) as err:
            c.get("k")
        took = time.monotonic() - started
        assert 0.15 <= took < 0.8, took
        assert type(err.value) is errors.ServerTimeout
        assert isinstance(err.value, errors.ServerError) and isinstance(err.value, TimeoutError)
        # A later call fails fast or times out too; it never hangs or invents a reply.
        started = time.monotonic()
        with pytest.raises(errors.ServerError):
            c.version()
        assert time.monotonic() - started < 0.8


def test_unreachable_server(tmp_path) -> None:
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(errors.ServerUnreachable) as err:
        _core.Client(address, connect_timeout=1.0)
    assert type(err.value) is errors.ServerUnreachable
    assert isinstance(err.value, errors.ServerError) and isinstance(err.value, ConnectionError)
    assert address in str(err.value)
    with pytest.raises(errors.ServerUnreachable):
        _core.Client(f"unix:{tmp_path / 'no.sock'}")


def test_server_that_closes_the_connection(fake_server: FakeFactory) -> None:
    fake = fake_server("close")
    with pytest.raises(errors.ConnectionClosed) as err, _core.Client(fake.address) as c:
        c.get("k")
    assert type(err.value) is errors.ConnectionClosed
    assert isinstance(err.value, errors.ServerError)


def test_server_that_half_closes(fake_server: FakeFactory) -> None:
    fake = fake_server("half-close")
    with _core.Client(fake.address, timeout=1.0) as c:
        started = time.monotonic()
        with pytest.raises(errors.ConnectionClosed):
            c.get("k")
        assert time.monotonic() - started < 0.8  # end of stream is noticed, not waited out


def test_server_that_answers_garbage(fake_server: FakeFactory) -> None:
    fake = fake_server("garbage")
    with pytest.raises(errors.ProtocolError) as err, _core.Client(fake.address, timeout=1.0) as c:
        c.get("k")
    assert type(err.value) is errors.ProtocolError
    assert isinstance(err.value, errors.ServerError)


@pytest.mark.parametrize(
    "address", ["nonsense", "127.0.0.1:99999", "127.0.0.1:port", ":11211"]
)
def test_bad_addresses_are_usage_errors(address: str) -> None:
    with pytest.raises(errors.UsageError):
        _core.Client(address)


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, 3601])
def test_bad_timeouts_are_usage_errors(memcached: PrivateMemcached, timeout: float) -> None:
    with pytest.raises(errors.UsageError):
        _core.Client(memcached.address, timeout=timeout)
    with pytest.raises(errors.UsageError):
        _core.Client(memcached.address, connect_timeout=timeout)


# -- histograms ---------------------------------------------------------------------------------


def test_hist_percentiles_of_1_to_10000() -> None:
    h = _core.hist_from_values(list(range(1, 10_001)))
    points = [1.0, 5.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0]
    for p, got in zip(points, _core.hist_percentiles(h, points)):
        exact = p * 100  # the nearest-rank percentile of 1..10000
        assert abs(got - exact) / exact <= 0.001, (p, got, exact)
    assert _core.hist_percentiles(h, [0.0]) == [1]


def test_hist_percentiles_use_the_nearest_rank() -> None:
    # 9,990 fast samples and 10 slow ones: exactly 99.9 % are fast, so p99.9 is fast.
    h = _core.hist_from_values([1000] * 9990 + [5_000_000] * 10)
    fast, slow = _core.hist_percentiles(h, [99.9, 99.91])
    assert abs(fast - 1000) <= 1, fast
    assert abs(slow - 5_000_000) / 5_000_000 <= 0.001, slow
    h = _core.hist_from_values([1000] * 500 + [2000] * 500)
    assert [round(v, -2) for v in _core.hist_percentiles(h, [50.0, 50.1])] == [1000, 2000]


def test_hist_summary() -> None:
    h = _core.hist_from_values(list(range(1, 10_001)))
    s = _core.hist_summary(h)
    assert s["count"] == 10_000
    assert s["min"] == 1
    assert abs(s["max"] - 10_000) / 10_000 <= 0.001
    assert abs(s["mean"] - 5000.5) / 5000.5 <= 0.001
    assert abs(s["stdev"] - 2886.75) / 2886.75 <= 0.001
    empty = _core.hist_summary(_core.hist_from_values([]))
    assert empty["count"] == 0
    assert _core.hist_percentiles(_core.hist_from_values([]), [50.0]) == [0]


def test_hist_merge_is_lossless() -> None:
    whole = _core.hist_from_values(list(range(1, 10_001)))
    parts = [_core.hist_from_values(list(range(i, 10_001, 3))) for i in (1, 2, 3)]
    merged = _core.hist_merge(parts)
    points = [5.0, 50.0, 99.0, 99.9, 100.0]
    assert _core.hist_percentiles(merged, points) == _core.hist_percentiles(whole, points)
    assert _core.hist_summary(merged) == _core.hist_summary(whole)
    assert _core.hist_summary(_core.hist_merge([]))["count"] == 0


def test_hist_keeps_outliers() -> None:
    h = _core.hist_from_values([0, 10**18])  # below and above the range: clamped, not dropped
    assert _core.hist_summary(h)["count"] == 2


def test_hist_bad_input() -> None:
    with pytest.raises(errors.InputError):
        _core.hist_percentiles("not a histogram", [50.0])
    with pytest.raises(errors.InputError):
        _core.hist_merge([_core.hist_from_values([1]), "bm90IGEgaGlzdG9ncmFt"])
    with pytest.raises(errors.InputError):
        _core.hist_summary("")
    h = _core.hist_from_values([1, 2, 3])
    for p in (-1.0, 100.1, math.nan):
        with pytest.raises(ValueError):
            _core.hist_percentiles(h, [p])


def test_delete_many_is_one_pipelined_round_trip(memcached: PrivateMemcached) -> None:
    """``delete_many`` answers per key (existed or not), in order, in one write: the server
    counts the deletes, and a key injected with a newline is refused before anything is sent."""
    c = _core.Client(memcached.address)
    prefix = f"dm:{os.getpid()}:{time.monotonic_ns()}"
    keys = [f"{prefix}:{i}" for i in range(300)]
    for k in keys[::2]:
        c.set(k, b"v")
    before = int(dict(c.stats())["delete_hits"])
    assert c.delete_many(keys) == [i % 2 == 0 for i in range(300)]
    assert int(dict(c.stats())["delete_hits"]) - before == 150
    assert c.get_multi(keys) == {}
    with pytest.raises(errors.InvalidKey):
        c.delete_many([f"{prefix}:ok", "bad\r\nflush_all"])
    assert c.delete_many([]) == []
