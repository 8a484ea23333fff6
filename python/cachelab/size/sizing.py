"""Sizing a cache from a trace: ``cachelab size`` (docs/simulation.md, "Sizing a cache").

The question memcached operators ask most — how much memory for a 95 % hit ratio, what does
doubling it buy — answered from the exact LRU miss-ratio curve by bytes (stack distances in one
pass; SHARDS for huge traces):

* the memory each target hit ratio needs (found on the curve, then refined inside its bracket),
  or that the target is out of reach: a trace's first access of each key misses at any size,
  which caps the hit ratio at ``1 − keys/requests``;
* the hit ratio at ½×, 1×, 2× and 4× the server's memory (``--memory``, or what a capture
  recorded);
* for a capture, the check: the hit ratio predicted at the server's own memory next to the one
  the server had. The curve starts cold (every key's first access misses) while the server was
  warm (a key cached before the capture began hits at once): the prediction is given both ways,
  cold and warm (first accesses that hit on the server counted as hits), and the observed ratio
  should lie between them; what remains is memcached not being one LRU (slab classes, its
  segmented LRU).

Capacities of a capture are counted as memcached counts memory by default (each item's slab
chunk, :func:`cachelab.traces.capture.memcached_bytes`), so they compare with ``-m``; other
traces count value bytes. The hit ratio is per request (a get), as memcached's
``get_hits / cmd_get``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import cachelab._core as _core
import cachelab.environment as environment
from cachelab.answers import Answer
from cachelab.artifacts import created_now, from_fields, write_json
from cachelab.errors import UsageError
from cachelab.simulate import redis_memory
from cachelab.simulate.flat import load_trace, miss_ratio_curve, policies, simulate_flat
from cachelab.size.answers import size_answers
from cachelab.tables import write_json_and_csv
from cachelab.traces.names import CAPTURE_FORMAT, detect_format
from cachelab.units import check_limit, human_bytes, limited, limits_of, pct, times

__all__ = ["LIMITS", "MULTIPLES", "SCHEMA", "SCHEMA_VERSION", "SizeResult", "SizeSpec",
           "answers", "hit_text", "size"]

SCHEMA = "cachelab.size"
SCHEMA_VERSION = 1
#: Multiples of the server's memory at which the hit ratio is reported.
MULTIPLES = (0.5, 1.0, 2.0, 4.0)
#: Capacities evaluated inside a target's bracket to refine it.
_REFINE = 64
#: With a policy other than LRU (one simulation per capacity, no one-pass curve): the curve's
#: capacities, and those inside a target's bracket.
_POLICY_POINTS = 40
_POLICY_REFINE = 12
#: Accountings of a flat trace's sizes: value bytes, memcached's slab chunks (a capture),
#: Redis's bytes per key (:mod:`cachelab.simulate.redis_memory`).
ACCOUNTINGS = ("value", "memcached", "redis")


@dataclass(frozen=True)
class SizeSpec:
    """What to size: a flat trace (or capture), the hit ratios wanted, the server's memory."""

    trace: str
    format: str | None = None
    #: The server's memory in bytes (default: what a capture recorded, else none).
    memory: int | None = None
    hit_ratios: tuple[float, ...] = (0.90, 0.95, 0.99)
    #: ``value``, ``memcached`` or ``redis`` (default: memcached for a capture, value
    #: otherwise).
    accounting: str | None = None
    #: The eviction policy: ``lru`` (the exact curve in one pass) or any flat policy, e.g.
    #: ``redis-lru`` (simulated at each size).
    policy: str = "lru"
    #: Key length in bytes for ``redis`` accounting (a flat trace has ids, not keys).
    key_length: int = limited(16, 1, 512 * 1024 * 1024)
    #: SHARDS sampling rate for huge traces, below 1 (None: exact).
    shards: float | None = limited(None, 0.0, 1.0, above=True, below=True)
    points: int = limited(200, 10, 10_000)

    def check(self) -> None:
        if not self.hit_ratios or any(not 0 < h < 1 for h in self.hit_ratios):
            raise UsageError("hit ratios must be above 0 % and below 100 %")
        if self.memory is not None and self.memory < 1:
            raise UsageError(f"memory must be at least 1 byte, not {self.memory}")
        if self.accounting not in (None, *ACCOUNTINGS):
            raise UsageError(f"accounting {self.accounting!r}: {', '.join(ACCOUNTINGS)}")
        if self.policy not in policies():
            raise UsageError(f"--policy {self.policy!r}: choose from {', '.join(policies())}")
        if self.policy != "lru" and self.shards is not None:
            raise UsageError("--shards samples the LRU curve; other policies are simulated "
                             "whole")
        for name, limit in LIMITS.items():
            if getattr(self, name) is not None:
                check_limit(name, limit, getattr(self, name))


#: The range of each numeric field only Python checks (``--shards``' too).
LIMITS = limits_of(SizeSpec)


@dataclass
class SizeResult:
    """The answers, the curve they come from, and (for a capture) the check."""

    spec: dict[str, Any]
    accounting: str
    requests: int
    keys: int
    working_set_bytes: int
    #: The highest hit ratio any size reaches (first accesses miss).
    max_hit_ratio: float
    exact: bool
    #: Per target: ``hit_ratio``, ``bytes`` (None when out of reach), ``bracket`` [lo, hi].
    targets: list[dict[str, Any]]
    memory: int | None
    #: Per multiple of ``memory``: ``multiple``, ``bytes``, ``hit_ratio``.
    at_memory: list[dict[str, Any]]
    #: A capture's check: observed vs predicted (cold and warm) at the server's memory.
    check: dict[str, Any] | None
    curve: dict[str, list[float]]
    created: str = field(default_factory=created_now)
    environment: dict[str, Any] = field(default_factory=environment.facts)
    #: The eviction policy simulated (``lru``: the exact one-pass curve).
    policy: str = "lru"

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "size.json") -> SizeResult:
        """The result of a ``size.json`` (as :meth:`to_dict` wrote it)."""
        return from_fields(cls, d, where)

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    def csv_table(self) -> tuple[list[str], list[list[float]]]:
        """``size.csv`` (and ``--format csv``): the curve, one row per memory size."""
        c = self.curve
        return (["bytes", "hit_ratio", "miss_ratio"],
                [[b, 1 - m, m] for b, m in zip(c["bytes"], c["miss_ratio"])])

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """``size.json``, ``size.csv`` (the curve) and, unless told not to, the plot."""
        written = write_json_and_csv(self, out_dir, "size")
        if plots:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.simulate.plots import size_plot

            written += size_plot(self.to_dict(), out_dir / "size")
        return written

    def answers(self) -> list[Answer]:
        """The answer card: the memory each target needs and what the server's memory gets,
        *predicted* (:func:`~cachelab.size.answers.size_answers`)."""
        return size_answers(self.to_dict())

    def render(self) -> str:
        how = {"memcached": "memcached's memory (slab chunks)",
               "redis": "Redis's memory per key"}.get(self.accounting, "value bytes")
        model = ("exact LRU" + ("" if self.exact else " (SHARDS sample)")
                 if self.policy == "lru" else f"{self.policy} simulated at each size")
        lines = [
            f"cache size for {self.spec['trace']}: {self.requests:,} requests, "
            f"{self.keys:,} keys, working set {human_bytes(self.working_set_bytes)} "
            f"(counted in {how}); {model}",
            f"the best any size does: {pct(self.max_hit_ratio, 2)} hit ratio (each key's first "
            "access misses)",
            "",
            *answers(self.to_dict()),
            "",
            f"{'hit ratio':>10}  {'memory needed':>16}",
        ]
        for t in self.targets:
            need = (human_bytes(int(t["bytes"])) if t["bytes"] is not None
                    else "out of reach")
            lines.append(f"{hit_text(t['hit_ratio']):>10}  {need:>16}")
        if self.memory is not None:
            lines += ["", f"{'memory':>16}  {'hit ratio':>10}"]
            for row in self.at_memory:
                lines.append(f"{human_bytes(int(row['bytes'])):>16}  {pct(row['hit_ratio']):>10}"
                             f"  ({row['multiple']:g}× the server's)")
        if self.check is not None:
            k = self.check
            lines += ["", f"check at the server's memory ({human_bytes(int(k['memory']))}): "
                      f"observed {pct(k['observed'])}; predicted {pct(k['predicted_cold'])} "
                      f"cold, {pct(k['predicted_warm'])} warm — {k['verdict']}"]
        return "\n".join(lines)


def hit_text(h: float) -> str:
    """A target hit ratio as the tables show it: ``95.0 %``, ``99.50 %``."""
    return pct(h, 2 if h > 0.99 else 1)


def answers(d: Mapping[str, Any]) -> list[str]:
    """A ``size.json``'s answers in words, numbers formatted: the memory each target hit ratio
    needs (against the server's memory, when known); then what the server's memory gets and
    what to do about it — more memory, less, or none (:func:`_advice`). The terminal prints
    them first; the report's section has them as its findings."""
    memory = d.get("memory")
    best = float(d["max_hit_ratio"])
    parts = []
    for t in d["targets"]:
        if t.get("bytes") is None:
            parts.append(f"{hit_text(t['hit_ratio'])} is out of reach")
            continue
        need = f"{hit_text(t['hit_ratio'])} needs {human_bytes(t['bytes'])}"
        parts.append(need + (f" ({times(t['bytes'], memory)} the server's)" if memory else ""))
    line = "Memory for a hit ratio: " + "; ".join(parts)
    if any(t.get("bytes") is None for t in d["targets"]):
        line += f" (no size does better than {pct(best, 2)}: each key's first access misses)"
    out = [line + "."]
    rows = {float(r["multiple"]): r for r in d.get("at_memory") or []}
    if memory and 1.0 in rows:
        who = "an LRU" if d.get("policy", "lru") == "lru" else str(d["policy"])
        text = (f"At the server's {human_bytes(memory)} {who} gets "
                f"{hit_text(rows[1.0]['hit_ratio'])} starting empty")
        check = d.get("check")
        if check:
            text += (f" ({pct(check['predicted_warm'])} warm; the server had "
                     f"{pct(check['observed'])})")
        out.append(f"{text}. {_advice(rows, best)}")
    return out


def _advice(rows: Mapping[float, Mapping[str, Any]], best: float) -> str:
    """What the memory is worth: within half a point of the best any size does, more buys
    nothing (and half may do as well); else what doubling it gives, and halving it."""
    one = float(rows[1.0]["hit_ratio"])
    half, two = rows.get(0.5), rows.get(2.0)
    if best - one < 0.005:
        text = (f"More memory buys nothing: that is within half a point of the best any size "
                f"does ({pct(best, 2)}); the misses left are first accesses")
        if half is not None and one - half["hit_ratio"] < 0.005:
            text += (f", and half the memory ({human_bytes(half['bytes'])}) does as well "
                     f"({hit_text(half['hit_ratio'])})")
        return text + "."
    text = ""
    if two is not None:
        gain = 100 * (two["hit_ratio"] - one)
        text = (f"Doubling it to {human_bytes(two['bytes'])} gives "
                f"{hit_text(two['hit_ratio'])} ({gain:+.1f} points)")
    if half is not None:
        text += ("; halving it to " if text else "Halving it to ") + (
            f"{human_bytes(half['bytes'])}, {hit_text(half['hit_ratio'])}")
    return text + "." if text else ""


def size(spec: SizeSpec) -> SizeResult:
    """Answers ``spec`` from the trace's exact LRU miss-ratio curve by bytes."""
    spec.check()
    fmt = detect_format(spec.trace, spec.format)
    is_capture = fmt == CAPTURE_FORMAT
    meta: dict[str, Any] = {}
    resp = False   # a Redis capture (MONITOR): value bytes, no hits to check against
    if is_capture:
        # deferred: capture imports pyarrow, which takes ~0.1 s
        from cachelab.traces.capture import capture_accesses, read_capture

        table, meta = read_capture(spec.trace)
        resp = (meta.get("server") or {}).get("protocol") == "resp"
    accounting = spec.accounting or ("memcached" if is_capture and not resp else "value")
    if is_capture and accounting == "redis":
        raise UsageError("--accounting redis is for a flat trace (a capture counts value "
                         "bytes, or memcached's memory)")
    if resp and accounting == "memcached":
        raise UsageError(f"{spec.trace}: a Redis capture (MONITOR) is sized in value bytes: "
                         "--accounting memcached is for a memcached's capture")
    if is_capture:
        ids, sizes, times = capture_accesses(spec.trace, accounting, read=(table, meta))
        trace = _core.FlatTrace.from_arrays(ids.tolist(), sizes.tolist(), times.tolist())
    else:
        if accounting == "memcached":
            raise UsageError("--accounting memcached needs a capture (it knows the keys' "
                             "lengths and the server's slab settings)")
        trace = load_trace(spec.trace, spec.format)
        if accounting == "redis":
            trace = _redis_sizes(trace, spec.key_length)
    info = trace.inspect()
    n, keys = int(info["requests"]), int(info["unique_keys"])
    if n == 0:
        raise UsageError(f"{spec.trace}: the trace has no requests")
    wss = int(info["working_set_bytes"])
    memory = spec.memory
    if memory is None and meta:
        # A pool's capture records the members' total (capture._pool_facts).
        memory = int(meta["server"].get("limit_maxbytes") or 0) or None
    # A capture that kept a sample of keys stands for 1/sample of the cache.
    scale = float(meta.get("sample", 1.0)) if meta else 1.0

    # Redis's maxmemory also counts its baseline and hash table: the simulated capacity is
    # what is left of a memory for the keys.
    fixed = _RedisOverhead(keys, wss) if accounting == "redis" else None
    curve = _Curve(trace, spec)
    caps, miss = curve.caps, curve.miss
    targets = [_target(curve, h) for h in spec.hit_ratios]
    at_memory: list[dict[str, Any]] = []
    if memory is not None:
        wanted = [max(1, int(memory * m * scale)) for m in MULTIPLES]
        if fixed is not None:
            wanted = [max(1, fixed.room(w)) for w in wanted]
        by_cap = curve.at(wanted)
        at_memory = [{"multiple": m, "bytes": memory * m, "hit_ratio": 1 - by_cap[c]}
                     for m, c in zip(MULTIPLES, wanted)]
    if fixed is not None:
        for t in targets:
            if t["bytes"] is not None:
                t["bytes"] = float(fixed.memory(int(t["bytes"])))
                t["bracket"] = [float(fixed.memory(int(b))) for b in t["bracket"]]
        caps = np.asarray([fixed.memory(int(c)) for c in caps], dtype=np.int64)
        wss = fixed.memory(wss)
    check = None
    if is_capture and memory is not None and not resp:   # MONITOR shows no hits
        check = _check(table, meta, at_memory[MULTIPLES.index(1.0)]["hit_ratio"], n, memory)
    for t in targets:
        if t["bytes"] is not None:
            t["bytes"] = t["bytes"] / scale
            t["bracket"] = [b / scale for b in t["bracket"]]
    return SizeResult(
        spec=asdict(spec), accounting=accounting, requests=n, keys=keys,
        working_set_bytes=int(wss / scale), max_hit_ratio=1 - keys / n,
        exact=curve.exact, targets=targets, memory=memory, at_memory=at_memory, check=check,
        curve={"bytes": [c / scale for c in caps.tolist()], "miss_ratio": miss.tolist()},
        policy=spec.policy,
    )


class _Curve:
    """The miss ratio by capacity in bytes of the spec's policy: LRU's exact curve in one pass
    (or its SHARDS sample), any other policy simulated at :data:`_POLICY_POINTS` log-spaced
    capacities up to the working set."""

    def __init__(self, trace: Any, spec: SizeSpec) -> None:
        self.trace, self.policy, self.shards = trace, spec.policy, spec.shards
        if self.policy == "lru":
            c = miss_ratio_curve(trace, "bytes", sample_rate=spec.shards, points=spec.points)
            self.caps = np.asarray(c.capacities, dtype=np.int64)
            self.miss = np.asarray(c.miss_ratios, dtype=float)
            self.exact = c.exact
            return
        wss = int(trace.inspect()["working_set_bytes"])
        grid = np.unique(np.geomspace(max(1, wss // 1000), max(1, wss), _POLICY_POINTS)
                         .astype(np.int64))
        by = self.at(grid.tolist())
        self.caps = grid
        self.miss = np.asarray([by[int(c)] for c in grid], dtype=float)
        self.exact = True

    def at(self, capacities: list[int]) -> dict[int, float]:
        """The miss ratio at each capacity (bytes)."""
        if self.policy == "lru":
            c = miss_ratio_curve(self.trace, "bytes", sample_rate=self.shards,
                                 sizes=capacities)
            return dict(zip(c.capacities, c.miss_ratios))
        sim = simulate_flat(self.trace, [self.policy], sorted(set(capacities)), "bytes")
        return {r.capacity: r.miss_ratio for r in sim.results}


def _target(curve: _Curve, hit: float) -> dict[str, Any]:
    """The least memory with at least ``hit`` hit ratio: bracketed on the curve, then refined
    with capacities inside the bracket (an LRU's hit ratio never falls as it grows, so the
    first capacity that reaches the target is the answer to that resolution; a sampled
    policy's nearly never does)."""
    caps, miss = curve.caps, curve.miss
    ok = np.nonzero(1 - miss >= hit - 1e-12)[0]
    if len(ok) == 0:
        return {"hit_ratio": hit, "bytes": None, "bracket": None}
    i = int(ok[0])
    lo = int(caps[i - 1]) if i > 0 else 0
    hi = int(caps[i])
    steps = _REFINE if curve.policy == "lru" else _POLICY_REFINE
    if hi - lo > 1:
        grid = sorted({int(v) for v in np.linspace(lo, hi, steps + 2)[1:-1]} - {lo, hi})
        if grid:
            fine = curve.at(grid)
            for c in grid:
                if 1 - fine[c] >= hit - 1e-12:
                    hi = c
                    break
                lo = c
    return {"hit_ratio": hit, "bytes": float(hi), "bracket": [float(lo), float(hi)]}


def _redis_sizes(trace: Any, key_length: int) -> Any:
    """The trace with each request's size replaced by what its key costs Redis
    (:func:`~cachelab.simulate.redis_memory.key_bytes`, a ``key_length``-byte key)."""
    sizes = np.frombuffer(trace.sizes_bytes(), dtype="<u4")
    values, where = np.unique(sizes, return_inverse=True)
    cost = np.asarray([redis_memory.key_bytes(key_length, int(v)) if v else 0
                       for v in values], dtype=np.int64)[where]
    return _core.FlatTrace.from_arrays(np.frombuffer(trace.ids_bytes(), dtype="<u8").tolist(),
                                       cost.tolist(),
                                       np.frombuffer(trace.times_bytes(), dtype="<u4").tolist())


class _RedisOverhead:
    """What Redis's ``maxmemory`` counts beyond the keys: the server's baseline and the
    hash table, for the trace's mean bytes per key (capacities in bytes either way)."""

    def __init__(self, keys: int, wss: int) -> None:
        self.per_key = max(1.0, wss / max(1, keys))

    def _table(self, room: int) -> int:
        return redis_memory.table_bytes(int(room / self.per_key))

    def memory(self, room: int) -> int:
        """The maxmemory whose keys take ``room`` bytes."""
        return room + redis_memory.BASELINE + self._table(room)

    def room(self, memory: int) -> int:
        """The most bytes of keys whose :meth:`memory` is within ``memory`` (0 when the
        baseline takes it all); :meth:`memory` never falls as the keys grow."""
        lo, hi = 0, max(0, memory - redis_memory.BASELINE)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.memory(mid) <= memory:
                lo = mid
            else:
                hi = mid - 1
        return lo

def _check(table: Any, meta: dict[str, Any], predicted_cold: float, n: int,
           memory: int) -> dict[str, Any]:
    """The capture's own hit ratio against the prediction at the server's memory, cold and
    warm (each key whose first get hit on the server counted as a hit there too)."""
    import pyarrow.compute as pc  # deferred with the capture's other pyarrow use

    gets = table.filter(pc.equal(table["op"].cast("string"), "get"))
    found = gets["status"].cast("string").to_numpy(zero_copy_only=False) == "found"
    keys = gets["key"].to_numpy(zero_copy_only=False)
    _, first = np.unique(keys, return_index=True)
    warm_hits = int(found[first].sum())
    observed = float(found.mean()) if len(found) else math.nan
    warm = predicted_cold + warm_hits / n
    lo, hi = min(predicted_cold, warm), max(predicted_cold, warm)
    if lo <= observed <= hi:
        verdict = "the observed ratio lies between the cold and warm predictions"
    elif lo - 0.005 <= observed <= hi + 0.005:
        verdict = ("the observed ratio is within half a point of the cold-to-warm range "
                   f"({pct(min(abs(observed - lo), abs(observed - hi)))} outside it)")
    elif observed < lo:
        verdict = (f"the server did {pct(lo - observed)} worse than an LRU of its size: "
                   "slab classes and the segmented LRU use memory less evenly than one LRU")
    else:
        verdict = (f"the server did {pct(observed - hi)} better than an LRU of its size "
                   "would from this capture")
    members = int(meta.get("server", {}).get("pool") or 1)
    if members > 1:
        verdict += (f" (the pool's {members} members are taken as one LRU of their total memory: "
                    "an approximation, each member is its own LRU of its share of the keys)")
    return {"memory": memory, "observed": observed, "predicted_cold": predicted_cold,
            "predicted_warm": warm, "first_access_hits": warm_hits,
            "lost_lines": int((meta.get("summary") or {}).get("lost", 0)), "verdict": verdict}
