"""``cachelab.tiered`` side by side with what it replaces.

Three comparisons, against one memcached, in one run, in interleaved rounds (each round runs
every contender once, in turn, so drift on a shared machine lands on all of them):

* **L1 hit** — ``TieredCache.get`` of a key held in its ``LRUMemory``, and ``RequestScope.get``
  of a key already fetched in the request, against a plain ``dict`` lookup. Timed as loops of
  ``--loop`` calls (the timer's cost divided away). Goal (issue 6): an L1 hit in ≤ 1 µs.
* **L2 get** — ``TieredCache.get`` (no L1) of a 1 KB value in memcached (a multi-get of one
  key through the Rust client, decode of the raw codec) against ``_core.Client.get`` and
  pymemcache's ``Client.get`` (``no_delay=True``, timeouts set). p50 of single timed calls.
* **L2 multi-get of 100 keys** — ``TieredCache.get_many`` (no L1) against
  ``_core.Client.get_multi`` and pymemcache's ``get_many``. Goal: ≥ 2× faster than pymemcache.
* **Gap** — the p50 of ``_core.Client.get`` when the caller was busy for 0, 20, 100 or 300 µs
  before each call (as an application is between memcached calls; ``cachelab profile`` sends
  its requests back to back). Explains part of ``cachelab replay``'s gap to its prediction.

By default a private memcached runs with ``-t 1`` pinned to core 1 and this process is pinned
to core 0 (``--no-pin`` to skip). ``--record`` writes ``benches/runs/<date>-tiered.md`` and the
raw JSON beside it. Exit status 0 when both goals are met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Any

from cachelab import _core, environment
from cachelab.servers import PrivateMemcached
from cachelab.tiered import LRUMemory, MemcachedTier, TieredCache
from records import write_record


def per_call_loop(fn: Any, n: int) -> float:
    """ns per call of ``fn`` over a loop of ``n`` calls."""
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def p50_single(fn: Any, n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    return float(statistics.median(ts))


def p50_after_gap(fn: Any, gap_us: float, n: int) -> float:
    """p50 of ``fn`` when the caller was busy (spinning) for ``gap_us`` before each call, as an
    application is between its memcached calls."""
    ts = []
    for _ in range(n):
        until = time.perf_counter_ns() + int(gap_us * 1000)
        while time.perf_counter_ns() < until:
            pass
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    return float(statistics.median(ts))


GAPS_US = (0, 20, 100, 300)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pymemcache.client.base import Client as PymemcacheClient

    mc = PrivateMemcached(threads=1, cpus=None if args.no_pin else "1")
    with mc:
        if not args.no_pin:
            os.sched_setaffinity(0, {0})
        host, port = mc.address.rsplit(":", 1)
        pym = PymemcacheClient((host, int(port)), connect_timeout=2, timeout=2, no_delay=True)
        core = _core.Client(mc.address)
        value = os.urandom(1000)

        l1_cache = TieredCache(MemcachedTier(mc.address), LRUMemory(max_items=1000),
                               prefix="bench-l1")
        l1_kc = l1_cache.key_class("item", lambda ids: {i: {"id": i} for i in ids})
        l1_cache.get(l1_kc, 1)
        scope = l1_cache.request()
        scope.get(l1_kc, 1)
        plain = {1: {"id": 1}}

        l2_cache = TieredCache(MemcachedTier(mc.address), None, prefix="bench-l2")
        l2_kc = l2_cache.key_class("blob", lambda ids: {}, codec="raw")
        idents = list(range(100))
        for i in idents:
            l2_cache.put(l2_kc, i, value)
        keys = [l2_cache.key_for(l2_kc, i) for i in idents]
        assert l2_cache.get(l2_kc, 0) == value and pym.get(keys[0])[2:] == value
        assert len(l2_cache.get_many(l2_kc, idents)) == 100
        assert len(pym.get_many(keys)) == 100 and len(core.get_multi(keys)) == 100

        contenders = {
            "l1": {
                "dict lookup": lambda: per_call_loop(lambda: plain[1], args.loop),
                "TieredCache.get (L1 hit)": lambda: per_call_loop(
                    lambda: l1_cache.get(l1_kc, 1), args.loop),
                "RequestScope.get (in request)": lambda: per_call_loop(
                    lambda: scope.get(l1_kc, 1), args.loop),
            },
            "get": {
                "pymemcache get": lambda: p50_single(lambda: pym.get(keys[0]), args.samples),
                "_core.Client.get": lambda: p50_single(lambda: core.get(keys[0]), args.samples),
                "TieredCache.get (L2)": lambda: p50_single(
                    lambda: l2_cache.get(l2_kc, 0), args.samples),
            },
            "multiget100": {
                "pymemcache get_many": lambda: p50_single(lambda: pym.get_many(keys),
                                                          args.samples // 4),
                "_core.Client.get_multi": lambda: p50_single(lambda: core.get_multi(keys),
                                                             args.samples // 4),
                "TieredCache.get_many (L2)": lambda: p50_single(
                    lambda: l2_cache.get_many(l2_kc, idents), args.samples // 4),
            },
        }
        contenders["gap"] = {
            f"_core.Client.get after {g} µs busy": (
                lambda g=g: p50_after_gap(lambda: core.get(keys[0]), g, args.samples // 4))
            for g in GAPS_US
        }
        rounds: dict[str, dict[str, list[float]]] = {
            g: {name: [] for name in c} for g, c in contenders.items()}
        for _ in range(args.rounds):
            for g, c in contenders.items():
                for name, fn in c.items():
                    rounds[g][name].append(fn())
        for k in keys:
            core.delete(k)
        pym.close()
        core.close()
        argv = mc.argv
    med = {g: {n: statistics.median(v) for n, v in c.items()} for g, c in rounds.items()}

    def ratio(g: str, a: str, b: str) -> float:
        """Median over rounds of the per-round ratio a / b (drift cancels within a round)."""
        return statistics.median(x / y for x, y in zip(rounds[g][a], rounds[g][b]))

    ratios = {
        "l1_hit_vs_dict": ratio("l1", "TieredCache.get (L1 hit)", "dict lookup"),
        "scope_hit_vs_dict": ratio("l1", "RequestScope.get (in request)", "dict lookup"),
        "l2_get_pymemcache_over_tiered": ratio("get", "pymemcache get", "TieredCache.get (L2)"),
        "l2_get_tiered_over_core": ratio("get", "TieredCache.get (L2)", "_core.Client.get"),
        "multiget100_pymemcache_over_tiered":
            ratio("multiget100", "pymemcache get_many", "TieredCache.get_many (L2)"),
        "multiget100_tiered_over_core":
            ratio("multiget100", "TieredCache.get_many (L2)", "_core.Client.get_multi"),
    }
    goals = {
        "l1_hit_le_1us": med["l1"]["TieredCache.get (L1 hit)"] <= 1000,
        "multiget100_2x_pymemcache": ratios["multiget100_pymemcache_over_tiered"] >= 2.0,
    }
    return {"command": " ".join([sys.executable.rsplit("/", 1)[-1], *sys.argv]),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "server_argv": argv,
            "pinned": not args.no_pin, "rounds": rounds, "medians_ns": med, "ratios": ratios,
            "goals": goals, "environment": environment.facts(),
            "load_average": os.getloadavg(), "python": platform.python_version()}


def render(r: dict[str, Any]) -> str:
    lines = [f"# cachelab.tiered vs dict / Rust client / pymemcache ({r['date']})", "",
             f"- command: `{r['command']}`",
             f"- memcached: `{' '.join(r['server_argv'])}`; client pinned: {r['pinned']}",
             f"- commit {r['environment'].get('commit')}; Python {r['python']}; "
             f"load average at the end {', '.join(f'{x:.2f}' for x in r['load_average'])}",
             "", "| comparison | contender | median over rounds | rounds (min–max) |",
             "|---|---|---|---|"]
    for g, c in r["medians_ns"].items():
        for name, v in c.items():
            raw = r["rounds"][g][name]
            unit, div = ("ns", 1) if g == "l1" else ("µs", 1000)
            lines.append(f"| {g} | {name} | {v / div:,.1f} {unit} | "
                         f"{min(raw) / div:,.1f}–{max(raw) / div:,.1f} |")
    lines += ["", "Ratios (median over rounds of the per-round ratio):", ""]
    lines += [f"- {k}: {v:.2f}" for k, v in r["ratios"].items()]
    lines += ["", "Goals:", ""]
    lines += [f"- {k}: {'met' if v else 'MISSED'}" for k, v in r["goals"].items()]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--samples", type=int, default=2000, help="timed calls per round (L2)")
    p.add_argument("--loop", type=int, default=100_000, help="calls per timed loop (L1)")
    p.add_argument("--no-pin", action="store_true")
    p.add_argument("--record", action="store_true")
    args = p.parse_args()
    r = run(args)
    text = render(r)
    print(text)
    if args.record:
        md = write_record("tiered", time.strftime("%Y-%m-%d"), text, r)
        print(f"wrote {md}", file=sys.stderr)
    return 0 if all(r["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
