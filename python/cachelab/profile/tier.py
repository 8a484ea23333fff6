"""Profiling through a :mod:`cachelab.tiered` tier, from Python, with think time between calls
(:func:`profile_via_tier`), and the parts ``replay`` uses to do it between its own slices:
:func:`tier_cells`, :func:`tier_profile`, :func:`delete_tier_cells`, :func:`think_summary`,
:func:`spin`, :func:`spin_until`, :func:`rank_sequence`."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import cachelab._core as _core
import cachelab.environment as environment
from cachelab.artifacts import created_now
from cachelab.capacity import delete_keys
from cachelab.errors import ServerError, UsageError
from cachelab.profile.cell import Cell, with_percentiles
from cachelab.profile.model import LatencyProfile
from cachelab.profile.spec import (
    DEFAULT_MULTI_VALUE_SIZE,
    DEFAULT_SIZES,
    MAX_KEY_COUNT,
    MAX_VALUE_SIZE,
    new_prefix,
)
from cachelab.tiered import MemcachedTier

#: Iterations of an empty Python loop per nanosecond, by clock ("cpu", "wall"): measured once,
#: then kept up to date by every :func:`spin_until` burst.
_SPIN_RATE: dict[str, float] = {}


def _spin_rate(cpu: bool) -> float:
    """Iterations of an empty Python loop per nanosecond of wall (or this thread's CPU) time:
    the median of 5 timings at first use, then what the latest bursts ran at."""
    key = "cpu" if cpu else "wall"
    if key not in _SPIN_RATE:
        clock = time.thread_time_ns if cpu else time.perf_counter_ns
        n, runs = 100_000, []
        for _ in range(5):
            t0 = clock()
            for _ in range(n):
                pass
            runs.append(clock() - t0)
        _SPIN_RATE[key] = n / max(1, sorted(runs)[2])
    return _SPIN_RATE[key]


#: A burst aims at this share of the time left, so that a loop running slower than the rate
#: says overshoots by little; the rest is covered by the next bursts.
_BURST = 0.35
#: At most this many bursts (clock reads) per :func:`spin_until`.
_MAX_BURSTS = 64


def spin_until(deadline_ns: int, *, cpu: bool = False) -> None:
    """Busy until ``deadline_ns`` of the clock (this thread's CPU time with ``cpu``, else
    ``perf_counter_ns``): an application's work between two memcached calls. Interpreter work
    (an empty loop) in a few bursts, one clock read after each, not a loop reading the clock
    (on some virtual machines a clock read costs ~0.4 µs, and thousands of them in a row are
    no application's work). Each burst is sized from the loop's rate and measures it again:
    the rate changes with what the other CPU does (it was 2× off the rate measured at start-up
    in a replay on a busy machine, so a fixed count of iterations overshot its think time 2×;
    seen in a per-read dump, not a recorded bench)."""
    key = "cpu" if cpu else "wall"
    clock = time.thread_time_ns if cpu else time.perf_counter_ns
    rate = _spin_rate(cpu)
    now = clock()
    for _ in range(_MAX_BURSTS):
        left = deadline_ns - now
        if left <= 0:
            return
        n = max(1, int(left * rate * (_BURST if left > 2_000 else 1.0)))
        for _ in range(n):
            pass
        then = clock()
        if then > now and n >= 100:
            # what the loop runs at now, smoothed over bursts (the clock read is in it too)
            rate = _SPIN_RATE[key] = 0.5 * rate + 0.5 * n / (then - now)
        now = then
    # The bursts ran out short of it (a loop far slower than its rate, preempted between
    # bursts): the rest reading the clock, so that the think time is never cut short.
    while clock() < deadline_ns:
        pass


def spin(ns: int, *, cpu: bool = False) -> None:
    """Busy for about ``ns`` nanoseconds from now (see :func:`spin_until`)."""
    spin_until((time.thread_time_ns() if cpu else time.perf_counter_ns()) + ns, cpu=cpu)


#: The bytes of values the multi-get cells' calls rotate over, at least. Values read again and
#: again stay in the CPU's caches (4 MiB of L2 a core here); an application's reads over a
#: large catalog find them cold. Sets taken in turn from a 16 MiB pool made a 64-key
#: multi-get of 8 KB values through the tier 1.19× as slow at p50 and 1.11× at p90 as one set
#: read over and over (benches/runs/2026-11-27-cold-values.md), and the prediction of depth-2
#: prefetch, whose multi-gets return up to ~800 KB, had fallen short by 10 % at p90
#: (-replay-accuracy-6; -8 % with the pool, -7). A get cell rotates over 4 keys (one value, a
#: fraction of a multi-get's bytes).
COLD_BYTES = 16 << 20
#: The most key sets a multi-get cell rotates over.
MAX_MULTI_SETS = 256
#: Keys a get cell rotates over.
GET_KEYS = 4


@dataclass
class TierCell:
    """One cell of a profile measured through a tier: the keys its calls rotate over, how many
    a call asks for (``width``; a multi-get's sets are ``stride`` keys apart), and the
    latencies (ns) of the calls made so far (see :func:`profile_via_tier`)."""

    op: str
    value_size: int
    keys: list[str]
    latencies: list[int] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    misses: int = 0
    calls: int = 0
    width: int = 1
    stride: int = 1

    def next_keys(self) -> list[str]:
        """What the next call asks for, in turn over the cell's keys: one key of a get; the
        next set's first ``width`` keys of a multi-get."""
        self.calls += 1
        if self.op != "multiget":
            return [self.keys[self.calls % len(self.keys)]]
        at = (self.calls % max(1, len(self.keys) // self.stride)) * self.stride
        return self.keys[at:at + self.width]


def _multi_sets(key_counts: Sequence[int], value_size: int, pool_bytes: int) -> int:
    """How many sets of max(key_counts) keys the multi-get cells rotate over."""
    return max(1, min(MAX_MULTI_SETS, -(-pool_bytes // (max(key_counts) * value_size))))


def tier_cells(
    address: str, prefix: str, *, sizes: tuple[int, ...], key_counts: tuple[int, ...],
    multi_value_size: int, timeout: float = 1.0, seed: int | None = None,
    pool_bytes: int = COLD_BYTES,
) -> list[TierCell]:
    """Writes the values a tier profile reads (random bytes under ``prefix``): per get size,
    :data:`GET_KEYS` keys, and sets of max(key_counts) keys of ``multi_value_size`` shared by
    the multi-get cells, as many as hold ``pool_bytes`` (at most :data:`MAX_MULTI_SETS`): the
    calls rotate over them, so they find values as cold as an application's (``replay`` gives
    the smaller of :data:`COLD_BYTES` and its catalog's bytes: an application whose whole
    catalog fits in the CPU's caches reads hot values too). Delete them with
    :func:`delete_tier_cells`."""
    if not sizes and not key_counts:
        raise UsageError("nothing to measure: give at least one size or key count")
    if any(not 1 <= s <= MAX_VALUE_SIZE for s in [*sizes, multi_value_size]):
        raise UsageError(f"value sizes must be between 1 byte and {MAX_VALUE_SIZE} bytes")
    if any(not 1 <= k <= MAX_KEY_COUNT for k in key_counts):
        raise UsageError(f"key counts must be between 1 and {MAX_KEY_COUNT}")
    rng = np.random.default_rng(seed)
    cells: list[TierCell] = []
    tried: list[str] = []  # every key a set was sent for, to delete if a later one fails
    try:
        with _core.Client(address, timeout=timeout, connect_timeout=timeout) as writer:
            for s in sizes:
                keys = [f"{prefix}:g{s}:{j}" for j in range(GET_KEYS)]
                for k in keys:
                    tried.append(k)
                    writer.set(k, rng.bytes(s))
                cells.append(TierCell("get", s, keys))
            if key_counts:
                stride = max(key_counts)
                mkeys = [f"{prefix}:m:{j}"
                         for j in range(stride * _multi_sets(key_counts, multi_value_size,
                                                             pool_bytes))]
                for k in mkeys:
                    tried.append(k)
                    writer.set(k, rng.bytes(multi_value_size))
                cells += [TierCell("multiget", multi_value_size, mkeys, width=n, stride=stride)
                          for n in key_counts]
    except BaseException:
        # A SERVER_ERROR (out of memory, too large) half-way: the caller never gets the cells
        # to delete, so the keys written so far go now.
        delete_keys(address, tried, timeout=timeout)
        raise
    return cells


def tier_cell_writes(sizes: Sequence[int], key_counts: Sequence[int], multi_value_size: int,
                     pool_bytes: int = COLD_BYTES) -> list[tuple[int, int]]:
    """What :func:`tier_cells` writes: (value size, count) pairs."""
    out = [(int(s), GET_KEYS) for s in sizes]
    if key_counts:
        out.append((int(multi_value_size),
                    max(key_counts) * _multi_sets(key_counts, int(multi_value_size),
                                                  pool_bytes)))
    return out


def delete_tier_cells(address: str, cells: list[TierCell], timeout: float = 1.0) -> int:
    """Deletes what :func:`tier_cells` wrote (within a bounded time, never raising); how many
    keys could not be deleted."""
    return delete_keys(address, sorted({k for c in cells for k in c.keys}), timeout=timeout)


def tier_profile(
    cells: list[TierCell], *, address: str, version: str | None, client: Mapping[str, Any],
    started: float, sequence: Sequence[Sequence[tuple[int, int]]] | None = None,
) -> LatencyProfile:
    """The latency profile (the format of :func:`profile`'s) of cells measured through a
    tier; ``client`` says how (``via``, think time, samples). ``sequence``: the order the
    samples were taken in, as :func:`rank_sequence` takes it, to keep in the profile."""
    out = []
    for c in cells:
        hist = _core.hist_from_values(c.latencies if c.latencies else [1])
        out.append(with_percentiles(Cell(
            op=c.op, value_size=c.value_size, keys=c.width,
            samples=len(c.latencies), histogram=hist, errors=dict(c.errors),
            misses=c.misses)))
    return LatencyProfile(
        name=f"memcached {version} at {address}, via Python with think time",
        source="measured",
        created=created_now(),
        cells=out,
        server={"address": address, "private": False, "version": version},
        client={"via": "python", "call": "cachelab.tiered MemcachedTier read (get_list)",
                **dict(client)},
        environment=environment.facts(),
        run={"started_unix": round(started, 3), "elapsed_s": round(time.time() - started, 3)},
        sequence=rank_sequence(cells, sequence) if sequence else None,
    )


def think_summary(think_ns: Any) -> dict[str, float]:
    """n, mean and p50/p90/p99 (ns) of think times."""
    t = np.asarray(list(think_ns), dtype=np.int64)
    if not len(t):
        return {"n": 0}
    return {"n": int(len(t)), "mean": float(t.mean()),
            **{f"p{p:g}": float(np.percentile(t, p)) for p in (50.0, 90.0, 99.0)}}


def profile_via_tier(
    address: str,
    *,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    key_counts: tuple[int, ...] = (),
    multi_value_size: int = DEFAULT_MULTI_VALUE_SIZE,
    samples: int = 500,
    warmup: int = 20,
    think_ns: Any = (),
    think_cpu: bool = False,
    timeout: float = 1.0,
    seed: int | None = None,
    prefix: str | None = None,
    tier: Any = None,
) -> LatencyProfile:
    """A latency profile measured from Python through the call :mod:`cachelab.tiered` makes
    for its L2 — the tier's ``get_list`` (or ``get_multi`` where it has none; a get is a
    multi-get of one key, as the tiered cache sends it), values copied into Python ``bytes`` —
    with *think time* before each call.

    :func:`profile` times back-to-back requests in Rust; an application calls memcached after
    doing other work, and on a busy or virtual machine a call after a pause is slower. Here,
    before each timed call the caller spins for a time drawn (seeded, with replacement) from
    ``think_ns`` (nanoseconds — of this thread's CPU time with ``think_cpu``, as an
    application's work between calls is best measured; empty: none). Cells: ``get`` at each
    of ``sizes`` and ``multiget`` at each of ``key_counts`` (values of ``multi_value_size``
    bytes), ``samples`` each after ``warmup`` untimed rounds, in one shuffled order so drift
    lands on every cell.
    ``tier`` is any tier with ``get_multi(keys)`` (default: a new ``MemcachedTier``). The
    result has the format of :func:`profile`'s (``client.via == "python"``), so ``simulate``
    and :func:`cachelab.simulate.model.latency_model` take it as is. Keys are written under a
    unique prefix and deleted at the end.
    """
    if samples < 1 or warmup < 0:
        raise UsageError("samples must be at least 1 and warm-up 0 or more")
    think = np.asarray(list(think_ns), dtype=np.int64)
    if len(think) and int(think.min()) < 0:
        raise UsageError("think times must be 0 or more nanoseconds")
    if tier is None:
        tier = MemcachedTier(address, timeout=timeout, connect_timeout=timeout)
    seed = seed if seed is not None else secrets.randbits(63)
    rng = np.random.default_rng(seed)
    started = time.time()
    cells = tier_cells(address, prefix or new_prefix(), sizes=sizes, key_counts=key_counts,
                       multi_value_size=multi_value_size, timeout=timeout, seed=seed)
    try:
        with _core.Client(address, timeout=timeout, connect_timeout=timeout) as c:
            version = c.version()
        order = np.repeat(np.arange(len(cells)), samples)
        rng.shuffle(order)
        order = np.concatenate([np.repeat(np.arange(len(cells)), warmup), order])
        waits = think[rng.integers(0, len(think), len(order))] if len(think) else None
        clock = time.perf_counter_ns
        if hasattr(tier, "get_list"):  # how TieredCache reads its L2 (values in key order)
            def get_multi(keys: list[str]) -> Any:
                return range(tier.get_list(keys)[1])
        else:
            get_multi = tier.get_multi
        # The think time runs from the end of the previous call, as the application's did.
        since = time.thread_time_ns if think_cpu else clock
        ended = since()
        for n, i in enumerate(order.tolist()):
            cell = cells[i]
            keys = cell.next_keys()
            if waits is not None and waits[n]:
                spin_until(ended + int(waits[n]), cpu=think_cpu)
            t0 = clock()
            try:
                got = get_multi(keys)
            except ServerError as e:
                cell.errors[type(e).__name__] = cell.errors.get(type(e).__name__, 0) + 1
                ended = since()
                continue
            t1 = clock()
            ended = since()
            if cell.calls > warmup:  # the first `warmup` calls of each cell are untimed
                cell.latencies.append(t1 - t0)
                cell.misses += len(keys) - len(got)
    finally:
        delete_tier_cells(address, cells, timeout)
    return tier_profile(cells, address=address, version=version, started=started,
                        client={"think_ns": think_summary(think), "think_cpu": think_cpu,
                                "samples": samples,
                                "warmup": warmup, "seed": seed, "timeout": timeout})


def rank_sequence(cells: Sequence[Any], segments: Sequence[Sequence[tuple[int, int]]]
                  ) -> dict[str, Any] | None:
    """The ``sequence`` of a profile whose samples were taken in the order given:
    ``segments`` of ``(cell index, latency ns)`` in time order, the latencies being those in
    ``cells[i].latencies``. Each sample's rank is its mid-rank among its cell's latencies,
    ``(below + ties / 2) / n``, in (0, 1). ``lag1`` is the correlation of consecutive ranks
    within segments: how much one call's latency says about the next's."""
    sorted_lat = [np.sort(np.asarray(c.latencies, dtype=np.int64)) for c in cells]
    ranks: list[np.ndarray] = []
    for seg in segments:
        if not seg:
            continue
        idx = np.asarray([i for i, _ in seg], dtype=np.int64)
        ns = np.asarray([v for _, v in seg], dtype=np.int64)
        u = np.empty(len(seg))
        for i in np.unique(idx):
            s, at = sorted_lat[i], idx == i
            lo, hi = np.searchsorted(s, ns[at], "left"), np.searchsorted(s, ns[at], "right")
            u[at] = (lo + hi) / (2.0 * len(s))
        ranks.append(u)
    if not ranks:
        return None
    pairs = [(u[:-1], u[1:]) for u in ranks if len(u) > 1]
    a = np.concatenate([p[0] for p in pairs]) if pairs else np.zeros(0)
    b = np.concatenate([p[1] for p in pairs]) if pairs else np.zeros(0)
    lag1 = float(np.corrcoef(a, b)[0, 1]) if len(a) > 2 and a.std() > 0 and b.std() > 0 else None
    # Five decimals, kept below 1 (a cell of more than 100,000 samples would round its top up).
    return {"ranks": [min(round(float(x), 5), 0.99999) for x in np.concatenate(ranks)],
            "segments": [len(u) for u in ranks],
            "lag1": None if lag1 is None else round(lag1, 4)}

