"""A history checker for ``cachelab.tiered`` (Jepsen-style): several processes × threads do
get/put/invalidate on a few keys through a :class:`~cachelab.tiered.TieredCache` whose memcached
sits behind a fault proxy adding network delay; every operation is recorded with its start and
end (``time.monotonic()``, one clock for all processes on Linux), and every read is checked
against the writes.

Each key is written by the threads of one process and read by all. A *write* sets the
"database" (a SQLite file shared by the processes: the loader reads it, and it knows nothing of
memcached, so it keeps answering through a memcached outage) to a value unique to it
(``"<proc>:<thread>:<n>"``), then either ``put``s it or ``invalidate``s the key. A *read* is
``get``. Write ``a`` is *definitely older* than write ``b`` when ``a`` ended before ``b`` began
(concurrent writes are not ordered). A read of ``a``'s value is *stale* when a write definitely
newer than ``a`` ended before the read began; its *age* is the time from the earliest such
write's end to the read's start. It is a *same-process* stale read when such a write was made
by the reader's process.

Outages (:func:`run_outage`): a writer process and a reader process around one scripted fault
— memcached stopped (SIGSTOP) while the writer, its breaker open, puts one key and
invalidates another and then stays idle; the same on a pool of two memcached, the member that
holds both keys stopped (``pool``); a fill whose lease request is in flight when memcached
stops (a placeholder nobody will fill); the writer alone cut off by a fault proxy (a partition).
A stale read whose newer write ended during the fault (or before the owed deletes can have
gone out after it) is allowed until the fault's end plus the stated ``after_outage_s``; every
other one ``cross_process_s`` after the write (:meth:`Report.over_outages`).

Redis (``redis://`` URLs for ``l2``): the same runs over a :class:`~cachelab.tiered.RedisTier`
(the fault proxy speaks TCP, whatever the protocol).

Stale-while-revalidate (``run_history(..., soft_ttl=...)``): the key class has a soft TTL, only
the first ``written`` keys are written (the others only go stale and are revalidated), and the
loader tags every value with when it read it (``<value>@<time.monotonic()>``, as a ``put``
with its start), so that a read's *age* — how long ago its value left the database — is known
(``History.ages``), as is every loader call (``History.loads``): writes are checked as above,
ages against the hard ``ttl``, and the reloads of a key that is never written against the
soft TTL (one per soft period across all processes, not one per process).

Run by the test (tests/tiered/test_tiered_history.py, short), or alone for the full run::

    PYTHONPATH=python python tests/tiered/tiered_history.py run --procs 4 --threads 8 --seconds 30

(it starts its own memcached and fault proxy). ``worker`` is what each process runs.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiered_helpers import all_stopped, stop, wait_for

_HERE = Path(__file__).resolve().parent
#: Most operations one thread records (a bound on the history's size and the loop's length).
MAX_OPS_PER_THREAD = 200_000


# -- the database -----------------------------------------------------------------------------


class Db:
    """The source of truth: a SQLite file shared by the processes (one connection per process,
    under a lock; WAL, so readers do not wait for a writer; patient when busy)."""

    def __init__(self, path: str | Path) -> None:
        self.conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None,
                                    check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=OFF")
        self.conn.execute("CREATE TABLE IF NOT EXISTS kv (k INTEGER PRIMARY KEY, v TEXT)")
        self.lock = threading.Lock()

    def set(self, k: int, v: str) -> None:
        with self.lock:
            self.conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (k, v))

    def load(self, idents: list[Any]) -> dict[Any, Any]:
        with self.lock:
            marks = ",".join("?" * len(idents))
            rows = self.conn.execute(f"SELECT k, v FROM kv WHERE k IN ({marks})",
                                     list(idents)).fetchall()
        return dict(rows)


def seed(db: str | Path, keys: list[int], h: History) -> None:
    """Writes each key's first value (``init:<k>``), recorded in ``h`` as written forever ago."""
    d = Db(db)
    for k in keys:
        v = f"init:{k}"
        d.set(k, v)
        h.add("w", -1, 0, k, v, float("-inf"), float("-inf"))
    d.conn.close()


# -- the workers ------------------------------------------------------------------------------


def _cache(cfg: dict[str, Any], l2: str | list[str], db: Db, loader: Any = None,
           **tier: Any) -> tuple[Any, Any]:
    """The worker's cache over ``l2`` (one server — a ``redis://`` URL: a
    :class:`~cachelab.tiered.RedisTier` — or a pool's members) and its key class
    (with ``cfg["soft_ttl"]``, if given: stale-while-revalidate, its loader ``loader``)."""
    from cachelab.tiered import (
        CircuitBreaker,
        LRUMemory,
        MemcachedPool,
        MemcachedTier,
        RedisPool,
        RedisTier,
        TieredCache,
    )

    l1 = LRUMemory(max_items=100) if cfg["ttl"] == "default" else \
        LRUMemory(max_items=100, ttl=cfg["ttl"])
    redis = isinstance(l2, str) and l2.startswith(("redis://", "rediss://"))
    maker = tier.pop("tier", RedisTier if redis else MemcachedTier)
    if cfg.get("cluster"):  # l2 a seed node of a Redis Cluster
        maker = maker.cluster
    pool = RedisPool if cfg.get("redis_pool") else MemcachedPool
    t = pool(l2, **tier) if isinstance(l2, list) else maker(l2, **tier)
    reset = cfg.get("reset_after")
    soft = cfg.get("soft_ttl")
    cache = TieredCache(t, l1, prefix=cfg["prefix"],
                        breaker=None if reset is None else CircuitBreaker(3, reset),
                        **({"lease_ttl": cfg["lease_ttl"]} if soft else {}))
    if cfg.get("tracking"):
        from cachelab.tiered import RedisTracking

        RedisTracking(cache)  # stopped by cache.close(); a daemon thread otherwise
    if soft:
        return cache, cache.key_class("h", loader, ttl=cfg["hard_ttl"], soft_ttl=soft)
    return cache, cache.key_class("h", db.load)


def read(cache: Any, kc: Any, k: int, t: int, log: list[list[Any]], errors: list[str]
         ) -> None:
    """Reads key ``k`` in thread ``t``: the read into ``log`` (its start and end on the
    monotonic clock), or its error into ``errors``."""
    t0 = time.monotonic()
    try:
        v = cache.get(kc, k)
    except Exception as e:  # noqa: BLE001 - reported with the history
        errors.append(f"get: {type(e).__name__}: {e}")
    else:
        log.append(["r", k, v, t0, time.monotonic(), t])


def worker(cfg: dict[str, Any]) -> None:
    """One process: ``cfg["threads"]`` threads for ``cfg["seconds"]``, its history written as
    JSON to ``cfg["out"]``: ``[[kind, key, value, start, end, thread], ...]``."""
    db = Db(cfg["db"])
    loads: list[list[Any]] = []  # [key, time.monotonic()] of every ident a loader call read
    swr = bool(cfg.get("soft_ttl"))

    def tagged(idents: list[Any]) -> dict[Any, Any]:
        """The database's values, each tagged with when it was read."""
        at = time.monotonic()
        loads.extend([k, at] for k in idents)
        got = db.load(idents)
        time.sleep(cfg["load_s"])  # a slow database: others are served stale meanwhile
        return {k: f"{v}@{at}" for k, v in got.items()}

    cache, kc = _cache(cfg, cfg["l2"], db, tagged)
    proc = cfg["proc"]
    keys = list(range(cfg["keys"]))
    # Each key is written by one process only (all its threads), read by all: the others keep
    # it in L1 until it expires, so the cross-process bound is actually exercised.
    written = keys[:cfg["written"]] if swr else keys
    mine = [k for k in written if k % cfg["procs"] == proc] or written
    logs: list[list[list[Any]]] = []
    errors: list[str] = []

    def run(t: int) -> None:
        rng = random.Random(proc * 1000 + t)
        log: list[list[Any]] = []
        logs.append(log)
        now = time.monotonic
        deadline = now() + cfg["seconds"]
        n = 0
        while now() < deadline and n < MAX_OPS_PER_THREAD:
            n += 1
            r = rng.random()
            k = rng.choice(mine if r < cfg["writes"] else keys)
            if r < cfg["writes"]:
                v = f"{proc}:{t}:{n}"
                op = "put" if r < cfg["writes"] / 2 else "invalidate"
                t0 = now()
                db.set(k, v)
                try:
                    if op == "put":
                        cache.put(kc, k, f"{v}@{t0}" if swr else v)
                    else:
                        cache.invalidate(kc, k)
                except Exception as e:  # noqa: BLE001 - reported with the history
                    errors.append(f"{op}: {type(e).__name__}: {e}")
                    # its value is in the database, but the write never completed
                    log.append(["w", k, v, t0, float("inf"), t])
                else:
                    log.append(["w", k, v, t0, now(), t])
            else:
                read(cache, kc, k, t, log, errors)
            time.sleep(rng.random() * cfg["pause"])

    start_at = cfg["start_at"]
    time.sleep(min(max(0.0, start_at - time.monotonic()), 5.0))
    threads = [threading.Thread(target=run, args=(t,)) for t in range(cfg["threads"])]
    for th in threads:
        th.start()
    for th in threads:
        th.join(cfg["seconds"] + 60)
    ops = [op for log in logs for op in log]
    ages = []  # [key, when its value was read from the database, the read's start]
    for op in ops:
        if op[0] == "r" and isinstance(op[2], str) and "@" in op[2]:
            op[2], born = op[2].rsplit("@", 1)
            ages.append([op[1], float(born), op[3]])
    Path(cfg["out"]).write_text(json.dumps(
        {"proc": proc, "ops": ops, "errors": errors, "loads": loads, "ages": ages,
         "events": {**cache.stats()["events"], "l2_errors": cache.stats()["l2"]["errors"]}},
        allow_nan=True))


# -- running them -----------------------------------------------------------------------------


def run_history(l2: str | list[str], db: str | Path, prefix: str, tmp: Path, *, procs: int,
                threads: int, seconds: float, keys: int = 4, writes: float = 0.1,
                pause: float = 0.0002, ttl: float | str = "default",
                swr: dict[str, Any] | None = None, tracking: bool = False,
                cluster: bool = False, redis_pool: bool = False) -> History:
    """Seeds the keys in the SQLite file ``db``, runs ``procs`` worker processes against ``l2``
    (the proxy, or a list: a pool of them, ``MemcachedPool``), and returns their merged
    history. ``swr``: stale-while-revalidate (``soft_ttl``, ``hard_ttl``, ``lease_ttl``,
    ``written``, ``load_s`` — each loader call's extra seconds: see the module docstring).
    ``tracking``: every process's L1 told of writes by a
    :class:`~cachelab.tiered.RedisTracking` (``l2`` a ``redis://`` URL). ``cluster``: ``l2``
    is a seed node of a Redis Cluster (``RedisTier.cluster``). ``redis_pool``: ``l2`` is a list
    of Redis servers (``RedisPool``)."""
    h = History()
    seed(db, list(range(keys)), h)
    start_at = time.monotonic() + 1.0
    children = []
    for p in range(procs):
        cfg = {"l2": l2, "db": str(db), "prefix": prefix, "proc": p, "procs": procs,
               "threads": threads,
               "seconds": seconds, "keys": keys, "writes": writes, "pause": pause, "ttl": ttl,
               "start_at": start_at, "out": str(tmp / f"history-{p}.json"),
               "tracking": tracking, "cluster": cluster, "redis_pool": redis_pool,
               **(swr or {})}
        children.append(subprocess.Popen([sys.executable, __file__, "worker", json.dumps(cfg)],
                                         env=os.environ.copy()))
    for c in children:
        rc = c.wait(timeout=seconds + 120)
        if rc != 0:
            raise AssertionError(f"history worker exited {rc}")
    for p in range(procs):
        got = json.loads((tmp / f"history-{p}.json").read_text())
        h.errors += got["errors"]
        h.loads += [(k, at, p) for k, at in got["loads"]]
        h.ages += [(k, born, start) for k, born, start in got["ages"]]
        h.events.append(got["events"])
        for kind, k, v, t0, t1, t in got["ops"]:
            h.add(kind, p, t, k, v, t0, t1)
    return h


# -- outages ---------------------------------------------------------------------------------

#: Seconds each scripted fault lasts.
OUTAGE = 1.2
#: Seconds allowed over a stated after-outage bound. Generous: on a loaded 2-core machine the
#: replay thread, the reader and the harness (which times the fault) can each be kept from a CPU
#: for a few hundred ms; still far below what an unbounded case shows (its whole tail).
OUTAGE_SLACK = 1.0
#: Seconds the readers go on after the fault ends (the stated bound and the slack fit in it).
TAIL = 4.0
#: The outage workers' tier timeouts and breaker pause (the bounds they state follow from them).
OUTAGE_TIMEOUT = 0.1
OUTAGE_RESET = 0.5
#: Key 0 is put during the fault, key 1 invalidated; key 2 is the lease scenario's.
OUTAGE_KEYS = [0, 1, 2]
#: The writer reads keys from here on to open its breaker (absent, and not in the history).
OTHER = 100


def _stopping_tier(pid: int, redis: bool = False) -> Any:
    """A MemcachedTier (a RedisTier if ``redis``) that stops its server (SIGSTOP ``pid``) just
    before its first lease request for key 2: that request is in flight, unanswered, while the
    server is stopped."""
    from cachelab.tiered import MemcachedTier, RedisTier

    class StopsAtLease(RedisTier if redis else MemcachedTier):  # type: ignore[misc]
        armed = True

        def lease_get(self, key: str, lease_ttl: int) -> Any:
            if self.armed and key.endswith(":2"):
                self.armed = False
                stop(pid)
                t0 = time.monotonic()
                try:
                    got = super().lease_get(key, lease_ttl)
                except Exception as e:
                    type(self).outcome = (f"raised {type(e).__name__} after "
                                          f"{time.monotonic() - t0:.3f} s: {e}")
                    raise
                type(self).outcome = f"returned {got} after {time.monotonic() - t0:.3f} s"
                cc = getattr(self, "cluster_client", None)
                if cc is not None:
                    type(self).outcome += f" from {cc.get_node_from_key(key).name} ({pid})"
                return got
            return super().lease_get(key, lease_ttl)

    return StopsAtLease


def outage_worker(cfg: dict[str, Any]) -> None:
    """One process of :func:`run_outage`: the ``reader`` (threads reading keys 0 and 1, and 2
    from ``key2_from`` on, until ``end_at``; quiet from ``quiet_from`` until then in the lease
    scenario, so that it meets the placeholder as soon as memcached is back) or the ``writer``
    (at ``act_at``: reads other keys until its breaker opens, then puts key 0 and invalidates
    key 1 — or, ``lease``, reads key 2 through a tier that stops memcached before its lease
    request — then stays idle)."""
    db = Db(cfg["db"])
    tier: dict[str, Any] = {"timeout": OUTAGE_TIMEOUT, "connect_timeout": OUTAGE_TIMEOUT}
    writer = cfg["role"] == "writer"
    if writer and cfg["kind"] == "lease":
        tier["tier"] = _stopping_tier(cfg["pid"], cfg["l2"].startswith(("redis://", "rediss://")))
    cache, kc = _cache(cfg, cfg["l2"], db, **tier)
    now = time.monotonic
    ops: list[list[Any]] = []
    errors: list[str] = []
    facts: dict[str, Any] = {}

    def at(t: float) -> None:
        time.sleep(min(max(0.0, t - now()), 30.0))

    at(cfg["start_at"])
    if not writer:
        def run(t: int) -> None:
            rng = random.Random(t)
            for _ in range(MAX_OPS_PER_THREAD):
                if now() >= cfg["end_at"]:
                    return
                if cfg["kind"] == "lease" and cfg["quiet_from"] <= now() < cfg["key2_from"]:
                    time.sleep(0.01)  # its breaker stays closed: it reads key 2 at once after
                    continue
                k = 2 if cfg["kind"] == "lease" and now() >= cfg["key2_from"] and \
                    rng.random() < 0.5 else rng.choice((0, 1))
                read(cache, kc, k, t, ops, errors)
                time.sleep(rng.random() * 0.002)

        threads = [threading.Thread(target=run, args=(t,)) for t in range(cfg["threads"])]
        for th in threads:
            th.start()
        for th in threads:
            th.join(cfg["end_at"] - now() + 60)
    else:
        for k in (0, 1):
            read(cache, kc, k, 0, ops, errors)
        at(cfg["act_at"])
        if cfg["kind"] == "lease":
            # its lease request is lost: memcached is stopped while it waits
            read(cache, kc, 2, 0, ops, errors)
            facts["owed_after_fill"] = cache.events.pending_invalidations
            facts["lease_request"] = getattr(cache.l2, "outcome", None)
        else:
            # a pool's stopped member has a breaker of its own (the cache's is a template),
            # which only the reads of keys on that member open: those are the ones read
            member = cfg.get("member")
            breaker = cache.breaker if member is None else cache._lanes[member].breaker
            others = [OTHER + i for i in range(4000) if member is None
                      or cache.l2.member_of(cache.key_for(kc, OTHER + i)) == member][:40]
            master = cfg.get("cluster_master")
            if master:  # a cluster's stopped master: the keys it holds open the breaker
                cc = cache.l2.cluster_client
                others = [OTHER + i for i in range(4000) if cc.nodes_manager.get_node_from_slot(
                    cc.keyslot(cache.key_for(kc, OTHER + i))).name == master][:40]
            for k in others:  # bounded: each read waits one timeout at most
                if breaker.state != "closed":
                    break
                cache.get(kc, k)
            facts["breaker_at_write"] = breaker.state
            for k, op in ((0, "put"), (1, "invalidate")):
                v = f"0:0:{k}"
                t0 = now()
                db.set(k, v)
                if op == "put":
                    cache.put(kc, k, v)
                else:
                    cache.invalidate(kc, k)
                ops.append(["w", k, v, t0, now(), 0])
            facts["owed_after_writes"] = cache.events.pending_invalidations
        at(cfg["end_at"])  # idle: no call of any kind from here on
    facts["events"] = cache.stats()["events"]
    stated = cache.staleness() if hasattr(cache, "staleness") else {}
    Path(cfg["out"]).write_text(json.dumps(
        {"ops": ops, "errors": errors, "facts": facts, "staleness": stated}, allow_nan=True))


@dataclass
class Outage:
    """What :func:`run_outage` saw: the merged history, the fault's ``(start, end)``, and each
    process's ``facts`` and stated ``staleness`` (``writer``, ``reader``)."""

    history: History
    outages: list[tuple[float, float]]
    writer: dict[str, Any]
    reader: dict[str, Any]

    def judge(self, kind: str) -> None:
        """The outage scenarios' checks, on any L2: reads never raise and none is staler than
        the writer's stated bounds after the fault (with OUTAGE_SLACK for a loaded machine);
        ``lease``: the lost lease request is owed a delete and no read waits on it longer than
        the stated ``orphan_lease_s``; else the writes met the open breaker and their deletes
        were owed. Prints what was seen."""
        stated = self.writer["staleness"]
        cross, owed, after = (stated.get(k) for k in ("cross_process_s", "owed_delivery_s",
                                                       "after_outage_s"))
        assert owed is not None and after is not None, stated
        h = self.history
        rep = h.check()
        past = rep.over_outages(cross, self.outages, owed, after, OUTAGE_SLACK)
        end = self.outages[0][1]
        print(kind, rep.summary(), f"; stated after-outage bound {after} s, {len(past)} past "
              "it; latest stale read", max((round(r.start - end, 3) for r, _ in
                                            rep.cross_process), default=None),
              "s after the fault ended; longest read after it",
              max((round(op.end - max(op.start, end), 3) for op in h.ops if op.kind == "r"),
                  default=None), "s; reader's lease waits",
              self.reader["facts"]["events"].get("lease_waits"), "; writer",
              self.writer["facts"])
        assert not h.errors, h.error_kinds()  # reads never raise, in an outage or after it
        assert rep.reads > 100 and not rep.unknown and rep.same_process == []
        facts = self.writer["facts"]
        if kind == "lease":  # the lost lease request's placeholder is owed a delete
            assert facts["owed_after_fill"] >= 1, facts
            waits = h.waits_over(self.outages, stated["orphan_lease_s"] + OUTAGE_SLACK)
            assert waits == [], [(op.key, round(op.end - op.start, 3)) for op in waits[:5]]
        else:  # the writes met the open breaker: their deletes were owed
            assert facts["breaker_at_write"] != "closed" and facts["owed_after_writes"] == 2, \
                facts
        assert past == [], [(r.key, r.value, round(x, 3)) for r, x in past[:5]]


def _pool_member(servers: list[str], prefix: str) -> tuple[str, int]:
    """A prefix (``prefix`` or ``prefix-<n>``) under which keys 0 and 1 of the workers' key
    class live on one member of a pool of ``servers``, and that member's index."""
    from cachelab.tiered import MemcachedPool, TieredCache

    pool = MemcachedPool(servers)
    for n in range(1000):
        p = prefix if n == 0 else f"{prefix}-{n}"
        cache = TieredCache(pool, None, prefix=p)
        kc = cache.key_class("h", lambda ids: {})
        m = {pool.member_of(cache.key_for(kc, k)) for k in (0, 1)}
        if len(m) == 1:
            return p, m.pop()
    raise AssertionError("no prefix puts keys 0 and 1 on one member")


def run_outage(kind: str, address: str | list[str], pid: int | list[int], tmp: Path,
               prefix: str, *, threads: int = 3, cluster: str | None = None,
               redis_pool: bool = False) -> Outage:
    """One scripted fault (``stop``, ``pool``, ``lease`` or ``partition``: see the module
    docstring) against the memcached at ``address`` (process ``pid``, which this stops and
    continues: it must be the caller's own; for ``pool``, the lists of both members' addresses
    and processes: the member holding keys 0 and 1 is stopped), with a writer and a reader
    process; returns what happened. memcached is always continued, whatever fails.
    ``cluster``: ``address`` is a seed node of a Redis Cluster (``RedisTier.cluster``), ``pid``
    the master to stop and ``cluster`` its ``host:port`` (it must hold keys 0-2).
    ``redis_pool``: ``pool`` over Redis servers (``RedisPool``)."""
    sys.path.insert(0, str(_HERE.parent))
    from faultproxy import FaultProxy

    member = None
    if kind == "pool":
        assert isinstance(address, list) and isinstance(pid, list) and len(address) == 2
        prefix, member = _pool_member(address, prefix)
        pid = pid[member]
    assert isinstance(pid, int)

    h = History()
    db = tmp / "db.sqlite"
    seed(db, OUTAGE_KEYS, h)
    start_at = time.monotonic() + 2.0  # the processes start (and import) meanwhile
    stop_at = start_at + 0.6  # both have read keys 0 and 1 by then
    end_at = stop_at + OUTAGE + TAIL
    proxy = FaultProxy(address) if kind == "partition" else None
    base = {"db": str(db), "prefix": prefix, "ttl": "default", "reset_after": OUTAGE_RESET,
            "kind": kind, "pid": pid, "start_at": start_at, "act_at": stop_at + 0.1,
            "quiet_from": stop_at, "key2_from": stop_at + 0.1 + OUTAGE + 0.05, "end_at": end_at,
            "threads": threads, "member": member, "cluster": bool(cluster),
            "cluster_master": cluster, "redis_pool": redis_pool}
    roles = {"writer": proxy.address if proxy else address, "reader": address}
    children = []
    for role, l2 in roles.items():
        cfg = {**base, "role": role, "l2": l2, "out": str(tmp / f"outage-{role}.json")}
        if kind == "lease" and role == "writer":
            # its replay's next try comes well after memcached is back (not while it is still
            # stopped, answered at once when it continues): the reader meets the placeholder
            cfg["reset_after"] = 2.0
        children.append(subprocess.Popen([sys.executable, __file__, "outage", json.dumps(cfg)],
                                         env=os.environ.copy()))
    s = r = float("nan")
    try:
        time.sleep(max(0.0, stop_at - time.monotonic()))
        if kind in ("stop", "pool"):
            stop(pid)
        elif kind == "partition":
            assert proxy is not None
            proxy.blackhole(OUTAGE)
        else:  # the writer stops it at its lease request: a worker process that must start
            # and import first (over 10 s once, for Redis, beside a CPU hog)
            wait_for(lambda: all_stopped(pid), "the writer's lease request to stop memcached",
                     30.0)
        s = time.monotonic()
        time.sleep(OUTAGE)
    finally:
        if kind != "partition":
            os.kill(pid, signal.SIGCONT)
        r = time.monotonic()
        try:
            for c in children:
                rc = c.wait(timeout=end_at - time.monotonic() + 60)
                if rc != 0:
                    raise AssertionError(f"outage worker exited {rc}")
        finally:
            for c in children:
                if c.poll() is None:
                    c.kill()
                    c.wait(5)
            if proxy is not None:
                proxy.stop()
    got = {}
    for p, role in enumerate(roles):
        got[role] = out = json.loads((tmp / f"outage-{role}.json").read_text())
        h.errors += out["errors"]
        for kind_, k, v, t0, t1, t in out["ops"]:
            h.add(kind_, p, t, k, v, t0, t1)
    return Outage(h, [(s, r)], got["writer"], got["reader"])


# -- the checker ------------------------------------------------------------------------------


@dataclass
class Op:
    kind: str
    proc: int
    thread: int
    key: Any
    value: Any
    start: float
    end: float


@dataclass
class Report:
    reads: int = 0
    writes: int = 0
    #: (read, its age) for stale reads whose newer write was made by the reader's process
    same_process: list[tuple[Op, float]] = field(default_factory=list)
    #: (read, its age) for stale reads by age, the others
    cross_process: list[tuple[Op, float]] = field(default_factory=list)
    #: reads of values no write wrote
    unknown: list[Op] = field(default_factory=list)

    def over(self, bound: float) -> list[tuple[Op, float]]:
        return [(r, a) for r, a in self.cross_process if a > bound]

    def over_outages(self, cross: float, outages: list[tuple[float, float]], owed: float,
                     after: float, slack: float) -> list[tuple[Op, float]]:
        """The stale reads past their bound, as ``(read, seconds past it)``: ``cross``
        seconds after the newer write ended, or, for a write that ended during an outage
        ``(start, end)`` or within ``owed`` seconds after it (its delete may have been owed),
        ``after`` seconds after the outage ended — plus ``slack``."""
        out = []
        for r, age in self.cross_process:
            ended = r.start - age
            deadline = ended + cross
            for start, end in outages:
                if start <= ended <= end + owed:
                    deadline = max(deadline, end + after)
            if r.start > deadline + slack:
                out.append((r, r.start - deadline))
        return out

    def summary(self, bound: float | None = None) -> str:
        worst = max((a for _, a in self.cross_process), default=0.0)
        s = (f"{self.reads} reads, {self.writes} writes: {len(self.same_process)} same-process "
             f"stale, {len(self.cross_process)} cross-process stale (oldest {worst:.4f} s)")
        if bound is not None:
            s += f", {len(self.over(bound))} over {bound:g} s"
        return s + f", {len(self.unknown)} unknown values"


class History:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.errors: list[str] = []
        #: (key, when its value was read from the database, the read's start), for values a
        #: stale-while-revalidate run tagged
        self.ages: list[tuple[Any, float, float]] = []
        #: (key, when, process) of every ident a loader call read (stale-while-revalidate runs)
        self.loads: list[tuple[Any, float, int]] = []
        #: each process's ``stats()["events"]`` at its end
        self.events: list[dict[str, int]] = []

    def oldest(self) -> float:
        """The age of the oldest value read (0.0 without tagged values)."""
        return max((start - born for _, born, start in self.ages), default=0.0)

    def judge(self, bound: float, *, reads: int = 1000, writes: int = 100) -> None:
        """The put/invalidate history's checks, on any L2: no read raises (a put may, during
        a timeout: such a write counts as never completed); it ran and raced (more than
        ``reads`` reads and ``writes`` writes); every value read is known; none is stale in its
        own process, nor staler than ``bound`` (+ SLACK) in another. Prints what was seen."""
        rep = self.check()
        print(rep.summary(bound + SLACK))
        assert all(k.startswith("put: Server") for k in self.error_kinds()), self.error_kinds()
        assert rep.reads > reads and rep.writes > writes
        assert not rep.unknown
        assert rep.same_process == []
        assert rep.over(bound + SLACK) == []

    def judge_swr(self, cross: float, soft: float, hard: float, *, reads: int,
                  writes: int) -> None:
        """The stale-while-revalidate history's checks, on any L2 (keys 2 and 3 never
        written): writes bounded by ``cross`` (+ SLACK) as without a soft ttl; stale values
        served and revalidated; no value read older than the ``hard`` ttl (1 s for a busy
        machine between the loader's clock read and the store); a key never written reloaded
        once per ``soft`` period across the processes — one early reload at most for each
        request to the L2 that failed (its key is deleted, and the next read reloads it
        sooner: a timeout on a machine that stalls the server, seen at load 8). At least
        ``reads`` reads and ``writes`` writes. Prints what was seen."""
        rep = self.check()
        gaps = self.reload_gaps([2, 3])
        events = {k: sum(e.get(k, 0) for e in self.events)
                  for k in ("stale_hits", "revalidations", "revalidation_errors", "l2_errors")}
        print(rep.summary(cross + SLACK), f"; oldest value read {self.oldest():.3f} s (ttl "
              f"{hard} s); reloads of unwritten keys {len(gaps) + 2}, shortest gap "
              f"{min(gaps, default=float('nan')):.3f} s (soft_ttl {soft} s); {events}")
        assert all(k.startswith("put: Server") for k in self.error_kinds()), self.error_kinds()
        assert rep.reads > reads and rep.writes > writes and not rep.unknown
        assert rep.same_process == []
        assert rep.over(cross + SLACK) == []
        assert events["stale_hits"] > 0 and events["revalidations"] > 0, events
        assert max(start - born for _, born, start in self.ages) > soft
        assert self.oldest() <= hard + 1.0, self.oldest()
        # (Every failed request: a read or lease request that fails has its caller load the
        # key without storing it, or leaves the key's delete owed, which no fill stores over:
        # the next read loads it again. The L2's errors were left out until a run over Redis
        # at load 10 had an early reload and none of the other three.)
        failed = sum(e.get(k, 0) for e in self.events
                     for k in ("write_errors", "lease_timeouts", "revalidation_errors",
                               "l2_errors"))
        early = [g for g in gaps if g < soft - 0.05]
        assert len(gaps) >= 2 and len(early) <= failed, (sorted(gaps)[:5], failed, events)

    def reload_gaps(self, keys: list[Any]) -> list[float]:
        """The seconds between consecutive loads of each of ``keys``, over all processes."""
        gaps = []
        for k in keys:
            times = sorted(at for key, at, _ in self.loads if key == k)
            gaps += [b - a for a, b in zip(times, times[1:])]
        return gaps

    def waits_over(self, outages: list[tuple[float, float]], bound: float) -> list[Op]:
        """The reads that went on more than ``bound`` seconds past their start, or past the
        end of an outage they began before."""
        out = []
        for op in self.ops:
            if op.kind != "r":
                continue
            since = op.start
            for _, end in outages:
                if op.start < end:
                    since = max(since, end)
            if op.end - since > bound:
                out.append(op)
        return out

    def error_kinds(self) -> Counter[str]:
        """``"<op>: <exception type>"`` -> how many times."""
        return Counter(": ".join(e.split(": ", 2)[:2]) for e in self.errors)

    def add(self, kind: str, proc: int, thread: int, key: Any, value: Any, start: float,
            end: float) -> None:
        self.ops.append(Op(kind, proc, thread, key, value, start, end))

    def check(self) -> Report:
        """Every read against the writes of its key (see the module docstring)."""
        rep = Report()
        by_key: dict[Any, list[Op]] = {}
        for op in self.ops:
            if op.kind == "w":
                by_key.setdefault(op.key, []).append(op)
        # Per key, writes by start, and the suffix minimum of their ends (overall and per
        # process): the earliest end among the writes that began after a given time.
        tables = {}
        for k, ws in by_key.items():
            ws.sort(key=lambda w: w.start)
            starts = [w.start for w in ws]
            procs = {w.proc for w in ws}
            inf = float("inf")
            suffix = [inf] * (len(ws) + 1)
            per = {p: [inf] * (len(ws) + 1) for p in procs}
            for j in range(len(ws) - 1, -1, -1):
                suffix[j] = min(suffix[j + 1], ws[j].end)
                for p, arr in per.items():
                    arr[j] = min(arr[j + 1], ws[j].end if ws[j].proc == p else inf)
            value_end = {w.value: w.end for w in ws}
            tables[k] = (starts, suffix, per, value_end)
        for op in self.ops:
            if op.kind == "w":
                rep.writes += op.proc >= 0
                continue
            rep.reads += 1
            starts, suffix, per, value_end = tables[op.key]
            if op.value not in value_end:
                rep.unknown.append(op)
                continue
            j = bisect.bisect_right(starts, value_end[op.value])  # writes begun after it ended
            first = suffix[j]
            if first < op.start:
                mine = per.get(op.proc)
                if mine is not None and mine[j] < op.start:
                    rep.same_process.append((op, op.start - mine[j]))
                else:
                    rep.cross_process.append((op, op.start - first))
        return rep


def _run_standalone(args: argparse.Namespace) -> int:
    import tempfile

    sys.path.insert(0, str(_HERE.parent))
    from cachelab.servers import PrivateMemcached
    from cachelab.tiered import LRUMemory, MemcachedTier, TieredCache
    from faultproxy import FaultProxy

    ttl: float | str = "default" if args.ttl is None else args.ttl
    probe = TieredCache(MemcachedTier("127.0.0.1:1"),
                        LRUMemory(max_items=1) if args.ttl is None
                        else LRUMemory(max_items=1, ttl=args.ttl), prefix="probe")
    # (the code before the bound was stated has no ``staleness``: take the ttl as the bound)
    stated = probe.staleness() if hasattr(probe, "staleness") else \
        {"cross_process_s": args.ttl}
    bound = stated["cross_process_s"]
    with PrivateMemcached() as mc, FaultProxy(mc.address) as proxy, \
            tempfile.TemporaryDirectory() as tmp:
        proxy.delay(args.delay)
        h = run_history(proxy.address, Path(tmp) / "db.sqlite", "hist", Path(tmp),
                        procs=args.procs,
                        threads=args.threads, seconds=args.seconds, ttl=ttl)
    rep = h.check()
    print(f"stated: {stated}")
    print(rep.summary(None if bound is None else bound + SLACK))
    if h.errors:
        print("exceptions raised to the caller:", dict(h.error_kinds()))
    for r, a in rep.same_process[:5]:
        print(f"same-process stale: {r} age {a:.4f} s")
    bad = rep.same_process or rep.unknown or (
        bound is not None and rep.over(bound + SLACK))
    return 1 if bad else 0


#: Seconds allowed on top of the stated bound: one clock for all, so only timestamp rounding.
SLACK = 0.005


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    w.add_argument("cfg")
    o = sub.add_parser("outage")
    o.add_argument("cfg")
    r = sub.add_parser("run")
    r.add_argument("--procs", type=int, default=4)
    r.add_argument("--threads", type=int, default=8)
    r.add_argument("--seconds", type=float, default=30.0)
    r.add_argument("--delay", type=float, default=0.0005)
    r.add_argument("--ttl", type=float, default=None, help="L1 ttl (default: the library's)")
    args = ap.parse_args()
    if args.cmd == "worker":
        worker(json.loads(args.cfg))
        return 0
    if args.cmd == "outage":
        outage_worker(json.loads(args.cfg))
        return 0
    return _run_standalone(args)


if __name__ == "__main__":
    sys.exit(main())
