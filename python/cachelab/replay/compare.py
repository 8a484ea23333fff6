"""Measured vs predicted, per strategy (:func:`compare`): percentiles of the added time and
its parts with their errors and the measurement's own bootstrap interval, where the time goes
term by term, and the checks that the real cache did what the simulator counts."""

from __future__ import annotations

from typing import Any

import numpy as np

from cachelab.replay.calibrate import library_ns

__all__ = ["BOOTSTRAP", "PERCENTILES", "TOLERANCE", "compare", "err", "nearest_rank",
           "pct_intervals", "pcts", "pkey", "shuffled_sums", "term_counts"]

#: Percentiles compared (nearest rank, as the simulator computes them).
PERCENTILES = (50.0, 90.0, 99.0)

#: The goal: predicted within this fraction of measured.
TOLERANCE = 0.15


def term_counts(costs: dict[str, list]) -> dict[str, np.ndarray]:
    """Per evaluated request, how often it pays each library term (:data:`TERMS
    <cachelab.replay.calibrate.TERMS>`), from the simulator's own counts
    (``_core.request_costs``): single gets; L1 hits, but for the prefetch's topic, which
    ``prefetch_tree`` looks up in L1 (in its own cost) and leaves in the request scope; scope
    hits, every other touch (repeats, prefetched items, the topic); a prefetch per request
    that walks a topic, with the items it walks and the keys its multi-get sends; and round
    trips (gets + multi-gets)."""
    c = {k: np.asarray(costs[k], dtype=np.int64)
         for k in ("touches", "l1_hits", "gets", "multiget_keys", "prefetch_walked",
                   "prefetch_topic_hit", "round_trips")}
    l1 = c["l1_hits"] - c["prefetch_topic_hit"]
    return {"scope": c["touches"] - l1 - c["gets"], "l1_hit": l1, "get": c["gets"],
            "prefetch": (c["prefetch_walked"] > 0).astype(np.int64),
            "walked": c["prefetch_walked"], "prefetch_keys": c["multiget_keys"],
            "round_trips": c["round_trips"]}


def nearest_rank(values: np.ndarray, p: float) -> float:
    """The p-th percentile of ``values`` by nearest rank, as the simulator computes it."""
    v = np.sort(np.asarray(values, dtype=float))
    if not len(v):
        return 0.0
    rank = int(np.ceil(p / 100.0 * len(v) - 1e-9))
    return float(v[min(max(rank, 1), len(v)) - 1])


def pkey(p: float) -> str:
    """The key of percentile ``p`` in ``replay.json``: ``"50"``, ``"99"``."""
    return format(p, "g")


def shuffled_sums(calls: dict[int, tuple[list[int], list[bool]]], idx: np.ndarray,
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


def pcts(values: np.ndarray) -> dict[str, float]:
    return {pkey(p): nearest_rank(values, p) for p in PERCENTILES}


def err(pred: float, meas: float) -> float | None:
    return (pred - meas) / meas if meas > 0 else None


#: Resamples of the bootstrap interval of a measured percentile.
BOOTSTRAP = 1000


def pct_intervals(values: np.ndarray, seed: int) -> dict[str, tuple[float, float]]:
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
        out[pkey(p)] = (float(lo), float(hi))
    return out


def compare(trace: Any, strategy: str, measured: dict[str, Any], predicted: list[dict],
            evaluated: np.ndarray, terms: dict[str, float],
            gaps: tuple[np.ndarray, np.ndarray], seed: int = 0,
            alternative: list[dict] | None = None) -> dict[str, Any]:
    """Measured vs predicted for one strategy. ``predicted``: ``_core.request_costs`` for each
    draw (the first also gives the counts of the prediction and of the checks, the same in
    every draw); ``alternative``: the predictions with the other kind of draws (independent vs
    sequence), reported next to the main ones."""
    idx = np.flatnonzero(evaluated)
    base = np.asarray(trace.base_ms, dtype=float)[idx]
    added_ms = measured["added_ns"][idx] / 1e6
    in_tier_ms = measured["memcached_ns"][idx] / 1e6
    lib_meas_ms = added_ms - in_tier_ms
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
    counts = term_counts(predicted[0])
    lib = library_ns(terms, counts)
    lib_ms = sum(lib.values()) / 1e6

    def over_draws(f: Any, draws: list[np.ndarray] = mc_draws) -> dict[str, float]:
        per = [f(m) for m in draws]
        return {k: float(np.median([p[k] for p in per])) for k in per[0]}

    pred_total = over_draws(lambda m: pcts(m + lib_ms))
    pred_mc = over_draws(pcts)
    pred_inc = over_draws(lambda m: pcts((m + lib_ms) / base))
    meas_total, meas_mc, meas_lib = pcts(added_ms), pcts(in_tier_ms), pcts(lib_meas_ms)
    meas_inc, pred_lib = pcts(added_ms / base), pcts(lib_ms)
    shuffled = pcts(shuffled_sums(measured["calls"], idx, seed)) if measured.get(
        "calls") else None
    out: dict[str, Any] = {"strategy": strategy, "added_ms": {}, "increase": {},
                           "memcached_ms": {}, "library_ms": {}}
    worst = 0.0
    ci_total = pct_intervals(added_ms, seed)
    for k in (pkey(p) for p in PERCENTILES):
        out["added_ms"][k] = {"measured": meas_total[k], "predicted": pred_total[k],
                              "error": err(pred_total[k], meas_total[k]),
                              "measured_ci95": list(ci_total[k])}
        out["memcached_ms"][k] = {"measured": meas_mc[k], "predicted": pred_mc[k],
                                  "error": err(pred_mc[k], meas_mc[k])}
        if shuffled is not None:
            out["memcached_ms"][k]["calls_shuffled"] = shuffled[k]
        out["library_ms"][k] = {"measured": meas_lib[k], "predicted": pred_lib[k],
                                "error": err(pred_lib[k], meas_lib[k])}
        e_inc = err(pred_inc[k], meas_inc[k])
        out["increase"][k] = {"measured": meas_inc[k], "predicted": pred_inc[k], "error": e_inc}
        # The goal is on the added latency itself (the increase is reported beside it).
        e_add = out["added_ms"][k]["error"]
        worst = max(worst, abs(e_add) if e_add is not None else 1.0)
    if alternative is not None:
        alt = per_draw(alternative)
        alt_total = over_draws(lambda m: pcts(m + lib_ms), alt)
        alt_inc = over_draws(lambda m: pcts((m + lib_ms) / base), alt)
        alt_mc = over_draws(pcts, alt)
        out["alternative"] = {
            k: {"added_ms": alt_total[k], "added_error": err(alt_total[k], meas_total[k]),
                "memcached_ms": alt_mc[k], "memcached_error": err(alt_mc[k], meas_mc[k]),
                "increase": alt_inc[k], "increase_error": err(alt_inc[k], meas_inc[k])}
            for k in (pkey(p) for p in PERCENTILES)}
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
    # The real cache's counters vs the simulator's counts: equal when the cache does what the
    # model says. Lookups (first touches within a request) are the trace's, the same for both.
    lookups = int(np.sum(predicted[0]["lookups"]))
    rt_sim = counts["round_trips"]
    out["checks"] = {
        "hit_ratio": {"measured": measured["l1_hits"] / max(1, lookups),
                      "predicted": (int(np.sum(predicted[0]["l1_hits"])) / lookups
                                    if lookups else 0.0)},
        "round_trips_per_request": {
            "measured": measured["round_trips"] / max(1, measured["requests"]),
            "predicted": int(rt_sim.sum()) / len(rt_sim) if len(rt_sim) else 0.0},
        "round_trips_differ_in_requests": int((measured["round_trips_by_request"][idx]
                                               != rt_sim).sum()),
        "loader_keys": measured["loader_keys"],
        "errors": measured["errors"],
    }
    out["worst_error"] = worst
    out["within_tolerance"] = worst <= TOLERANCE
    return out
