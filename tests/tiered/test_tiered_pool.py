"""A memcached pool as L2 (``MemcachedPool``), on real members at 127.0.0.2–127.0.0.4: keys
land where ``cachelab.pool.distribution`` says (asked of each member directly), multi-gets
split across members return everything, leases live on their key's member, and one member
killed or stopped under load from several threads: no exception, the other members keep
serving, the down member's keys come from the loader, its owed deletes are replayed when it is
back, and no read is staler than the stated bound (also over processes: the history checker)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tiered_helpers import free_port, memcached_on, stop, wait_for
from tiered_history import run_history

from cachelab import _core
from cachelab import pool as cpool
from cachelab.errors import ServerError
from cachelab.servers import PrivateMemcached
from cachelab.tiered import CircuitBreaker, LRUMemory, MemcachedPool, TieredCache
from cachelab.tiered.flight import LEASE_POLL_MAX
from faultproxy import FaultProxy

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
TIMEOUT = 0.1  # each member's request and connect timeouts in the outage tests
# What a call may take beyond one timeout (GIL, loader, scheduling: on a loaded 2-core machine,
# beside other tests, a thread waits a few hundred ms for a CPU now and then; 0.41 s was seen
# beside a CPU hog). The outage lasts at least OUTAGE, which a call not bounded by the timeout
# would wait out.
SLACK_CALL = 0.9
OUTAGE = 2.0
THREADS = 4
KEYS = 240


@pytest.fixture(scope="module")
def members() -> Iterator[list[PrivateMemcached]]:
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(PrivateMemcached(host=h, memory_mb=16, threads=1))
               for h in HOSTS]


def _held(address: str, keys: list[str]) -> set[str]:
    """The keys among ``keys`` that the server at ``address`` holds, asked directly."""
    with _core.Client(address) as c:
        return {k.decode() for k in c.get_multi(list(keys))}


def _rows(idents: list[Any]) -> dict[Any, Any]:
    return {i: {"id": i, "v": f"row {i}"} for i in idents}


@pytest.mark.parametrize(("kind", "weights"), [("ketama", (1, 2, 1)), ("rendezvous", (1, 1, 1)),
                                               ("modula", (1, 1, 1))])
def test_keys_land_on_the_member_the_distribution_picks(
    members: list[PrivateMemcached], kind: str, weights: tuple[int, ...]
) -> None:
    specs = [m.address if w == 1 else f"{m.address}:{w}" for m, w in zip(members, weights)]
    # (generous timeouts: this is about where keys land, and a loaded machine can hold a
    # member's reply past the library's default 0.25 s — a write is then skipped, by design)
    cache = TieredCache(MemcachedPool(specs, distribution=kind, timeout=5, connect_timeout=5),
                        None)
    kc = cache.key_class("row", _rows)
    idents = list(range(300))
    for i in idents[:150]:
        cache.put(kc, i, {"id": i})  # writes
    cache.get_many(kc, idents[150:])  # fills
    keys = [cache.key_for(kc, i) for i in idents]
    golden = cpool.distribution(kind, specs)  # checked against pylibmc / pymemcache
    for n, m in enumerate(members):
        want = {k for k in keys if golden.server_for(k) == n}
        assert want, f"member {n} should hold some of 300 keys"
        assert _held(m.address, keys) == want, f"member {n} ({kind})"
    st = cache.stats()
    assert st["pool"]["distribution"] == kind
    assert [x["address"] for x in st["pool"]["members"]] == [m.address for m in members]
    assert [x["weight"] for x in st["pool"]["members"]] == list(weights)


def test_get_many_across_members_returns_everything(
    members: list[PrivateMemcached], tmp_path: Path
) -> None:
    servers = tmp_path / "pool.txt"
    servers.write_text("# the test pool\n" + "\n".join(m.address for m in members) + "\n")
    loads: list[list[Any]] = []

    def load(idents: list[Any]) -> dict[Any, Any]:
        loads.append(list(idents))
        return _rows([i for i in idents if i % 10 != 7])  # some idents are unknown

    writer = TieredCache(MemcachedPool.from_file(servers), None, prefix=f"gm{os.getpid()}")
    wkc = writer.key_class("row", load)
    idents = list(range(100))
    want = {i: r for i, r in _rows(idents).items() if i % 10 != 7}
    assert writer.get_many(wkc, idents) == want
    assert loads == [idents]  # one loader call for every member's misses, in request order
    # Another cache (no L1) over the same pool: every value from memcached, none loaded.
    reader = TieredCache(MemcachedPool(str(servers)), None, prefix=writer.prefix)
    rkc = reader.key_class("row", load)
    got = reader.get_many(rkc, idents[::-1])
    assert got == want and list(got) == [i for i in idents[::-1] if i in want]
    assert len(loads) == 2 and loads[1] == [i for i in idents[::-1] if i not in want]
    st = reader.stats()
    assert st["l2"]["calls"] == 3 + 10  # one multi-get per member, then 10 lease gets
    assert st["l2"]["hits"] == len(want) and st["l2"]["misses"] == 10
    per = st["pool"]["members"]
    assert sum(x["hits"] for x in per) == len(want) and all(x["hits"] > 0 for x in per)
    # The pool as a plain Tier: split per member, each key on its member.
    pool = reader.l2
    assert isinstance(pool, MemcachedPool)
    keys = [reader.key_for(rkc, i) for i in idents]
    assert set(pool.get_multi(keys)) == {reader.key_for(rkc, i) for i in want}
    pool.delete_many(keys[:50])
    assert not any(_held(m.address, keys[:50]) for m in members)
    assert len(pool.get_multi(keys)) == sum(1 for i in want if i >= 50)


def test_a_lease_lives_on_its_keys_member(members: list[PrivateMemcached]) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(idents: list[Any]) -> dict[Any, Any]:
        entered.set()
        assert release.wait(5)
        return _rows(idents)

    specs = [m.address for m in members]
    # (Timeouts of 2 s, not the default 0.25 s: beside a CPU hog the waiter's lease poll timed
    # out once, and a waiter whose poll fails loads the row itself, as documented.)
    holder = TieredCache(MemcachedPool(specs, timeout=2.0, connect_timeout=2.0), None)
    hkc = holder.key_class("row", slow)
    waiter = TieredCache(MemcachedPool(specs, timeout=2.0, connect_timeout=2.0), None,
                         prefix=holder.prefix)
    calls: list[Any] = []
    wkc = waiter.key_class("row", lambda ids: (calls.append(ids), _rows(ids))[1])
    got: dict[str, Any] = {}
    t1 = threading.Thread(target=lambda: got.update(h=holder.get(hkc, 5)))
    t1.start()
    assert entered.wait(5)
    key = holder.key_for(hkc, 5)
    home = cpool.distribution("ketama", specs).server_for(key)
    try:
        for n, m in enumerate(members):  # the placeholder (an empty value): on its member only
            with _core.Client(m.address) as c:
                status, _, value = c.meta_get(key, "v")
            assert (status, value) == (("VA", b"") if n == home else ("EN", None)), n
        t2 = threading.Thread(target=lambda: got.update(w=waiter.get(wkc, 5)))
        t2.start()
        wait_for(lambda: waiter.events.lease_waits == 1, "the waiter to meet the lease")
    finally:
        release.set()
    t1.join(5)
    t2.join(5)
    assert got["h"] == got["w"] == {"id": 5, "v": "row 5"}
    assert calls == [] and holder.events.lease_wins == 1  # loaded once, in the holder


# -- one member down under load ---------------------------------------------------------------


class Truth:
    """The rows the loader reads (each key's ``n``), and which keys it loaded."""

    def __init__(self) -> None:
        self.n = dict.fromkeys(range(KEYS), 0)
        self.loaded: list[int] = []

    def load(self, idents: list[Any]) -> dict[Any, Any]:
        self.loaded.extend(idents)
        return {i: {"id": i, "n": self.n[i]} for i in idents}


class Load:
    """THREADS threads: reads of any key, ~5 % writes (put or invalidate) of the thread's own
    keys (key % THREADS). A thread that reads one of its own keys must see its last write
    (the same-process bound is "none"): any other value is recorded as a stale read."""

    def __init__(self, cache: TieredCache, kc: Any, truth: Truth) -> None:
        self.cache, self.kc, self.truth = cache, kc, truth
        self.last_n: dict[int, int] = {}
        self.errors: list[BaseException] = []
        self.stale: list[tuple[int, int, int]] = []
        self.worst = 0.0
        #: The slowest call: what it was, its key, and when it began (``time.monotonic()``)
        self.worst_call: tuple[str, int, float] | None = None
        self.calls = 0
        self._stop = threading.Event()

    def _work(self, t: int) -> None:
        rng = random.Random(t)
        mine = [k for k in range(KEYS) if k % THREADS == t]
        for step in range(1, 10_000_000):  # bounded; stopped by the event long before
            if self._stop.is_set():
                return
            t0 = time.monotonic()
            op = "get"
            try:
                if rng.random() < 0.05:
                    k = rng.choice(mine)
                    n = step * THREADS + t  # increasing per key
                    self.truth.n[k] = n
                    if rng.random() < 0.3:
                        op = "invalidate"
                        self.cache.invalidate(self.kc, k)
                    else:
                        op = "put"
                        self.cache.put(self.kc, k, {"id": k, "n": n})
                    self.last_n[k] = n
                else:
                    k = rng.randrange(KEYS)
                    v = self.cache.get(self.kc, k)
                    if k % THREADS == t and v["n"] != self.last_n.get(k, 0):
                        self.stale.append((k, v["n"], self.last_n.get(k, 0)))
            except BaseException as e:  # noqa: BLE001 - every exception is a failure here
                self.errors.append(e)
                return
            took = time.monotonic() - t0
            if took > self.worst:
                self.worst, self.worst_call = took, (op, k, t0)
            self.calls += 1

    @contextlib.contextmanager
    def running(self) -> Iterator[Load]:
        threads = [threading.Thread(target=self._work, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        try:
            yield self
        finally:
            self._stop.set()
            for th in threads:
                th.join(10)


def _member(cache: TieredCache, n: int) -> dict[str, Any]:
    return cache.stats()["pool"]["members"][n]  # type: ignore[no-any-return]


def _count_failures(tier: Any) -> list[int]:
    """Counts the ``ServerError`` a member's tier raises (a witness of its failures, kept
    apart from the cache's breakers): ``[n]``, updated in place."""
    failures = [0]
    call = tier._call

    def counted(method: str, *args: Any, **kw: Any) -> Any:
        try:
            return call(method, *args, **kw)
        except ServerError:
            failures[0] += 1
            raise

    tier._call = counted
    return failures


@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_one_member_down_under_load(members: list[PrivateMemcached], fault: str) -> None:
    """Member 1 (127.0.0.3, on a port of our choosing so it can come back on it) is killed
    and restarted empty, or stopped and continued with its old values still in it.

    On a loaded machine a healthy member's request can time out too (0.1 s), and three in a
    row open its breaker: what is checked of the healthy members is then conditioned on the
    failures they raised themselves (counted apart from the breakers), and each phase lasts
    until what it is for has happened rather than for a fixed time."""
    port = free_port(HOSTS[1])
    truth = Truth()
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(memcached_on(port, HOSTS[1]))
        specs = [members[0].address, f"{HOSTS[1]}:{port}", members[2].address]
        pool = MemcachedPool(specs, timeout=TIMEOUT, connect_timeout=TIMEOUT)
        own = [_count_failures(m) for m in pool.members]
        cache = TieredCache(pool, LRUMemory(max_items=KEYS // 4),
                            breaker=CircuitBreaker(3, 0.2), prefix=f"out{os.getpid()}{fault}")
        kc = cache.key_class("item", truth.load)
        on = [pool.member_of(cache.key_for(kc, k)) for k in range(KEYS)]
        load = Load(cache, kc, truth)
        with load.running():
            # healthy: fills every member (every key loaded or written), writes through them
            before: list[dict[str, Any]] = []
            own_before: list[int] = []

            def healthy() -> bool:
                own_before[:] = [f[0] for f in own]  # (first: a failure in between is the
                before[:] = [_member(cache, n) for n in range(3)]  # next phase's)
                return len({*truth.loaded, *load.last_n}) == KEYS and all(
                    m["hits"] > 0 for m in before)

            # (Every one of the 240 keys read at random: a coupon collector's wait, which a
            # busy machine's timeouts and opened breakers stretched past 10 s once.)
            wait_for(healthy, "every key in memcached, every member serving hits", 30.0)
            down_at = time.monotonic()
            if fault == "kill":
                server.kill()
                server.wait(5)
            else:
                stop(server.pid)
            wait_for(lambda: _member(cache, 1)["state"] != "closed", "member 1 to be down")
            # (The loads and the reads past member 1 counted from one moment: reads past it
            # before this one load keys that `loaded` below does not hold.)
            loaded_from, bypassed_from = len(truth.loaded), _member(cache, 1)["bypassed"]

            def served() -> bool:  # down: its keys bypass L2, the others keep hitting
                now = [_member(cache, n) for n in range(3)]  # and a write meant for it waits
                return (now[1]["bypassed"] - bypassed_from > 20
                        and all(now[n]["hits"] - before[n]["hits"] > 50 for n in (0, 2))
                        and now[1]["pending_invalidations"] > 0)  # (5 % of calls: none once)

            wait_for(served, "member 1 read past, the others serving")
            during = [_member(cache, n) for n in range(3)]
            own_during = [f[0] for f in own]  # (last: a failure in between is this phase's)
            loaded = truth.loaded[loaded_from:]
            time.sleep(max(0.0, down_at + OUTAGE - time.monotonic()))
            if fault == "kill":
                stack.enter_context(memcached_on(port, HOSTS[1]))  # empty, same address
            else:
                os.kill(server.pid, signal.SIGCONT)
            time.sleep(0.5)  # back: owed deletes replayed under load
        assert not load.errors, load.errors[:3]
        assert not load.stale, load.stale[:5]
        assert TIMEOUT + SLACK_CALL < OUTAGE
        # (What the slowest call was, when it began after the fault, on which member, and the
        # cache's events.) A stopped member runs the lease requests lost to it when it
        # continues, maybe after their owed delete: gets wait on such a placeholder until the
        # second delete, lost_request_s after the first reached it. (A get of 9.4 s, the
        # lease's TTL, once on a member that stayed up: a winner that skipped its store for
        # an owed delete left its placeholder when that delete had reached the server first
        # — the one such path found; it now frees it, test_tiered_leases.py.)
        late = (cache.staleness()["lost_request_s"] + 2 * LEASE_POLL_MAX if fault == "stop"
                else 0.0)
        assert load.worst <= max(TIMEOUT, late) + SLACK_CALL, (
            load.worst, load.worst_call and (load.worst_call[0], load.worst_call[1],
                                             round(load.worst_call[2] - down_at, 3),
                                             on[load.worst_call[1]]), cache.events)
        # Each breaker counts its own member's failures, no other's.
        for n, failures in enumerate(own):
            assert _member(cache, n)["failed_calls"] <= failures[0], (n, failures)
        healthy_failed = False
        for n in (0, 2):  # the other members kept serving
            failed = own_during[n] - own_before[n]
            healthy_failed |= failed > 0 or before[n]["state"] != "closed"
            if not failed and before[n]["state"] == "closed":
                # and, answering every request in time, never went down
                assert during[n]["down_episodes"] == before[n]["down_episodes"], during[n]
                # Read past only now and then: a reader that meets an invalidation's delete
                # queued a moment ago by another thread. Never an outage of the member.
                hits = during[n]["hits"] - before[n]["hits"]
                assert during[n]["bypassed"] - before[n]["bypassed"] <= max(2, hits // 50), (
                    n, before[n], during[n])
            else:  # a loaded machine's timeouts (0.1 s): each down episode a failure of its own
                episodes = during[n]["down_episodes"] - before[n]["down_episodes"]
                assert failed >= episodes, (n, failed, during[n])
        assert during[1]["pending_invalidations"] > 0, during[1]  # writes meant for it
        ones = sum(on[k] == 1 for k in loaded)  # the others' come from invalidations only
        assert ones > 20, (ones, len(loaded))
        if not healthy_failed:  # (and from their own timeouts, when they had some)
            assert ones > 3 * (len(loaded) - ones), (ones, len(loaded))
        # Whatever is still owed goes out on the next call once its breaker allows one.
        wait_for(lambda: (cache.get(kc, 0), cache.events.pending_invalidations == 0)[1],
                 "the owed deletes")
        after = _member(cache, 1)
        assert after["state"] == "closed" and after["down_episodes"] >= 1
        assert after["deletes_flushed"] > 0
        assert after["last_down"] is not None and after["last_up"] is not None
        assert after["last_up"] > after["last_down"]
        # Every member answers: the cache says so once each has had a call (a healthy member
        # whose breaker a loaded machine's timeouts opened is half-open until its next call).
        probes = [on.index(n) for n in range(3)]

        def closed() -> bool:
            for k in probes:
                cache.invalidate(kc, k)
            return cache.stats()["breaker"] == "closed"

        wait_for(closed, "every member's breaker to close")
        # No key reads older than its last write, from a cache that saw none of them
        # (stopped: member 1 kept its pre-outage values; only the replayed deletes hide them).
        fresh = TieredCache(MemcachedPool(specs), None, prefix=cache.prefix)
        fkc = fresh.key_class("item", truth.load)
        got = fresh.get_many(fkc, sorted(load.last_n))
        stale = {k: (got[k]["n"], n) for k, n in load.last_n.items() if got[k]["n"] != n}
        assert not stale, stale
        assert any(on[k] == 1 for k in load.last_n)  # member 1's keys were written too


def test_history_over_a_pool_has_no_read_staler_than_the_bound(
    members: list[PrivateMemcached], tmp_path: Path
) -> None:
    """The whole-history checker, every member behind a proxy adding 0.5 ms to each reply."""
    bound = TieredCache(MemcachedPool([m.address for m in members]), LRUMemory(max_items=10),
                        prefix="x").staleness()["cross_process_s"]
    assert bound == 1.0
    with contextlib.ExitStack() as stack:
        proxies = [stack.enter_context(FaultProxy(m.address)) for m in members]
        for p in proxies:
            p.delay(0.0005)
        h = run_history([p.address for p in proxies], tmp_path / "db.sqlite",
                        f"phist{os.getpid()}", tmp_path, procs=2, threads=3, seconds=2.0,
                        keys=9)
    h.judge(bound)


def test_stale_values_on_a_pool_are_claimed_on_their_members(
    members: list[PrivateMemcached],
) -> None:
    """Stale-while-revalidate over a pool: one get_many of keys on every member reloads the
    stale ones in one loader call, each claim and store on its key's member; another cache
    then reads the reloads as fresh."""
    specs = [m.address for m in members]
    calls: list[list[Any]] = []

    def load(ids: list[Any]) -> dict[Any, Any]:
        calls.append(list(ids))
        return {i: rows[i] for i in ids}

    a = TieredCache(MemcachedPool(specs), None)
    ka = a.key_class("row", load, ttl=30, soft_ttl=1)
    b = TieredCache(MemcachedPool(specs), None, prefix=a.prefix)
    kb = b.key_class("row", load, ttl=30, soft_ttl=1)
    # The run's prefix places keys at random: take the first four ids that land on each member.
    by_member: dict[int, list[int]] = {}
    for i in range(1000):
        on = by_member.setdefault(b._pool.member_of(b.key_for(kb, i)), [])  # type: ignore[union-attr]
        if len(on) < 4:
            on.append(i)
    ids = sorted(i for on in by_member.values() for i in on)
    assert len(by_member) == 3 and len(ids) == 12
    rows = {i: f"v1 {i}" for i in ids}
    assert a.get_many(ka, ids) == rows
    rows.update({i: f"v2 {i}" for i in ids})
    time.sleep(1.15)  # past the soft ttl
    assert a.get_many(ka, ids) == rows and calls[1:] == [ids]
    assert a.events.revalidations == 12
    assert b.get_many(kb, ids) == rows and len(calls) == 2 and b.events.stale_hits == 0
