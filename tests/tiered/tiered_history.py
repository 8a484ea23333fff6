"""A history checker for ``cachelab.tiered`` (Jepsen-style): several processes × threads do
get/put/invalidate on a few keys through a :class:`~cachelab.tiered.TieredCache` whose memcached
sits behind a fault proxy adding network delay; every operation is recorded with its start and
end (``time.monotonic()``, one clock for all processes on Linux), and every read is checked
against the writes.

Each key is written by the threads of one process and read by all. A *write* sets the
"database" (keys of the same memcached, read directly, not through the
proxy: the loader reads them) to a value unique to it (``"<proc>:<thread>:<n>"``), then either
``put``s it or ``invalidate``s the key. A *read* is ``get``. Write ``a`` is *definitely older*
than write ``b`` when ``a`` ended before ``b`` began (concurrent writes are not ordered). A read
of ``a``'s value is *stale* when a write definitely newer than ``a`` ended before the read
began; its *age* is the time from the earliest such write's end to the read's start. It is a
*same-process* stale read when such a write was made by the reader's process.

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
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
#: Most operations one thread records (a bound on the history's size and the loop's length).
MAX_OPS_PER_THREAD = 200_000


# -- the workers ------------------------------------------------------------------------------


def worker(cfg: dict[str, Any]) -> None:
    """One process: ``cfg["threads"]`` threads for ``cfg["seconds"]``, its history written as
    JSON to ``cfg["out"]``: ``[[kind, key, value, start, end, thread], ...]``."""
    from cachelab.tiered import LRUMemory, MemcachedPool, MemcachedTier, TieredCache

    # The "database": a patient client, so a busy machine does not fail the loader.
    db = MemcachedTier(cfg["db"], timeout=5.0, connect_timeout=5.0)
    dbkey = (cfg["prefix"] + "-db:{}").format

    def load(idents: list[Any]) -> dict[Any, Any]:
        got = db.get_multi([dbkey(i) for i in idents])
        return {i: got[dbkey(i)].decode() for i in idents if dbkey(i) in got}

    l1 = LRUMemory(max_items=100) if cfg["ttl"] == "default" else \
        LRUMemory(max_items=100, ttl=cfg["ttl"])
    l2 = cfg["l2"]  # one server, or a pool's members
    tier = MemcachedPool(l2) if isinstance(l2, list) else MemcachedTier(l2)
    cache = TieredCache(tier, l1, prefix=cfg["prefix"])
    kc = cache.key_class("h", load)
    proc = cfg["proc"]
    keys = list(range(cfg["keys"]))
    # Each key is written by one process only (all its threads), read by all: the others keep
    # it in L1 until it expires, so the cross-process bound is actually exercised.
    mine = [k for k in keys if k % cfg["procs"] == proc] or keys
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
                db.set(dbkey(k), v.encode(), 0, 0)
                try:
                    if op == "put":
                        cache.put(kc, k, v)
                    else:
                        cache.invalidate(kc, k)
                except Exception as e:  # noqa: BLE001 - reported with the history
                    errors.append(f"{op}: {type(e).__name__}: {e}")
                    # its value is in the database, but the write never completed
                    log.append(["w", k, v, t0, float("inf"), t])
                else:
                    log.append(["w", k, v, t0, now(), t])
            else:
                t0 = now()
                try:
                    v = cache.get(kc, k)
                except Exception as e:  # noqa: BLE001 - reported with the history
                    errors.append(f"get: {type(e).__name__}: {e}")
                else:
                    log.append(["r", k, v, t0, now(), t])
            time.sleep(rng.random() * cfg["pause"])

    start_at = cfg["start_at"]
    time.sleep(min(max(0.0, start_at - time.monotonic()), 5.0))
    threads = [threading.Thread(target=run, args=(t,)) for t in range(cfg["threads"])]
    for th in threads:
        th.start()
    for th in threads:
        th.join(cfg["seconds"] + 60)
    ops = [op for log in logs for op in log]
    Path(cfg["out"]).write_text(json.dumps({"proc": proc, "ops": ops, "errors": errors},
                                           allow_nan=True))


# -- running them -----------------------------------------------------------------------------


def run_history(l2: str | list[str], db: str, prefix: str, tmp: Path, *, procs: int, threads: int,
                seconds: float, keys: int = 4, writes: float = 0.1, pause: float = 0.0002,
                ttl: float | str = "default") -> History:
    """Seeds the keys, runs ``procs`` worker processes against ``l2`` (the proxy, or a list:
    a pool of them, ``MemcachedPool``), and returns their merged history."""
    from cachelab.tiered import MemcachedTier

    seed = MemcachedTier(db)
    h = History()
    for k in range(keys):
        v = f"init:{k}"
        seed.set(f"{prefix}-db:{k}", v.encode(), 0, 0)
        h.add("w", -1, 0, k, v, float("-inf"), float("-inf"))
    seed.close()
    start_at = time.monotonic() + 1.0
    children = []
    for p in range(procs):
        cfg = {"l2": l2, "db": db, "prefix": prefix, "proc": p, "procs": procs,
               "threads": threads,
               "seconds": seconds, "keys": keys, "writes": writes, "pause": pause, "ttl": ttl,
               "start_at": start_at, "out": str(tmp / f"history-{p}.json")}
        children.append(subprocess.Popen([sys.executable, __file__, "worker", json.dumps(cfg)],
                                         env=os.environ.copy()))
    for c in children:
        rc = c.wait(timeout=seconds + 120)
        if rc != 0:
            raise AssertionError(f"history worker exited {rc}")
    for p in range(procs):
        got = json.loads((tmp / f"history-{p}.json").read_text())
        h.errors += got["errors"]
        for kind, k, v, t0, t1, t in got["ops"]:
            h.add(kind, p, t, k, v, t0, t1)
    return h


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
        h = run_history(proxy.address, mc.address, "hist", Path(tmp), procs=args.procs,
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
    return _run_standalone(args)


if __name__ == "__main__":
    sys.exit(main())
