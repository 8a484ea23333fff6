"""Capturing a live memcached's key stream: ``cachelab trace capture`` (docs/traces.md,
"Capturing a trace").

memcached (1.6+) streams one line per item fetch and store to a connection that sent
``watch fetchers mutations``::

    ts=1795596440.129536 gid=4 type=item_get key=k1 status=found clsid=1 cfd=24 size=5
    ts=1795596440.129540 gid=5 type=item_store key=k1 status=stored cmd=set ttl=0 clsid=1 \
        cfd=24 size=5

:func:`capture` reads that stream for a bounded time and writes it as a capture file
(Parquet, schema ``cachelab.capture`` v1): one row per client request's access to a key —
time, key, operation, status, size, slab class, the client's connection, and a request id
that groups the keys of one multi-get. What the stream says and what it leaves out (memcached
1.6.18):

* A store is logged as a fetch of its key (the server looks for the old item) and then the
  store; the fetch is the server's, not the client's, and is dropped: a fetch of a key that
  the same connection's next line stores.
* Deletes, touches and incr/decr are logged as fetches only (``watch deletions`` is not in
  1.6.18), so they are indistinguishable from gets; the capture compares its gets with the
  server's ``cmd_get`` and reports the difference.
* The keys of one multi-get arrive together from one connection. A fetch joins the request
  of the fetch before it when both come from the same connection within
  :data:`SAME_REQUEST_US` microseconds with nothing else from that connection between
  (pipelined single gets look the same and are grouped too).
* A watcher that falls behind makes the server skip lines and say how many (``skipped=N``),
  and worker threads drop lines their log buffer cannot hold; both are counted as lost, from
  the stream and the server's ``log_watcher_skipped`` and ``log_worker_dropped``.

Keys are pseudonymised unless asked not to be: each becomes ``k`` + 16 hex digits of a keyed
BLAKE2b whose secret is random per capture and never written, so a capture can leave the
building without the keys, and equal keys stay equal within it. ``sample`` keeps a spatial
sample (every access of a key or none, by the keyed hash), as SHARDS-style simulation expects.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import cachelab._core as _core
from cachelab.artifacts import created_now
from cachelab.errors import InputError, ServerError, ServerUnreachable, UsageError
from cachelab.traces._files import atomic_file

__all__ = ["SCHEMA", "SCHEMA_VERSION", "SAME_REQUEST_US", "UNKNOWN_SIZE", "CaptureResult",
           "CaptureSpec", "capture", "capture_accesses", "memcached_bytes", "read_capture",
           "slab_classes"]

SCHEMA = "cachelab.capture"
SCHEMA_VERSION = 1
#: Fetches of one connection this close together (µs) belong to one request.
SAME_REQUEST_US = 5.0
#: The size given, as a flat trace, to a key the capture never saw a size of.
UNKNOWN_SIZE = 1
#: Rows buffered before a Parquet row group is written.
_ROW_GROUP = 65_536
_READ_CHUNK = 1 << 20
#: How long a read of the stream may block before the caps and the clock are checked.
_POLL_S = 0.2

_COLUMNS = pa.schema([
    ("time", pa.float64()),        # seconds since the capture started
    ("key", pa.string()),
    ("op", pa.dictionary(pa.int8(), pa.string())),
    ("status", pa.dictionary(pa.int8(), pa.string())),
    ("size", pa.uint32()),
    ("clsid", pa.uint16()),
    ("conn", pa.int32()),
    ("request", pa.int64()),
    ("ttl", pa.int64()),
    ("key_bytes", pa.uint16()),    # the key's length on the server (kept when pseudonymised)
])


@dataclass(frozen=True)
class CaptureSpec:
    """What to capture and when to stop."""

    server: str
    #: Seconds to capture.
    duration: float = 60.0
    #: Stop after this many accesses written.
    max_events: int = 50_000_000
    #: Stop after this many bytes of the server's stream.
    max_bytes: int = 8 * 2**30
    #: The share of keys kept (all accesses of a key or none), in (0, 1].
    sample: float = 1.0
    #: Write the keys as they are rather than pseudonymised.
    keep_keys: bool = False
    connect_timeout: float = 2.0

    def check(self) -> None:
        """UsageError naming the first bad field."""
        if not (math.isfinite(self.duration) and 0 < self.duration <= 7 * 86_400):
            raise UsageError(f"duration must be above 0 and at most a week, not {self.duration}")
        if not 0 < self.sample <= 1:
            raise UsageError(f"sample must be in (0, 1], not {self.sample}")
        if self.max_events < 1 or self.max_bytes < 1:
            raise UsageError("max_events and max_bytes must be at least 1")
        if not 0 < self.connect_timeout <= 60:
            raise UsageError(f"connect_timeout must be in (0, 60] s, not {self.connect_timeout}")
        if self.server.startswith("unix:"):
            return
        host, sep, port = self.server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise UsageError(f"server {self.server!r} is not HOST:PORT or unix:PATH")


@dataclass
class CaptureResult:
    """A finished capture: where it went and what it holds."""

    path: str
    spec: dict[str, Any]
    #: Why it ended: ``duration``, ``max_events``, ``max_bytes``, ``interrupted`` or
    #: ``server closed the stream``.
    ended: str
    elapsed_s: float
    #: Accesses written, by operation (``get``, ``set``, ``add``, ...).
    ops: dict[str, int]
    gets: int
    hits: int
    misses: int
    stores: int
    requests: int
    multi_get_requests: int
    keys: int
    #: Lines the server skipped because the watcher fell behind.
    lost: int
    #: Fetches dropped as the server's own lookup before a store.
    store_lookups: int
    #: Accesses left out by sampling.
    sampled_out: int
    #: The server's counters over the capture (deltas of ``stats``) and its facts.
    server: dict[str, Any]
    created: str = field(default_factory=created_now)

    @property
    def partial(self) -> bool:
        """Whether the capture holds less than asked: ended before its duration, or with
        lines lost."""
        return self.ended != "duration" or self.lost > 0

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA + "-summary", "schema_version": SCHEMA_VERSION, **asdict(self)}

    def checks(self) -> list[str]:
        """Where the capture and the server's own counters disagree, each as a sentence."""
        out = []
        d = self.server.get("deltas") or {}
        scale = self.spec.get("sample", 1.0)
        if scale == 1.0 and "cmd_get" in d:
            extra = self.gets - d["cmd_get"]
            if extra > 0:
                out.append(f"{extra:,} captured fetches more than the server's cmd_get: deletes, "
                           "touches and incr/decr are logged as fetches by this memcached")
            elif extra < 0:
                out.append(f"about {-extra:,} gets the server counted are not in the capture "
                           + ("(lost lines; " if self.lost else "(")
                           + "its counters are read just before and after the stream, a "
                           "slightly wider window)")
        dropped = int(d.get("log_worker_dropped", 0))
        skipped = self.lost - dropped
        if dropped:
            out.append(f"{dropped:,} lines lost in the server: its worker threads' log buffers "
                       "were full (its logger thread could not keep up)")
        if skipped > 0:
            out.append(f"{skipped:,} lines lost: the server skipped them because the capture "
                       "fell behind")
        return out

    def render(self) -> str:
        sampled = (f", a {self.spec['sample']:.3g} sample of keys"
                   if self.spec.get("sample", 1.0) < 1 else "")
        names = "keys as they are" if self.spec.get("keep_keys") else "keys pseudonymised"
        head = "PARTIAL: " if self.partial else ""
        lines = [
            f"{head}capture of {self.server.get('address')} (memcached "
            f"{self.server.get('version', '?')}): {self.elapsed_s:.1f} s, ended by "
            f"{self.ended}; {names}{sampled}",
            f"  written to {self.path}",
            f"  {self.gets:,} gets ({self.hits:,} hits, {self.misses:,} misses), "
            f"{self.stores:,} stores, {self.requests:,} requests "
            f"({self.multi_get_requests:,} multi-gets), {self.keys:,} distinct keys",
        ]
        d = self.server.get("deltas") or {}
        if d:
            lines.append(f"  the server counted: cmd_get {d.get('cmd_get', 0):,}, get_hits "
                         f"{d.get('get_hits', 0):,}, get_misses {d.get('get_misses', 0):,}, "
                         f"cmd_set {d.get('cmd_set', 0):,}")
        lines += [f"  note: {c}" for c in self.checks()]
        return "\n".join(lines)


class _Pseudonyms:
    """Keyed BLAKE2b of keys: a pseudonym and a uniform draw in [0, 1) for sampling."""

    def __init__(self, keep: bool) -> None:
        self._secret = secrets.token_bytes(32)
        self._keep = keep
        self._cache: dict[str, tuple[str, float]] = {}

    def __call__(self, key: str) -> tuple[str, float]:
        got = self._cache.get(key)
        if got is None:
            digest = hashlib.blake2b(key.encode("utf-8", "surrogateescape"),
                                     key=self._secret, digest_size=8).digest()
            word = int.from_bytes(digest, "big")
            got = (key if self._keep else f"k{word:016x}", word / 2.0**64)
            if len(self._cache) < 1_000_000:
                self._cache[key] = got
        return got


class _Writer:
    """Rows buffered in columns and written as Parquet row groups."""

    def __init__(self, path: Path, metadata: dict[bytes, bytes]) -> None:
        self._writer = pq.ParquetWriter(str(path), _COLUMNS.with_metadata(metadata),
                                        compression="zstd")
        self._cols: dict[str, list[Any]] = {name: [] for name in _COLUMNS.names}
        self.rows = 0

    def add(self, t: float, key: str, op: str, status: str, size: int, clsid: int, conn: int,
            request: int, ttl: int, key_bytes: int) -> None:
        c = self._cols
        c["time"].append(t)
        c["key"].append(key)
        c["op"].append(op)
        c["status"].append(status)
        c["size"].append(size)
        c["clsid"].append(clsid)
        c["conn"].append(conn)
        c["request"].append(request)
        c["ttl"].append(ttl)
        c["key_bytes"].append(key_bytes)
        self.rows += 1
        if len(c["time"]) >= _ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if not self._cols["time"]:
            return
        arrays = [pa.array(self._cols[f.name], type=f.type.value_type if
                           pa.types.is_dictionary(f.type) else f.type) for f in _COLUMNS]
        arrays = [a.dictionary_encode() if pa.types.is_dictionary(f.type) else a
                  for a, f in zip(arrays, _COLUMNS)]
        arrays = [a.cast(f.type) for a, f in zip(arrays, _COLUMNS)]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=_COLUMNS))
        for v in self._cols.values():
            v.clear()

    def close(self, metadata: dict[bytes, bytes]) -> None:
        self.flush()
        self._writer.add_key_value_metadata(metadata)
        self._writer.close()


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


def capture(spec: CaptureSpec, path: str | os.PathLike[str], *,
            on_progress: Callable[[float, int], None] | None = None,
            stop: Callable[[], bool] | None = None) -> CaptureResult:
    """Captures ``spec.server``'s key stream into the capture file ``path`` (written
    atomically: complete or not at all) and returns what it holds.

    Ends at ``spec.duration``, a cap, when ``stop()`` returns true, or on Ctrl-C (the accesses
    read so far are kept and the result says ``interrupted``). ``on_progress(elapsed_s,
    events)`` is called about five times a second. Raises a ServerError subclass when the
    server cannot be reached or does not stream (``watch`` refused).
    """
    spec.check()
    before, facts = _server_state(spec)
    names = _Pseudonyms(spec.keep_keys)
    sock, first_bytes = _open_watch(spec)
    meta = {b"cachelab": _json({"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
                                "pseudonymised": not spec.keep_keys, "sample": spec.sample,
                                "server": facts, "created": created_now()})}
    state = _State()
    ended = "duration"
    started = time.monotonic()
    try:
        with atomic_file(path) as tmp:
            writer = _Writer(tmp, meta)
            try:
                ended = _pump(sock, spec, writer, names, state, started, on_progress, stop,
                              first_bytes)
            except KeyboardInterrupt:
                ended = "interrupted"
            finally:
                sock.close()
                if ended != "max_events":
                    state.flush(writer, names, spec.sample)
            elapsed = time.monotonic() - started
            after, _ = _server_state(spec, quiet=True)
            deltas = {k: int(after[k]) - int(before[k]) for k in _DELTA_STATS
                      if k in after and k in before}
            lost = _lost(state.lost, deltas)
            summary = {"ended": ended, "elapsed_s": elapsed, "lost": lost,
                       "events": writer.rows, "deltas": deltas}
            writer.close({**meta, b"cachelab.summary": _json(summary)})
            requests, multi, keys = _tally(tmp)
    except OSError as e:
        raise InputError(f"{path}: cannot write the capture: {e}") from e
    counts = state.ops
    gets = counts.get("get", 0)
    return CaptureResult(
        path=str(path), spec=asdict(spec), ended=ended, elapsed_s=elapsed, ops=dict(counts),
        gets=gets, hits=state.hits, misses=gets - state.hits,
        stores=sum(n for op, n in counts.items() if op != "get"), requests=requests,
        multi_get_requests=multi, keys=keys, lost=lost,
        store_lookups=state.store_lookups, sampled_out=state.sampled_out,
        server={**facts, "deltas": deltas},
    )


_DELTA_STATS = ("cmd_get", "get_hits", "get_misses", "cmd_set", "delete_hits",
                "delete_misses", "cmd_touch", "evictions", "log_worker_dropped",
                "log_watcher_skipped", "log_watcher_sent")


def _tally(path: Path) -> tuple[int, int, int]:
    """From the written capture (so nothing grows with the keys while capturing): the
    requests, the multi-gets among them (requests of two gets or more) and distinct keys."""
    table = pq.read_table(str(path), columns=["key", "op", "request"])
    if table.num_rows == 0:
        return 0, 0, 0
    gets = table.filter(pc.equal(table["op"].cast(pa.string()), "get"))
    per_request = pc.value_counts(gets["request"]).field("counts")
    multi = int(pc.sum(pc.greater(per_request, 1)).as_py() or 0)
    return (int(pc.count_distinct(table["request"]).as_py()), multi,
            int(pc.count_distinct(table["key"]).as_py()))


def _lost(skipped_lines: int, deltas: dict[str, int]) -> int:
    """Log lines lost over the capture: those the server skipped for this watcher (its
    ``skipped=N`` lines, or its ``log_watcher_skipped`` counter, which counts every watcher's,
    whichever is larger) plus those its worker threads dropped before any watcher saw them
    (``log_worker_dropped``)."""
    return (max(skipped_lines, deltas.get("log_watcher_skipped", 0))
            + deltas.get("log_worker_dropped", 0))


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True).encode()


def _server_state(spec: CaptureSpec, quiet: bool = False) -> tuple[dict[str, str], dict[str, Any]]:
    """The server's ``stats`` and the facts a capture records (address, version, memory)."""
    t = spec.connect_timeout
    try:
        with _core.Client(spec.server, connect_timeout=t, timeout=t) as c:
            stats = c.stats()
            settings = c.stats("settings")
    except ServerError:
        if quiet:
            return {}, {}
        raise
    facts = {"address": spec.server, "version": stats.get("version"),
             "limit_maxbytes": int(stats.get("limit_maxbytes", 0)),
             "item_size_max": int(settings.get("item_size_max", 0) or 0),
             "growth_factor": float(settings.get("growth_factor", 1.25) or 1.25),
             "chunk_size": int(settings.get("chunk_size", 48) or 48),
             "slab_chunk_max": int(settings.get("slab_chunk_max", 0) or 0),
             "cas_enabled": settings.get("cas_enabled", "yes") == "yes",
             "threads": int(stats.get("threads", 0)),
             "curr_items": int(stats.get("curr_items", 0)),
             "bytes": int(stats.get("bytes", 0))}
    return stats, facts


def _open_watch(spec: CaptureSpec) -> tuple[socket.socket, bytes]:
    """A connection that has sent ``watch fetchers mutations`` and been told OK, and the
    stream's bytes that came with the OK (a busy server starts streaming at once)."""
    t = spec.connect_timeout
    try:
        if spec.server.startswith("unix:"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(t)
            sock.connect(spec.server[5:])
        else:
            host, _, port = spec.server.rpartition(":")
            sock = socket.create_connection((host.strip("[]"), int(port)), timeout=t)
    except OSError as e:
        raise ServerUnreachable(f"{spec.server}: cannot connect: {e}") from e
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
        raise ServerError(f"{spec.server}: no reply to 'watch': {e}") from e
    first, _, rest = reply.partition(b"\r\n")
    if first != b"OK":
        sock.close()
        said = first[:80].decode("ascii", "replace").strip() or "nothing"
        raise ServerError(f"{spec.server}: the server refused 'watch fetchers mutations' "
                          f"(it answered {said!r}); capturing needs memcached 1.6 or later")
    sock.settimeout(_POLL_S)
    return sock, rest


def _timestamp(text: str) -> float:
    """``ts=SECONDS.MICROSECONDS`` as memcached prints it: the microseconds without leading
    zeros (``1795735358.29784`` is .029784 s, not .29784 s)."""
    sec, _, usec = text.partition(".")
    return int(sec) + int(usec or 0) * 1e-6


def _key(logged: str) -> str:
    """A key as the client sent it: memcached's log URI-encodes keys (``a%25b`` is
    ``a%b``)."""
    return unquote(logged, errors="surrogateescape") if "%" in logged else logged


def _key_bytes(key: str) -> int:
    return min(len(key.encode("utf-8", "surrogateescape")), 65_535)


class _State:
    """What the stream has told so far, and each connection's fetch not yet written (a
    store's own lookup is recognised by the store that follows it)."""

    def __init__(self) -> None:
        self.ops: dict[str, int] = {}
        self.hits = 0
        self.lost = 0
        self.store_lookups = 0
        self.sampled_out = 0
        self.t0: float | None = None
        #: The key of a store just refused as too large (its lookup follows it).
        self.too_large: str | None = None
        #: conn -> the fetch held back: (time, key, status, size, clsid)
        self.held: dict[int, tuple[float, str, str, int, int]] = {}
        #: conn -> (time of its last written fetch, its request id, keys in that request)
        self.last_get: dict[int, tuple[float, int, int]] = {}
        self.next_request = 0

    def flush(self, writer: _Writer, names: _Pseudonyms, sample: float) -> None:
        for conn in list(self.held):
            self._emit_get(writer, names, sample, conn, self.held.pop(conn))

    def _emit_get(self, writer: _Writer, names: _Pseudonyms, sample: float, conn: int,
                  held: tuple[float, str, str, int, int]) -> None:
        t, key, status, size, clsid = held
        last = self.last_get.get(conn)
        if last is not None and 0 <= (t - last[0]) * 1e6 <= SAME_REQUEST_US:
            request, n = last[1], last[2] + 1
        else:
            request, n = self.next_request, 1
            self.next_request += 1
        self.last_get[conn] = (t, request, n)
        name, draw = names(key)
        if draw >= sample:
            self.sampled_out += 1
            return
        self.ops["get"] = self.ops.get("get", 0) + 1
        self.hits += status == "found"
        writer.add(t, name, "get", status, size, clsid, conn, request, -1, _key_bytes(key))

    def line(self, line: str, writer: _Writer, names: _Pseudonyms, sample: float) -> None:
        if line.startswith("skipped=") or " skipped=" in line:
            for part in line.split():
                if part.startswith("skipped="):
                    self.lost += int(part[8:] or 0)
            return
        f = _fields(line)
        if f is None:
            return
        kind = f.get("type")
        try:
            ts = _timestamp(f["ts"])
            conn = int(f.get("cfd", -1))
            size = int(f.get("size", 0))
            clsid = int(f.get("clsid", 0))
        except (KeyError, ValueError):
            return
        if self.t0 is None:
            self.t0 = ts
        t = ts - self.t0
        key = _key(f["key"])
        held = self.held.pop(conn, None)
        if kind == "item_get":
            if held is not None:
                self._emit_get(writer, names, sample, conn, held)
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
                self._emit_get(writer, names, sample, conn, held)
            return
        if held is not None:
            if held[1] == key:
                self.store_lookups += 1  # the server's lookup of the item it replaces
            else:
                self._emit_get(writer, names, sample, conn, held)
        self.too_large = key if f.get("status") == "too_large" else None
        self.last_get.pop(conn, None)
        name, draw = names(key)
        if draw >= sample:
            self.sampled_out += 1
            return
        op = f.get("cmd", "set")
        self.ops[op] = self.ops.get(op, 0) + 1
        request = self.next_request
        self.next_request += 1
        try:
            ttl = int(f.get("ttl", -1))
        except ValueError:
            ttl = -1
        writer.add(t, name, op, f.get("status", ""), size, clsid, conn, request, ttl,
                   _key_bytes(key))


def _pump(sock: socket.socket, spec: CaptureSpec, writer: _Writer, names: _Pseudonyms,
          state: _State, started: float, on_progress: Callable[[float, int], None] | None,
          stop: Callable[[], bool] | None, rest: bytes = b"") -> str:
    """Reads the stream until the time is up, a cap is reached or it ends; why it ended.
    ``rest``: stream bytes already read (with the watch's OK)."""
    deadline = started + spec.duration
    received = len(rest)
    next_report = started
    while True:
        now = time.monotonic()
        if now >= deadline:
            return "duration"
        if stop is not None and stop():
            return "interrupted"
        if on_progress is not None and now >= next_report:
            on_progress(now - started, writer.rows)
            next_report = now + 0.2
        try:
            chunk = sock.recv(_READ_CHUNK)
        except TimeoutError:
            continue
        except OSError as e:
            raise ServerError(f"{spec.server}: the stream failed: {e}") from e
        if not chunk:
            return "server closed the stream"
        received += len(chunk)
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for raw in lines:
            state.line(raw.decode("utf-8", "surrogateescape").rstrip("\r"), writer, names,
                       spec.sample)
            if writer.rows >= spec.max_events:
                return "max_events"
        if received >= spec.max_bytes:
            return "max_bytes"


def read_capture(path: str | os.PathLike[str]) -> tuple[pa.Table, dict[str, Any]]:
    """A capture file's rows, in time order, and its metadata (``cachelab`` facts and
    ``summary``). The file holds them in the order they were written: a fetch is written when
    its connection's next line shows it was no store's lookup, and the server interleaves its
    worker threads' lines in chunks."""
    try:
        table = pq.read_table(str(path))
        raw = {**(table.schema.metadata or {}), **(pq.read_metadata(str(path)).metadata or {})}
    except (OSError, pa.ArrowInvalid) as e:
        raise InputError(f"{path}: not a readable capture file: {e}") from e
    if b"cachelab" not in raw:
        raise InputError(f"{path}: not a cachelab capture (no cachelab metadata)")
    try:
        meta = json.loads(raw[b"cachelab"])
        summary = json.loads(raw.get(b"cachelab.summary", b"{}"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: the capture's metadata is not readable JSON: {e}") from None
    if not isinstance(meta, dict):
        raise InputError(f"{path}: the capture's metadata is not an object")
    if meta.get("schema") != SCHEMA:
        raise InputError(f"{path}: schema {meta.get('schema')!r}, not {SCHEMA}")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise InputError(f"{path}: {SCHEMA} version {meta.get('schema_version')}; this "
                         f"cachelab reads version {SCHEMA_VERSION}")
    meta["summary"] = summary
    order = pc.sort_indices(table, sort_keys=[("time", "ascending")])
    return table.take(order), meta


def slab_classes(server: dict[str, Any]) -> np.ndarray:
    """The chunk sizes of memcached's slab classes, from its settings as a capture records
    them (``chunk_size``, ``growth_factor``, ``slab_chunk_max``), as ``slabs_init`` computes
    them: 48 bytes of item header plus ``chunk_size``, each class the last times the factor,
    aligned to 8 bytes, and a last class of ``slab_chunk_max``."""
    factor = float(server.get("growth_factor") or 1.25)
    chunk_max = int(server.get("slab_chunk_max") or 512 * 1024)
    size = _ITEM_HEADER + int(server.get("chunk_size") or 48)
    out = []
    while size < chunk_max / factor and len(out) < 62:
        size += (-size) % 8
        out.append(size)
        size = int(size * factor)
    out.append(chunk_max)
    return np.asarray(out, dtype=np.int64)


def memcached_bytes(value: np.ndarray, key_bytes: np.ndarray,
                    server: dict[str, Any]) -> np.ndarray:
    """What items of ``value`` bytes under keys of ``key_bytes`` take in memcached's memory:
    the item (header, CAS if enabled, key, its terminator, value and its CRLF) rounded up to
    its slab class's chunk, and an item larger than the largest chunk to whole chunks."""
    cas = 8 if server.get("cas_enabled", True) else 0
    total = _ITEM_HEADER + cas + key_bytes.astype(np.int64) + 1 + value.astype(np.int64) + 2
    classes = slab_classes(server)
    at = np.searchsorted(classes, total)
    largest = classes[-1]
    return np.where(at < len(classes), classes[np.minimum(at, len(classes) - 1)],
                    -(-total // largest) * largest)


_ITEM_HEADER = 48  # sizeof(item) on 64-bit memcached 1.6


def capture_accesses(path: str | os.PathLike[str], accounting: str = "value", *,
                     read: tuple[pa.Table, dict[str, Any]] | None = None,
                     ) -> tuple[Any, Any, Any]:
    """The gets of a capture as a flat trace's columns (numpy arrays): key ids (numbered by
    first access, as the flat readers number keys), sizes, and whole-second times.

    ``accounting``: ``value`` (sizes are value bytes, as the stream gives them) or
    ``memcached`` (what each item takes in the server's memory: :func:`memcached_bytes`,
    from the slab settings the capture recorded), so capacities compare with ``-m``.

    A miss carries no size in the stream; it takes the size its key has next in the capture
    (the value the client then stored), else the size it had last. A key that never shows a
    size (only missed, never stored) counts as :data:`UNKNOWN_SIZE` byte: the simulators skip
    requests of size 0, and these are requests — exact in objects, next to nothing in bytes.
    ``read``: what :func:`read_capture` already returned for ``path``, not to read it twice.
    """
    if accounting not in ("value", "memcached"):
        raise UsageError(f"accounting {accounting!r}: value or memcached")
    table, meta = read if read is not None else read_capture(path)
    n = table.num_rows
    keys = table["key"].to_numpy(zero_copy_only=False)
    rows = np.arange(n)
    uniq, inv = np.unique(keys, return_inverse=True)
    first = np.full(len(uniq), n, dtype=np.int64)
    np.minimum.at(first, inv, rows)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    ids = rank[inv]
    sizes = table["size"].to_numpy().astype(np.int64)
    # Rows grouped by key, in time order within a key; fill each unknown size from the next
    # known one of its key, else the previous known one.
    order = np.lexsort((rows, ids))
    s, g = sizes[order], ids[order]
    known = s > 0
    nxt = np.minimum.accumulate(np.where(known, rows, n)[::-1])[::-1]
    prv = np.maximum.accumulate(np.where(known, rows, -1))
    take_next = (nxt < n) & (g[np.minimum(nxt, n - 1)] == g)
    take_prev = (prv >= 0) & (g[np.maximum(prv, 0)] == g)
    filled = np.where(known, s, np.where(take_next, s[np.minimum(nxt, n - 1)],
                                         np.where(take_prev, s[np.maximum(prv, 0)],
                                                  UNKNOWN_SIZE)))
    out_sizes = np.empty(n, dtype=np.int64)
    out_sizes[order] = filled
    unknown = np.empty(n, dtype=bool)
    unknown[order] = ~(known | take_next | take_prev)
    if accounting == "memcached":
        # A key never seen with a size stays UNKNOWN_SIZE: a chunk would make its misses push
        # real items out of the simulated cache, which memcached never stores.
        sized = memcached_bytes(out_sizes, table["key_bytes"].to_numpy(), meta["server"])
        out_sizes = np.where(unknown, UNKNOWN_SIZE, sized)
    is_get = table["op"].cast(pa.string()).to_numpy(zero_copy_only=False) == "get"
    times = table["time"].to_numpy()
    return (ids[is_get].astype(np.uint64), out_sizes[is_get].astype(np.uint32),
            np.floor(np.maximum(times[is_get], 0.0)).astype(np.uint32))
