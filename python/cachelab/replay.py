"""``cachelab replay``: run a request trace through the real :mod:`cachelab.tiered` cache on a
real memcached, and compare each request's measured added time with a prediction built the way
``simulate`` builds its own — plus the library's own costs, term by term.

Steps (:func:`replay`):

1. **Load the catalog** into memcached: every item as a value of its size (random bytes in the
   tiered cache's ``raw`` format), under a per-run prefix; everything is deleted at the end.
2. **Measure**: for each strategy, one :class:`~cachelab.tiered.TieredCache` per app instance
   (its own L1, one memcached connection per strategy), requests in time order. The training
   window is run first, untimed, to warm LRUs (``fixed:`` pins its hot set — the items most
   training requests touch, as the simulator picks them — and loads it before the
   evaluation). Each evaluated request runs in a request scope; at its first topic a prefetch
   strategy calls ``prefetch_tree(topic, children, depth)``; every touch is a ``get``. The
   request's added time is the wall time of all of that; the part inside L2 reads, the
   *think time* before each L2 read (how long since this process's previous read ended) and
   what each touch turned out to be (a scope hit, an L1 hit, a get) are recorded too.
3. **Model**, for each strategy:

   * the **memcached model**: a latency profile measured through the same read the tiered
     cache makes (the tier's ``get_list``, on the strategy's own connection, through the same
     :class:`_GapTier`; gets at percentiles of the touched sizes, and for prefetch strategies
     multi-gets by key count at the catalog's mean size), with think time before each sample
     drawn from the gaps that strategy's reads had. ``profile_mode="interleaved"`` (default):
     a few after each of the strategy's requests; ``"slices"``: a slice's worth of samples
     after each of the ``slices`` slices. (:func:`cachelab.profiles.profile_via_tier`
     measures the same outside replay.)
     The profile keeps the order its samples came in (a rank sequence, one segment per
     slice), and the simulator's draws within a request follow it (``sequence=False``:
     independent draws; the other prediction is computed too and reported as
     ``alternative``).
   * the **library's per-touch costs** (:func:`calibrate`, after each slice), measured in this
     process on the same kind of L1 by timing crafted requests through the same request
     function: a request, a touch answered by the request scope, an L1 hit, the library part
     of a single-key get, and ``prefetch_tree`` (per call, per node walked, per key fetched).

4. **Predict** per request: ``simulate``'s memcached time (the simulator's ``request_costs``
   with the strategy's profile as its model, several seeded draws) plus the library
   terms — each unit cost times how often the request pays it. The counts are the
   simulator's semantics (``request_costs`` gives round trips per request, checked equal to
   the measured ones request by request; it does not return L1 hits per request, so those come
   from the tiered cache's counters, which agree with the simulator's in total).

Nothing is fitted to the measured request times: the profile and the unit costs come from
separate measurements in the same process and on the same server.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cachelab import _core, environment
from cachelab.errors import UsageError
from cachelab.tables import text_table
from cachelab.tiered import FixedMemory, LRUMemory, MemcachedTier, TieredCache

__all__ = ["PERCENTILES", "SCHEMA", "TERMS", "ReplayResult", "ReplaySpec", "calibrate",
           "replay"]

SCHEMA = "cachelab.replay"
SCHEMA_VERSION = 2

#: Percentiles compared (nearest rank, as the simulator computes them).
PERCENTILES = (50.0, 90.0, 99.0)

#: The goal: predicted within this fraction of measured.
TOLERANCE = 0.15

#: The library's cost terms, in the order they are reported: (name, what it is).
TERMS = (
    ("request", "per request: the scope, the loop, the timer"),
    ("scope", "per touch answered by the request scope (a repeat, or prefetched)"),
    ("l1_hit", "per touch answered by L1"),
    ("get", "per single-key get: the library's part, outside the memcached call"),
    ("prefetch", "per prefetch_tree call (+ per node walked and per key fetched)"),
)


@dataclass
class ReplaySpec:
    """What ``replay`` runs. ``strategies=None``: none, lru:N, fixed:N and
    fixed:N+prefetch-children with N = 5 % of the catalog (as ``simulate``'s defaults)."""

    strategies: tuple[str, ...] | None = None
    train: float = 0.5
    draws: int = 5
    seed: int = 0
    #: Samples per cell of each strategy's profile (split over the slices).
    profile_samples: int = 1000
    profile_warmup: int = 20
    #: Crafted requests per measurement of each library cost term, per slice.
    calibration_reps: int = 200
    #: When each strategy's profile samples are taken: ``interleaved`` — a few after each of
    #: its requests, with think time, so each sample follows the application's own work;
    #: ``slices`` — a slice's worth after each slice, back to back with think time. Measured on
    #: a quiet machine, interleaved predicts better (docs/tiered.md).
    profile_mode: str = "interleaved"
    timeout: float = 1.0
    #: The evaluation is cut into this many slices; within each, every request runs under
    #: every strategy in turn (in ``interleaved`` mode each followed by its strategy's profile
    #: samples and calibration requests; in ``slices`` mode those come after the slice) — so
    #: the model and every strategy sample the same stretch of a machine whose load drifts.
    slices: int = 4
    #: Within a request, the simulator's draws follow the profile's rank sequence (the order
    #: its samples came in: consecutive calls' latencies are correlated, as the application's
    #: are). False: independent draws. Either way the other prediction is reported too.
    sequence: bool = True

    @classmethod
    def quick(cls, **overrides: Any) -> ReplaySpec:
        return cls(**{"profile_samples": 500, "profile_warmup": 10, "draws": 3,
                      "calibration_reps": 100, **overrides})

    def check(self) -> None:
        if not 0.0 < self.train < 1.0:
            raise UsageError(f"--train must be in (0, 1) for replay, got {self.train}")
        if not 1 <= self.draws <= 100 or not 1 <= self.slices <= 100:
            raise UsageError("--draws and --slices must be 1-100")
        if self.profile_samples < 50:
            raise UsageError("--profile-samples must be at least 50")
        if not 10 <= self.calibration_reps <= 100_000:
            raise UsageError("--calibration-reps must be 10-100000")
        if self.profile_mode not in ("interleaved", "slices"):
            raise UsageError(f"--profile-mode must be interleaved or slices, not "
                             f"{self.profile_mode!r}")
        for s in self.strategies or ():
            parse(_core.parse_strategy(s))


@dataclass
class _Plan:
    lru_items: int | None = None
    lru_bytes: int | None = None
    fixed_items: int | None = None
    fixed_bytes: int | None = None
    depth: int = 0


def _capacity(text: str) -> tuple[int | None, int | None]:
    from cachelab.units import parse_size

    if text.isdigit():
        return int(text), None
    t = text.strip()
    return None, parse_size(t[:-1] if t.endswith("B") else t)  # 64MB -> 64M, 1MiB -> 1Mi


def parse(canonical: str) -> _Plan:
    """What a canonical strategy asks the tiered cache to be. Replay supports one L1 kind per
    strategy (none, lru or fixed), with or without prefetch."""
    plan = _Plan()
    for part in canonical.split("+"):
        if part == "none":
            continue
        if part.startswith("lru:"):
            plan.lru_items, plan.lru_bytes = _capacity(part[4:])
        elif part.startswith("fixed:"):
            plan.fixed_items, plan.fixed_bytes = _capacity(part[6:])
        elif part == "prefetch-children":
            plan.depth = 1
        elif part.startswith("prefetch:depth="):
            plan.depth = int(part.split("=", 1)[1])
        else:
            raise UsageError(f"replay does not support the strategy part {part!r}")
    lru = plan.lru_items is not None or plan.lru_bytes is not None
    fixed = plan.fixed_items is not None or plan.fixed_bytes is not None
    if lru and fixed:
        raise UsageError(f"{canonical}: replay runs one L1 per strategy (lru or fixed, not both)")
    return plan


def default_strategies(n_items: int) -> list[str]:
    n = max(10, round(0.05 * n_items))
    return ["none", f"lru:{n}", f"fixed:{n}", f"fixed:{n}+prefetch-children"]


@dataclass
class ReplayResult:
    created: str
    trace: dict[str, Any]
    spec: dict[str, Any]
    server: dict[str, Any]
    profile: dict[str, Any]
    strategies: list[dict[str, Any]]
    elapsed_s: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)
    #: The 1-, 5- and 15-minute load averages before and after the run.
    load_average: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path

    @property
    def within_tolerance(self) -> bool:
        return all(s["within_tolerance"] for s in self.strategies)


def _nearest_rank(values: np.ndarray, p: float) -> float:
    v = np.sort(np.asarray(values, dtype=float))
    if not len(v):
        return 0.0
    rank = int(np.ceil(p / 100.0 * len(v) - 1e-9))
    return float(v[min(max(rank, 1), len(v)) - 1])


def _pkey(p: float) -> str:
    return format(p, "g")


def _training_ranking(trace: Any, evaluated: np.ndarray) -> list[int]:
    counts = np.zeros(trace.n_items, dtype=np.int64)
    for r in np.flatnonzero(~evaluated):
        counts[np.unique(trace.touches(int(r)))] += 1
    items = np.flatnonzero(counts > 0)
    order = np.lexsort((items, -counts[items]))
    return [int(i) for i in items[order]]


def _fixed_set(trace: Any, ranking: list[int], plan: _Plan) -> list[int]:
    if plan.fixed_items is not None:
        return ranking[: plan.fixed_items]
    left = int(plan.fixed_bytes or 0)
    out = []
    for i in ranking:
        s = int(trace.item_sizes[i])
        if s <= left:
            left -= s
            out.append(i)
    return out


def _load_catalog(cache: TieredCache, kc: Any, sizes: np.ndarray, pool: bytes) -> None:
    span = len(pool) - int(sizes.max())
    for i, s in enumerate(sizes.tolist()):
        off = (i * 7919) % max(1, span)
        cache.put(kc, i, pool[off:off + s])


def _delete_catalog(address: str, cache: TieredCache, kc: Any, n: int) -> int:
    left = 0
    with _core.Client(address, timeout=2.0) as c:
        for i in range(n):
            try:
                c.delete(cache.key_for(kc, i))
            except Exception:  # noqa: BLE001 - count what we could not clean up
                left += 1
    return left


_clock = time.perf_counter_ns
_cpu = time.thread_time_ns


#: The client calls that read values for the tiered cache's L2 (``_core.Client`` methods).
_L2_READS = ("get_multi", "get_multi_list")


class _GapTier(MemcachedTier):
    """``MemcachedTier`` that also keeps, per L2 read, the caller's *think time*: how long
    since the previous L2 read of this process (on any connection sharing ``clock``) ended —
    how long client and server were away from each other — in wall time and in this thread's
    CPU time (the work done; the rest of a gap is time the process was not running, which a
    profile must not replay as work). It hooks the tier's client call,
    below whichever read method the tiered cache uses, so the cache's own fast path is kept;
    the profile samples go through the same method, class and connection (:meth:`sample`)."""

    def __init__(self, address: str, *, timeout: float, clock: dict[str, int]) -> None:
        super().__init__(address, timeout=timeout, connect_timeout=timeout)
        #: Think times (ns) before the reads made while ``recording``: wall, and CPU.
        self.gaps: list[int] = []
        self.cpu_gaps: list[int] = []
        self.recording = False
        self._sampling = False
        self._shared = clock
        #: Keys per read, for every read since the tier was made.
        self.keys_per_call: list[int] = []
        #: The header ``get_list`` strips (the key class's own), when the cache reads that way.
        self.strip: bytes | None = None

    def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        if method not in _L2_READS or self._sampling:
            return super()._call(method, *args, **kw)
        self.keys_per_call.append(len(args[0]))
        c0 = _cpu()
        t0 = _clock()
        shared = self._shared
        if shared["last"] and self.recording:
            self.gaps.append(t0 - shared["last"])
            self.cpu_gaps.append(c0 - shared["cpu"])
        try:
            return super()._call(method, *args, **kw)
        finally:
            shared["last"] = _clock()
            shared["cpu"] = _cpu()

    def sample(self, keys: list[str]) -> tuple[int, int]:
        """One profile sample: an L2 read as the tiered cache makes it, timed as the cache
        times it (without keeping a gap); (ns, keys found)."""
        self._sampling = True
        shared = self._shared
        t0 = _clock()
        _cpu()  # the same clock reads as an application's read (see _call)
        try:
            if hasattr(self, "get_list"):
                found = self.get_list(keys, self.strip)[1]
            else:  # pragma: no cover - a tiered cache that reads with get_multi
                found = len(self.get_multi(keys))
        finally:
            t1 = shared["last"] = _clock()
            shared["cpu"] = _cpu()
            self._sampling = False
        return t1 - t0, found

    def forget(self) -> None:
        """The next read's gap is not measured (it follows a pause that is not the app's)."""
        self._shared["last"] = 0


class _Sampler:
    """A strategy's latency profile, measured on the strategy's own connection while the
    replay runs: a shuffled schedule (every cell ``samples`` times) spread evenly over the
    evaluated requests, each sample after spinning for a think time drawn from the gaps (CPU
    time) the strategy's own reads have had so far. :meth:`after_request` takes the samples
    due — after every request (``interleaved``) or after every slice (``slices``)."""

    def __init__(self, tier: _GapTier, cells: list[Any], samples: int, requests: int,
                 rng: np.random.Generator) -> None:
        self.tier, self.cells, self.rng = tier, cells, rng
        self.schedule = np.repeat(np.arange(len(cells)), samples)
        rng.shuffle(self.schedule)
        self.requests = max(1, requests)
        self.done_requests = 0
        self.pos = 0
        self.think: list[int] = []
        #: (cell index, ns) of every sample in the order taken, cut into segments of
        #: back-to-back sampling (:meth:`new_segment`).
        self.sequence: list[list[tuple[int, int]]] = [[]]

    def new_segment(self) -> None:
        """The next samples are not back to back with the ones before."""
        if self.sequence[-1]:
            self.sequence.append([])

    def warm(self, rounds: int) -> None:
        for _ in range(rounds):
            for c in self.cells:
                self.tier.sample(c.next_keys())

    def after_request(self, requests: int = 1) -> None:
        """Takes the samples due once ``requests`` more requests have run."""
        from cachelab.errors import ServerError
        from cachelab.profiles import spin

        self.done_requests += requests
        target = len(self.schedule) * self.done_requests // self.requests
        gaps = self.tier.cpu_gaps
        while self.pos < min(target, len(self.schedule)):
            ci = int(self.schedule[self.pos])
            cell = self.cells[ci]
            self.pos += 1
            keys = cell.next_keys()
            think = int(gaps[int(self.rng.integers(len(gaps)))]) if gaps else 0
            self.think.append(think)
            if think:
                spin(think, cpu=True)
            try:
                ns, found = self.tier.sample(keys)
            except ServerError as e:
                cell.errors[type(e).__name__] = cell.errors.get(type(e).__name__, 0) + 1
                continue
            cell.latencies.append(ns)
            cell.misses += len(keys) - found
            self.sequence[-1].append((ci, ns))


def _request(cache: TieredCache, kc: Any, touches: list[int], children: list[list[int]],
             depth: int) -> tuple[int, int]:
    """One application request, exactly as replay times it: a scope; at the first topic a
    prefetch strategy's ``prefetch_tree``; a ``get`` per touch. Returns (keys the prefetch sent
    to memcached, 1 if the prefetch found its root in L1), both 0 without a prefetch."""
    kp = root_hit = 0
    with cache.request() as req:
        prefetched = depth == 0
        for item in touches:
            if not prefetched and children[item]:
                prefetched = True
                h0 = cache.l1_stats.hits
                kp = req.prefetch_tree(kc, item, children.__getitem__, depth)
                root_hit = cache.l1_stats.hits - h0
            req.get(kc, item)
    return kp, root_hit


def _walked(children: list[list[int]], root: int, depth: int) -> int:
    """Nodes ``prefetch_tree`` walks from ``root`` to ``depth`` levels (root included)."""
    seen, frontier = {root}, [root]
    for _ in range(depth):
        nxt = [c for p in frontier for c in children[p] if c not in seen and not seen.add(c)]
        if not nxt:
            break
        frontier = nxt
    return len(seen)


#: Per evaluated request, what the request paid for, as counted (see ``_Driver.run``).
_COUNTS = ("scope", "l1_hit", "get", "prefetch", "walked", "prefetch_keys", "round_trips")


class _Driver:
    """One strategy built for real: a TieredCache per app instance over one memcached
    connection, driven one request at a time."""

    def __init__(self, trace: Any, address: str, prefix: str, canonical: str, ranking: list[int],
                 children: list[list[int]], touch_lists: list[list[int]], timeout: float,
                 clock: dict[str, int]) -> None:
        self.strategy = canonical
        self.plan = plan = parse(canonical)
        self.trace = trace
        self.prefix = prefix
        self.children = children
        self.touch_lists = touch_lists
        self.tier = _GapTier(address, timeout=timeout, clock=clock)
        self.fixed = (_fixed_set(trace, ranking, plan)
                      if plan.fixed_items is not None or plan.fixed_bytes is not None else None)
        self.lru = plan.lru_items is not None or plan.lru_bytes is not None
        self.caches: dict[int, tuple[TieredCache, Any]] = {}
        for inst in sorted(set(trace.instance.tolist())):
            self.caches[int(inst)] = self.new_cache()
        self.lookups = 0
        self.counts_by_request = {k: np.zeros(len(trace), dtype=np.int64) for k in _COUNTS}
        self._walks: dict[int, int] = {}
        #: Per request run: its L2 calls' latencies (ns) and whether each was a multi-get.
        self.calls: dict[int, tuple[list[int], list[bool]]] = {}

    def new_cache(self, extra_pins: tuple[int, ...] | list[int] = ()) -> tuple[TieredCache, Any]:
        """A TieredCache with this strategy's L1 on this strategy's connection (pinned and
        loaded for ``fixed:``, with ``extra_pins`` too)."""
        plan, sizes = self.plan, self.trace.item_sizes

        def loader(idents: list[int]) -> dict[int, bytes]:
            # Never expected: the catalog is all in memcached (counted as loader_keys).
            return {i: bytes(int(sizes[i])) for i in idents}

        pins = None if self.fixed is None else [*self.fixed, *extra_pins]
        if self.lru:
            l1: Any = LRUMemory(max_items=plan.lru_items, max_bytes=plan.lru_bytes)
        elif pins is not None:
            l1 = FixedMemory.from_keys("item", pins)
        else:
            l1 = None
        c = TieredCache(self.tier, l1, prefix=self.prefix)
        kc = c.key_class("item", loader, codec="raw")
        if pins:
            c.get_many(kc, pins)  # pin the hot set before the evaluation
        return c, kc

    def warm(self, requests: np.ndarray) -> None:
        """The training window, untimed: only an LRU has state to warm."""
        if self.lru:
            for r in requests:
                self.run(int(r))
        for c, _ in self.caches.values():
            c.reset_stats()
        self.lookups = 0
        for v in self.counts_by_request.values():
            v[:] = 0
        self.calls.clear()

    def run(self, r: int) -> tuple[int, int]:
        """Runs request ``r``; (its wall time, the part inside memcached calls), ns. Also counts
        what each touch turned out to be."""
        cache, kc = self.caches[int(self.trace.instance[r])]
        touches = self.touch_lists[r]
        recorded = cache.l2_stats.latencies_ns
        n0, h0, c0 = len(recorded), cache.l1_stats.hits, cache.l2_stats.calls
        k0 = len(self.tier.keys_per_call)
        t0 = _clock()
        kp, root_hit = _request(cache, kc, touches, self.children, self.plan.depth)
        t1 = _clock()
        self.lookups += len(set(touches))
        self.calls[r] = (recorded[n0:], [k > 1 for k in self.tier.keys_per_call[k0:]])
        calls = cache.l2_stats.calls - c0
        l1 = cache.l1_stats.hits - h0 - root_hit
        gets = calls - (1 if kp else 0)
        cr = self.counts_by_request
        cr["l1_hit"][r] = l1
        cr["get"][r] = gets
        cr["scope"][r] = len(touches) - l1 - gets
        cr["round_trips"][r] = calls
        topic = self._first_topic(touches)
        if topic is not None:
            cr["prefetch"][r] = 1
            cr["walked"][r] = self._walk(topic)
            cr["prefetch_keys"][r] = kp
        return t1 - t0, sum(recorded[n0:])

    def _first_topic(self, touches: list[int]) -> int | None:
        """The topic a prefetch strategy prefetches at (None: no prefetch in this request)."""
        if not self.plan.depth:
            return None
        return next((i for i in touches if self.children[i]), None)

    def _walk(self, topic: int) -> int:
        w = self._walks.get(topic)
        if w is None:
            w = self._walks[topic] = _walked(self.children, topic, self.plan.depth)
        return w

    def counts(self, requests: int) -> dict[str, Any]:
        caches = [c for c, _ in self.caches.values()]
        return {
            "lookups": self.lookups,
            "l1_hits": sum(c.l1_stats.hits for c in caches),
            "round_trips": sum(c.l2_stats.calls for c in caches),
            "requests": requests,
            "loader_keys": sum(c.l3_stats.keys for c in caches),
            "errors": sum(c.l2_stats.errors for c in caches),
        }


def _timed(cache: TieredCache, kc: Any, touches: list[int], children: list[list[int]],
           depth: int) -> tuple[int, int, int, int, int]:
    """Times one crafted request: (wall ns, ns inside L2 calls, L2 calls, L1 hits counted by
    gets, keys the prefetch sent)."""
    recorded = cache.l2_stats.latencies_ns
    n0, h0, c0 = len(recorded), cache.l1_stats.hits, cache.l2_stats.calls
    t0 = _clock()
    kp, root_hit = _request(cache, kc, touches, children, depth)
    t1 = _clock()
    return (t1 - t0, sum(recorded[n0:]), cache.l2_stats.calls - c0,
            cache.l1_stats.hits - h0 - root_hit, kp)


class _Calibrator:
    """The library's unit costs (ns) for ``driver``'s kind of L1, from crafted requests run
    through the same request function replay times, in this process, on the same connection.
    :meth:`step` runs the next one; :meth:`terms` turns what the steps measured into:

    * ``request``: a request with no touches;
    * ``scope``: the slope of ``[x] * n`` over n, x already in the scope after its first touch;
    * ``l1_first``, ``l1_hit`` (strategies with L1): a request's first touch answered by L1
      (a request of one, less ``request``), and each further one (the slope from one to 8
      distinct items in L1);
    * ``get_first``, ``get``: the same for single-key gets of items not in L1, less their time
      inside memcached — a request of 1 and of 8;
    * prefetch strategies: ``prefetch`` (per call), ``prefetch_walk`` (per node walked),
      ``prefetch_key`` (per key sent) and ``prefetch_call`` (once when any key is sent), a
      least-squares fit over real topics of the catalog with their subtrees in L1 and not.

    The kinds take turns, so steps spread over a replay (one or two after each of the
    strategy's requests) measure each kind under the conditions the application's requests
    run in: caches shared with other strategies and with the profile's samples, a thread
    just back from a blocking read. There, the first touch of a kind in a request costs
    several times the next ones (its code and data are out of the CPU's caches), hence the
    separate first and further costs. Back to back (:func:`calibrate`), the same requests run
    in warm caches and measured about half of the library's time per request."""

    #: Crafted requests for an ``l1_hit`` / ``scope`` pair: ``[x]`` and ``[x] * (N + 1)``.
    SCOPE_N = 32
    #: Distinct items per ``get`` request.
    GET_BATCH = 8

    def __init__(self, driver: _Driver, rng: np.random.Generator) -> None:
        self.driver = driver
        trace, children, depth = driver.trace, driver.children, driver.plan.depth
        n_items = trace.n_items
        pinned = set(driver.fixed or ())
        topics = [i for i in range(n_items) if children[i]]
        self.topics: list[int] = []
        extra: list[int] = []
        if depth and topics:
            self.topics = [int(t) for t in rng.choice(topics, size=min(len(topics), 64),
                                                      replace=False)]
            if driver.fixed is not None:  # half of the subtrees pinned, half not
                for t in self.topics[::2]:
                    seen, frontier = {t}, [t]
                    for _ in range(depth):
                        frontier = [c for p in frontier for c in children[p] if c not in seen
                                    and not seen.add(c)]
                    extra += sorted(seen)
        self.cache, self.kc = driver.new_cache(extra)
        # Prefetch requests get a cache of their own: an LRU's is made anew for each first
        # pass over the topics (a cold L1; the second pass finds the subtrees in it).
        self.pcache, self.pkc = self.cache, self.kc
        skip = pinned | set(extra)
        self.cold = [i for i in rng.permutation(n_items).tolist() if i not in skip]
        # x: in L1 when there is one (a pinned item, or an LRU's most recent), else fetched.
        self.x = driver.fixed[0] if driver.fixed else self.cold[0]
        self.hot = list(driver.fixed or [])
        self.kinds = (["request", "one", "many", "get1", "get"]
                      + (["l1"] if driver.lru or self.hot else [])
                      + (["prefetch"] if self.topics else []))
        self.passes = 2 if driver.lru else 1
        self.turn = self.pos = self.ptopic = 0
        self.rng = rng
        self.reset()

    def reset(self) -> None:
        """Forgets what the steps so far measured."""
        self.raw: dict[str, list[Any]] = {k: [] for k in self.kinds}

    @property
    def per_round(self) -> int:
        """Steps per round of every kind."""
        return len(self.kinds)

    def step(self) -> None:
        """Runs and times the next crafted request."""
        kind = self.kinds[self.turn % len(self.kinds)]
        self.turn += 1
        cache, kc, children, depth = self.cache, self.kc, self.driver.children, 0
        touches: list[int]
        if kind == "request":
            touches = []
        elif kind in ("one", "many"):
            if cache.l1 is not None and self.driver.lru:
                cache.get(kc, self.x)
            touches = [self.x] * (1 if kind == "one" else self.SCOPE_N + 1)
        elif kind in ("get1", "get"):
            m = 1 if kind == "get1" else self.GET_BATCH
            touches = [self.cold[(self.pos + j) % len(self.cold)] for j in range(m)]
            self.pos += m
        elif kind == "l1":
            if self.hot:
                picks = self.rng.choice(len(self.hot), size=min(self.GET_BATCH, len(self.hot)),
                                        replace=False)
                touches = [self.hot[int(i)] for i in picks]
            else:  # an LRU: the most recent items, in L1 after the gets before
                touches = [self.cold[(self.pos - 1 - j) % len(self.cold)]
                           for j in range(self.GET_BATCH)]
                for t in touches:
                    cache.get(kc, t)
        else:
            k = self.ptopic % (len(self.topics) * self.passes)
            self.ptopic += 1
            if self.driver.lru and k == 0:
                self.pcache, self.pkc = self.driver.new_cache()
            cache, kc, depth = self.pcache, self.pkc, self.driver.plan.depth
            touches = [self.topics[k % len(self.topics)]]
        w, mc, calls, hits, kp = _timed(cache, kc, touches, children, depth)
        if kind in ("get1", "get", "l1"):
            self.raw[kind].append((w - mc, calls, hits))
        elif kind == "prefetch":
            self.raw[kind].append((w - mc, _walked(children, touches[0], depth), kp))
        else:
            self.raw[kind].append(w - mc)

    def terms(self) -> dict[str, float]:
        """Unit costs (ns) from the steps since :meth:`reset` (medians; a least-squares fit
        for prefetch)."""
        raw, out = self.raw, {}

        def med(xs: list[float]) -> float:
            return float(np.median(xs)) if xs else 0.0

        out["request"] = med(raw["request"])
        one, many = med(raw["one"]), med(raw["many"])
        out["scope"] = max(0.0, (many - one) / self.SCOPE_N)
        d = self.driver
        has_l1 = self.cache.l1 is not None and (d.lru or d.fixed)
        out["l1_first"] = max(0.0, one - out["request"]) if has_l1 else 0.0
        out["l1_hit"] = 0.0
        if has_l1:
            # Requests of k touches all answered by L1 (a pinned set smaller than k: fewer; an
            # L1 too small to hold k items: none, and then each hit costs as the first).
            k = max((hits for _, calls, hits in raw.get("l1", []) if not calls), default=0)
            rows = [w for w, calls, hits in raw.get("l1", []) if hits == k and not calls]
            out["l1_hit"] = (max(0.0, (med(rows) - one) / (k - 1)) if k > 1
                             else out["l1_first"])

        def lib(rows: list[tuple[int, int, int]]) -> float:
            """Median ns of gets' requests, less the L1 hits among them at their costs."""
            return med([w - (hits > 0) * out["l1_first"] - max(0, hits - 1) * out["l1_hit"]
                        for w, calls, hits in rows if calls])

        first = lib([r for r in raw["get1"] if r[1] == 1])
        out["get_first"] = max(0.0, first - out["request"])
        batch = [r for r in raw["get"] if r[1] > 1]
        calls = int(np.median([c for _, c, _ in batch])) if batch else 0
        out["get"] = max(0.0, (lib([r for r in batch if r[1] == calls]) - first)
                         / (calls - 1)) if calls > 1 else 0.0
        if "prefetch" in raw:
            rows = [[1.0, walked, kp, 1.0 if kp else 0.0] for _, walked, kp in raw["prefetch"]]
            ys = [w - out["request"] - out["scope"] for w, _, _ in raw["prefetch"]]
            coef = np.zeros(4)
            if rows:
                coef, *_ = np.linalg.lstsq(np.asarray(rows, dtype=float),
                                           np.asarray(ys, dtype=float), rcond=None)
            out.update(prefetch=float(coef[0]), prefetch_walk=float(coef[1]),
                       prefetch_key=float(coef[2]), prefetch_call=float(coef[3]))
        return out

    def aside(self, steps: int) -> None:
        """Runs ``steps`` steps in the middle of a replay without their time counting as the
        application's: the strategy's next read measures its think time as if they had not
        run."""
        tier = self.driver.tier
        shared = tier._shared
        last, cpu, recording = shared["last"], shared["cpu"], tier.recording
        tier.recording = False
        t0, c0 = _clock(), _cpu()
        try:
            for _ in range(steps):
                self.step()
        finally:
            tier.recording = recording
            if last:
                shared["last"] = last + (_clock() - t0)
                shared["cpu"] = cpu + (_cpu() - c0)
            else:
                shared["last"] = 0


def calibrate(driver: _Driver, reps: int, rng: np.random.Generator) -> dict[str, float]:
    """The library's unit costs (ns), from ``reps`` crafted requests of each kind run back to
    back (see :class:`_Calibrator`; the GC is off, as in the timed replay)."""
    cal = _Calibrator(driver, rng)
    gc.collect()
    gc.disable()
    try:
        for _ in range(reps * cal.per_round):
            cal.step()
    finally:
        gc.enable()
    return cal.terms()


def _library_ns(terms: dict[str, float], counts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per request, each term's predicted ns: unit cost x how often the request pays it."""
    n = len(counts["scope"])

    def first_and_more(k: np.ndarray, first: str, more: str) -> np.ndarray:
        """A request's first touch of a kind costs ``first`` (``more`` when not measured
        apart: a saved result of an earlier version), each further one ``more``."""
        return ((k > 0) * terms.get(first, terms[more])
                + np.maximum(k - 1, 0) * terms[more])

    pf = counts["prefetch"].astype(float)
    keys = counts["prefetch_keys"].astype(float)
    return {
        "request": np.full(n, terms["request"]),
        "scope": counts["scope"] * terms["scope"],
        "l1_hit": first_and_more(counts["l1_hit"], "l1_first", "l1_hit"),
        "get": first_and_more(counts["get"], "get_first", "get"),
        "prefetch": (pf * terms.get("prefetch", 0.0)
                     + counts["walked"] * terms.get("prefetch_walk", 0.0)
                     + keys * terms.get("prefetch_key", 0.0)
                     + (keys > 0) * terms.get("prefetch_call", 0.0)),
    }


#: Where a strategy's get cells are measured: these percentiles of the sizes the evaluated
#: requests touch (with repeats). The simulator interpolates between cells on a log scale of
#: size while a get's latency grows about linearly with size, so cells spread over a decade
#: would overstate the items between them; cells where the touches are avoid that.
SIZE_PERCENTILES = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 97.0, 99.5, 100.0)


def _profile_cells(trace: Any, children: list[list[int]], depth: int,
                   evaluated: np.ndarray) -> dict[str, Any]:
    """Which cells a strategy's model needs: gets at the :data:`SIZE_PERCENTILES` of the
    touched items' sizes; for prefetch, multi-gets by key count (powers of two) up to the
    largest batch it can send."""
    touched = np.concatenate([trace.touches(int(r)) for r in np.flatnonzero(evaluated)])
    sizes = np.asarray(trace.item_sizes)[touched] if len(touched) else trace.item_sizes
    at = np.percentile(sizes, SIZE_PERCENTILES, method="nearest")
    out: dict[str, Any] = {"sizes": tuple(sorted({max(1, int(x)) for x in at})),
                           "key_counts": ()}
    if depth:
        biggest = max((_walked(children, i, depth) for i in range(trace.n_items)
                       if children[i]), default=1)
        counts, k = [1], 1
        while k < biggest:
            k *= 2
            counts.append(k)
        out["key_counts"] = tuple(counts)
    return out


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        return []


def replay(
    trace: Any, spec: ReplaySpec | None = None, *, server: str | None = None,
    trace_info: dict[str, Any] | None = None, log: Any = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replays ``trace`` (a :class:`cachelab.traces.RequestTrace`) on the memcached at
    ``server`` (or a private one sized for the catalog) and compares with the prediction.
    ``on_progress(done, total)`` is called as evaluated requests are replayed (every 200, and
    at the end of each slice)."""
    spec = spec or ReplaySpec()
    spec.check()
    say = log or (lambda msg: None)
    if server is None:
        from cachelab.servers import PrivateMemcached

        need_mb = int(trace.item_sizes.sum() / 1e6 * 1.6) + 64
        big = int(trace.item_sizes.max()) > 1_000_000 - 300
        with PrivateMemcached(memory_mb=need_mb, item_size_max="2m" if big else None) as mc:
            result = replay(trace, spec, server=mc.address, trace_info=trace_info, log=log,
                            on_progress=on_progress)
            result.server.update({"private": True, "argv": mc.argv})
            return result

    from cachelab import profiles
    from cachelab.latency_model import latency_model
    from cachelab.simulation import SimulateSpec, simulate

    started = time.perf_counter()
    load_before = _load()
    strategies = list(spec.strategies or default_strategies(trace.n_items))
    canonical = [_core.parse_strategy(s) for s in strategies]
    plans = [parse(c) for c in canonical]
    n = len(trace)
    order = np.lexsort((np.arange(n), trace.time))
    n_train = int(np.floor(spec.train * n))
    evaluated = np.ones(n, dtype=bool)
    evaluated[order[:n_train]] = False
    children = [trace.children(i).tolist() for i in range(trace.n_items)]
    ranking = _training_ranking(trace, evaluated) if any(
        p.fixed_items or p.fixed_bytes for p in plans) else []
    rng = np.random.default_rng(spec.seed)

    prefix = f"cachelab:{secrets.token_hex(6)}"
    loader_cache = TieredCache(MemcachedTier(server, timeout=spec.timeout), None, prefix=prefix)
    kc = loader_cache.key_class("item", lambda ids: {}, codec="raw")
    sizes = trace.item_sizes
    say(f"loading {trace.n_items:,} items ({sizes.sum() / 1e6:.1f} MB) into memcached")
    pool = os.urandom(int(sizes.max()) + 65_536)
    drivers: list[_Driver] = []
    written: list[list[Any]] = []
    with _core.Client(server, timeout=spec.timeout, connect_timeout=spec.timeout) as c:
        version = c.version()
    try:
        _load_catalog(loader_cache, kc, sizes, pool)
        mean_size = max(1, int(round(float(sizes.mean()))))
        touch_lists = [trace.touches(r).tolist() for r in range(n)]
        clock = {"last": 0, "cpu": 0}  # when this process's last L2 read ended (wall, CPU)
        drivers = [_Driver(trace, server, prefix, c, ranking, children, touch_lists,
                           spec.timeout, clock) for c in canonical]
        for d in drivers:
            say(f"warming {d.strategy} on the training window")
            d.warm(order[:n_train])
        chunks = np.array_split(order[n_train:], spec.slices)
        added = {c: np.zeros(n, dtype=np.int64) for c in canonical}
        in_mc = {c: np.zeros(n, dtype=np.int64) for c in canonical}
        cals: dict[str, list[dict[str, float]]] = {c: [] for c in canonical}
        n_eval = int(evaluated.sum())
        samplers = {}
        for d in drivers:
            cells = profiles.tier_cells(
                server, f"{prefix}:profile:{len(samplers)}",
                **_profile_cells(trace, children, d.plan.depth, evaluated),
                multi_value_size=mean_size,
                timeout=spec.timeout, seed=spec.seed)
            written.append(cells)
            d.tier.strip = getattr(kc.format, "own_header", None)
            samplers[d.strategy] = _Sampler(d.tier, cells, spec.profile_samples, n_eval, rng)
            samplers[d.strategy].warm(spec.profile_warmup)
        started_profiles = time.time()
        interleaved = spec.profile_mode == "interleaved"
        calibrators = ({d.strategy: _Calibrator(d, rng) for d in drivers} if interleaved
                       else {})
        progress = on_progress or (lambda done, total: None)
        replayed = 0
        progress(0, n_eval)
        for k, chunk in enumerate(chunks):
            say(f"slice {k + 1}/{len(chunks)}: {len(chunk):,} requests under every strategy "
                "in turn" + (", each followed by a few samples of its profile and "
                             "calibration requests" if interleaved else "; then each "
                             "strategy's profile slice and calibration"))
            for d in drivers:
                d.tier.forget()
                d.tier.recording = True
                samplers[d.strategy].new_segment()
            # Interleaved: each request is followed by its strategy's profile samples due and
            # its share of the slice's calibration requests.
            steps = {c: -(-spec.calibration_reps * cal.per_round // max(1, len(chunk)))
                     for c, cal in calibrators.items()}
            gc.collect()
            gc.disable()
            try:
                for j, r in enumerate(chunk.tolist()):
                    for q in range(len(drivers)):  # rotate who goes first
                        d = drivers[(j + q) % len(drivers)]
                        added[d.strategy][r], in_mc[d.strategy][r] = d.run(r)
                        if interleaved:
                            samplers[d.strategy].after_request()
                            calibrators[d.strategy].aside(steps[d.strategy])
                    if j % 200 == 199:
                        progress(replayed + j + 1, n_eval)
            finally:
                gc.enable()
                for d in drivers:
                    d.tier.recording = False
            if not interleaved:
                # Who samples first rotates by slice too, as the requests do.
                for q in range(len(drivers)):
                    d = drivers[(k + q) % len(drivers)]
                    d.tier.forget()
                    samplers[d.strategy].new_segment()
                    samplers[d.strategy].after_request(len(chunk))
            for d in drivers:
                if interleaved:
                    cals[d.strategy].append(calibrators[d.strategy].terms())
                    calibrators[d.strategy].reset()
                else:
                    cals[d.strategy].append(calibrate(d, spec.calibration_reps, rng))
            replayed += len(chunk)
            progress(replayed, n_eval)
        say("simulating")
        core_trace = trace.to_core()
        rows = []
        profile_info: dict[str, Any] = {}
        for d in drivers:
            smp = samplers[d.strategy]
            prof = profiles.tier_profile(
                smp.cells, address=server, version=version, started=started_profiles,
                client={"think_ns": profiles.think_summary(smp.think), "think_cpu": True,
                        "samples": spec.profile_samples, "warmup": spec.profile_warmup,
                        "mode": spec.profile_mode,
                        "timeout": spec.timeout},
                sequence=smp.sequence)
            model = latency_model(prof, sequence=spec.sequence)
            other = latency_model(prof, sequence=not spec.sequence)
            sim = simulate(trace, SimulateSpec(strategies=(d.strategy,), train=spec.train,
                                               draws=spec.draws, seed=spec.seed), model=model)

            def costs(m: Any, strategy: str = d.strategy) -> list[dict]:
                core_model = m.to_core()
                return [_core.request_costs(core_trace, core_model, strategy, train=spec.train,
                                            seed=spec.seed, draw=i)
                        for i in range(spec.draws)]

            predicted = costs(model)
            alternative = costs(other) if other.draws != model.draws else None
            terms = {key: float(np.median([c[key] for c in cals[d.strategy]]))
                     for key in cals[d.strategy][0]}
            g = (np.asarray(d.tier.gaps, dtype=np.int64),
                 np.asarray(d.tier.cpu_gaps, dtype=np.int64))
            measured = {"added_ns": added[d.strategy], "memcached_ns": in_mc[d.strategy],
                        "by_request": d.counts_by_request, "calls": d.calls,
                        **d.counts(n_eval)}
            row = _compare(trace, d.strategy, measured, predicted, sim.by_name(d.strategy),
                           evaluated, terms, g, spec.seed, alternative)
            row["draws"] = {"used": model.draws,
                            "lag1": (prof.sequence or {}).get("lag1")}
            rows.append(row)
            profile_info[d.strategy] = {
                "name": prof.name,
                "multi_value_size": mean_size,
                "get_p50_us": {c.label: c.at([50.0])[0] / 1000 for c in prof.cells_of("get")},
                "multiget_p50_us": {c.label: c.at([50.0])[0] / 1000
                                    for c in prof.cells_of("multiget")},
                "latency_profile": prof.to_dict(),
            }
    finally:
        for d in drivers:
            d.tier.close()
        for cells in written:
            profiles.delete_tier_cells(server, cells, spec.timeout)
        left = _delete_catalog(server, loader_cache, kc, trace.n_items)
        if left:
            say(f"could not delete {left} keys under {prefix}")
    return ReplayResult(
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        trace={"requests": n, "items": trace.n_items, "evaluated": n_eval,
               "bytes": int(sizes.sum()), **(trace_info or {})},
        spec={**asdict(spec), "strategies": canonical},
        server={"address": server, "version": version, "private": False},
        profile=profile_info,
        strategies=rows,
        elapsed_s=round(time.perf_counter() - started, 3),
        environment=environment.facts(),
        load_average={"before": load_before, "after": _load()},
    )


def _shuffled_sums(calls: dict[int, tuple[list[int], list[bool]]], idx: np.ndarray,
                   seed: int) -> np.ndarray:
    """Per request, ms inside memcached if its calls' latencies were dealt out at random from
    all the calls the strategy made (gets among gets, multi-gets among multi-gets): the
    measured calls with any dependence between the calls of one request removed — what a
    simulator drawing each call independently can at best reproduce."""
    rng = np.random.default_rng(seed)
    lat = [np.asarray(calls.get(int(r), ((), ()))[0], dtype=np.int64) for r in idx]
    multi = [np.asarray(calls.get(int(r), ((), ()))[1], dtype=bool) for r in idx]
    if not lat:
        return np.zeros(0)
    all_lat, all_multi = np.concatenate(lat), np.concatenate(multi)
    dealt = all_lat.copy()
    for kind in (False, True):
        where = np.flatnonzero(all_multi == kind)
        dealt[where] = all_lat[where][rng.permutation(len(where))]
    ends = np.cumsum([len(x) for x in lat])
    return np.asarray([s.sum() for s in np.split(dealt, ends[:-1])], dtype=float) / 1e6


def _pcts(values: np.ndarray) -> dict[str, float]:
    return {_pkey(p): _nearest_rank(values, p) for p in PERCENTILES}


def _err(pred: float, meas: float) -> float | None:
    return (pred - meas) / meas if meas > 0 else None


#: Resamples of the bootstrap interval of a measured percentile.
BOOTSTRAP = 1000


def _pct_intervals(values: np.ndarray, seed: int) -> dict[str, tuple[float, float]]:
    """The 95 % percentile-bootstrap interval of each measured percentile (nearest rank):
    how far the measurement itself could be from the run's true percentile, given how many
    requests it has — at p99 of 1,000 requests, about ten of them decide."""
    rng = np.random.default_rng(seed)
    n = len(values)
    if n == 0:
        return {}
    srt = np.sort(values)
    draws = np.sort(srt[rng.integers(0, n, size=(BOOTSTRAP, n))], axis=1)
    out = {}
    for p in PERCENTILES:
        k = max(0, int(np.ceil(p / 100 * n)) - 1)
        lo, hi = np.percentile(draws[:, k], [2.5, 97.5])
        out[_pkey(p)] = (float(lo), float(hi))
    return out


def _compare(trace: Any, strategy: str, measured: dict[str, Any], predicted: list[dict],
             sim_row: dict[str, Any], evaluated: np.ndarray, terms: dict[str, float],
             gaps: tuple[np.ndarray, np.ndarray], seed: int = 0,
             alternative: list[dict] | None = None) -> dict[str, Any]:
    """Measured vs predicted for one strategy. ``alternative``: the predictions with the
    other kind of draws (independent vs sequence), reported next to the main ones."""
    idx = np.flatnonzero(evaluated)
    base = np.asarray(trace.base_ms, dtype=float)[idx]
    added_ms = measured["added_ns"][idx] / 1e6
    in_tier_ms = measured["memcached_ns"][idx] / 1e6
    lib_meas_ms = added_ms - in_tier_ms
    counts = {k: v[idx] for k, v in measured["by_request"].items()}
    lib = _library_ns(terms, counts)
    lib_ms = sum(lib.values()) / 1e6
    # Per draw: the simulator's memcached time per request (ordered by request index, as idx).
    def per_draw(predicted: list[dict]) -> list[np.ndarray]:
        out = []
        for d in predicted:
            req = np.asarray(d["request"], dtype=np.int64)
            if not np.array_equal(req, idx):
                raise RuntimeError("request_costs and the replay disagree on the evaluated "
                                   "requests")
            out.append(np.asarray(d["added_ms"], dtype=float))
        return out

    mc_draws = per_draw(predicted)
    rt_sim = np.asarray(predicted[0]["round_trips"], dtype=np.int64)

    def over_draws(f: Any, draws: list[np.ndarray] = mc_draws) -> dict[str, float]:
        per = [f(m) for m in draws]
        return {k: float(np.median([p[k] for p in per])) for k in per[0]}

    pred_total = over_draws(lambda m: _pcts(m + lib_ms))
    pred_mc = over_draws(_pcts)
    pred_inc = over_draws(lambda m: _pcts((m + lib_ms) / base))
    meas_total, meas_mc, meas_lib = _pcts(added_ms), _pcts(in_tier_ms), _pcts(lib_meas_ms)
    meas_inc, pred_lib = _pcts(added_ms / base), _pcts(lib_ms)
    shuffled = _pcts(_shuffled_sums(measured["calls"], idx, seed)) if measured.get(
        "calls") else None
    out: dict[str, Any] = {"strategy": strategy, "added_ms": {}, "increase": {},
                           "memcached_ms": {}, "library_ms": {}}
    worst = 0.0
    ci_total = _pct_intervals(added_ms, seed)
    for k in (_pkey(p) for p in PERCENTILES):
        out["added_ms"][k] = {"measured": meas_total[k], "predicted": pred_total[k],
                              "error": _err(pred_total[k], meas_total[k]),
                              "measured_ci95": list(ci_total[k])}
        out["memcached_ms"][k] = {"measured": meas_mc[k], "predicted": pred_mc[k],
                                  "error": _err(pred_mc[k], meas_mc[k])}
        if shuffled is not None:
            out["memcached_ms"][k]["calls_shuffled"] = shuffled[k]
        out["library_ms"][k] = {"measured": meas_lib[k], "predicted": pred_lib[k],
                                "error": _err(pred_lib[k], meas_lib[k])}
        e_inc = _err(pred_inc[k], meas_inc[k])
        out["increase"][k] = {"measured": meas_inc[k], "predicted": pred_inc[k], "error": e_inc}
        # The goal is on the added latency itself (the increase is reported beside it).
        e_add = out["added_ms"][k]["error"]
        worst = max(worst, abs(e_add) if e_add is not None else 1.0)
    if alternative is not None:
        alt = per_draw(alternative)
        alt_total = over_draws(lambda m: _pcts(m + lib_ms), alt)
        alt_inc = over_draws(lambda m: _pcts((m + lib_ms) / base), alt)
        alt_mc = over_draws(_pcts, alt)
        out["alternative"] = {
            k: {"added_ms": alt_total[k], "added_error": _err(alt_total[k], meas_total[k]),
                "memcached_ms": alt_mc[k], "memcached_error": _err(alt_mc[k], meas_mc[k]),
                "increase": alt_inc[k], "increase_error": _err(alt_inc[k], meas_inc[k])}
            for k in (_pkey(p) for p in PERCENTILES)}
    total = float(added_ms.sum()) or 1.0
    out["library_overhead_share"] = 1.0 - float(in_tier_ms.sum()) / total
    # Where the time goes: mean per request, predicted term by term vs measured.
    mean_mc = float(np.median([m.mean() for m in mc_draws]))
    out["terms"] = {
        "unit_us": {k: v / 1000 for k, v in terms.items()},
        "per_request": {k: float(v.mean()) for k, v in counts.items()},
        "mean_ms": {"memcached": mean_mc,
                    **{k: float(v.mean()) / 1e6 for k, v in lib.items()}},
        "measured_mean_ms": {"memcached": float(in_tier_ms.mean()),
                             "library": float(lib_meas_ms.mean()),
                             "total": float(added_ms.mean())},
    }
    out["terms"]["mean_ms"]["total"] = sum(out["terms"]["mean_ms"].values())
    wall, cpu = gaps
    out["think_us"] = {"calls": int(len(wall))}
    if len(wall):
        for p in (50.0, 90.0, 99.0):
            out["think_us"][f"p{p:g}"] = float(np.percentile(wall, p)) / 1000
            out["think_us"][f"cpu_p{p:g}"] = float(np.percentile(cpu, p)) / 1000
    lookups = max(1, measured["lookups"])
    out["checks"] = {
        "hit_ratio": {"measured": measured["l1_hits"] / lookups,
                      "predicted": sim_row["hit_ratio"]},
        "round_trips_per_request": {
            "measured": measured["round_trips"] / max(1, measured["requests"]),
            "predicted": sim_row["round_trips_per_request"]},
        "round_trips_differ_in_requests": int((counts["round_trips"] != rt_sim).sum()),
        "loader_keys": measured["loader_keys"],
        "errors": measured["errors"],
    }
    out["worst_error"] = worst
    out["within_tolerance"] = worst <= TOLERANCE
    return out


def _term_cell(t: dict[str, Any], name: str) -> str:
    """A term's mean predicted ms per request, with its unit cost and count."""
    u, c, mm = t["unit_us"], t["per_request"], t["mean_ms"]
    if name == "prefetch":
        if "prefetch" not in u:
            return f"{mm['prefetch']:.3f}"
        return (f"{mm['prefetch']:.3f} ({u['prefetch']:.1f}+{u['prefetch_walk']:.2f}/node"
                f"+{u['prefetch_key']:.2f}/key+{u['prefetch_call']:.1f})")
    first = {"l1_hit": "l1_first", "get": "get_first"}.get(name)
    if first in u:
        return (f"{mm[name]:.3f} ({u[first]:.2f} first+{u[name]:.2f}/more;"
                f" {c.get(name, 1.0):.1f}/req)")
    return f"{mm[name]:.3f} ({u[name]:.2f}x{c.get(name, 1.0):.1f})"


def render(result: ReplayResult) -> str:
    """Measured vs predicted, side by side, and where the time goes, for a terminal."""
    d = result.to_dict()
    load = d.get("load_average") or {}
    lines = [
        f"Added time per request: measured on the real tiered cache vs predicted "
        f"({d['trace']['evaluated']:,} evaluated requests on {d['server']['address']}; "
        f"load average before {load.get('before')}, after {load.get('after')})",
        "",
    ]
    header = ["strategy", "%ile", "measured ms", "95% CI", "predicted ms", "error",
              "in memcached ms",
              "shuffled", "model ms", "error", "library ms", "predicted", "inc measured",
              "inc predicted", "error"]
    rows = []

    def err(e: float | None) -> str:
        return "—" if e is None else f"{100 * e:+.1f}%"

    for s in d["strategies"]:
        for k in (_pkey(p) for p in PERCENTILES):
            a, i, m, b = (s["added_ms"][k], s["increase"][k], s["memcached_ms"][k],
                          s["library_ms"][k])
            ci = a.get("measured_ci95")
            ci_cell = (f"{100 * (ci[0] / a['measured'] - 1):+.0f}/"
                       f"{100 * (ci[1] / a['measured'] - 1):+.0f}%"
                       if ci and a["measured"] > 0 else "—")
            rows.append([s["strategy"] if k == "50" else "", f"p{k}", f"{a['measured']:.3f}",
                         ci_cell, f"{a['predicted']:.3f}", err(a["error"]),
                         f"{m['measured']:.3f}",
                         f"{m['calls_shuffled']:.3f}" if "calls_shuffled" in m else "—",
                         f"{m['predicted']:.3f}", err(m["error"]), f"{b['measured']:.3f}",
                         f"{b['predicted']:.3f}", f"{100 * i['measured']:.2f}%",
                         f"{100 * i['predicted']:.2f}%", err(i["error"])])
    lines += text_table(header, rows, left=2)
    lines += ["", "measured = the request's wall time in the tiered cache; predicted = the "
              "simulator's memcached time (model: a profile measured through the tiered "
              "cache's own L2 call, with this strategy's think times) + the library terms "
              "below; in memcached = the part inside L2 calls vs the model alone; shuffled = "
              "the same calls dealt out to requests at random (what independent draws can "
              "reproduce at best); library = the rest vs the terms; inc = added time / the "
              "request's base latency. error = (predicted - measured) / measured. 95% CI = "
              "the measured percentile's bootstrap interval over the evaluated requests, "
              "relative to it: the measurement's own uncertainty."]
    lines += ["", "Where the time goes (mean per request, predicted ms; unit cost µs x count "
              "per request):"]
    th = ["strategy", "memcached", *[t for t, _ in TERMS], "predicted", "measured",
          "think p50/p90 µs (CPU)"]
    trows = []
    for s in d["strategies"]:
        t = s["terms"]
        mm = t["mean_ms"]

        th_us = s.get("think_us", {})
        trows.append([s["strategy"], f"{mm['memcached']:.3f}",
                      *[_term_cell(t, n) for n, _ in TERMS],
                      f"{mm['total']:.3f}", f"{t['measured_mean_ms']['total']:.3f}",
                      f"{th_us.get('p50', 0):.0f}/{th_us.get('p90', 0):.0f} "
                      f"({th_us.get('cpu_p50', 0):.0f}/{th_us.get('cpu_p90', 0):.0f})"])
    lines += text_table(th, trows, left=2)
    lines += ["", "Terms: " + "; ".join(f"{n} = {what}" for n, what in TERMS) + ". Unit costs "
              "are measured by calibration requests in this process (not fitted to the "
              "replay); measured = the replay's mean wall time per request."]
    lines += ["", "Draws within a request (how one memcached call's latency relates to the "
              "next's):"]
    for s in d["strategies"]:
        dr = s.get("draws") or {}
        lag = dr.get("lag1")
        what = ("consecutive ranks of the profile's samples in the order taken" if
                dr.get("used") == "sequence" else "independent")
        line = f"  {s['strategy']}: {what}"
        if lag is not None:
            line += f" (lag-1 rank correlation of the profile's samples {lag:.2f})"
        alt = s.get("alternative")
        if alt:
            other = "independent" if dr.get("used") == "sequence" else "sequence"
            line += (f"; with {other} draws the errors would be "
                     + ", ".join(f"p{k} {err(alt[k]['increase_error'])}" for k in
                                 (_pkey(p) for p in PERCENTILES)))
        lines.append(line)
    lines += ["", "Checks (must agree: the replay mirrors the simulator's semantics):"]
    for s in d["strategies"]:
        c = s["checks"]
        lines.append(
            f"  {s['strategy']}: L1 hit ratio {c['hit_ratio']['measured']:.4f} vs "
            f"{c['hit_ratio']['predicted']:.4f}; round trips/request "
            f"{c['round_trips_per_request']['measured']:.3f} vs "
            f"{c['round_trips_per_request']['predicted']:.3f} (requests that differ: "
            f"{c['round_trips_differ_in_requests']}); loader keys {c['loader_keys']}; "
            f"errors {c['errors']}; library {100 * s['library_overhead_share']:.0f}% of added "
            f"time; added ms within ±{TOLERANCE:.0%} at p50/p90/p99: "
            f"{'yes' if s['within_tolerance'] else 'NO'}")
    return "\n".join(lines)
