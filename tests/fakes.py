"""Fake memcached servers, only for faults a real memcached will not produce.

    with FakeServer("silent") as fake:
        ...                                   # connect to fake.address; requests time out

Behaviors:

``silent``
    accept connections and read from them, never answer (timeouts)
``close``
    accept each connection and close it at once
``garbage``
    answer every received line with ``HELLO garbage\\r\\n`` (not a memcached reply)
``half-close``
    read one request, then shut down the write side and keep the connection open
``corrupt:<host:port>``
    a transparent proxy to the real memcached at host:port that flips the first data byte of
    every value in its replies (see ValueCorrupter), to check data verification

Every server listens on 127.0.0.1 and serves each connection in a daemon thread; all threads
poll a stop flag every few milliseconds, so ``stop()`` returns promptly.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType

LOOPBACK = "127.0.0.1"
_TICK = 0.05  # seconds a blocked thread waits before looking at the stop flag
_JOIN_TIMEOUT = 2.0  # seconds stop() waits for each thread
_UPSTREAM_TIMEOUT = 2.0  # seconds to connect to the proxied memcached
_GARBAGE = b"HELLO garbage\r\n"


class ValueCorrupter:
    """Flips the first data byte of every value in a stream of memcached replies.

    Understands the text protocol's ``VALUE <key> <flags> <bytes> [<cas>]`` header and the meta
    protocol's ``VA <bytes> <flags>*`` header, each followed by <bytes> bytes of data and
    ``\\r\\n``; every other line passes through unchanged.  Feed the stream in chunks of any
    size; a partial header line is held back until it is complete.
    """

    def __init__(self) -> None:
        self.flipped = 0  # values corrupted so far
        self._line = b""  # the start of a header line split across chunks
        self._data_left = 0  # bytes of the current data block still to pass, "\r\n" included
        self._flip_next = False  # the next data byte is the first of a value

    def feed(self, chunk: bytes) -> bytes:
        """Return ``chunk`` with the first byte of each value that starts in it flipped."""
        out = bytearray()
        pos = 0
        while pos < len(chunk):
            if self._data_left:
                take = min(self._data_left, len(chunk) - pos)
                if self._flip_next:
                    out.append(chunk[pos] ^ 0x01)
                    out += chunk[pos + 1 : pos + take]
                    self._flip_next = False
                    self.flipped += 1
                else:
                    out += chunk[pos : pos + take]
                self._data_left -= take
                pos += take
                continue
            end = chunk.find(b"\n", pos)
            if end < 0:
                self._line += chunk[pos:]
                break
            line, self._line = self._line + chunk[pos : end + 1], b""
            pos = end + 1
            out += line
            size = _value_size(line)
            if size is not None:
                self._data_left = size + 2
                self._flip_next = size > 0
        return bytes(out)


def _value_size(line: bytes) -> int | None:
    """The data length a ``VALUE`` or ``VA`` header announces, or None for any other line."""
    words = line.split()
    try:
        if len(words) >= 4 and words[0] == b"VALUE":
            return int(words[3])
        if len(words) >= 2 and words[0] == b"VA":
            return int(words[1])
    except ValueError:
        pass
    return None


class FakeServer:
    """A misbehaving server on 127.0.0.1; it listens from construction until ``stop()``."""

    def __init__(self, behavior: str) -> None:
        """Start serving ``behavior`` (see the module docstring); ValueError if unknown."""
        name, _, upstream = behavior.partition(":")
        handlers: dict[str, Callable[[socket.socket], None]] = {
            "silent": self._serve_silent,
            "close": self._serve_close,
            "garbage": self._serve_garbage,
            "half-close": self._serve_half_close,
            "corrupt": self._serve_corrupt,
        }
        if name not in handlers or bool(upstream) != (name == "corrupt"):
            raise ValueError(f"unknown fake server behavior {behavior!r}")
        self.behavior = behavior
        self._handler = handlers[name]
        self._upstream: tuple[str, int] | None = None
        if upstream:
            host, _, port = upstream.rpartition(":")
            self._upstream = (host, int(port))
        self._corrupters: list[ValueCorrupter] = []
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._listener.bind((LOOPBACK, 0))
            self._listener.listen(128)
            self._listener.settimeout(_TICK)
        except BaseException:
            self._listener.close()
            raise
        self.port: int = self._listener.getsockname()[1]
        self._spawn(self._accept_loop)

    @property
    def address(self) -> str:
        """``"127.0.0.1:PORT"``."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def values_corrupted(self) -> int:
        """How many values a ``corrupt`` proxy has flipped so far."""
        with self._lock:
            return sum(corrupter.flipped for corrupter in self._corrupters)

    def stop(self) -> None:
        """Close the listener and every connection, and wait for the threads; idempotent."""
        self._stopped.set()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(_JOIN_TIMEOUT)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped.is_set() else "running"
        return f"<FakeServer {self.behavior!r} at {self.address} {state}>"

    # -- threads -------------------------------------------------------------------------------

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        with self._listener:
            while not self._stopped.is_set():
                try:
                    conn, _ = self._listener.accept()
                except socket.timeout:
                    continue
                except OSError:
                    return
                conn.settimeout(_TICK)
                self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # OSError: the client went away
            self._handler(conn)

    def _recv(self, sock: socket.socket) -> bytes:
        """The next bytes from ``sock``; b"" at end of stream, on reset, or once stopped."""
        while not self._stopped.is_set():
            try:
                return sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return b""
        return b""

    def _send(self, sock: socket.socket, data: bytes) -> None:
        """Send all of ``data``, however slowly the peer reads, unless stopped first."""
        view = memoryview(data)
        while view and not self._stopped.is_set():
            try:
                view = view[sock.send(view) :]
            except socket.timeout:
                continue

    # -- behaviors -----------------------------------------------------------------------------

    def _serve_silent(self, conn: socket.socket) -> None:
        while self._recv(conn):
            pass

    def _serve_close(self, conn: socket.socket) -> None:
        pass  # _serve closes the connection

    def _serve_garbage(self, conn: socket.socket) -> None:
        pending = b""
        while data := self._recv(conn):
            pending += data
            lines = pending.count(b"\n")
            pending = pending[pending.rfind(b"\n") + 1 :]
            self._send(conn, _GARBAGE * lines)

    def _serve_half_close(self, conn: socket.socket) -> None:
        request = b""
        while b"\n" not in request:
            data = self._recv(conn)
            if not data:
                return
            request += data
        conn.shutdown(socket.SHUT_WR)
        while self._recv(conn):
            pass

    def _serve_corrupt(self, client: socket.socket) -> None:
        assert self._upstream is not None
        try:
            upstream = socket.create_connection(self._upstream, timeout=_UPSTREAM_TIMEOUT)
        except OSError:
            return
        corrupter = ValueCorrupter()
        with self._lock:
            self._corrupters.append(corrupter)
        with upstream:
            upstream.settimeout(_TICK)
            requests = threading.Thread(target=self._pump, args=(client, upstream), daemon=True)
            requests.start()
            self._pump(upstream, client, corrupter.feed)
            requests.join(_JOIN_TIMEOUT)

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        transform: Callable[[bytes], bytes] | None = None,
    ) -> None:
        """Copy ``source`` to ``sink`` until end of stream, then pass the end on."""
        with contextlib.suppress(OSError):
            while data := self._recv(source):
                self._send(sink, transform(data) if transform else data)
            sink.shutdown(socket.SHUT_WR)
