"""Capturing a live Redis (or Valkey) through ``MONITOR``: ``cachelab trace capture --server
redis://…`` (docs/resp.md, "trace capture").

A connection that sent ``MONITOR`` receives one line per command the server runs, from every
client::

    +1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"

:func:`capture_monitor` reads that stream for a bounded time into the same capture file as
memcached's capture (:mod:`cachelab.traces.capture`; the Rust reader's drain thread and its
caps, the same keyed BLAKE2b pseudonyms and sampling): one row per key of each command a
cache sees — GET, MGET (one request, a row per key), GETEX, GETDEL, SET (its value's length
as the size, ``EX``/``PX`` as the TTL), SETEX, PSETEX, SETNX, GETSET, MSET, APPEND, DEL,
UNLINK, EXISTS, TOUCH, INCR/DECR, EXPIRE, PERSIST, STRLEN — with the database in a ``db``
column where memcached's capture has its slab class. What ``MONITOR`` leaves out: whether a
read hit (the status is empty; the server's ``keyspace_hits``/``keyspace_misses`` over the
capture are recorded beside it) and a read's value size (a read takes its key's size from
the capture's writes, as a memcached miss does). Other commands (INFO, PING, AUTH, hashes,
lists, …) are counted by name, not written; so are another database's when the URL names
one. cachelab's own connections send only ``AUTH`` and ``INFO``, before and after the
stream, and the ``MONITOR`` connection itself is excluded by its address.

``MONITOR`` is dear: the server formats every command of every client for this connection
(:data:`COST` says what it was measured to cost). The server's CPU over the capture
(``used_cpu_sys`` + ``used_cpu_user``) is recorded and shown.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

import cachelab._core as _core
from cachelab.artifacts import atomic_file, created_now
from cachelab.errors import InputError, Interrupted, ServerError, UsageError
from cachelab.resp import RespLogin, read_info
from cachelab.tls import TlsOptions, core_tls, describe_tls, transport_of
from cachelab.traces.capture import (
    _COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    CaptureResult,
    _json,
    _Merge,
    _parse_the_rest,
    _run,
    _Signals,
    _tally,
    _Writer,
    batch_table,
)
from cachelab.traces.capture_read import READS
from cachelab.traces.capture_spec import CaptureSpec

__all__ = ["COMMANDS", "COST", "MonitorResult", "capture_monitor"]

#: The file's columns: the capture's, with ``db`` where memcached's has ``clsid``.
COLUMNS = pa.schema([pa.field("db", f.type) if f.name == "clsid" else f for f in _COLUMNS])

#: The commands written (their ``commandstats`` names), as the Rust reader's table
#: (crates/capture/src/monitor.rs).
COMMANDS = ("get", "mget", "getex", "getdel", "set", "setnx", "getset", "setex", "psetex",
            "mset", "msetnx", "append", "del", "unlink", "exists", "touch", "incr", "incrby",
            "incrbyfloat", "decr", "decrby", "expire", "pexpire", "expireat", "pexpireat",
            "persist", "strlen")

#: What ``MONITOR`` costs the server, as measured (benches/monitor_cost.py,
#: benches/runs/2026-11-29-monitor-cost.md): the one line every Redis capture states.
COST = ("MONITOR copies every command to this client: measured +26 % server CPU per command "
        "at 5,000/s and the load's p50 x1.7 (docs/resp.md)")

#: INFO's counters kept as deltas over a capture.
_DELTAS = ("total_commands_processed", "keyspace_hits", "keyspace_misses", "expired_keys",
           "evicted_keys")


def _cpu(info: dict[str, str]) -> float | None:
    try:
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    except (KeyError, ValueError):
        return None


def _calls(info: dict[str, str]) -> dict[str, int]:
    """``commandstats``' calls of each command written (``cmdstat_get:calls=2,…``)."""
    out = {}
    for name in COMMANDS:
        value = info.get(f"cmdstat_{name}", "")
        for part in value.split(","):
            k, _, v = part.partition("=")
            if k == "calls" and v.isdigit():
                out[name] = int(v)
    return out


def _state(address: str, login: RespLogin, timeout: float,
           tls: dict[str, Any] | None) -> dict[str, str]:
    """INFO's every section (``everything``: commandstats too), flat."""
    return read_info(address, login, timeout=timeout, tls=tls, section="everything")


def server_deltas(before: dict[str, str], after: dict[str, str]) -> dict[str, Any]:
    """INFO's counters over the capture, the server's CPU seconds and the calls of each
    command written; empty when ``after`` is missing or from another process."""
    if not after or before.get("run_id") != after.get("run_id"):
        return {}
    out: dict[str, Any] = {k: int(after[k]) - int(before[k]) for k in _DELTAS
                           if after.get(k, "").isdigit() and before.get(k, "").isdigit()}
    cpu0, cpu1 = _cpu(before), _cpu(after)
    if cpu0 is not None and cpu1 is not None:
        out["cpu_s"] = round(cpu1 - cpu0, 6)
    c0, c1 = _calls(before), _calls(after)
    out["calls"] = {k: c1[k] - c0.get(k, 0) for k in c1 if c1[k] - c0.get(k, 0)}
    return out


@dataclass
class MonitorResult(CaptureResult):
    """A finished ``MONITOR`` capture (:class:`CaptureResult`'s fields; hits and misses are
    unknown to the stream: the server's ``keyspace_hits``/``keyspace_misses`` are in
    ``server["deltas"]``)."""

    #: Commands written (an MGET of 3 keys is one).
    commands: int = 0
    #: Commands seen and not written, by name.
    other: dict[str, int] = field(default_factory=dict)
    #: Lines that were not a command.
    malformed: int = 0

    @property
    def warnings(self) -> list[str]:
        if self.ended == "max_buffer":
            return CaptureResult.warnings.fget(self)  # type: ignore[attr-defined,no-any-return]
        if self.commands or self.ended == "interrupted" or self.aborted:
            return []
        d = self.server.get("deltas") or {}
        seen = sum(self.other.values())
        return [f"captured 0 commands in {self.elapsed_s:.1f} s: was the server idle?"
                + (f" (it processed {d['total_commands_processed']:,} commands meanwhile, "
                   "cachelab's own INFO reads among them)" if "total_commands_processed" in d
                   else "")
                + (f"; {seen:,} other commands seen and not written" if seen else "")]

    def checks(self) -> list[str]:
        d = self.server.get("deltas") or {}
        calls = d.get("calls")
        out = []
        if calls is not None and self.spec.get("sample", 1.0) == 1.0 and \
                self.server.get("db") is None:
            counted = sum(calls.values())
            if counted > self.commands:
                out.append(f"the server counted {counted - self.commands:,} commands more "
                           f"than captured ({counted:,} against {self.commands:,}: its "
                           "counters are read just before and after the stream, a slightly "
                           "wider window)")
            elif counted < self.commands:
                out.append(f"{self.commands - counted:,} commands captured more than the "
                           "server counted")
        if self.malformed:
            out.append(f"{self.malformed:,} lines of the stream were not a command (skipped)")
        return out

    def cost_line(self) -> str:
        """The headline's cost of MONITOR: what was measured, and this capture's CPU."""
        d = self.server.get("deltas") or {}
        line = COST
        if "cpu_s" in d and self.elapsed_s > 0:
            line += (f"; the server used {100 * d['cpu_s'] / self.elapsed_s:.0f} % of a CPU "
                     "over this capture")
        return line

    def render(self) -> str:
        sampled = (f", a {self.spec['sample']:.3g} sample of keys"
                   if self.spec.get("sample", 1.0) < 1 else "")
        names = "keys as they are" if self.spec.get("keep_keys") else "keys pseudonymised"
        head = "PARTIAL: " if self.partial else ""
        db = self.server.get("db")
        lines = [
            f"{head}capture of {self.server.get('address')} (redis "
            f"{self.server.get('version', '?')}) through MONITOR"
            + (f", database {db}" if db is not None else "")
            + f": {self.elapsed_s:.1f} s, ended by {self.aborted or self.ended}; "
            f"{names}{sampled}",
            f"  {self.cost_line()}",
            f"  written to {self.path}",
            f"  {self.commands:,} commands: {self.gets:,} reads, {self.stores:,} writes and "
            f"deletes ({', '.join(f'{op} {n:,}' for op, n in self.ops.items()) or 'none'}), "
            f"{self.keys:,} distinct keys; hits are not in the stream",
        ]
        if self.other:
            top = sorted(self.other.items(), key=lambda kv: -kv[1])[:5]
            lines.append(f"  not written: {sum(self.other.values()):,} other commands ("
                         + ", ".join(f"{k} {n:,}" for k, n in top) + ")")
        d = self.server.get("deltas") or {}
        if "keyspace_hits" in d:
            lines.append(f"  the server counted: {sum((d.get('calls') or {}).values()):,} of "
                         f"these commands, keyspace_hits {d['keyspace_hits']:,}, "
                         f"keyspace_misses {d.get('keyspace_misses', 0):,}, evicted_keys "
                         f"{d.get('evicted_keys', 0):,}")
        lines += [f"  note: {c}" for c in self.checks()]
        return "\n".join(lines)


def capture_monitor(spec: CaptureSpec, path: str | os.PathLike[str], login: RespLogin, *,
                    tls: TlsOptions | None = None,
                    on_progress: Callable[[float, int], None] | None = None,
                    stop: Callable[[], bool] | None = None) -> MonitorResult:
    """Captures the commands of ``spec``'s Redis through ``MONITOR`` into the capture file
    ``path`` (written atomically), as :func:`cachelab.traces.capture.capture` does for
    memcached: the same stops (``duration``, ``max_events``, ``max_bytes``, ``max_buffer``,
    ``stop()``, Ctrl-C or SIGTERM keeping what was read), the same errors. ``login``'s
    database, when given, keeps that database's commands alone; its password is sent, never
    written. ``tls``: over TLS (a ``rediss://`` login without it: the default settings)."""
    spec.check()
    if tls is None and login.tls:
        tls = TlsOptions()
    core = core_tls(tls)
    if spec.servers:
        raise UsageError("trace capture of a Redis watches one server: give one --server "
                         "redis://HOST:PORT")
    if spec.reader != "rust":
        raise UsageError("trace capture of a Redis reads MONITOR with the rust reader: "
                         "not --reader python")
    address = spec.server
    try:
        before = _state(address, login, spec.connect_timeout, core)
    except KeyboardInterrupt:
        raise Interrupted("interrupted before the capture began: nothing captured") from None
    facts = {"address": address, "protocol": "resp", "version": before.get("redis_version"),
             "maxmemory": int(before.get("maxmemory", 0) or 0),
             "maxmemory_policy": before.get("maxmemory_policy"),
             "used_memory": int(before.get("used_memory", 0) or 0),
             "limit_maxbytes": int(before.get("maxmemory", 0) or 0),
             "login": login.described(), "db": login.db, "via": "MONITOR",
             "transport": transport_of(address, tls), "tls": describe_tls(tls)}
    meta = {b"cachelab": _json({"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
                                "pseudonymised": not spec.keep_keys, "sample": spec.sample,
                                "server": facts, "members": [facts], "reader": "rust",
                                "created": created_now()})}
    reader = _core.CaptureReader(secrets.token_bytes(32), spec.keep_keys, spec.sample, None,
                                 monitor=True, db=login.db)
    try:
        with _Signals() as signals, atomic_file(path) as tmp:
            reader.monitor(address, spec.connect_timeout, spec.max_buffer, user=login.user,
                           password=login.password, tls=core)
            started = time.monotonic()
            writer = _Writer(tmp, meta, COLUMNS)
            merge = _Merge(writer, [address], spec.max_events)
            halt = lambda: signals.count > 0 or (stop is not None and stop())  # noqa: E731
            ended, aborted = _run([reader], [address], spec, merge, started, on_progress, halt)
            if signals.count:
                ended = "interrupted"
            if ended != "max_events":
                _parse_the_rest(0, reader, address, merge, spec)
                merge.add(0, batch_table(reader.take(), address))
            merge.finish()
            elapsed = time.monotonic() - started
            after: dict[str, str] = {}
            try:   # (a Ctrl-C meanwhile leaves them out; the capture is kept either way)
                after = _state(address, login, spec.connect_timeout, core)
            except (ServerError, KeyboardInterrupt):
                after = {}
            if signals.count:
                ended = "interrupted"
            deltas = server_deltas(before, after)
            summary = {"ended": ended, "elapsed_s": elapsed, "lost": 0, "events": writer.rows,
                       "deltas": deltas, "commands": reader.commands}
            writer.close({**meta, b"cachelab.summary": _json(summary)})
            tally = _tally(tmp)
            peak = reader.peak_buffered
    except OSError as e:
        raise InputError(f"{path}: cannot write the capture: {e}") from e
    finally:
        reader.close()
    t = tally["total"]
    reads = sum(n for op, n in t["ops"].items() if op in READS)
    return MonitorResult(
        path=str(path), spec=asdict(spec), ended=ended, elapsed_s=elapsed, ops=t["ops"],
        gets=reads, hits=0, misses=0, stores=sum(t["ops"].values()) - reads,
        requests=tally["requests"], multi_get_requests=tally["multi"], keys=tally["keys"],
        lost=0, lost_by={}, buffer_peak_bytes=peak, store_lookups=0,
        sampled_out=reader.sampled_out, server={**facts, "deltas": deltas}, members=[],
        aborted=aborted, commands=reader.commands, other=dict(reader.other),
        malformed=reader.malformed)

