"""``cachelab replay``: run a request trace through the real :mod:`cachelab.tiered` cache on a
real memcached, and compare each request's measured added time with ``simulate``'s prediction.

Steps (:func:`replay`):

1. **Load the catalog** into memcached: every item as a value of its size (random bytes in the
   tiered cache's ``raw`` format), under a per-run prefix; everything is deleted at the end.
2. **Measure a latency profile on the same server** (:func:`cachelab.profile`, quick by
   default; the multi-get cells use the catalog's mean item size) and make it the model.
3. **Predict**: :func:`cachelab.simulate` with that model, for the same trace, strategies and
   training split; per-request predictions from the simulator's ``request_costs``.
4. **Measure**: for each strategy, one :class:`~cachelab.tiered.TieredCache` per app instance
   (its own L1, one shared memcached connection), requests in time order. The training window
   is run first, untimed, to warm LRUs (``fixed:`` pins its hot set — the items most training
   requests touch, as the simulator picks them — and loads it before the evaluation). Each
   evaluated request runs in a request scope; at its first topic a prefetch strategy calls
   ``prefetch_tree(topic, children, depth)``; every touch is a ``get``. The request's added
   time is the wall time of all of that.

Mirroring the simulator's semantics (``docs/simulation.md``) means the hit ratios and round
trips per request must agree exactly; they are reported next to the latencies as a check.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cachelab import _core, environment
from cachelab.errors import UsageError
from cachelab.tables import text_table
from cachelab.tiered import FixedMemory, LRUMemory, MemcachedTier, TieredCache

__all__ = ["PERCENTILES", "SCHEMA", "ReplayResult", "ReplaySpec", "replay"]

SCHEMA = "cachelab.replay"
SCHEMA_VERSION = 1

#: Percentiles compared (nearest rank, as the simulator computes them).
PERCENTILES = (50.0, 90.0, 99.0)

#: The goal: predicted within this fraction of measured.
TOLERANCE = 0.15


@dataclass
class ReplaySpec:
    """What ``replay`` runs. ``strategies=None``: none, lru:N, fixed:N and
    fixed:N+prefetch-children with N = 5 % of the catalog (as ``simulate``'s defaults)."""

    strategies: tuple[str, ...] | None = None
    train: float = 0.5
    draws: int = 5
    seed: int = 0
    profile_samples: int = 1000
    profile_warmup: int = 50
    timeout: float = 1.0
    #: The evaluation is cut into this many slices; before each, a slice of the profile is
    #: measured, and within each, every request runs under every strategy in turn — so the
    #: model and every strategy sample the same moments of a machine whose load drifts.
    slices: int = 4

    @classmethod
    def quick(cls, **overrides: Any) -> ReplaySpec:
        return cls(**{"profile_samples": 500, "profile_warmup": 20, "draws": 3, **overrides})

    def check(self) -> None:
        if not 0.0 < self.train < 1.0:
            raise UsageError(f"--train must be in (0, 1) for replay, got {self.train}")
        if not 1 <= self.draws <= 100 or not 1 <= self.slices <= 100:
            raise UsageError("--draws and --slices must be 1-100")
        if self.profile_samples < 50:
            raise UsageError("--profile-samples must be at least 50")
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


class _Driver:
    """One strategy built for real: a TieredCache per app instance over one memcached
    connection, driven one request at a time."""

    def __init__(self, trace: Any, address: str, prefix: str, canonical: str, ranking: list[int],
                 children: list[list[int]], touch_lists: list[list[int]], timeout: float) -> None:
        self.strategy = canonical
        self.plan = plan = parse(canonical)
        self.trace = trace
        self.children = children
        self.touch_lists = touch_lists
        self.tier = MemcachedTier(address, timeout=timeout, connect_timeout=timeout)
        sizes = trace.item_sizes

        def loader(idents: list[int]) -> dict[int, bytes]:
            # Never expected: the catalog is all in memcached (counted as loader_keys).
            return {i: bytes(int(sizes[i])) for i in idents}

        self.fixed = (_fixed_set(trace, ranking, plan)
                      if plan.fixed_items is not None or plan.fixed_bytes is not None else None)
        self.lru = plan.lru_items is not None or plan.lru_bytes is not None
        self.caches: dict[int, tuple[TieredCache, Any]] = {}
        for inst in sorted(set(trace.instance.tolist())):
            if self.lru:
                l1: Any = LRUMemory(max_items=plan.lru_items, max_bytes=plan.lru_bytes)
            elif self.fixed is not None:
                l1 = FixedMemory.from_keys("item", self.fixed)
            else:
                l1 = None
            c = TieredCache(self.tier, l1, prefix=prefix)
            kc = c.key_class("item", loader, codec="raw")
            if self.fixed is not None:
                c.get_many(kc, self.fixed)  # pin the hot set before the evaluation
            self.caches[int(inst)] = (c, kc)
        self.lookups = 0

    def warm(self, requests: np.ndarray) -> None:
        """The training window, untimed: only an LRU has state to warm."""
        if self.lru:
            for r in requests:
                self.run(int(r))
        for c, _ in self.caches.values():
            c.reset_stats()
        self.lookups = 0

    def run(self, r: int) -> tuple[int, int]:
        """Runs request ``r``; (its wall time, the part inside memcached calls), ns."""
        cache, kc = self.caches[int(self.trace.instance[r])]
        touches = self.touch_lists[r]
        children = self.children
        depth = self.plan.depth
        recorded = cache.l2_stats.latencies_ns
        n0 = len(recorded)
        t0 = _clock()
        with cache.request() as req:
            prefetched = depth == 0
            for item in touches:
                if not prefetched and children[item]:
                    prefetched = True
                    req.prefetch_tree(kc, item, children.__getitem__, depth)
                req.get(kc, item)
        t1 = _clock()
        self.lookups += len(set(touches))
        return t1 - t0, sum(recorded[n0:])

    def counts(self, requests: int) -> dict[str, Any]:
        caches = [c for c, _ in self.caches.values()]
        out = {
            "lookups": self.lookups,
            "l1_hits": sum(c.l1_stats.hits for c in caches),
            "round_trips": sum(c.l2_stats.calls for c in caches),
            "requests": requests,
            "loader_keys": sum(c.l3_stats.keys for c in caches),
            "errors": sum(c.l2_stats.errors for c in caches),
        }
        self.tier.close()
        return out


_clock = time.perf_counter_ns


def _merge_profiles(slices: list[Any]) -> Any:
    """One profile from profiles measured in slices through the run (histograms merged)."""
    from cachelab.profiles import Cell, LatencyProfile

    first = slices[0]
    cells = []
    for cell in first.cells:
        same = [c for p in slices for c in p.cells
                if (c.op, c.value_size, c.keys) == (cell.op, cell.value_size, cell.keys)
                and c.samples > 0]
        if not same:
            continue
        merged = Cell(op=cell.op, value_size=cell.value_size, keys=cell.keys,
                      samples=sum(c.samples for c in same),
                      histogram=_core.hist_merge([c.histogram for c in same]),
                      errors={}, mismatches=sum(c.mismatches for c in same),
                      misses=sum(c.misses for c in same))
        for c in same:
            for k, v in c.errors.items():
                merged.errors[k] = merged.errors.get(k, 0) + v
        cells.append(merged)
    return LatencyProfile(name=first.name, source="measured", created=first.created,
                          cells=cells, server=first.server, client=first.client,
                          environment=first.environment,
                          run={**first.run, "slices": len(slices)})


def replay(
    trace: Any, spec: ReplaySpec | None = None, *, server: str | None = None,
    trace_info: dict[str, Any] | None = None, log: Any = None,
) -> ReplayResult:
    """Replays ``trace`` (a :class:`cachelab.traces.RequestTrace`) on the memcached at
    ``server`` (or a private one sized for the catalog) and compares with ``simulate``."""
    spec = spec or ReplaySpec()
    spec.check()
    say = log or (lambda msg: None)
    if server is None:
        from cachelab.servers import PrivateMemcached

        need_mb = int(trace.item_sizes.sum() / 1e6 * 1.6) + 64
        big = int(trace.item_sizes.max()) > 1_000_000 - 300
        with PrivateMemcached(memory_mb=need_mb, item_size_max="2m" if big else None) as mc:
            result = replay(trace, spec, server=mc.address, trace_info=trace_info, log=log)
            result.server.update({"private": True, "argv": mc.argv})
            return result

    from cachelab import profiles
    from cachelab.latency_model import latency_model
    from cachelab.simulation import SimulateSpec, simulate

    started = time.perf_counter()
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

    prefix = f"cachelab:{secrets.token_hex(6)}"
    loader_cache = TieredCache(MemcachedTier(server, timeout=spec.timeout), None, prefix=prefix)
    kc = loader_cache.key_class("item", lambda ids: {}, codec="raw")
    sizes = trace.item_sizes
    say(f"loading {trace.n_items:,} items ({sizes.sum() / 1e6:.1f} MB) into memcached")
    pool = os.urandom(int(sizes.max()) + 65_536)
    try:
        _load_catalog(loader_cache, kc, sizes, pool)
        mean_size = max(1, int(round(float(sizes.mean()))))
        touch_lists = [trace.touches(r).tolist() for r in range(n)]
        drivers = [_Driver(trace, server, prefix, c, ranking, children, touch_lists,
                           spec.timeout) for c in canonical]
        for d in drivers:
            say(f"warming {d.strategy} on the training window")
            d.warm(order[:n_train])
        chunks = np.array_split(order[n_train:], spec.slices)
        added = {c: np.zeros(n, dtype=np.int64) for c in canonical}
        in_mc = {c: np.zeros(n, dtype=np.int64) for c in canonical}
        slices = []
        pspec = profiles.ProfileSpec(
            samples=max(10, spec.profile_samples // spec.slices), warmup=spec.profile_warmup,
            multi_value_size=mean_size, key_counts=(1, 3, 5, 10, 30, 100),
            timeout=spec.timeout, seed=spec.seed)
        for k, chunk in enumerate(chunks):
            say(f"slice {k + 1}/{len(chunks)}: a profile slice on the same server, then "
                f"{len(chunk):,} requests under every strategy in turn")
            slices.append(profiles.profile(pspec, server=server))
            gc.collect()
            gc.disable()
            try:
                for j, r in enumerate(chunk.tolist()):
                    for q in range(len(drivers)):  # rotate who goes first
                        d = drivers[(j + q) % len(drivers)]
                        added[d.strategy][r], in_mc[d.strategy][r] = d.run(r)
            finally:
                gc.enable()
        prof = _merge_profiles(slices)
        model = latency_model(prof)
        say("simulating")
        sim = simulate(trace, SimulateSpec(strategies=tuple(canonical), train=spec.train,
                                           draws=spec.draws, seed=spec.seed), model=model)
        core_trace, core_model = trace.to_core(), model.to_core()
        rows = []
        n_eval = int(evaluated.sum())
        for d in drivers:
            measured = {"added_ns": added[d.strategy], "memcached_ns": in_mc[d.strategy],
                        **d.counts(n_eval)}
            predicted = [
                _core.request_costs(core_trace, core_model, d.strategy, train=spec.train,
                                    seed=spec.seed, draw=i)
                for i in range(spec.draws)
            ]
            rows.append(_compare(trace, d.strategy, measured, predicted,
                                 sim.by_name(d.strategy), evaluated))
    finally:
        left = _delete_catalog(server, loader_cache, kc, trace.n_items)
        if left:
            say(f"could not delete {left} keys under {prefix}")
    return ReplayResult(
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        trace={"requests": n, "items": trace.n_items, "evaluated": int(evaluated.sum()),
               "bytes": int(sizes.sum()), **(trace_info or {})},
        spec={**asdict(spec), "strategies": canonical},
        server={"address": server, "version": prof.server.get("version"), "private": False},
        profile={
            "name": prof.name,
            "multi_value_size": mean_size,
            "get_p50_us": {c.label: c.at([50.0])[0] / 1000 for c in prof.cells_of("get")},
            "multiget_p50_us": {c.label: c.at([50.0])[0] / 1000
                                for c in prof.cells_of("multiget")},
            "latency_profile": prof.to_dict(),
        },
        strategies=rows,
        elapsed_s=round(time.perf_counter() - started, 3),
        environment=environment.facts(),
    )


def _compare(trace: Any, strategy: str, measured: dict[str, Any], predicted: list[dict],
             sim_row: dict[str, Any], evaluated: np.ndarray) -> dict[str, Any]:
    idx = np.flatnonzero(evaluated)
    added_ms = measured["added_ns"][idx] / 1e6
    base = np.asarray(trace.base_ms, dtype=float)[idx]
    inc = added_ms / base
    in_tier_ms = measured["memcached_ns"][idx] / 1e6
    out: dict[str, Any] = {"strategy": strategy, "added_ms": {}, "increase": {},
                           "memcached_ms": {}}
    sim_pct = {_pkey(float(b["percentile"])): b["median"] for b in sim_row["percentiles"]}
    worst = 0.0
    for p in PERCENTILES:
        k = _pkey(p)
        m_ms = _nearest_rank(added_ms, p)
        p_ms = float(np.median([_nearest_rank(np.asarray(d["added_ms"]), p) for d in predicted]))
        m_inc = _nearest_rank(inc, p)
        p_inc = float(sim_pct.get(k, np.median(
            [_nearest_rank(np.asarray(d["increase"]), p) for d in predicted])))
        e_ms = (p_ms - m_ms) / m_ms if m_ms > 0 else None
        e_inc = (p_inc - m_inc) / m_inc if m_inc > 0 else None
        out["added_ms"][k] = {"measured": m_ms, "predicted": p_ms, "error": e_ms}
        t_ms = _nearest_rank(in_tier_ms, p)
        out["memcached_ms"][k] = {"measured": t_ms, "predicted": p_ms,
                                  "error": (p_ms - t_ms) / t_ms if t_ms > 0 else None}
        out["increase"][k] = {"measured": m_inc, "predicted": p_inc, "error": e_inc}
        worst = max(worst, abs(e_inc) if e_inc is not None else 1.0)
    total = float(added_ms.sum()) or 1.0
    out["library_overhead_share"] = 1.0 - float(in_tier_ms.sum()) / total
    lookups = max(1, measured["lookups"])
    out["checks"] = {
        "hit_ratio": {"measured": measured["l1_hits"] / lookups,
                      "predicted": sim_row["hit_ratio"]},
        "round_trips_per_request": {
            "measured": measured["round_trips"] / max(1, measured["requests"]),
            "predicted": sim_row["round_trips_per_request"]},
        "loader_keys": measured["loader_keys"],
        "errors": measured["errors"],
    }
    out["worst_error"] = worst
    out["within_tolerance"] = worst <= TOLERANCE
    return out


def render(result: ReplayResult) -> str:
    """Measured vs predicted, side by side, for a terminal."""
    d = result.to_dict()
    lines = [
        f"Added time per request: measured on the real tiered cache vs simulate's prediction "
        f"({d['trace']['evaluated']:,} evaluated requests; profile measured on the same "
        f"server, {d['server']['address']})",
        "",
    ]
    header = ["strategy", "%ile", "measured ms", "predicted ms", "error", "in memcached ms",
              "error", "measured inc", "predicted inc", "error"]
    rows = []

    def err(e: float | None) -> str:
        return "—" if e is None else f"{100 * e:+.1f}%"

    for s in d["strategies"]:
        for k in (_pkey(p) for p in PERCENTILES):
            a, i, m = s["added_ms"][k], s["increase"][k], s["memcached_ms"][k]
            rows.append([s["strategy"] if k == "50" else "", f"p{k}", f"{a['measured']:.3f}",
                         f"{a['predicted']:.3f}", err(a["error"]), f"{m['measured']:.3f}",
                         err(m["error"]), f"{100 * i['measured']:.2f}%",
                         f"{100 * i['predicted']:.2f}%", err(i["error"])])
    lines += text_table(header, rows, left=2)
    lines += ["", "measured = the request's wall time in the tiered cache; in memcached = the "
              "part spent inside L2 calls (the Rust client, as the profile measures it); inc = "
              "added time / the request's base latency (simulate's measure). error = "
              "(predicted - measured) / measured."]
    lines += ["", "Checks (must agree: the replay mirrors the simulator's semantics):"]
    for s in d["strategies"]:
        c = s["checks"]
        lines.append(
            f"  {s['strategy']}: L1 hit ratio {c['hit_ratio']['measured']:.4f} vs "
            f"{c['hit_ratio']['predicted']:.4f}; round trips/request "
            f"{c['round_trips_per_request']['measured']:.3f} vs "
            f"{c['round_trips_per_request']['predicted']:.3f}; loader keys {c['loader_keys']}; "
            f"errors {c['errors']}; library overhead "
            f"{100 * s['library_overhead_share']:.0f}% of added time; within ±{TOLERANCE:.0%}: "
            f"{'yes' if s['within_tolerance'] else 'NO'}")
    return "\n".join(lines)
