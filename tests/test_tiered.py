"""``cachelab.tiered`` against a real memcached and a real SQLite database: each tier, request
scope, prefetch round trips, codecs, leases and single flight, failure and recovery,
invalidation, hostile keys."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cachelab import _core
from cachelab.errors import UsageError
from cachelab.servers import PrivateMemcached, find_memcached
from cachelab.tiered import (
    CircuitBreaker,
    FixedMemory,
    LRUMemory,
    MemcachedTier,
    PymemcacheTier,
    TieredCache,
    ValueFormat,
)
from cachelab.tiered.codecs import MAGIC, CorruptValue

# -- a real store ---------------------------------------------------------------------------


class Store:
    """A SQLite table of JSON-ish rows, and a loader over it that counts its calls."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE item (id TEXT PRIMARY KEY, body TEXT, n INTEGER)")
        self.lock = threading.Lock()
        self.calls: list[list[Any]] = []
        self.before_return: Callable[[], None] | None = None

    def write(self, ident: Any, body: str, n: int = 0) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO item VALUES (?, ?, ?)", (str(ident), body, n))
            self.db.commit()

    def load(self, idents: list[Any]) -> dict[Any, Any]:
        with self.lock:
            self.calls.append(list(idents))
            marks = ",".join("?" * len(idents))
            rows = self.db.execute(
                f"SELECT id, body, n FROM item WHERE id IN ({marks})", [str(i) for i in idents]
            ).fetchall()
        by_id = {r[0]: {"id": r[0], "body": r[1], "n": r[2]} for r in rows}
        out = {i: by_id[str(i)] for i in idents if str(i) in by_id}
        if self.before_return is not None:
            self.before_return()
        return out

    @property
    def loaded_keys(self) -> int:
        return sum(len(c) for c in self.calls)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store.sqlite")
    for i in range(50):
        s.write(i, f"body of {i} " * 20, i)
    yield s
    s.db.close()


class CountingTier(MemcachedTier):
    """A MemcachedTier that counts multi-gets (round trips) and their keys."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.multigets: list[int] = []

    def get_multi(self, keys: list[str]) -> dict[str, bytes]:
        self.multigets.append(len(keys))
        return super().get_multi(keys)


def server_stats(address: str) -> dict[str, int]:
    with _core.Client(address) as c:
        s = c.stats()
    return {k: int(s[k]) for k in ("cmd_get", "get_hits", "get_misses")}


def make(address: str, store: Store, *, l1: Any = None, prefix: str | None = None,
         **kw: Any) -> tuple[TieredCache, Any, CountingTier]:
    tier = CountingTier(address)
    cache = TieredCache(tier, l1, prefix=prefix, **kw)
    kc = cache.key_class("item", store.load)
    return cache, kc, tier


# -- each tier ------------------------------------------------------------------------------


def test_l3_fill_then_l2_then_l1(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, tier = make(memcached.address, store, l1=LRUMemory(max_items=10))
    assert cache.get(kc, 7)["body"].startswith("body of 7")  # L3, stored in L2 and L1
    assert store.loaded_keys == 1
    raw = _core.Client(memcached.address).get(cache.key_for(kc, 7))
    assert raw is not None and raw[0] == MAGIC
    gets_before = len(tier.multigets)
    assert cache.get(kc, 7)["n"] == 7  # L1: no loader, no memcached
    assert len(tier.multigets) == gets_before and store.loaded_keys == 1
    assert cache.stats()["l1"]["hits"] == 1

    other, okc, otier = make(memcached.address, store, prefix=cache.prefix)  # no L1
    assert other.get(okc, 7)["n"] == 7  # L2
    assert store.loaded_keys == 1 and otier.multigets == [1]
    assert other.stats()["l2"]["hits"] == 1


def test_loader_misses_are_not_cached(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10))
    assert cache.get(kc, "absent", default="none") == "none"
    store.write("absent", "now here")
    assert cache.get(kc, "absent")["body"] == "now here"


def test_lru_memory_is_bounded_by_bytes_and_items() -> None:
    m = LRUMemory(max_bytes=100)
    for i in range(5):
        m.put(("c", i), i, 30)
    assert m.items == 3 and m.bytes == 90
    assert m.contains(("c", 4)) and not m.contains(("c", 0)) and not m.contains(("c", 1))
    m.put(("c", "big"), "x", 101)  # heavier than the whole budget: not admitted
    assert not m.contains(("c", "big"))
    m2 = LRUMemory(max_items=2)
    m2.put(("c", 1), 1, 1)
    m2.put(("c", 2), 2, 1)
    assert m2.contains(("c", 1))  # 1 becomes the most recent
    m2.put(("c", 3), 3, 1)
    assert m2.contains(("c", 1)) and not m2.contains(("c", 2))


def test_fixed_memory_holds_only_its_pins(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, tier = make(memcached.address, store, l1=FixedMemory.from_keys("item", [1, 2]))
    for i in (1, 2, 3):
        cache.get(kc, i)
    calls = len(tier.multigets)
    cache.get(kc, 1)
    cache.get(kc, 2)
    assert len(tier.multigets) == calls  # pinned: in process
    cache.get(kc, 3)
    assert len(tier.multigets) == calls + 1  # not pinned: memcached again


def test_l1_ttl_bounds_staleness(store: Store) -> None:
    m = LRUMemory(max_items=10, ttl=1e-9)
    m.put(("c", 1), "v", 1)
    time.sleep(0.001)  # past the (nanosecond) TTL; not a timing assertion
    assert not m.contains(("c", 1))


# -- request scope and prefetch -------------------------------------------------------------


def test_request_scope_fetches_each_key_once(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, tier = make(memcached.address, store)  # no L1: only the scope can dedup
    cache.get_many(kc, [1, 2, 3])  # fill memcached
    before = server_stats(memcached.address)
    tier.multigets.clear()
    with cache.request() as req:
        for _ in range(3):
            assert req.get(kc, 1)["n"] == 1
            assert req.get(kc, 2)["n"] == 2
        after = server_stats(memcached.address)
        assert req.get(kc, "nope") is None and req.get(kc, "nope") is None
    assert tier.multigets == [1, 1, 1]  # 1, 2 and "nope", once each
    assert after["get_hits"] - before["get_hits"] == 2
    assert after["cmd_get"] - before["cmd_get"] == 2
    assert store.calls[-1] == ["nope"] and sum(c == ["nope"] for c in store.calls) == 1


def test_prefetch_is_one_round_trip(memcached: PrivateMemcached, store: Store) -> None:
    cache, kc, tier = make(memcached.address, store, l1=LRUMemory(max_items=100))
    warm, _, _ = make(memcached.address, store, prefix=cache.prefix)
    warm.get_many(warm._classes["item"], range(20))  # in memcached, not in cache's L1
    cache.get(kc, 0)  # in L1
    tier.multigets.clear()
    before = server_stats(memcached.address)
    with cache.request() as req:
        assert req.prefetch(kc, range(20)) == 19
        got = [req.get(kc, i)["n"] for i in range(20)]
    after = server_stats(memcached.address)
    assert got == list(range(20))
    assert tier.multigets == [19]  # one multi-get of the 19 keys L1 lacked
    assert after["get_hits"] - before["get_hits"] == 19
    assert after["cmd_get"] - before["cmd_get"] == 19


def test_prefetch_tree_walks_to_depth(memcached: PrivateMemcached, store: Store) -> None:
    tree = {0: [1, 2], 1: [3, 4], 2: [5], 3: [6], 4: [], 5: [], 6: []}
    cache, kc, tier = make(memcached.address, store, l1=LRUMemory(max_items=100))
    cache.get(kc, 2)  # already in L1: left out of the multi-get
    tier.multigets.clear()
    with cache.request() as req:
        assert req.prefetch_tree(kc, 0, tree.__getitem__, depth=2) == 5  # 0, 1, 3, 4, 5
        before = len(tier.multigets)
        for i in (0, 1, 2, 3, 4, 5):
            req.get(kc, i)
        assert len(tier.multigets) == before  # all present
        req.get(kc, 6)  # depth 3: not prefetched
    assert tier.multigets[0] == 5 and tier.multigets[-1] == 1


# -- codecs ---------------------------------------------------------------------------------

SMALL = {"id": 1, "tags": ["a", "b"], "score": 0.5, "ok": True, "none": None}
LARGE = {"text": "lorem ipsum dolor " * 400, "list": list(range(300))}


@pytest.mark.parametrize("codec", ["msgpack", "orjson", "pickle"])
@pytest.mark.parametrize("compression", ["none", "zlib", "zstd", "lz4"])
@pytest.mark.parametrize("obj", [SMALL, LARGE], ids=["small", "large"])
def test_codec_round_trips(codec: str, compression: str, obj: Any) -> None:
    fmt = ValueFormat(codec, compression, threshold=1024)
    enc = fmt.encode(obj)
    assert enc.data[0] == MAGIC and enc.data[1] == enc.flags
    compressed = enc.flags >> 4
    assert compressed == (0 if compression == "none" or obj is SMALL else enc.flags >> 4)
    if compression != "none" and obj is LARGE:
        assert compressed != 0 and len(enc.data) < enc.plain_size
    assert fmt.decode(enc.data) == obj


def test_raw_codec_and_flags_on_the_server(memcached: PrivateMemcached, store: Store) -> None:
    cache = TieredCache(MemcachedTier(memcached.address))
    blobs = cache.key_class("blob", lambda ids: {i: b"\x00\r\n" * 2000 for i in ids},
                            codec="raw", compression="zstd", threshold=100)
    assert cache.get(blobs, "b") == b"\x00\r\n" * 2000
    status, flags, value = _core.Client(memcached.address).meta_get(
        cache.key_for(blobs, "b"), "v f")
    assert status == "VA" and value is not None and len(value) < 6000
    assert f"f{value[1]}" in flags.split() and value[1] == (2 << 4 | 0)  # zstd, raw


def test_foreign_and_pickled_values_are_refused() -> None:
    with pytest.raises(CorruptValue):
        ValueFormat("msgpack").decode(b"plain bytes someone else wrote")
    pickled = ValueFormat("pickle").encode({"a": 1}).data
    with pytest.raises(CorruptValue, match="pickle"):
        ValueFormat("msgpack").decode(pickled)
    with pytest.raises(UsageError):
        ValueFormat("yaml")
    with pytest.raises(UsageError):
        ValueFormat("raw").encode({"not": "bytes"})


def test_a_foreign_value_under_our_key_reads_as_a_miss(
    memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, _ = make(memcached.address, store)
    _core.Client(memcached.address).set(cache.key_for(kc, 5), b"not ours")
    assert cache.get(kc, 5)["n"] == 5
    assert cache.stats()["events"]["corrupt"] >= 1
    loads = store.loaded_keys
    fresh, fkc, _ = make(memcached.address, store, prefix=cache.prefix)
    assert fresh.get(fkc, 5)["n"] == 5 and store.loaded_keys == loads  # overwritten with ours


# -- stampedes ------------------------------------------------------------------------------


def _wait_for(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.001)


def test_two_processes_fill_a_key_once_with_leases(
    memcached: PrivateMemcached, store: Store
) -> None:
    """Two caches (as two processes would have) miss the same key at once: the lease winner
    loads it, the other waits for the winner's value instead of loading it again."""
    a, akc, _ = make(memcached.address, store, lease_wait=10.0)
    b, bkc, _ = make(memcached.address, store, prefix=a.prefix, lease_wait=10.0)
    loading, release = threading.Event(), threading.Event()

    def slow_load(idents: list[Any]) -> dict[Any, Any]:
        loading.set()
        release.wait(10)
        return store.load(idents)

    a._classes["item"] = akc = a._classes["item"].__class__(
        "item", slow_load, akc.format, akc.ttl, akc.l1, akc.namespace)
    got: dict[str, Any] = {}
    ta = threading.Thread(target=lambda: got.__setitem__("a", a.get(akc, 9)))
    ta.start()
    assert loading.wait(10)
    tb = threading.Thread(target=lambda: got.__setitem__("b", b.get(bkc, 9)))
    tb.start()
    _wait_for(lambda: b.events.lease_waits == 1, "the second filler to see the lease")
    release.set()
    ta.join(10)
    tb.join(10)
    assert got["a"] == got["b"] and got["a"]["n"] == 9
    assert store.calls == [[9]]  # loaded once, by the winner
    assert a.events.lease_wins == 1 and b.events.lease_wins == 0
    assert b.events.lease_timeouts == 0


def test_threads_fill_a_key_once_with_single_flight(
    memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, _ = make(memcached.address, store)
    loading, release = threading.Event(), threading.Event()
    store.before_return = lambda: (loading.set(), release.wait(10))
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(kc, 3)))
               for _ in range(2)]
    threads[0].start()
    assert loading.wait(10)
    threads[1].start()
    _wait_for(lambda: cache.events.singleflight_waits == 1, "the second thread to wait")
    release.set()
    for t in threads:
        t.join(10)
    assert [r["n"] for r in results] == [3, 3]
    assert store.calls == [[3]]


# -- failure and recovery -------------------------------------------------------------------


class ManualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def memcached_on(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """A memcached on a port we choose, so it can come back on the same address."""
    argv = [find_memcached(), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "16"]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                _core.Client(f"127.0.0.1:{port}", connect_timeout=0.2).version()
                break
            except Exception:
                if time.monotonic() > deadline or p.poll() is not None:
                    raise
                time.sleep(0.01)
        yield p
    finally:
        p.terminate()
        p.wait(5)


def test_memcached_stopped_mid_test_then_back(store: Store) -> None:
    port = _free_port()
    clock = ManualClock()
    address = f"127.0.0.1:{port}"
    with memcached_on(port):
        cache, kc, _ = make(address, store, breaker=CircuitBreaker(2, 5.0, clock=clock))
        assert cache.get(kc, 1)["n"] == 1
    # stopped: every read falls back to the loader; the breaker opens after 2 failures
    for i in (2, 3, 4, 5):
        assert cache.get(kc, i)["n"] == i
    s = cache.stats()
    assert s["breaker"] == "open" and s["events"]["opened"] == 1
    assert s["events"]["fallbacks"] >= 2 and s["events"]["skipped"] >= 2
    assert s["l2"]["errors"] >= 2
    with memcached_on(port):
        assert cache.get(kc, 6)["n"] == 6  # still open: skipped, not tried
        assert cache.stats()["breaker"] == "open"
        clock.t += 5.0  # half-open: the next call is a trial
        assert cache.get(kc, 7)["n"] == 7
        assert cache.stats()["breaker"] == "closed"
        loads = store.loaded_keys
        other, okc, _ = make(address, store, prefix=cache.prefix)
        assert other.get(okc, 7)["n"] == 7 and store.loaded_keys == loads  # stored again


def test_hung_server_falls_back_within_the_timeout(
    fake_server: Callable[[str], Any], store: Store
) -> None:
    fake = fake_server("silent")
    cache = TieredCache(MemcachedTier(fake.address, timeout=0.05), None,
                        breaker=CircuitBreaker(1, 60.0))
    kc = cache.key_class("item", store.load)
    assert cache.get(kc, 1)["n"] == 1  # the timeout, then the loader
    assert cache.get(kc, 2)["n"] == 2  # breaker open: straight to the loader
    s = cache.stats()
    assert s["events"]["fallbacks"] == 2 and s["events"]["skipped"] == 1


def test_pending_invalidation_survives_a_hang(
    fresh_memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, _ = make(fresh_memcached.address, store, l1=LRUMemory(max_items=10),
                        breaker=CircuitBreaker(1, 0.01))
    cache.l2.timeout = 0.05  # type: ignore[union-attr]
    assert cache.get(kc, 1)["body"].startswith("body of 1")
    store.write(1, "new body", 1)
    os.kill(fresh_memcached.pid or 0, signal.SIGSTOP)
    try:
        cache.invalidate(kc, 1)  # cannot reach memcached: kept pending
        assert cache.stats()["events"]["pending_invalidations"] == 1
    finally:
        os.kill(fresh_memcached.pid or 0, signal.SIGCONT)
    _wait_for(lambda: cache.breaker.state != "open", "the breaker to allow a trial")
    assert cache.get(kc, 1)["body"] == "new body"
    assert cache.stats()["events"]["pending_invalidations"] == 0
    other, okc, _ = make(fresh_memcached.address, store, prefix=cache.prefix)
    assert other.get(okc, 1)["body"] == "new body"


# -- invalidation ---------------------------------------------------------------------------


def test_no_stale_read_after_invalidation(memcached: PrivateMemcached, store: Store) -> None:
    a, akc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10))
    b, bkc, _ = make(memcached.address, store, prefix=a.prefix)
    assert a.get(akc, 4)["body"].startswith("body") and b.get(bkc, 4)["body"].startswith("body")
    store.write(4, "v2", 4)
    a.invalidate(akc, 4)
    assert a.get(akc, 4)["body"] == "v2"
    assert b.get(bkc, 4)["body"] == "v2"


def test_a_fill_racing_an_invalidation_is_not_stored(
    memcached: PrivateMemcached, store: Store
) -> None:
    """The loader reads v1; before it returns, the row changes and is invalidated. The fill
    must not land in memcached or L1 (the lease's CAS set fails), so the next read sees v2."""
    a, akc, _ = make(memcached.address, store, l1=LRUMemory(max_items=10))
    writer, wkc, _ = make(memcached.address, store, prefix=a.prefix)

    def change_and_invalidate() -> None:
        store.before_return = None
        store.write(8, "v2", 8)
        writer.invalidate(wkc, 8)
        a.invalidate(akc, 8)  # the same process would also bump a's epoch

    store.before_return = change_and_invalidate
    assert a.get(akc, 8)["body"].startswith("body of 8")  # the read overlapped the write
    assert a.events.lease_lost == 1
    assert a.get(akc, 8)["body"] == "v2"
    fresh, fkc, _ = make(memcached.address, store, prefix=a.prefix)
    assert fresh.get(fkc, 8)["body"] == "v2"


def test_versioned_namespace(memcached: PrivateMemcached, store: Store) -> None:
    a = TieredCache(MemcachedTier(memcached.address), LRUMemory(max_items=10), ns_refresh=0)
    b = TieredCache(MemcachedTier(memcached.address), None, prefix=a.prefix, ns_refresh=0)
    akc = a.key_class("item", store.load, namespace="catalog")
    bkc = b.key_class("item", store.load, namespace="catalog")
    assert a.get(akc, 1)["n"] == 1 and b.get(bkc, 1)["n"] == 1
    old_key = a.key_for(akc, 1)
    store.write(1, "v2", 1)
    store.write(2, "v2", 2)
    b.invalidate_namespace("catalog")
    assert a.key_for(akc, 1) != old_key
    assert a.get(akc, 1)["body"] == "v2" and b.get(bkc, 1)["body"] == "v2"


# -- hostile keys ---------------------------------------------------------------------------

HOSTILE = [
    "a b", "x\r\nflush_all", "get other", "\x00", "é", "k" * 300, b"\xff\xfe bytes",
    "#deadbeef", "", "tab\there",
]


def test_hostile_idents_are_encoded_not_sent(memcached: PrivateMemcached, store: Store) -> None:
    cache = TieredCache(MemcachedTier(memcached.address))
    kc = cache.key_class("h", lambda ids: {i: {"i": repr(i)} for i in ids})
    keys = set()
    canary = cache.key_class("canary", store.load)
    cache.get(canary, 1)
    for ident in HOSTILE:
        key = cache.key_for(kc, ident)
        _core.validate_key(key)
        assert len(key) <= 250 and not any(c.isspace() for c in key)
        keys.add(key)
        assert cache.get(kc, ident) == {"i": repr(ident)}
    assert len(keys) == len(HOSTILE)  # distinct idents, distinct keys
    loads = store.loaded_keys
    other = TieredCache(MemcachedTier(memcached.address), prefix=cache.prefix)
    assert other.get(other.key_class("canary", store.load), 1)["n"] == 1
    assert store.loaded_keys == loads  # nothing was flushed or overwritten


@pytest.mark.parametrize("prefix", ["has space", "x\r\n", "", "p" * 101])
def test_hostile_prefixes_and_names_are_rejected(prefix: str) -> None:
    with pytest.raises(UsageError):
        TieredCache(None, prefix=prefix)
    cache = TieredCache(None)
    with pytest.raises(UsageError):
        cache.key_class(prefix or "a b", lambda ids: {})


# -- other clients and no memcached ---------------------------------------------------------


def test_pymemcache_tier(memcached: PrivateMemcached, store: Store) -> None:
    from pymemcache.client.base import Client

    host, port = memcached.address.rsplit(":", 1)
    client = Client((host, int(port)), connect_timeout=1, timeout=1)
    cache = TieredCache(PymemcacheTier(client), None)
    kc = cache.key_class("item", store.load, compression="zlib", threshold=10)
    assert cache.get(kc, 3)["n"] == 3
    assert cache.get_many(kc, [3, 4]) == {3: store.load([3])[3], 4: store.load([4])[4]}
    loads = len(store.calls)
    ours = TieredCache(MemcachedTier(memcached.address), None, prefix=cache.prefix)
    assert ours.get(ours.key_class("item", store.load), 4)["n"] == 4
    assert len(store.calls) == loads  # the Rust client reads what pymemcache wrote
    client.close()


def test_without_memcached(store: Store) -> None:
    cache = TieredCache(None, LRUMemory(max_items=5))
    kc = cache.key_class("item", store.load)
    assert cache.get(kc, 1)["n"] == 1 and cache.get(kc, 1)["n"] == 1
    assert store.calls == [[1]]


# -- the multi-get path: one list aligned with the request ------------------------------------


def test_get_multi_list_is_aligned_with_the_request(memcached: PrivateMemcached) -> None:
    head = bytes((MAGIC, 1))
    keys = [f"gml:{n}" for n in range(6)]
    with _core.Client(memcached.address) as c:
        c.set(keys[0], head + b"one")
        c.set(keys[2], b"foreign")
        c.set(keys[3], head)
        c.set(keys[5], b"")
        for k in (keys[1], keys[4]):
            c.delete(k)
        asked = [*keys, keys[0]]  # a repeated key gets its value at both places
        values, found, others, stripped = c.get_multi_list(asked, head)
        assert values == [b"one", None, b"foreign", b"", None, b"", b"one"]
        assert found == 5 and others == [2, 5] and stripped == 2 * len(head + b"one") + 2
        whole = c.get_multi_list(asked)
        assert whole[0] == [head + b"one", None, b"foreign", head, None, b"", head + b"one"]
        assert whole[2] == [0, 2, 3, 5, 6] and whole[3] == 0
    # The Tier default (through get_multi, as a subclass wrapping it sees) answers the same.
    counting = CountingTier(memcached.address)
    assert counting.get_list(keys, head) == MemcachedTier(memcached.address).get_list(keys, head)
    assert counting.multigets == [len(keys)]


def test_a_multi_get_of_mixed_values(memcached: PrivateMemcached, store: Store) -> None:
    """Plain, compressed, corrupt, foreign, placeholder and missing values in one multi-get:
    each read right, the bad ones counted and loaded again."""
    cache = TieredCache(CountingTier(memcached.address), LRUMemory(max_items=100))
    kc = cache.key_class("mixed", store.load, compression="zlib", threshold=200)
    for i in range(8):
        cache.put(kc, i, {"id": str(i), "body": "x" * (20 if i % 2 else 400), "n": i})
    with _core.Client(memcached.address) as c:
        c.set(cache.key_for(kc, 2), bytes((MAGIC, 1)) + b"\xc1")  # msgpack never uses 0xc1
        c.set(cache.key_for(kc, 3), b"foreign")
        c.set(cache.key_for(kc, 4), b"")  # a lease placeholder
        c.delete(cache.key_for(kc, 5))
    cache.l1.clear()  # type: ignore[union-attr]
    got = cache.get_many(kc, range(8))
    assert list(got) == list(range(8))  # in the order asked
    for i in (0, 1, 6, 7):
        assert got[i] == {"id": str(i), "body": "x" * (20 if i % 2 else 400), "n": i}
    for i in (2, 3, 4, 5):
        assert got[i]["body"].startswith(f"body of {i}")  # from the store
    # 4 looks like a fill in progress (an empty value): loaded on its own after lease_wait
    assert store.calls == [[2, 3, 5], [4]]
    st = cache.stats()
    # 2 and 3 are refused twice: in the multi-get, then in the lease get before loading
    assert st["events"]["corrupt"] == 4 and st["l2"]["hits"] == 4 and st["l2"]["misses"] == 4
    assert cache.l1.items == 8  # type: ignore[union-attr]
    assert cache.get_many(kc, range(8)) == got and len(store.calls) == 2  # all from L1


def test_the_l1_hit_path_keeps_ttl_versions_and_recency(
    memcached: PrivateMemcached, store: Store
) -> None:
    cache, kc, tier = make(memcached.address, store, l1=LRUMemory(max_items=2, ttl=60))
    cache.get(kc, 1)
    cache.get(kc, 2)
    assert cache.get(kc, 1)["n"] == 1  # an entry with a TTL: through LRUMemory.get
    cache.get(kc, 3)  # evicts 2, the least recently used
    assert cache.l1.contains(("item", 1)) and not cache.l1.contains(("item", 2))  # type: ignore[union-attr]
    assert cache.stats()["l1"]["hits"] == 1

    plain, pkc, _ = make(memcached.address, store, l1=LRUMemory(max_items=2),
                         prefix=cache.prefix)
    plain.get(pkc, 1)
    plain.get(pkc, 2)
    assert plain.get(pkc, 1)["n"] == 1  # the inlined hit
    plain.get(pkc, 3)
    assert plain.l1.contains(("item", 1)) and not plain.l1.contains(("item", 2))  # type: ignore[union-attr]
    assert plain.stats()["l1"]["hits"] == 1
    plain.l1 = None  # the hit path follows the attribute
    before = len(store.calls)
    assert plain.get(pkc, 1)["n"] == 1 and plain.stats()["l1"]["hits"] == 1
    assert len(store.calls) == before  # from memcached
