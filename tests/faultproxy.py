"""A fault proxy: a TCP proxy on 127.0.0.1 in front of a real memcached that injects network
faults on command, for the faults this machine's kernel cannot make (it has no ``netem``).

    with FaultProxy("127.0.0.1:11211") as proxy:
        proxy.delay(0.02, jitter=0.005)   # every reply 15–25 ms late, order kept
        proxy.blackhole(2.0)              # nothing moves either way for 2 s, then all of it
        proxy.reset()                     # every open connection gets a TCP reset
        proxy.half_open()                 # replies vanish; connections stay open
        proxy.trickle(16, 0.01)           # replies come 16 bytes every 10 ms
        proxy.hold_next(b" N10", 0.6)     # the next request holding b" N10" (and what follows
                                          # it on its connection) reaches the server 0.6 s late
        proxy.clear()                     # back to a plain proxy

Each accepted connection gets an upstream connection and, per direction, a reader thread
that queues what arrives (stamped with its arrival time) and a writer thread that delivers
it when the faults allow. Reading never waits for writing, so an added delay is a delay,
not a throughput limit. Every thread polls a stop flag, so ``stop()`` returns promptly;
every wait is bounded.
"""

from __future__ import annotations

import collections
import contextlib
import random
import socket
import struct
import threading
import time
from types import TracebackType

LOOPBACK = "127.0.0.1"
_TICK = 0.02  # seconds a blocked thread waits before looking at the stop flag
_JOIN_TIMEOUT = 2.0


class FaultProxy:
    """Listens on a free loopback port and forwards to ``upstream`` (``host:port``)."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._clients: list[socket.socket] = []
        self._delay = 0.0
        self._jitter = 0.0
        self._hold_until = 0.0
        self._swallow = False
        self._trickle: tuple[int, float] | None = None
        self._hold_next: tuple[bytes, float] | None = None
        self._rng = random.Random(1)
        self.connections = 0
        #: When a client last connected or sent a byte (``time.monotonic()``; None: never).
        self.last_heard: float | None = None
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind((LOOPBACK, 0))
        self._listener.listen(128)
        self._listener.settimeout(_TICK)
        self.port: int = self._listener.getsockname()[1]
        self._spawn(self._accept_loop)

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    # -- faults --------------------------------------------------------------------------------

    def delay(self, seconds: float, jitter: float = 0.0) -> None:
        """Deliver every reply ``seconds`` ± ``jitter`` (uniform) after it arrived, in order."""
        with self._lock:
            self._delay, self._jitter = seconds, jitter

    def blackhole(self, seconds: float) -> None:
        """For the next ``seconds`` nothing is delivered either way; then everything held is."""
        with self._lock:
            self._hold_until = time.monotonic() + seconds

    def reset(self) -> None:
        """Send a TCP reset on every open client connection (SO_LINGER 0, then close)."""
        with self._lock:
            clients, self._clients = self._clients, []
        for c in clients:
            with contextlib.suppress(OSError):
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.close()

    def half_open(self) -> None:
        """From now on replies are dropped and connections stay open: the server seems to
        have vanished without closing anything (requests time out)."""
        with self._lock:
            self._swallow = True

    def trickle(self, chunk: int, every: float) -> None:
        """Deliver replies ``chunk`` bytes at a time, one chunk every ``every`` seconds."""
        with self._lock:
            self._trickle = (chunk, every)

    def hold_next(self, pattern: bytes, seconds: float) -> None:
        """The next request bytes that hold ``pattern`` (one read of a connection: a request
        sent alone) reach the server ``seconds`` after they arrived, and whatever follows them
        on that connection after them; other connections flow. Once: a request stuck in a
        slow server's socket while the server still answers new connections. What a client
        that timed out sent is still delivered when it closes (its delete may overtake it)."""
        with self._lock:
            self._hold_next = (pattern, seconds)

    def clear(self) -> None:
        """Back to a plain proxy (held bytes are released)."""
        with self._lock:
            self._delay = self._jitter = 0.0
            self._hold_until = 0.0
            self._swallow = False
            self._trickle = None
            self._hold_next = None

    # -- lifecycle -----------------------------------------------------------------------------

    def stop(self) -> None:
        with self._lock:  # a connection accepted meanwhile sees the flag and closes itself
            self._stopped.set()
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
        for t in list(self._threads):
            t.join(_JOIN_TIMEOUT)
        self._listener.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------------

    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(t)
        t.start()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except (socket.timeout, OSError):
                continue
            try:
                upstream = socket.create_connection(self._upstream, timeout=2.0)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.settimeout(_TICK)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._stopped.is_set():  # stop() has taken the list: these are not in it
                    client.close()
                    upstream.close()
                    return
                self._socks += [client, upstream]
                self._clients.append(client)
                self.connections += 1
                self.last_heard = time.monotonic()
            self._pipe(client, upstream, replies=False)
            self._pipe(upstream, client, replies=True)

    def _pipe(self, source: socket.socket, sink: socket.socket, *, replies: bool) -> None:
        queue: collections.deque[tuple[float, bytes]] = collections.deque()
        ready = threading.Condition()
        done = threading.Event()
        self._spawn(self._read, source, queue, ready, done, not replies)
        self._spawn(self._write, sink, queue, ready, done, replies)

    def _read(self, source: socket.socket, queue: collections.deque[tuple[float, bytes]],
              ready: threading.Condition, done: threading.Event, requests: bool) -> None:
        while not self._stopped.is_set():
            try:
                data = source.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not data:
                break
            if requests:
                self.last_heard = time.monotonic()
            with ready:
                queue.append((time.monotonic(), data))
                ready.notify()
        done.set()
        with ready:
            ready.notify()

    def _write(self, sink: socket.socket, queue: collections.deque[tuple[float, bytes]],
               ready: threading.Condition, done: threading.Event, replies: bool) -> None:
        release = 0.0
        while not self._stopped.is_set():
            with ready:
                if not queue:
                    if done.is_set():
                        break
                    ready.wait(_TICK)
                    continue
                arrived, data = queue.popleft()
            with self._lock:
                hold = self._hold_next
                if not replies and hold is not None and hold[0] in data:
                    self._hold_next = None
                    release = max(release, arrived + hold[1])
                delay, jitter = (self._delay, self._jitter) if replies else (0.0, 0.0)
                swallow = self._swallow and replies
                trickle = self._trickle if replies else None
            if delay or jitter:
                release = max(release, arrived + delay + self._rng.uniform(-jitter, jitter))
            if release:
                self._sleep_until(release)
            self._wait_out_blackhole()
            if swallow:
                continue
            if not self._send(sink, data, trickle):
                break
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def _wait_out_blackhole(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                until = self._hold_until
            if time.monotonic() >= until:
                return
            time.sleep(_TICK)

    def _sleep_until(self, t: float) -> None:
        while not self._stopped.is_set() and (left := t - time.monotonic()) > 0:
            time.sleep(min(left, _TICK))

    def _send(self, sink: socket.socket, data: bytes, trickle: tuple[int, float] | None) -> bool:
        step = trickle[0] if trickle else len(data)
        view = memoryview(data)
        try:
            while view and not self._stopped.is_set():
                piece = view[:step]
                while piece and not self._stopped.is_set():
                    try:
                        n = sink.send(piece)
                    except socket.timeout:
                        continue
                    piece, view = piece[n:], view[n:]
                if trickle and view:
                    time.sleep(trickle[1])
        except OSError:
            return False
        return True
