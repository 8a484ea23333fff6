"""Never harm the user's cache: what a run will write into a memcached cachelab did not start,
whether that fits without evicting anyone's items, and a watch on ``evictions`` while it runs.

A memcached holds its items in 1 MiB pages, each page cut into chunks of one *slab class*
(96 B, 120 B, 152 B, … growing by ``growth_factor`` up to ``slab_chunk_max``). An item takes
one chunk of the smallest class it fits: its value, its key and a header —

    48 B item header + 8 B CAS + key + 1 + value + 2 (CRLF) + 4 B client flags

(:data:`ITEM_OVERHEAD` = 63 B beside key and value). An item larger than ``slab_chunk_max``
is chained: a small header item, then chunks of ``slab_chunk_max`` (each with a ~40 B chunk
header), the last one in the class its remainder fits. When a class has no free chunk and the
memory limit (``-m``, ``limit_maxbytes``) leaves no page to give it, memcached **evicts** the
oldest items of that class — the user's. And an item above ``item_size_max`` (``-I``) is
refused outright.

So :meth:`ServerMemory.need` counts what a run writes (:class:`Writes`: items by key length
and value size, at the run's peak) chunk by chunk into classes, takes the free chunks those
classes already have (``stats slabs``), and rounds the rest up to whole pages.
:meth:`ServerMemory.check` compares that with the pages no class holds yet (``limit_maxbytes``
less ``total_malloced``), less a margin of :data:`MARGIN` of the limit (room for the user's
own traffic meanwhile, and for the estimate's error), and raises :class:`WontFit` — one line:
what the run needs, what is free, and the flag that shrinks the run. Free chunks of other
classes do not count (memcached cannot use them for ours), so the check errs on the safe side.

During a run, :class:`EvictionWatch` reads ``stats`` at most every :data:`POLL_EVERY`
seconds (one request with a deadline) when the run asks, and says how many items the server
evicted since the run began — items the user has lost, since a run that fits evicts nothing
of its own. Verbs stop when it rises.

Every key a run writes is deleted at its end, also after an error: :func:`delete_keys` does it
within a bounded time and never raises, so the run's own error is the one reported.

Only servers cachelab did not start are checked: a private server is sized by the verb
(:meth:`cachelab.target.Target.open`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import cachelab._core as _core
from cachelab.errors import ConnectionClosed, ServerError, ServerReplyError, UsageError
from cachelab.resp import RespLogin, info_or_none, read_info
from cachelab.servers import proxy_message, read_stats, restarted, stats_or_none
from cachelab.tls import TlsOptions, core_tls
from cachelab.units import human_bytes

__all__ = ["CLEANUP_BUDGET", "ITEM_OVERHEAD", "MARGIN", "PAGE", "POLL_EVERY", "RESP_KEY_OVERHEAD",
           "EvictionWatch", "Evicting", "PoolWatch", "RespMemory", "ServerMemory", "WontFit",
           "Writes", "delete_keys", "evicted_message", "guard", "guard_pool", "guard_resp",
           "jemalloc_size"]

#: Bytes of an item beside its key and value: the item header (48), CAS (8), the key's
#: terminator (1), the value's CRLF (2) and the client flags (4).
ITEM_OVERHEAD = 48 + 8 + 1 + 2 + 4
#: A chained (large) item: the header of each chunk (about 40 B; rounded up).
CHUNK_HEADER = 48
#: memcached's slab page (fixed at 1 MiB since 1.4.x; ``-I`` no longer changes it).
PAGE = 1 << 20
#: Share of the server's memory limit a run leaves untouched on top of its own estimate.
MARGIN = 0.10
#: Seconds between two reads of ``stats`` by :class:`EvictionWatch`.
POLL_EVERY = 0.5
#: The longest wait between reads of a server that stopped answering (seconds).
POLL_BACKOFF_MAX = 8.0
#: The most seconds one clean-up spends deleting keys before it gives up on the rest.
CLEANUP_BUDGET = 30.0
#: memcached's defaults, for a server whose ``stats settings`` lacks one.
_DEFAULTS = {"item_size_max": 1 << 20, "chunk_size": 48, "growth_factor": 1.25,
             "slab_chunk_max": 1 << 19}
_MAX_CLASSES = 63  # MAX_NUMBER_OF_SLAB_CLASSES - 1


class WontFit(UsageError):
    """The run would write more than the server has free, or a value above its item size
    limit; the message says how much and which flag shrinks the run."""


class Evicting(ServerError):
    """The server evicted items while the run wrote to it: the run was stopped."""


def evicted_message(n: int) -> str:
    """The one wording of a run stopped by evictions."""
    return f"stopped: the server evicted {n:,} of its items (its memory is full)"


@dataclass
class Writes:
    """What a run keeps in memcached at its peak: ``items[(key length, value size)]`` = count;
    ``what`` names them in messages (``"replay's catalog and profile values"``), ``shrink`` is
    the advice when they do not fit (``"use fewer --sizes"``), ``sizes_flag`` the advice when
    a value is above the item size limit."""

    verb: str
    what: str
    shrink: str
    sizes_flag: str
    items: Counter[tuple[int, int]] = field(default_factory=Counter)

    def add(self, value_size: int, count: int = 1, key_len: int = 48) -> Writes:
        """``count`` more items of ``value_size`` bytes under keys of ``key_len`` bytes."""
        if count > 0:
            self.items[(int(key_len), int(value_size))] += int(count)
        return self

    def add_sizes(self, sizes: Iterable[int], key_len: int = 48) -> Writes:
        """One item of each of ``sizes``."""
        for s in sizes:
            self.add(int(s), 1, key_len)
        return self

    @property
    def count(self) -> int:
        return sum(self.items.values())

    @property
    def value_bytes(self) -> int:
        return sum(v * n for (_, v), n in self.items.items())

    def part(self, share: float) -> Writes:
        """The writes of one member of a pool that takes ``share`` of the keys: every count
        scaled (rounded up), and the largest item kept, so that each member's item size
        limit is checked too."""
        out = Writes(self.verb, self.what, self.shrink, self.sizes_flag)
        for (key_len, value), n in self.items.items():
            out.add(value, math.ceil(n * share), key_len)
        if self.items and share > 0:
            key_len, value = self.largest
            out.items[(key_len, value)] = max(1, out.items[(key_len, value)])
        return out

    @property
    def largest(self) -> tuple[int, int]:
        """(key length, value size) of the largest item, (0, 0) when there is none."""
        return max(self.items, key=lambda kv: kv[0] + kv[1], default=(0, 0))


def _int(stats: Mapping[str, str], name: str, default: int | None = None) -> int:
    try:
        return int(float(stats[name]))
    except (KeyError, ValueError):
        if default is None:
            raise
        return default


@dataclass(frozen=True)
class ServerMemory:
    """A memcached's memory as its ``stats``, ``stats settings`` and ``stats slabs`` tell it
    (read by :meth:`read`)."""

    address: str
    #: ``limit_maxbytes`` (``-m``).
    limit: int
    #: Bytes of the items stored (``bytes``).
    used: int
    #: Bytes of pages given to slab classes (``total_malloced``).
    malloced: int
    #: The largest item (``item_size_max``, ``-I``).
    item_size_max: int
    evictions: int
    items: int
    #: Chunk size of each slab class, smallest first.
    classes: tuple[int, ...]
    #: Free chunks in pages a class already holds, by chunk size.
    free_chunks: Mapping[int, int]

    @classmethod
    def read(cls, address: str, timeout: float = 2.0,
             tls: TlsOptions | None = None) -> ServerMemory:
        """Reads the server's memory (three :func:`~cachelab.servers.read_stats`, each with
        ``timeout``).

        A proxy that closes the connection on ``stats`` (twemproxy) is a UsageError saying so.
        """
        try:
            stats = read_stats(address, timeout=timeout, tls=core_tls(tls))
        except ConnectionClosed as e:
            message = proxy_message(address, timeout, tls)
            if message is None:
                raise
            raise UsageError(message) from e
        # A server that does not know a group answers ERROR: nothing from it.
        settings = stats_or_none(address, "settings", timeout=timeout, tls=core_tls(tls)) or {}
        slabs = stats_or_none(address, "slabs", timeout=timeout, tls=core_tls(tls)) or {}
        if "limit_maxbytes" not in stats:
            raise UsageError(f"the server at {address} does not report its memory limit "
                             "(no limit_maxbytes in stats): cachelab writes only to a server "
                             "whose room it can check")
        s = {k: _int(settings, k, v) if k != "growth_factor" else
             float(settings.get(k, v)) for k, v in _DEFAULTS.items()}
        free: Counter[int] = Counter()
        for key, value in slabs.items():
            cid, _, name = key.partition(":")
            if name in ("free_chunks", "free_chunks_end") and f"{cid}:chunk_size" in slabs:
                free[_int(slabs, f"{cid}:chunk_size")] += int(value)
        return cls(address=address, limit=_int(stats, "limit_maxbytes"),
                   used=_int(stats, "bytes", 0), malloced=_int(slabs, "total_malloced", 0),
                   item_size_max=int(s["item_size_max"]), evictions=_int(stats, "evictions", 0),
                   items=_int(stats, "curr_items", 0),
                   classes=slab_classes(int(s["chunk_size"]), float(s["growth_factor"]),
                                        int(s["slab_chunk_max"])),
                   free_chunks=dict(free))

    @property
    def free(self) -> int:
        """Bytes of pages no slab class holds yet."""
        return max(0, self.limit - self.malloced)

    @property
    def margin(self) -> int:
        return int(MARGIN * self.limit)

    def chunks(self, key_len: int, value_size: int) -> list[int]:
        """The chunk sizes one item takes (one, or a chain for an item above the largest
        class)."""
        total = ITEM_OVERHEAD + key_len + value_size
        top = self.classes[-1]
        if total <= top:
            return [self._class_of(total)]
        # Chained: a header item (with a pointer chunk header), full chunks, the remainder.
        out = [self._class_of(ITEM_OVERHEAD - 2 + key_len + CHUNK_HEADER)]
        data, per = value_size + 2, top - CHUNK_HEADER
        out += [top] * (data // per)
        if data % per:
            out.append(self._class_of(data % per + CHUNK_HEADER))
        return out

    def _class_of(self, size: int) -> int:
        for c in self.classes:
            if size <= c:
                return c
        return self.classes[-1]

    def need(self, writes: Writes) -> int:
        """Bytes of new pages ``writes`` needs: chunks per class, less that class's free
        chunks, rounded up to whole pages."""
        per_class: Counter[int] = Counter()
        for (key_len, value), n in writes.items.items():
            for c in self.chunks(key_len, value):
                per_class[c] += n
        pages = 0
        for c, n in per_class.items():
            short = n - self.free_chunks.get(c, 0)
            if short > 0:
                pages += math.ceil(short / max(1, PAGE // c))
        return pages * PAGE

    def too_large(self, writes: Writes) -> str | None:
        """The refusal when the largest item is above ``item_size_max``, else None."""
        key_len, value = writes.largest
        total = ITEM_OVERHEAD + key_len + value
        if not writes.items or total <= self.item_size_max:
            return None
        return (f"{writes.verb} would write values of up to {value:,} bytes ({total:,} with key "
                f"and header), above the item size limit of the memcached at {self.address}: "
                f"{self.item_size_max:,} bytes (item_size_max, memcached -I "
                f"{_mib(self.item_size_max)}): {writes.sizes_flag}")

    def check(self, writes: Writes) -> int:
        """Raises :class:`WontFit` unless ``writes`` fits; returns the bytes it needs."""
        big = self.too_large(writes)
        if big:
            raise WontFit(big)
        need = self.need(writes)
        room = self.free - self.margin
        if need > room:
            raise WontFit(
                f"{writes.verb} would write {human_bytes(writes.value_bytes)} in "
                f"{writes.count:,} {writes.what}, needing {human_bytes(need)} of the memory "
                f"of the memcached at {self.address}; it has {human_bytes(self.free)} free of "
                f"{human_bytes(self.limit)} (-m {self.limit >> 20}), and cachelab leaves "
                f"{MARGIN:.0%} of that untouched so that none of its items is evicted: "
                f"{writes.shrink}")
        return need


def slab_classes(chunk_size: int = 48, factor: float = 1.25,
                 chunk_max: int = 1 << 19) -> tuple[int, ...]:
    """memcached's slab class chunk sizes for these settings (its own ``slabs_init``): from
    the 48-byte item header plus ``chunk_size``, times ``factor``, aligned to 8 bytes, until
    the next would reach ``chunk_max / factor``; then ``chunk_max`` itself."""
    out, size = [], 48 + chunk_size
    while len(out) < _MAX_CLASSES - 1 and size < chunk_max / factor:
        size += -size % 8
        out.append(size)
        size = int(size * factor)
    return (*out, chunk_max)


def _mib(n: int) -> str:
    return f"{n >> 20}m" if n % (1 << 20) == 0 else f"{n >> 10}k"


def guard(address: str, writes: Writes, *, private: bool,
          timeout: float = 2.0, tls: TlsOptions | None = None) -> EvictionWatch | None:
    """For a server cachelab did not start: :meth:`ServerMemory.check` ``writes`` (raising
    :class:`WontFit`) and return an :class:`EvictionWatch` from now. None for a private
    server (sized by the verb itself)."""
    if private:
        return None
    memory = ServerMemory.read(address, timeout, tls)
    memory.check(writes)
    return EvictionWatch(address, memory.evictions, timeout=timeout, tls=tls)


def guard_pool(members: Iterable[tuple[str, Writes]], *, private: bool, timeout: float = 2.0,
               tls: TlsOptions | None = None) -> PoolWatch | None:
    """:func:`guard` for each member of a pool with its share of the writes (``(address,
    writes)`` pairs): :class:`WontFit` names the first member the run does not fit; the
    watch sums the members' evictions. None for a private server."""
    if private:
        return None
    watches = []
    for address, writes in members:
        watch = guard(address, writes, private=False, timeout=timeout, tls=tls)
        assert watch is not None
        watches.append(watch)
    return PoolWatch(watches)


#: Bytes a Redis key takes beside its key and value strings: the keyspace's hash-table entry
#: (24, in a 32-byte allocation), the value's object header (16), the table's slots (8, twice
#: while it rehashes: 16), and an entry in the expiry table with its slots (48) — counted for
#: every key, TTL or not, to err on the safe side.
RESP_KEY_OVERHEAD = 32 + 16 + 16 + 48


def jemalloc_size(n: int) -> int:
    """The allocation jemalloc (Redis's allocator) makes for ``n`` bytes: its size class —
    8, then multiples of 16 up to 128, then four classes per doubling."""
    if n <= 8:
        return 8
    if n <= 128:
        return -(-n // 16) * 16
    step = 1 << ((n - 1).bit_length() - 3)
    return -(-n // step) * step


@dataclass(frozen=True)
class RespMemory:
    """A Redis or Valkey's memory as ``INFO`` tells it: ``maxmemory`` (0: no limit),
    ``used_memory``, ``maxmemory_policy`` and ``evicted_keys`` so far."""

    address: str
    limit: int
    used: int
    policy: str
    evictions: int

    @classmethod
    def read(cls, address: str, login: RespLogin, timeout: float = 2.0,
             tls: dict | None = None) -> RespMemory:
        info = read_info(address, login, timeout=timeout, tls=tls)
        return cls(address, limit=_int(info, "maxmemory", 0), used=_int(info, "used_memory", 0),
                   policy=info.get("maxmemory_policy", "?"),
                   evictions=_int(info, "evicted_keys", 0))

    @staticmethod
    def need(writes: Writes) -> int:
        """Bytes the writes take: the key's and the value's strings (each with its 4-byte
        header and terminator, in jemalloc's size class) and :data:`RESP_KEY_OVERHEAD` each.
        (Measured on redis-server 7.0 with 27-byte keys and 1000-byte values: 1,121 bytes a
        key without a TTL, 1,149 with one; this counts 1,168.)"""
        return sum(n * (jemalloc_size(k + 4) + jemalloc_size(v + 4) + RESP_KEY_OVERHEAD)
                   for (k, v), n in writes.items.items())

    def check(self, writes: Writes) -> int:
        """Raises :class:`WontFit` when the writes do not fit below ``maxmemory`` less
        :data:`MARGIN` of it — Redis would then evict the user's keys (or, with
        ``noeviction``, refuse writes); returns the bytes needed. A server without
        ``maxmemory`` (0) never evicts: it fits."""
        need = self.need(writes)
        if not self.limit:
            return need
        free = max(0, self.limit - self.used - int(self.limit * MARGIN))
        if need > free:
            what = ("refuse the run's writes (maxmemory-policy noeviction)"
                    if self.policy == "noeviction"
                    else f"evict the user's keys (maxmemory-policy {self.policy})")
            raise WontFit(
                f"the {writes.verb} run would write about {human_bytes(need)} of {writes.what} "
                f"but the server at {self.address} has {human_bytes(free)} free (maxmemory "
                f"{human_bytes(self.limit)}, used_memory {human_bytes(self.used)}, less a "
                f"{MARGIN:.0%} margin): it would {what}; {writes.shrink}, or raise its "
                "maxmemory")
        return need


def guard_resp(members: Iterable[tuple[str, Writes]], login: RespLogin, *, private: bool,
               timeout: float = 2.0, tls: TlsOptions | None = None) -> PoolWatch | None:
    """:func:`guard_pool` for Redis or Valkey servers: each one's ``maxmemory`` checked
    (:meth:`RespMemory.check`, :class:`WontFit`) before anything is written, and a watch on
    their ``evicted_keys`` from now. None for a private server."""
    if private:
        return None
    core = core_tls(tls)
    watches = []
    for address, writes in members:
        memory = RespMemory.read(address, login, timeout, core)
        memory.check(writes)
        watches.append(EvictionWatch(
            address, memory.evictions, timeout=timeout, counter="evicted_keys",
            read=lambda a=address: info_or_none(a, login, timeout=timeout, tls=core)))
    return PoolWatch(watches)


class PoolWatch:
    """The :class:`EvictionWatch` of every member of a pool, as one: items evicted on all
    of them since the run began."""

    def __init__(self, watches: list[EvictionWatch]) -> None:
        self.watches = watches

    @property
    def evicted(self) -> int:
        return sum(w.evicted for w in self.watches)

    def poll(self, force: bool = False) -> int:
        return sum(w.poll(force) for w in self.watches)

    def lives(self) -> dict[str, list[dict[str, str]]]:
        """Each watched server's :attr:`EvictionWatch.lives` (the last ``stats`` read of
        each of its processes), by address."""
        return {w.address: list(w.lives) for w in self.watches}


class EvictionWatch:
    """The server's ``evictions`` since ``baseline``, read at most every ``every`` seconds
    when asked (:meth:`poll`), each read bounded by ``timeout``. A failed read keeps the last
    count: the run notices a server that is gone by itself; and the wait before the next read
    doubles after each failure (up to :data:`POLL_BACKOFF_MAX` s), so that a server that does
    not answer does not hold up the run a whole ``timeout`` at every poll.

    A server restarted meanwhile (:func:`~cachelab.servers.restarted`) starts a new life:
    :attr:`lives` keeps the last ``stats`` read of each process, in order (what a run's
    counters per life come from), and each life's evictions are counted from its own start
    (the first from ``baseline``)."""

    def __init__(self, address: str, baseline: int, *, every: float = POLL_EVERY,
                 timeout: float = 1.0, tls: TlsOptions | None = None,
                 counter: str = "evictions",
                 read: Callable[[], dict[str, str] | None] | None = None) -> None:
        self.address, self.baseline, self.every, self.timeout = address, baseline, every, timeout
        self.tls = core_tls(tls)
        #: The counter watched (a Redis's ``evicted_keys``) and how the server is read (a
        #: Redis's ``INFO``; memcached's ``stats`` by default).
        self.counter = counter
        self._read = read or (lambda: stats_or_none(self.address, timeout=self.timeout,
                                                    tls=self.tls))
        self.evicted = 0
        self.lives: list[dict[str, str]] = []
        self._last = time.monotonic()
        self._wait = every

    def poll(self, force: bool = False) -> int:
        """Items evicted since the run began (reads ``stats`` if the wait has passed since
        the last read ended)."""
        if not force and time.monotonic() - self._last < self._wait:
            return self.evicted
        stats = self._read()
        self._last = time.monotonic()
        self._wait = (self.every if stats is not None
                      else min(POLL_BACKOFF_MAX, max(self.every, 2 * self._wait)))
        if stats is not None:
            if self.lives and not restarted(self.lives[-1], stats):
                self.lives[-1] = stats
            else:  # the first read, or a new process at the address
                self.lives.append(stats)
            self.evicted = max(self.evicted, self._evictions())
        return self.evicted

    def _evictions(self) -> int:
        """Evictions over every life seen: the first's since ``baseline``, a later one's
        since its start."""
        total = 0
        for i, last in enumerate(self.lives):
            try:
                total += max(0, _int(last, self.counter) - (self.baseline if i == 0 else 0))
            except (KeyError, ValueError):  # a reply without a readable eviction count
                continue
        return total

    def stop_if_evicting(self, force: bool = False) -> None:
        """Raises :class:`Evicting` once the server has evicted anything."""
        if self.poll(force):
            raise Evicting(evicted_message(self.evicted))


def delete_keys(address: str, keys: Iterable[str], *, timeout: float = 1.0,
                budget: float = CLEANUP_BUDGET) -> int:
    """Deletes ``keys``; returns how many could not be deleted. Raises nothing: a connection
    that fails is opened again, but two failures in a row (the server is gone) or ``budget``
    seconds in all end the clean-up, and the keys not reached count as not deleted."""
    keys = list(keys)
    deadline = time.monotonic() + budget
    client: _core.Client | None = None
    left = failures = 0
    try:
        for n, key in enumerate(keys):
            if failures >= 2 or time.monotonic() > deadline:
                return left + len(keys) - n
            try:
                if client is None:
                    client = _core.Client(address, timeout=timeout, connect_timeout=timeout)
                client.delete(key)
                failures = 0
            except (ServerReplyError, UsageError):  # answered: this key stays, go on
                left += 1
            except ServerError:
                left += 1
                failures += 1
                if client is not None:
                    client.close()
                client = None
    finally:
        if client is not None:
            client.close()
    return left
