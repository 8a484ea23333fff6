"""The Python capture reader: memcached's watcher stream, line by line, into capture rows.

This is the reference the Rust reader (``cachelab._core.CaptureReader``, crates/capture)
matches row for row, and the reader ``trace capture --reader python`` uses. Both have one
interface: ``watch(address, timeout)``, ``read(wait, batch, max_rows, max_bytes)``,
``feed(data, max_rows)``, ``flush()``, ``take()`` and the counters ``ops``, ``hits``,
``lost``, ``store_lookups``, ``sampled_out``, ``received``, ``t0``. The rules (what a line
means, which fetches are the server's own, how multi-gets are grouped) are set out in
:mod:`cachelab.traces.capture`.
"""

from __future__ import annotations

import hashlib
import socket
import time
from typing import Any
from urllib.parse import unquote

from cachelab.errors import ServerError, ServerUnreachable

__all__ = ["SAME_REQUEST_US", "PyCaptureReader"]

#: Fetches of one connection this close together (µs) belong to one request.
SAME_REQUEST_US = 5.0
_READ_CHUNK = 1 << 20
_INT64 = 2**63
_COLUMN_NAMES = ("time", "key", "op", "status", "size", "clsid", "conn", "request", "ttl",
                 "key_bytes")


class _Pseudonyms:
    """Keyed BLAKE2b of keys: a pseudonym and a uniform draw in [0, 1) for sampling."""

    def __init__(self, secret: bytes, keep: bool) -> None:
        self._secret = secret
        self._keep = keep
        self._cache: dict[str, tuple[str, float]] = {}

    def __call__(self, key: str) -> tuple[str, float]:
        got = self._cache.get(key)
        if got is None:
            raw = key.encode("utf-8", "surrogateescape")
            digest = hashlib.blake2b(raw, key=self._secret, digest_size=8).digest()
            word = int.from_bytes(digest, "big")
            # A kept key that is not UTF-8 is written with U+FFFD for its bad bytes.
            got = (raw.decode("utf-8", "replace") if self._keep else f"k{word:016x}",
                   word / 2.0**64)
            if len(self._cache) < 1_000_000:
                self._cache[key] = got
        return got


def _int(text: str, lo: int = -_INT64, hi: int = _INT64 - 1) -> int | None:
    """``int(text)`` for ASCII text within [lo, hi], else None."""
    if not text.isascii():
        return None
    try:
        v = int(text)
    except ValueError:
        return None
    return v if lo <= v <= hi else None


def _fields(line: str) -> dict[str, str] | None:
    """The ``name=value`` fields of a log line; the key (which may hold ``=``) is taken whole
    up to `` status=``. None for a line that is not an item fetch or store."""
    start = line.find(" key=")
    end = line.find(" status=", start + 5)
    if start < 0 or end < 0:
        return None
    out = {"key": line[start + 5:end]}
    for part in (line[:start] + line[end:]).split():
        name, sep, value = part.partition("=")
        if sep:
            out[name] = value
    return out


def _timestamp(text: str) -> float | None:
    """``ts=SECONDS.MICROSECONDS`` as memcached prints it: the microseconds without leading
    zeros (``1795735358.29784`` is .029784 s, not .29784 s)."""
    sec, _, usec = text.partition(".")
    s, u = _int(sec), _int(usec or "0")
    return None if s is None or u is None else s + u * 1e-6


def _key(logged: str) -> str:
    """A key as the client sent it: memcached's log URI-encodes keys (``a%25b`` is
    ``a%b``)."""
    return unquote(logged, errors="surrogateescape") if "%" in logged else logged


def _key_bytes(key: str) -> int:
    return min(len(key.encode("utf-8", "surrogateescape")), 65_535)


class _State:
    """What the stream has told so far, and each connection's fetch not yet written (a
    store's own lookup is recognised by the store that follows it)."""

    def __init__(self, names: _Pseudonyms, sample: float, t0: float | None) -> None:
        self.names = names
        self.sample = sample
        self.rows: dict[str, list[Any]] = {name: [] for name in _COLUMN_NAMES}
        self.ops: dict[str, int] = {}
        self.hits = 0
        self.lost = 0
        self.store_lookups = 0
        self.sampled_out = 0
        self.t0 = t0
        #: The key of a store just refused as too large (its lookup follows it).
        self.too_large: str | None = None
        #: conn -> the fetch held back: (time, key, status, size, clsid)
        self.held: dict[int, tuple[float, str, str, int, int]] = {}
        #: conn -> (time of its last written fetch, its request id, keys in that request)
        self.last_get: dict[int, tuple[float, int, int]] = {}
        self.next_request = 0

    def add(self, *row: Any) -> None:
        for name, value in zip(_COLUMN_NAMES, row):
            self.rows[name].append(value)

    def flush(self) -> None:
        for conn in list(self.held):
            self._emit_get(conn, self.held.pop(conn))

    def _emit_get(self, conn: int, held: tuple[float, str, str, int, int]) -> None:
        t, key, status, size, clsid = held
        last = self.last_get.get(conn)
        if last is not None and 0 <= (t - last[0]) * 1e6 <= SAME_REQUEST_US:
            request, n = last[1], last[2] + 1
        else:
            request, n = self.next_request, 1
            self.next_request += 1
        self.last_get[conn] = (t, request, n)
        name, draw = self.names(key)
        if draw >= self.sample:
            self.sampled_out += 1
            return
        self.ops["get"] = self.ops.get("get", 0) + 1
        self.hits += status == "found"
        self.add(t, name, "get", status, size, clsid, conn, request, -1, _key_bytes(key))

    def line(self, line: str) -> None:
        if line.startswith("skipped=") or " skipped=" in line:
            for part in line.split():
                if part.startswith("skipped="):
                    n = _int(part[8:] or "0")
                    self.lost += n if n is not None and n > 0 else 0
            return
        f = _fields(line)
        if f is None or "ts" not in f:
            return
        ts = _timestamp(f["ts"])
        conn = _int(f.get("cfd", "-1"), -2**31, 2**31 - 1)
        size = _int(f.get("size", "0"), 0, 2**32 - 1)
        clsid = _int(f.get("clsid", "0"), 0, 2**16 - 1)
        if ts is None or conn is None or size is None or clsid is None:
            return
        if self.t0 is None:
            self.t0 = ts
        t = ts - self.t0
        kind = f.get("type")
        key = _key(f["key"])
        held = self.held.pop(conn, None)
        if kind == "item_get":
            if held is not None:
                self._emit_get(conn, held)
            if self.too_large == key:
                # A refused store (too large) is logged first, then the server's lookup of
                # the item it unlinks: not a client's get.
                self.too_large = None
                self.store_lookups += 1
                return
            self.held[conn] = (t, key, f.get("status", ""), size, clsid)
            return
        if kind != "item_store":
            if held is not None:
                self._emit_get(conn, held)
            return
        if held is not None:
            if held[1] == key:
                self.store_lookups += 1  # the server's lookup of the item it replaces
            else:
                self._emit_get(conn, held)
        self.too_large = key if f.get("status") == "too_large" else None
        self.last_get.pop(conn, None)
        name, draw = self.names(key)
        if draw >= self.sample:
            self.sampled_out += 1
            return
        op = f.get("cmd", "set")
        self.ops[op] = self.ops.get(op, 0) + 1
        request = self.next_request
        self.next_request += 1
        ttl = _int(f.get("ttl", "-1"))
        self.add(t, name, op, f.get("status", ""), size, clsid, conn, request,
                 -1 if ttl is None else ttl, _key_bytes(key))


class PyCaptureReader:
    """The Python reader, with the Rust reader's interface (see the module's docstring)."""

    def __init__(self, secret: bytes, keep_keys: bool, sample: float,
                 t0: float | None = None) -> None:
        self._state = _State(_Pseudonyms(secret, keep_keys), sample, t0)
        self._sock: socket.socket | None = None
        self._rest = b""
        self.received = 0

    def watch(self, address: str, connect_timeout: float) -> None:
        t = connect_timeout
        try:
            if address.startswith("unix:"):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(t)
                sock.connect(address[5:])
            else:
                host, _, port = address.rpartition(":")
                sock = socket.create_connection((host.strip("[]"), int(port)), timeout=t)
        except OSError as e:
            raise ServerUnreachable(f"{address}: cannot connect: {e}") from e
        try:
            sock.sendall(b"watch fetchers mutations\r\n")
            reply = b""
            while b"\r\n" not in reply and len(reply) < 512:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
        except OSError as e:
            sock.close()
            raise ServerError(f"{address}: no reply to 'watch': {e}") from e
        first, _, rest = reply.partition(b"\r\n")
        if first != b"OK":
            sock.close()
            said = first[:80].decode("ascii", "replace").strip() or "nothing"
            raise ServerError(f"{address}: the server refused 'watch fetchers mutations' "
                              f"(it answered {said!r}); capturing needs memcached 1.6 or later")
        self._sock, self._rest, self.received = sock, rest, len(rest)

    def feed(self, data: bytes, max_rows: int) -> bool:
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        rows = self._state.rows["time"]
        for raw in lines:
            self._state.line(raw.decode("utf-8", "surrogateescape").rstrip("\r"))
            if len(rows) >= max_rows:
                return False
        return True

    def read(self, wait: float, batch: int, max_rows: int, max_bytes: int) -> str:
        assert self._sock is not None, "read() before watch()"
        until = time.monotonic() + wait
        while True:
            left = until - time.monotonic()
            if left <= 0 or len(self) >= batch:
                return "more"
            self._sock.settimeout(max(left, 0.001))
            try:
                chunk = self._sock.recv(_READ_CHUNK)
            except TimeoutError:
                return "more"
            except OSError as e:
                raise ServerError(f"the stream failed: {e}") from e
            if not chunk:
                return "closed"
            self.received += len(chunk)
            if not self.feed(chunk, max_rows):
                return "max_events"
            if self.received >= max_bytes:
                return "max_bytes"

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()

    def flush(self) -> None:
        self._state.flush()

    def __len__(self) -> int:
        return len(self._state.rows["time"])

    def take(self) -> dict[str, Any]:
        rows = self._state.rows
        out = {"rows": len(self), "lists": {k: list(v) for k, v in rows.items()}}
        for v in rows.values():
            v.clear()
        return out

    ops = property(lambda self: list(self._state.ops.items()))
    hits = property(lambda self: self._state.hits)
    lost = property(lambda self: self._state.lost)
    store_lookups = property(lambda self: self._state.store_lookups)
    sampled_out = property(lambda self: self._state.sampled_out)
    t0 = property(lambda self: self._state.t0)
