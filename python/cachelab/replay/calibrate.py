"""The library's own costs, term by term (:data:`TERMS`): unit costs measured by timing
crafted requests through the same request function replay times (:class:`Calibrator`,
:func:`calibrate`), and a request's predicted library time from them (:func:`library_ns`:
unit cost x how often the request pays it)."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np

from cachelab.replay.driver import Driver, clock, cpu, request
from cachelab.tiered import TieredCache

__all__ = ["TERMS", "Calibrator", "calibrate", "library_ns", "timed"]

#: The library's cost terms, in the order they are reported: (name, what it is).
TERMS = (
    ("request", "per request: the scope, the loop, the timer"),
    ("scope", "per touch answered by the request scope (a repeat, or prefetched)"),
    ("l1_hit", "per touch answered by L1"),
    ("get", "per single-key get: the library's part, outside the memcached call"),
    ("prefetch", "per prefetch_tree call (+ per node walked and per key fetched)"),
)


def timed(cache: TieredCache, kc: Any, touches: list[int], children: list[list[int]],
          depth: int) -> tuple[int, int, int, int, int]:
    """Times one crafted request: (wall ns, ns inside L2 calls, L2 calls, L1 hits, keys the
    prefetch sent)."""
    recorded = cache.l2_stats.latencies_ns
    n0, h0, c0 = len(recorded), cache.l1_stats.hits, cache.l2_stats.calls
    t0 = clock()
    kp = request(cache, kc, touches, children, depth)
    t1 = clock()
    return (t1 - t0, sum(recorded[n0:]), cache.l2_stats.calls - c0,
            cache.l1_stats.hits - h0, kp)


class Calibrator:
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

    def __init__(self, driver: Driver, rng: np.random.Generator) -> None:
        self.driver = driver
        work, depth = driver.work, driver.depth
        n_items = work.trace.n_items
        pinned = set(driver.fixed or ())
        topics = work.topics()
        self.topics: list[int] = []
        #: Items a prefetch at each of the topics walks (the simulator's walk).
        self.walked: dict[int, int] = {}
        extra: list[int] = []
        if depth and topics:
            self.topics = [int(t) for t in rng.choice(topics, size=min(len(topics), 64),
                                                      replace=False)]
            subtrees = work.subtrees(self.topics, depth)
            self.walked = {t: len(s) for t, s in zip(self.topics, subtrees)}
            if driver.fixed is not None:  # half of the subtrees pinned, half not
                for s in subtrees[::2]:
                    extra += sorted(s)
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
        cache, kc, children, depth = self.cache, self.kc, self.driver.work.children, 0
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
            cache, kc, depth = self.pcache, self.pkc, self.driver.depth
            touches = [self.topics[k % len(self.topics)]]
        w, mc, calls, hits, kp = timed(cache, kc, touches, children, depth)
        if kind in ("get1", "get", "l1"):
            self.raw[kind].append((w - mc, calls, hits))
        elif kind == "prefetch":
            self.raw[kind].append((w - mc, self.walked[touches[0]], kp))
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
        shared = tier.shared
        last, last_cpu, recording = shared["last"], shared["cpu"], tier.recording
        tier.recording = False
        t0, c0 = clock(), cpu()
        try:
            for _ in range(steps):
                self.step()
        finally:
            tier.recording = recording
            if last:
                shared["last"] = last + (clock() - t0)
                shared["cpu"] = last_cpu + (cpu() - c0)
            else:
                shared["last"] = 0


def calibrate(driver: Driver, reps: int, rng: np.random.Generator) -> dict[str, float]:
    """The library's unit costs (ns), from ``reps`` crafted requests of each kind run back to
    back (see :class:`Calibrator`; the GC is off, as in the timed replay)."""
    cal = Calibrator(driver, rng)
    gc.collect()
    gc.disable()
    try:
        for _ in range(reps * cal.per_round):
            cal.step()
    finally:
        gc.enable()
    return cal.terms()


def library_ns(terms: dict[str, float], counts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
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
