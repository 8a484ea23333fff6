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

import json
import math
import os
import queue
import secrets
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import cachelab._core as _core
from cachelab.artifacts import atomic_file, created_now
from cachelab.errors import InputError, Interrupted, ServerError
from cachelab.servers import read_stats, restarted
from cachelab.traces.capture_lines import SAME_REQUEST_US, PyCaptureReader
from cachelab.traces.capture_read import (
    SCHEMA,
    SCHEMA_VERSION,
    UNKNOWN_SIZE,
    capture_accesses,
    memcached_bytes,
    read_capture,
    slab_classes,
)
from cachelab.traces.capture_spec import READERS, CaptureSpec

__all__ = ["CONN_STRIDE", "READERS", "SCHEMA", "SCHEMA_VERSION", "SAME_REQUEST_US",
           "UNKNOWN_SIZE", "CaptureResult", "CaptureSpec", "batch_table", "capture",
           "capture_accesses", "memcached_bytes", "read_capture", "slab_classes"]

#: Rows buffered before a Parquet row group is written.
_ROW_GROUP = 65_536
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
    ("member", pa.dictionary(pa.int16(), pa.string())),  # the server (a pool's member)
])


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
    #: Log lines lost: skipped by the server because the watcher fell behind, or dropped by
    #: its worker threads before any watcher saw them (``lost_by`` says which).
    lost: int
    #: Fetches dropped as the server's own lookup before a store.
    store_lookups: int
    #: Accesses left out by sampling.
    sampled_out: int
    #: The server's counters over the capture (deltas of ``stats``) and its facts (a pool's
    #: summed over its members).
    server: dict[str, Any]
    #: A pool's members: each one's address, counts (as the result's), lost lines and
    #: ``stats`` deltas; empty for one server.
    members: list[dict[str, Any]] = field(default_factory=list)
    created: str = field(default_factory=created_now)
    #: The lines lost by cause: ``skipped`` (the server's ``skipped=N`` notices to this
    #: watcher, or its ``log_watcher_skipped``, the larger) and ``worker_dropped`` (its
    #: ``log_worker_dropped``: its worker threads' log buffers were full).
    lost_by: dict[str, int] = field(default_factory=dict)
    #: The most stream bytes the Rust reader held read and not parsed yet (0: the Python one).
    buffer_peak_bytes: int = 0
    #: Why the capture ended early because of the server (its stream closed or failed: the
    #: server stopped, restarted or dropped the watcher), naming it; None otherwise.
    aborted: str | None = None

    @property
    def partial(self) -> bool:
        """Whether the capture holds less than asked: ended before its duration, or with
        lines lost."""
        return self.ended != "duration" or self.lost > 0

    def problems(self) -> dict[str, int]:
        """What ``--fail-on problems`` fails on: lines lost (said on stderr either way)."""
        return {"lines_lost": self.lost} if self.lost else {}

    @property
    def warnings(self) -> list[str]:
        """A capture stopped by its memory cap says so; one that recorded nothing says so (the
        server may be idle)."""
        if self.ended == "max_buffer":
            cap = self.spec.get("max_buffer", 0) / 2**20
            return [f"the capture stopped after {self.elapsed_s:.1f} s: it fell {cap:,.0f} MiB "
                    "behind the server's stream (its cap, max_buffer) and stopped rather than "
                    "lose lines; what it parsed is kept"]
        if self.requests or self.ended == "interrupted" or self.aborted:
            return []
        d = self.server.get("deltas") or {}
        return [f"captured 0 requests in {self.elapsed_s:.1f} s: was the server idle?"
                + (f" (the server counted {d.get('cmd_get', 0):,} gets and "
                   f"{d.get('cmd_set', 0):,} sets meanwhile)" if d else "")]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA + "-summary", "schema_version": SCHEMA_VERSION, **asdict(self),
                "partial": self.partial}

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
                       "were full (its logger thread could not keep up; memcached -o "
                       "worker_logbuf_size=KB, default 64, makes them larger)")
        if skipped > 0:
            out.append(f"{skipped:,} lines lost: the server skipped them because the capture "
                       "fell behind")
        return out

    def _what(self) -> str:
        if self.members:
            return f"a pool of {len(self.members)} ({self.server.get('address')})"
        return str(self.server.get("address"))

    def render(self) -> str:
        sampled = (f", a {self.spec['sample']:.3g} sample of keys"
                   if self.spec.get("sample", 1.0) < 1 else "")
        names = "keys as they are" if self.spec.get("keep_keys") else "keys pseudonymised"
        head = "PARTIAL: " if self.partial else ""
        if self.lost:   # the worst first: lines lost, by cause
            by = self.lost_by or {}
            causes = [f"{n:,} {why}" for n, why in (
                (by.get("worker_dropped", 0), "dropped by the server's worker threads"),
                (by.get("skipped", 0), "skipped by the server for this capture")) if n]
            head = (f"PARTIAL: {self.lost:,} lines lost"
                    + (f" ({', '.join(causes)})" if causes else "") + "; ")
        ended = self.aborted or self.ended
        lines = [
            f"{head}capture of {self._what()} (memcached "
            f"{self.server.get('version', '?')}): {self.elapsed_s:.1f} s, ended by "
            f"{ended}; {names}{sampled}",
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
        for m in self.members:
            md = m["deltas"]
            lines.append(f"  member {m['address']}: {m['gets']:,} gets ({m['hits']:,} hits), "
                         f"{m['stores']:,} stores, {m['lost']:,} lines lost; it counted "
                         f"cmd_get {md.get('cmd_get', 0):,}, get_hits {md.get('get_hits', 0):,}"
                         f", cmd_set {md.get('cmd_set', 0):,}")
        lines += [f"  note: {c}" for c in self.checks()]
        return "\n".join(lines)


class _Writer:
    """Rows (tables of the value columns) buffered and written as Parquet row groups of
    :data:`_ROW_GROUP` rows, whatever the batches' sizes, so both readers write the same file
    from the same stream."""

    def __init__(self, path: Path, metadata: dict[bytes, bytes],
                 columns: pa.Schema | None = None) -> None:
        #: The file's columns: a capture's, or a MONITOR capture's (``db`` where a capture
        #: has ``clsid``).
        self.columns = _COLUMNS if columns is None else columns
        self._writer = pq.ParquetWriter(str(path), self.columns.with_metadata(metadata),
                                        compression="zstd")
        self._pending: list[pa.Table] = []
        self._waiting = 0
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self._pending.append(table)
        self._waiting += table.num_rows
        self.rows += table.num_rows
        if self._waiting >= _ROW_GROUP:
            self._write(final=False)

    def _write(self, final: bool) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending).combine_chunks()
        at = 0
        while table.num_rows - at >= _ROW_GROUP or (final and at < table.num_rows):
            part = table.slice(at, _ROW_GROUP).combine_chunks()
            at += part.num_rows
            # By position: a MONITOR capture's db is the rows' clsid column.
            arrays = [part.column(i).combine_chunks() for i in range(len(self.columns))]
            arrays = [a.dictionary_encode().cast(f.type) if pa.types.is_dictionary(f.type)
                      else a.cast(f.type) for a, f in zip(arrays, self.columns)]
            self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.columns))
        rest = table.slice(at)
        self._pending = [rest] if rest.num_rows else []
        self._waiting = rest.num_rows

    def close(self, metadata: dict[bytes, bytes]) -> None:
        self._write(final=True)
        self._writer.add_key_value_metadata(metadata)
        self._writer.close()


def _new_reader(kind: str, secret: bytes, keep_keys: bool, sample: float,
                t0: float | None) -> Any:
    if kind == "python":
        return PyCaptureReader(secret, keep_keys, sample, t0)
    return _core.CaptureReader(secret, keep_keys, sample, t0)


def batch_table(batch: dict[str, Any], member: str) -> pa.Table:
    """A reader's ``take()`` as a table of the capture's columns (op, status and member
    plain strings; the writer dictionary-encodes them per row group)."""
    n = batch["rows"]
    if "lists" in batch:
        cols = {f.name: pa.array(batch["lists"][f.name], type=_VALUE_TYPES[f.name])
                for f in _COLUMNS if f.name != "member"}
    else:
        words = pa.array(batch["words"], pa.string())
        cols = {"time": pa.array(np.frombuffer(batch["time"], "<f8")),
                "key": pa.StringArray.from_buffers(n, pa.py_buffer(batch["offsets"]),
                                                   pa.py_buffer(batch["keys"]))}
        for name in ("op", "status"):
            cols[name] = words.take(pa.array(np.frombuffer(batch[name], "<u2")))
        for name, dtype in (("size", "<u4"), ("clsid", "<u2"), ("conn", "<i4"),
                            ("request", "<i8"), ("ttl", "<i8"), ("key_bytes", "<u2")):
            cols[name] = pa.array(np.frombuffer(batch[name], dtype))
    cols["member"] = pa.array([member] * n, pa.string())
    return pa.table([cols[f.name] for f in _COLUMNS], names=_COLUMNS.names)


_VALUE_TYPES = {f.name: f.type.value_type if pa.types.is_dictionary(f.type) else f.type
                for f in _COLUMNS}
#: Connection ids of member i are its ``cfd`` + i × this (unique across a pool's members).
CONN_STRIDE = 1 << 24


class _Merge:
    """Members' batches into the writer. One member: as they come. A pool: connection and
    request ids made unique per member, and rows written in time order: a row is written once
    every member still streaming has shown a later time (a member whose last read brought
    nothing does not hold the others back; one not heard from yet does), or when more than
    :data:`_MERGE_ROWS` wait. Times of a pool are the members' own clocks less the earliest
    time seen."""

    def __init__(self, writer: _Writer, members: list[str], max_events: int) -> None:
        self.writer = writer
        self.n = len(members)
        self.max_events = max_events
        self.pending: list[pa.Table] = []
        self.waiting = 0
        # Per member: the latest time it brought; -inf until it has been heard from (it holds
        # the others back, so the first rows written, and t0, are the earliest of all); None
        # once a read brought nothing (idle: it holds nothing back).
        self.latest: list[float | None] = [-math.inf] * self.n
        self.t0: float | None = None

    def add(self, i: int, table: pa.Table) -> None:
        if self.n == 1:
            self.writer.add(table)
            return
        if table.num_rows == 0:
            self.latest[i] = None        # idle: no longer holds the others back
            self._emit(all_rows=all(t is None for t in self.latest))
            return
        table = table.set_column(
            _COLUMNS.get_field_index("conn"), "conn",
            pc.add(table["conn"], pa.scalar(i * CONN_STRIDE, pa.int32())))
        table = table.set_column(
            _COLUMNS.get_field_index("request"), "request",
            pc.add(pc.multiply(table["request"], self.n), i))
        self.pending.append(table)
        self.waiting += table.num_rows
        self.latest[i] = float(pc.max(table["time"]).as_py())
        self._emit(all_rows=self.waiting > _MERGE_ROWS)

    def _emit(self, all_rows: bool) -> None:
        if not self.pending:
            return
        table = pa.concat_tables(self.pending)
        if self.t0 is None:
            self.t0 = float(pc.min(table["time"]).as_py())
        seen = [t for t in self.latest if t is not None]
        if not all_rows and seen:
            mark = min(seen)
            now = table.filter(pc.less_equal(table["time"], mark))
            later = table.filter(pc.greater(table["time"], mark))
        else:
            now, later = table, table.slice(0, 0)
        self.pending = [later] if later.num_rows else []
        self.waiting = later.num_rows
        if now.num_rows == 0:
            return
        now = now.take(pc.sort_indices(now, sort_keys=[("time", "ascending")]))
        now = now.set_column(0, "time", pc.subtract(now["time"], self.t0))
        room = self.max_events - self.writer.rows
        self.writer.add(now.slice(0, max(room, 0)))

    def finish(self) -> None:
        if self.n > 1:
            self._emit(all_rows=True)


#: Rows a pool's merge holds back at most before writing them in time order anyway.
_MERGE_ROWS = 8 * _ROW_GROUP


def _member_loop(i: int, reader: Any, spec: CaptureSpec, out: queue.Queue[Any],
                 halt: threading.Event) -> None:
    """One member's reader, in its own thread (the Rust reader releases the GIL while it
    reads): batches, then why it ended, onto ``out``."""
    taken = 0
    try:
        while not halt.is_set():
            status = reader.read(_POLL_S, _ROW_GROUP, spec.max_events - taken, spec.max_bytes)
            rows = len(reader)
            taken += rows
            out.put((i, reader.take() if rows or status == "more" else None))
            if status != "more":
                out.put((i, status))
                return
    except BaseException as e:  # noqa: BLE001 - handed to the main thread, raised there
        out.put((i, e))


_ENDED = {"closed": "server closed the stream", "max_events": "max_events",
          "max_bytes": "max_bytes", "max_buffer": "max_buffer"}


class _Signals:
    """Ctrl-C (SIGINT) and SIGTERM noted instead of raised while a capture runs, so that no
    moment of it — the watch just opened, the file half written, the server's counters being
    read — loses what was captured: the loop stops at its next poll and the file is finished
    and marked. Only the main thread receives signals; elsewhere this notes nothing."""

    def __init__(self) -> None:
        self.count = 0
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for name in ("SIGINT", "SIGTERM"):
                number = getattr(signal, name, None)
                if number is not None and signal.getsignal(number) is not None:
                    self._old[number] = signal.signal(number, self._note)
        return self

    def _note(self, signum: int, frame: object) -> None:
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._old.items():
            signal.signal(number, handler)


def capture(spec: CaptureSpec, path: str | os.PathLike[str], *,
            on_progress: Callable[[float, int], None] | None = None,
            stop: Callable[[], bool] | None = None) -> CaptureResult:
    """Captures the key stream of ``spec``'s server (or every member of its pool, merged by
    time) into the capture file ``path`` (written atomically: complete or not at all) and
    returns what it holds.

    Ends at ``spec.duration``, a cap, when ``stop()`` returns true, or on Ctrl-C or SIGTERM
    at any moment once the servers answered (the accesses read so far are kept, the file is
    finished and the result says ``interrupted``; a second signal while it is finished skips
    the server counters not read yet). ``on_progress(elapsed_s, events)`` is called about
    five times a second. Raises a ServerError subclass when a server cannot be reached or
    does not stream (``watch`` refused), and Interrupted when stopped before the servers
    answered (nothing captured). A server whose stream closes or fails mid-capture (it
    stopped or restarted) ends it too: what was read is kept, ``ended`` is ``server closed
    the stream`` and ``aborted`` names the server.
    """
    spec.check()
    members = list(spec.members)
    try:
        states = [_server_state(m, spec.connect_timeout) for m in members]
    except KeyboardInterrupt:
        raise Interrupted("interrupted before the capture began: nothing captured") from None
    secret = secrets.token_bytes(32)   # one for every member: a key's pseudonym is the same
    pool = len(members) > 1
    facts = _pool_facts([f for _, f in states]) if pool else states[0][1]
    meta = {b"cachelab": _json({"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
                                "pseudonymised": not spec.keep_keys, "sample": spec.sample,
                                "server": facts, "members": [f for _, f in states],
                                "reader": spec.reader, "created": created_now()})}
    readers: list[Any] = []
    try:
        with _Signals() as signals, atomic_file(path) as tmp:
            readers += [_new_reader(spec.reader, secret, spec.keep_keys, spec.sample,
                                    0.0 if pool else None) for _ in members]
            for reader, m in zip(readers, members):
                if spec.reader == "python":
                    reader.watch(m, spec.connect_timeout)
                else:
                    reader.watch(m, spec.connect_timeout, spec.max_buffer, spec.wake)
            _await_logger(readers, lambda: signals.count > 0 or (stop is not None and stop()))
            started = time.monotonic()
            writer = _Writer(tmp, meta)
            merge = _Merge(writer, members, spec.max_events)
            ended, aborted = _run(readers, members, spec, merge, started, on_progress,
                                  lambda: signals.count > 0 or (stop is not None and stop()))
            if signals.count:
                ended = "interrupted"
            if ended != "max_events":
                for i, reader in enumerate(readers):
                    _parse_the_rest(i, reader, members[i], merge, spec)
                    reader.flush()
                    merge.add(i, batch_table(reader.take(), members[i]))
            merge.finish()
            elapsed = time.monotonic() - started
            per_member = []
            seen = signals.count
            for (before, _), reader, m in zip(states, readers, members):
                # Another signal while finishing: the counters not read yet are left out.
                after = {} if signals.count > seen else \
                    _server_state(m, spec.connect_timeout, quiet=True)[0]
                deltas = stats_deltas(before, after)
                per_member.append({"address": m, "deltas": deltas,
                                   "lost": _lost(reader.lost, deltas),
                                   "skipped_lines": reader.lost,
                                   "buffer_peak_bytes": getattr(reader, "peak_buffered", 0),
                                   "store_lookups": reader.store_lookups,
                                   "sampled_out": reader.sampled_out})
            if signals.count:
                ended = "interrupted"
            deltas = {k: sum(p["deltas"].get(k, 0) for p in per_member)
                      for k in _DELTA_STATS if any(k in p["deltas"] for p in per_member)}
            lost = sum(p["lost"] for p in per_member)
            summary = {"ended": ended, "elapsed_s": elapsed, "lost": lost,
                       "events": writer.rows, "deltas": deltas,
                       "members": [{"address": p["address"], "lost": p["lost"],
                                    "deltas": p["deltas"]} for p in per_member]}
            writer.close({**meta, b"cachelab.summary": _json(summary)})
            tally = _tally(tmp)
    except OSError as e:
        raise InputError(f"{path}: cannot write the capture: {e}") from e
    finally:
        for reader in readers:
            reader.close()
    for p in per_member:
        p.update(tally["members"].get(p["address"], _EMPTY_COUNTS))
    t = tally["total"]
    return CaptureResult(
        path=str(path), spec=asdict(spec), ended=ended, elapsed_s=elapsed, ops=t["ops"],
        gets=t["gets"], hits=t["hits"], misses=t["misses"], stores=t["stores"],
        requests=tally["requests"], multi_get_requests=tally["multi"], keys=tally["keys"],
        lost=lost, lost_by=_lost_by(per_member),
        buffer_peak_bytes=max(p["buffer_peak_bytes"] for p in per_member),
        store_lookups=sum(p["store_lookups"] for p in per_member),
        sampled_out=sum(p["sampled_out"] for p in per_member),
        server={**facts, "deltas": deltas}, members=per_member if pool else [],
        aborted=aborted,
    )


def _parse_the_rest(i: int, reader: Any, member: str, merge: _Merge,
                    spec: CaptureSpec) -> None:
    """The stream a Rust reader drained before the capture ended, parsed (its socket is no
    longer read): a capture ends with every line the server sent until then."""
    if not hasattr(reader, "stop_reading"):
        return
    reader.stop_reading()
    for _ in range(100_000):      # bounded: each pass parses a chunk or ends
        room = spec.max_events - merge.writer.rows
        if room <= 0:
            return
        status = reader.read(0.0, _ROW_GROUP, room, spec.max_bytes)
        merge.add(i, batch_table(reader.take(), member))
        if status != "more" or not reader.buffered:
            return


#: How long a capture waits for the servers' logger threads to wake before its clock starts.
_WAKE_S = 3.0


def _await_logger(readers: list[Any], stop: Callable[[], bool]) -> None:
    """Waits (at most :data:`_WAKE_S`) until every server's logger thread is awake: one that
    slept up to a second while the server was quiet takes about as long again to answer at
    once, and until then a burst can overflow its worker threads' log buffers (the Rust
    reader's waker, docs/traces.md). What comes meanwhile is captured too."""
    until = time.monotonic() + _WAKE_S
    while (time.monotonic() < until and not stop()
           and not all(getattr(r, "awake", True) for r in readers)):
        time.sleep(0.01)


def _run(readers: list[Any], members: list[str], spec: CaptureSpec, merge: _Merge,
         started: float, on_progress: Callable[[float, int], None] | None,
         stop: Callable[[], bool] | None) -> tuple[str, str | None]:
    """Runs a reader thread per member until the time is up, a cap is reached, a stream ends
    or ``stop()``; why it ended, and when a server's stream closed or failed, which and how."""
    out: queue.Queue[Any] = queue.Queue()
    halt = threading.Event()
    threads = [threading.Thread(target=_member_loop, args=(i, r, spec, out, halt), daemon=True)
               for i, r in enumerate(readers)]
    deadline = started + spec.duration
    next_report = started
    ended = "duration"
    aborted: str | None = None
    try:
        # Started inside the try: a Ctrl-C while a thread starts still halts and joins the
        # ones running before the readers are closed (a reader in use cannot be closed).
        for t in threads:
            t.start()
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            if stop is not None and stop():
                ended = "interrupted"
                break
            if on_progress is not None and now >= next_report:
                on_progress(now - started, merge.writer.rows)
                next_report = now + 0.2
            try:
                i, item = out.get(timeout=0.05)
            except queue.Empty:
                continue
            if isinstance(item, ServerError):  # the stream failed: keep what was read
                ended = _ENDED["closed"]
                aborted = f"the server at {members[i]} failed mid-capture: {item}"
                break
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, str):
                ended = _ENDED[item]
                if item == "closed":
                    aborted = (f"the server at {members[i]} closed the stream mid-capture (it "
                               "stopped or restarted, or dropped the watcher)")
                break
            if item is not None:
                merge.add(i, batch_table(item, members[i]))
            if merge.writer.rows >= spec.max_events:
                ended = "max_events"
                break
    except KeyboardInterrupt:
        ended = "interrupted"
    finally:
        halt.set()
        for t in threads:
            if t.ident is not None:
                t.join(_POLL_S * 10)
    # What the readers read before they stopped is kept (not past a cap).
    while ended != "max_events":
        try:
            i, item = out.get_nowait()
        except queue.Empty:
            break
        if isinstance(item, dict):
            merge.add(i, batch_table(item, members[i]))
    return ended, aborted


_EMPTY_COUNTS = {"ops": {}, "gets": 0, "hits": 0, "misses": 0, "stores": 0}

_DELTA_STATS = ("cmd_get", "get_hits", "get_misses", "cmd_set", "delete_hits",
                "delete_misses", "cmd_touch", "evictions", "log_worker_dropped",
                "log_watcher_skipped", "log_watcher_sent")


def _tally(path: Path) -> dict[str, Any]:
    """From the written capture (so nothing grows with the keys while capturing): the
    requests, the multi-gets among them (requests of two gets or more), distinct keys, and
    the accesses by op, gets, hits and misses, in total and per member."""
    table = pq.read_table(str(path), columns=["key", "op", "status", "request", "member"])
    out: dict[str, Any] = {"requests": 0, "multi": 0, "keys": 0, "members": {},
                           "total": dict(_EMPTY_COUNTS)}
    if table.num_rows == 0:
        return out
    is_get = pc.equal(table["op"].cast(pa.string()), "get")
    gets = table.filter(is_get)
    per_request = pc.value_counts(gets["request"]).field("counts")
    out["multi"] = int(pc.sum(pc.greater(per_request, 1)).as_py() or 0)
    out["requests"] = int(pc.count_distinct(table["request"]).as_py())
    out["keys"] = int(pc.count_distinct(table["key"]).as_py())
    hit = pc.and_(is_get, pc.equal(table["status"].cast(pa.string()), "found"))
    counts = pa.table({"member": table["member"].cast(pa.string()),
                       "op": table["op"].cast(pa.string()), "hit": hit}) \
        .group_by(["member", "op"]).aggregate([("hit", "count"), ("hit", "sum")]).to_pylist()

    def counted(rows: list[dict[str, Any]]) -> dict[str, Any]:
        ops: dict[str, int] = {}
        for r in rows:
            ops[r["op"]] = ops.get(r["op"], 0) + r["hit_count"]
        gets, hits = ops.get("get", 0), sum(r["hit_sum"] for r in rows)
        return {"ops": ops, "gets": gets, "hits": hits, "misses": gets - hits,
                "stores": sum(n for op, n in ops.items() if op != "get")}

    out["total"] = counted(counts)
    for m in {r["member"] for r in counts}:
        out["members"][m] = counted([r for r in counts if r["member"] == m])
    return out


def _lost_by(per_member: list[dict[str, Any]]) -> dict[str, int]:
    """The lines lost, summed over the members, by cause (:attr:`CaptureResult.lost_by`)."""
    dropped = sum(p["deltas"].get("log_worker_dropped", 0) for p in per_member)
    return {"skipped": sum(p["lost"] for p in per_member) - dropped, "worker_dropped": dropped}


def _lost(skipped_lines: int, deltas: dict[str, int]) -> int:
    """Log lines lost over the capture: those the server skipped for this watcher (its
    ``skipped=N`` lines, or its ``log_watcher_skipped`` counter, which counts every watcher's,
    whichever is larger) plus those its worker threads dropped before any watcher saw them
    (``log_worker_dropped``)."""
    return (max(skipped_lines, deltas.get("log_watcher_skipped", 0))
            + deltas.get("log_worker_dropped", 0))


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True).encode()


def stats_deltas(before: dict[str, str], after: dict[str, str]) -> dict[str, int]:
    """The server's counters over the capture (``after`` − ``before``); none when the two
    replies come from different processes (:func:`cachelab.servers.restarted`: the server
    restarted mid-capture), whose counters must not be subtracted, or when ``after`` is
    missing (it did not answer)."""
    if restarted(before, after):
        return {}
    return {k: int(after[k]) - int(before[k]) for k in _DELTA_STATS
            if k in after and k in before}


def _server_state(address: str, timeout: float,
                  quiet: bool = False) -> tuple[dict[str, str], dict[str, Any]]:
    """A server's ``stats`` and the facts a capture records (address, version, memory, and
    its ``stats settings``)."""
    try:
        stats = read_stats(address, timeout=timeout)
        settings = read_stats(address, "settings", timeout=timeout)
    except ServerError:
        if quiet:
            return {}, {}
        raise
    facts = {"address": address, "version": stats.get("version"),
             "limit_maxbytes": int(stats.get("limit_maxbytes", 0)),
             "item_size_max": int(settings.get("item_size_max", 0) or 0),
             "growth_factor": float(settings.get("growth_factor", 1.25) or 1.25),
             "chunk_size": int(settings.get("chunk_size", 48) or 48),
             "slab_chunk_max": int(settings.get("slab_chunk_max", 0) or 0),
             "cas_enabled": settings.get("cas_enabled", "yes") == "yes",
             "threads": int(stats.get("threads", 0)),
             "curr_items": int(stats.get("curr_items", 0)),
             "bytes": int(stats.get("bytes", 0)),
             "settings": dict(settings)}
    return stats, facts


def _pool_facts(members: list[dict[str, Any]]) -> dict[str, Any]:
    """A pool's facts as one server's: memory, items and threads summed; version and slab
    settings the first member's (``slab_settings_differ`` says whether the others agree).
    Sizing treats the pool as one LRU of the total memory (docs/traces.md)."""
    first = members[0]
    slab = ("item_size_max", "growth_factor", "chunk_size", "slab_chunk_max", "cas_enabled")
    return {**{k: first[k] for k in ("version", *slab)},
            "address": ",".join(m["address"] for m in members), "pool": len(members),
            **{k: sum(m[k] for m in members)
               for k in ("limit_maxbytes", "threads", "curr_items", "bytes")},
            "slab_settings_differ": any(m[k] != first[k] for m in members for k in slab)}
