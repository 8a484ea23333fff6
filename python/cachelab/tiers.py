"""``cachelab tiers``: the seed's storage benchmark (App Engine datastore vs memcache vs instance
memory, with serialization and compression), as a measurement on this machine.

Two data shapes, as in the seed: one ~60 KB text record, and a list of 1,000 small records
(~100 B each, like comments). Each is read, again and again, from:

* ``store`` — the database: SQLite by default (a file in a temporary directory), PostgreSQL
  with ``dsn`` (needs ``psycopg``); one query, rows made into dicts;
* ``memcached raw`` — the encoded bytes fetched and not decoded (the transport alone);
* ``memcached + <codec>`` — fetched and decoded into ready objects;
* ``memcached + <codec> + zlib|zstd|lz4`` — fetched, decompressed, decoded;
* ``memory ready`` — the ready object from a dict in process;
* ``memory + <codec>`` (and ``+ zlib``) — encoded bytes from a dict in process, decoded.

Methods are interleaved read by read (one read of each per round, in a new shuffled order every
round), so drift on a shared machine falls on all of them alike and no method always follows
the same one. Each read's wall time and this thread's CPU time are recorded.
Values go through :class:`cachelab.tiered.ValueFormat`, the same encoding the tiered cache uses.
"""

from __future__ import annotations

import json
import random
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cachelab import _core, environment
from cachelab.errors import UsageError
from cachelab.tables import text_table
from cachelab.tiered.codecs import COMPRESSORS, ValueFormat

__all__ = ["SCHEMA", "TiersResult", "TiersSpec", "findings", "tiers"]

SCHEMA = "cachelab.tiers"
SCHEMA_VERSION = 1

SHAPES = ("record", "list")

_WORDS = (  # noqa: SIM905 - a paragraph of words reads better than a list literal
    "the of and to in is was for on that with as by at from his her which an be this are "
    "cache memory instance request latency server value record list comment topic exercise "
    "video article student teacher progress datastore query serialization compression "
    "protocol buffer network round trip quota application instance engine storage"
).split()


@dataclass
class TiersSpec:
    """What ``tiers`` measures."""

    reads: int = 200
    warmup: int = 10
    record_bytes: int = 60_000
    list_items: int = 1_000
    item_bytes: int = 100
    codec: str = "msgpack"
    compressions: tuple[str, ...] = ("zlib", "zstd", "lz4")
    dsn: str | None = None
    seed: int = 0
    timeout: float = 1.0

    @classmethod
    def quick(cls, **overrides: Any) -> TiersSpec:
        return cls(**{"reads": 40, "warmup": 5, **overrides})

    def check(self) -> None:
        if not 1 <= self.reads <= 1_000_000 or self.warmup < 0:
            raise UsageError("reads must be 1 to 1,000,000 and warm-up 0 or more")
        if not 100 <= self.record_bytes <= 900_000:
            raise UsageError("record size must be 100 B to 900 KB (memcached's 1 MB item)")
        if not 1 <= self.list_items <= 5_000 or not 20 <= self.item_bytes <= 10_000:
            raise UsageError("list: 1-5,000 items of 20 B-10 KB")
        if self.codec not in ("msgpack", "orjson", "pickle"):
            raise UsageError(f"codec must be msgpack, orjson or pickle, not {self.codec!r}")
        for c in self.compressions:
            if c not in COMPRESSORS or c == "none":
                raise UsageError(f"unknown compression {c!r}; choose from zlib, zstd, lz4")


@dataclass
class TiersResult:
    created: str
    spec: dict[str, Any]
    store: str
    server: dict[str, Any]
    rows: list[dict[str, Any]]
    findings: list[dict[str, Any]] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    def row(self, shape: str, method: str) -> dict[str, Any]:
        for r in self.rows:
            if r["shape"] == shape and r["method"] == method:
                return r
        raise KeyError((shape, method))


# -- data -----------------------------------------------------------------------------------


def _text(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(_WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def make_data(spec: TiersSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The 60 KB record and the list of small records (dicts of plain types)."""
    rng = random.Random(spec.seed)
    record = {"id": 1, "title": _text(rng, 60), "body": _text(rng, spec.record_bytes - 100),
              "author": "author-1", "created": 1_700_000_000}
    # ~item_bytes once encoded: four small fields around a text
    text_len = max(4, spec.item_bytes - 45)
    items = [
        {"id": i, "post": 1, "author": f"user-{rng.randrange(10_000)}",
         "created": 1_700_000_000 + i * 37, "text": _text(rng, text_len)}
        for i in range(spec.list_items)
    ]
    return record, items


class _SQLite:
    name = "sqlite"

    def __init__(self, record: dict[str, Any], items: list[dict[str, Any]]) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="cachelab-tiers-")
        self.db = sqlite3.connect(Path(self._dir.name) / "store.sqlite")
        self.db.execute(
            "CREATE TABLE record (id INTEGER PRIMARY KEY, title TEXT, body TEXT, author TEXT, "
            "created INTEGER)")
        self.db.execute(
            "CREATE TABLE comment (id INTEGER PRIMARY KEY, post INTEGER, author TEXT, "
            "created INTEGER, text TEXT)")
        self.db.execute("CREATE INDEX comment_post ON comment (post)")
        self.db.execute("INSERT INTO record VALUES (:id, :title, :body, :author, :created)",
                        record)
        self.db.executemany(
            "INSERT INTO comment VALUES (:id, :post, :author, :created, :text)", items)
        self.db.commit()

    def read_record(self) -> dict[str, Any]:
        cur = self.db.execute("SELECT id, title, body, author, created FROM record WHERE id = 1")
        names = [d[0] for d in cur.description]
        return dict(zip(names, cur.fetchone()))

    def read_list(self) -> list[dict[str, Any]]:
        cur = self.db.execute(
            "SELECT id, post, author, created, text FROM comment WHERE post = 1 ORDER BY id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def close(self) -> None:
        self.db.close()
        self._dir.cleanup()


class _Postgres(_SQLite):
    name = "postgresql"

    def __init__(self, dsn: str, record: dict[str, Any], items: list[dict[str, Any]]) -> None:
        try:
            import psycopg
        except ImportError:
            raise UsageError("--dsn needs psycopg: pip install 'psycopg[binary]'") from None
        # A connect waits at most 10 s unless the DSN says otherwise (every network wait has
        # a timeout); a server that cannot be reached is the user's to fix, not a traceback.
        extra = {} if "connect_timeout" in dsn else {"connect_timeout": 10}
        try:
            self.db = psycopg.connect(dsn, autocommit=True, **extra)
        except psycopg.Error as e:
            raise UsageError(f"--dsn: cannot connect to PostgreSQL: {e}".strip()) from None
        self.schema = f"cachelab_tiers_{secrets.token_hex(4)}"
        with self.db.cursor() as c:
            c.execute(f"CREATE SCHEMA {self.schema}")
            c.execute(f"CREATE TABLE {self.schema}.record (id INT PRIMARY KEY, title TEXT, "
                      "body TEXT, author TEXT, created BIGINT)")
            c.execute(f"CREATE TABLE {self.schema}.comment (id INT PRIMARY KEY, post INT, "
                      "author TEXT, created BIGINT, text TEXT)")
            c.execute(f"CREATE INDEX ON {self.schema}.comment (post)")
            c.execute(f"INSERT INTO {self.schema}.record VALUES (%(id)s, %(title)s, %(body)s, "
                      "%(author)s, %(created)s)", record)
            c.executemany(f"INSERT INTO {self.schema}.comment VALUES (%(id)s, %(post)s, "
                          "%(author)s, %(created)s, %(text)s)", items)

    def read_record(self) -> dict[str, Any]:
        with self.db.cursor() as c:
            c.execute(f"SELECT id, title, body, author, created FROM {self.schema}.record "
                      "WHERE id = 1")
            names = [d[0] for d in c.description]
            return dict(zip(names, c.fetchone()))

    def read_list(self) -> list[dict[str, Any]]:
        with self.db.cursor() as c:
            c.execute(f"SELECT id, post, author, created, text FROM {self.schema}.comment "
                      "WHERE post = 1 ORDER BY id")
            names = [d[0] for d in c.description]
            return [dict(zip(names, r)) for r in c.fetchall()]

    def close(self) -> None:
        with self.db.cursor() as c:
            c.execute(f"DROP SCHEMA {self.schema} CASCADE")
        self.db.close()


# -- the benchmark --------------------------------------------------------------------------


def _methods(spec: TiersSpec, client: _core.Client, store: Any, prefix: str,
             data: dict[str, Any]) -> tuple[list[tuple[str, str, Callable[[], Any], int]], list]:
    """(shape, method, read function, stored bytes) for every cell, and the keys written."""
    cells: list[tuple[str, str, Callable[[], Any], int]] = []
    written: list[str] = []
    plain = ValueFormat(spec.codec, "none")
    for shape in SHAPES:
        obj = data[shape]
        read_store = store.read_record if shape == "record" else store.read_list
        cells.append((shape, "store", read_store, 0))
        enc = plain.encode(obj)
        key = f"{prefix}:{shape}:raw"
        client.set(key, enc.data)
        written.append(key)
        cells.append((shape, "memcached raw", lambda k=key: client.get(k), len(enc.data)))
        key = f"{prefix}:{shape}:{spec.codec}"
        client.set(key, enc.data)
        written.append(key)
        cells.append((shape, f"memcached + {spec.codec}",
                      lambda k=key, f=plain: f.decode(client.get(k)), len(enc.data)))
        for comp in spec.compressions:
            fmt = ValueFormat(spec.codec, comp, threshold=0)
            e = fmt.encode(obj)
            key = f"{prefix}:{shape}:{spec.codec}:{comp}"
            client.set(key, e.data)
            written.append(key)
            cells.append((shape, f"memcached + {spec.codec} + {comp}",
                          lambda k=key, f=fmt: f.decode(client.get(k)), len(e.data)))
        ready = {shape: obj}
        cells.append((shape, "memory ready", lambda d=ready, s=shape: d[s], 0))
        blob = {shape: enc.data}
        cells.append((shape, f"memory + {spec.codec}",
                      lambda d=blob, s=shape, f=plain: f.decode(d[s]), 0))
        if spec.compressions:
            comp = spec.compressions[0]
            fmt = ValueFormat(spec.codec, comp, threshold=0)
            cblob = {shape: fmt.encode(obj).data}
            cells.append((shape, f"memory + {spec.codec} + {comp}",
                          lambda d=cblob, s=shape, f=fmt: f.decode(d[s]), 0))
    return cells, written


def tiers(spec: TiersSpec | None = None, *, server: str | None = None,
          on_progress: Callable[[int, int], None] | None = None) -> TiersResult:
    """Runs the benchmark against the memcached at ``server`` (or a private one)."""
    spec = spec or TiersSpec()
    spec.check()
    if server is None:
        from cachelab.servers import PrivateMemcached

        with PrivateMemcached() as mc:
            result = tiers(spec, server=mc.address, on_progress=on_progress)
            result.server["private"] = True
            return result
    record, items = make_data(spec)
    data = {"record": record, "list": items}
    store = _Postgres(spec.dsn, record, items) if spec.dsn else _SQLite(record, items)
    prefix = f"cachelab:{secrets.token_hex(6)}"
    client = _core.Client(server, timeout=spec.timeout)
    written: list[str] = []
    try:
        version = client.version()
        cells, written = _methods(spec, client, store, prefix, data)
        for _, _, fn, _ in cells:  # check every method returns the data, and warm up
            for _ in range(spec.warmup):
                fn()
        for shape, method, fn, _ in cells:
            if method != "memcached raw" and fn() != data[shape]:
                raise RuntimeError(f"{shape} via {method} does not round-trip")
        wall: list[list[int]] = [[] for _ in cells]
        cpu: list[list[int]] = [[] for _ in cells]
        clock, tclock = time.perf_counter_ns, time.thread_time_ns
        rng = random.Random(spec.seed)
        turn = list(range(len(cells)))
        for r in range(spec.reads):
            rng.shuffle(turn)  # a new order each round: no method always follows another
            for i in turn:
                fn = cells[i][2]
                c0, t0 = tclock(), clock()
                fn()
                t1, c1 = clock(), tclock()
                wall[i].append(t1 - t0)
                cpu[i].append(c1 - c0)
            if on_progress is not None and r % 10 == 9:
                on_progress(r + 1, spec.reads)
    finally:
        for key in written:
            try:
                client.delete(key)
            except Exception:  # noqa: BLE001 - best effort cleanup; the run's error wins
                break
        client.close()
        store.close()
    rows = []
    for i, (shape, method, _, stored) in enumerate(cells):
        w = sorted(wall[i])
        rows.append({
            "shape": shape,
            "method": method,
            "reads": len(w),
            "wall_p50_us": w[len(w) // 2] / 1000,
            "wall_p90_us": w[min(len(w) - 1, int(len(w) * 0.9))] / 1000,
            "wall_mean_us": statistics.fmean(w) / 1000,
            "cpu_mean_us": statistics.fmean(cpu[i]) / 1000,
            "stored_bytes": stored,
            "histogram": _core.hist_from_values(w),
        })
    result = TiersResult(
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        spec={**asdict(spec), "compressions": list(spec.compressions), "dsn": bool(spec.dsn)},
        store=store.name,
        server={"address": server, "version": version, "private": False},
        rows=rows,
        environment=environment.facts(),
    )
    result.findings = findings(result, spec)
    return result


def findings(result: TiersResult, spec: TiersSpec) -> list[dict[str, Any]]:
    """The seed's findings, each checked against this run: does its direction reproduce?"""
    codec = spec.codec
    comp = spec.compressions[0] if spec.compressions else None

    def t(shape: str, method: str) -> float:
        return float(result.row(shape, method)["wall_p50_us"])

    out: list[dict[str, Any]] = []

    def add(claim: str, holds: bool, evidence: str) -> None:
        out.append({"claim": claim, "reproduces": bool(holds), "evidence": evidence})

    mc = f"memcached + {codec}"
    add("memcached is faster than the store for the single large record (seed: about 2x)",
        t("record", mc) < t("record", "store"),
        f"record: {mc} {t('record', mc):.0f} µs vs store {t('record', 'store'):.0f} µs")
    add("memcached is faster than the store for the list of small records",
        t("list", mc) < t("list", "store"),
        f"list: {mc} {t('list', mc):.0f} µs vs store {t('list', 'store'):.0f} µs")
    add("process memory holding ready objects is much faster than memcached (≥10×)",
        all(t(s, "memory ready") * 10 <= t(s, mc) for s in SHAPES),
        "; ".join(f"{s}: memory ready {t(s, 'memory ready'):.2f} µs vs {mc} {t(s, mc):.0f} µs"
                  for s in SHAPES))
    mem_codec = f"memory + {codec}"
    add("serialized objects in process memory lose most of memory's advantage for the list "
        "(decoding costs at least half of a memcached read)",
        t("list", mem_codec) >= 0.5 * t("list", mc),
        f"list: {mem_codec} {t('list', mem_codec):.0f} µs vs {mc} {t('list', mc):.0f} µs")
    if comp is not None:
        mcc = f"{mc} + {comp}"
        add(f"compression ({comp}) makes reading the list of small records slower",
            t("list", mcc) > t("list", mc),
            f"list: {mcc} {t('list', mcc):.0f} µs vs {mc} {t('list', mc):.0f} µs")
        add(f"compression ({comp}) does not pay for itself on the large record on this network",
            t("record", mcc) >= t("record", mc),
            f"record: {mcc} {t('record', mcc):.0f} µs vs {mc} {t('record', mc):.0f} µs; "
            f"stored {result.row('record', mcc)['stored_bytes']:,} B vs "
            f"{result.row('record', mc)['stored_bytes']:,} B")
    return out


def render(result: TiersResult) -> str:
    """The table and the findings, for a terminal."""
    lines = [f"Reading each shape {result.spec['reads']} times (store: {result.store}; "
             f"memcached {result.server['version']} at {result.server['address']})", ""]
    header = ["shape", "method", "p50 µs", "p90 µs", "CPU µs", "stored B", "vs memory"]
    rows = []
    for r in result.rows:
        ready = result.row(r["shape"], "memory ready")["wall_p50_us"] or 1e-9
        rows.append([r["shape"], r["method"], f"{r['wall_p50_us']:.2f}",
                     f"{r['wall_p90_us']:.2f}", f"{r['cpu_mean_us']:.2f}",
                     f"{r['stored_bytes']:,}" if r["stored_bytes"] else "—",
                     f"{r['wall_p50_us'] / ready:,.0f}×"])
    lines += text_table(header, rows, left=2)
    lines += ["", "The seed's findings on this machine:"]
    for f in result.findings:
        mark = "reproduces" if f["reproduces"] else "DOES NOT reproduce"
        lines.append(f"  [{mark}] {f['claim']} — {f['evidence']}")
    return "\n".join(lines)
