"""How precise a load run's percentiles are: their 95 % intervals (order statistics,
:mod:`cachelab.intervals`) on the samples the run's validity verdict says are independent, and
the run length by precision (``load --precision 5%``: stop once the interval of the targeted
percentile — the spec's ``precision_percentile``, p99 by default — is tight).

The order-statistic interval assumes independent samples. The ``independent`` check
(:mod:`cachelab.load.validity`) finds the thinning *k* at which consecutive latencies are
independent (Spearman at lag *k*); the interval is then computed for the *n / k* effective
samples (the independent ones a thinned series would keep), read from the whole histogram: wider
than the naive one, never narrower. When no thinning up to 64 makes them independent (or the
check could not go far enough), the moving-block bootstrap on the engine's blocks of
consecutive latencies (:func:`cachelab.intervals.dependence`) estimates, for each percentile,
how many samples count as one (*d*), and the interval is that of *n / d* effective samples
(``basis.method`` says which: "order statistics", "order statistics, thinned 1 in k" or "block
bootstrap"). Without the samples (a run merged from agents) no interval is given, and the
reason is said instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import cachelab._core as _core
from cachelab.intervals import (
    check_precision,
    dependence,
    effective,
    interval,
    intervals,
    parse_precision,
    relative_half_width,
    tail_samples,
    within,
)
from cachelab.load.validity import series_blocks
from cachelab.units import num, us

__all__ = ["SHOWN", "Watch", "basis", "check_precision", "dependence_factors", "half_width",
           "interval_lines", "merged_p99_interval", "p99_interval_text", "parse_precision",
           "point_precision", "point_precision_text", "precision_text", "precision_verdict",
           "run_intervals", "with_intervals"]

#: A live stop needs at least this many measured intervals (batches) ...
MIN_BATCHES = 5
#: ... each with at least this many latencies (a p99 with two beyond it).
MIN_BATCH_SAMPLES = 200

#: The percentiles shown with intervals (key -> percentile); a precision target may be on any
#: of them.
SHOWN = {"50": 50.0, "90": 90.0, "99": 99.0, "99.9": 99.9}
#: The percentile whose precision ``--precision`` targets by default (the spec's
#: ``precision_percentile``), and the one whose effective samples a basis names.
TARGET_KEY = "99"


#: The fewest consecutive latencies the block bootstrap is run on.
MIN_BOOTSTRAP = 200


def dependence_factors(samples: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """For each :data:`SHOWN` percentile, the block bootstrap's ``{"block": b, "factor": d}``
    on the engine's blocks of consecutive latencies (``samples["replies"]`` of the engine's
    record; None for a percentile without a sample beyond it); None without samples."""
    segments = [v for _, v in series_blocks((samples or {}).get("replies") or {})]
    if sum(len(v) for v in segments) < MIN_BOOTSTRAP:
        return None
    return {key: dependence(segments, pct) for key, pct in SHOWN.items()}


def basis(n: int, independence: Mapping[str, Any] | None,
          factors: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The samples an interval stands on: ``method``, ``effective`` (n / k, or n / d for the
    p99 by the block bootstrap's ``factors``) and ``thinning`` k, or ``withheld`` (why
    not)."""
    check = independence or {"status": "not checked", "why": "no independence check"}
    # One shape whatever the verdict (keys without a value are None), so that results of one
    # kind compare field by field.
    out: dict[str, Any] = {"samples": n, "thinning": None, "effective": None, "withheld": None,
                           "method": None, "factors": None}
    if check.get("status") == "pass":
        k = int(check.get("thinning") or 1)
        return {**out, "thinning": k, "effective": n // k,
                "method": "order statistics" + (f", thinned 1 in {k}" if k > 1 else "")}
    if factors:
        p99 = factors.get(TARGET_KEY)
        return {**out, "method": "block bootstrap",
                "effective": effective(n, p99["factor"]) if p99 else None,
                "factors": dict(factors)}
    if check.get("status") == "fail":
        tried = check.get("tried") or [{}]
        lag = tried[-1].get("k", "?")
        return {**out, "withheld": f"latencies not independent (lag-{lag})"}
    return {**out, "withheld": f"independence not checked ({check.get('why', '?')})"}


def run_intervals(entry: Mapping[str, Any], independence: Mapping[str, Any] | None,
                  factors: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """For one histogram entry of load.json (``count``, ``histogram``): ``{"basis": ...,
    "ranges": {key: [low, high] or None}, "tail": {key: samples beyond}}`` for :data:`SHOWN`
    (``ranges`` None when withheld; a range None when too few samples lie beyond the
    percentile). Latencies that are not independent get the block bootstrap's effective
    samples, per percentile, from ``factors`` (:func:`dependence_factors`)."""
    n = int(entry.get("count") or 0)
    basis_ = basis(n, independence, factors)
    ranges = None
    tail = {k: tail_samples(basis_["effective"] or n, p) for k, p in SHOWN.items()}
    if basis_.get("factors") and entry.get("histogram"):
        ranges = {}
        for key, pct in SHOWN.items():
            f = basis_["factors"].get(key)
            eff = effective(n, f["factor"]) if f else 0
            tail[key] = tail_samples(eff, pct)
            iv = interval(entry["histogram"], eff, pct) if eff else None
            ranges[key] = None if iv is None else [iv[0], iv[1]]
    elif basis_["effective"] and entry.get("histogram"):
        ranges = intervals(entry["histogram"], basis_["effective"], SHOWN)
    elif basis_["withheld"] is None:
        basis_["withheld"] = "no latencies"
    return {"basis": basis_, "ranges": ranges, "tail": tail}


def merged_p99_interval(histogram: str | None, bases: list[Mapping[str, Any]],
                        percentile: float = 99.0) -> dict[str, Any]:
    """The p99's (or ``percentile``'s) interval of several runs' latencies merged (a scale
    point's repeats):
    ``{"range": [low, high] or None, "effective": n, "withheld": why or None}``; each run's
    samples count for their effective number (:func:`basis`), and one run whose latencies are
    not independent (or unchecked) withholds it."""
    withheld = next((b["withheld"] for b in bases if b.get("withheld")), None)
    if withheld or not histogram or not bases:
        return {"range": None, "effective": None,
                "withheld": withheld or "no latencies"}
    n = sum(int(b["effective"]) for b in bases)
    rng = interval(histogram, n, percentile)
    return {"range": None if rng is None else [rng[0], rng[1]], "effective": n,
            "withheld": None if rng is not None
            else f"n/a ({tail_samples(n, percentile)} samples beyond the p{percentile:g})"}


def point_precision(target: float, latency: Mapping[str, Any],
                    runs: list[Mapping[str, Any] | None], percentile: str = TARGET_KEY,
                    merged: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A scale point's precision under ``scale --precision``: the target, the relative
    half-width of the ``percentile``'s interval of its runs merged (``merged``, as
    :func:`merged_p99_interval` gives it; by default ``latency``'s ``p99_interval``; with
    ``percentiles_ns``; None when withheld), and how many of its runs reached the target on
    their own (each run's :func:`precision_verdict`)."""
    rng = (merged or latency.get("p99_interval") or {}).get("range")
    value = (latency.get("percentiles_ns") or {}).get(percentile)
    hw = relative_half_width(rng, value)
    return {"target": target, "percentile": percentile,
            "half_width": None if hw is None else round(hw, 5),
            "reached": within(hw, target),
            "runs_reached": sum(bool(r and r.get("reached")) for r in runs),
            "runs": len(runs)}


def point_precision_text(p: Mapping[str, Any] | None) -> str:
    """A scale point's precision in a table: "±3.1 % 2/2" (merged half-width; runs that
    reached the target on their own), "n/a 0/2" without an interval, "—" without a target."""
    if not p:
        return "—"
    hw = "n/a" if p["half_width"] is None else f"±{num(100 * p['half_width'], 2)} %"
    return f"{hw} {p['runs_reached']}/{p['runs']}"


def p99_interval_text(iv: Mapping[str, Any] | None) -> str:
    """A scale point's p99 interval for a table: "310–355" (µs), "n/a (k)", or "—"."""
    if not iv:
        return "—"
    if iv.get("range"):
        return f"{us(iv['range'][0])}–{us(iv['range'][1])}"
    why = str(iv.get("withheld") or "")
    return why.split(" samples")[0] + ")" if why.startswith("n/a (") else "not given"


def with_intervals(totals: dict[str, Any], independence: Mapping[str, Any] | None,
                   samples: Mapping[str, Any] | None = None) -> None:
    """Adds ``intervals`` (:func:`run_intervals`) to ``totals``' ``corrected`` and
    ``uncorrected`` entries; ``samples`` (the engine's record) feeds the block bootstrap when
    the latencies are not independent. (The samples are the corrected latencies in open
    loop: their dependence stands for the uncorrected ones' too, as the independence check's
    verdict does.)"""
    factors = (dependence_factors(samples)
               if (independence or {}).get("status") != "pass" else None)
    for name in ("corrected", "uncorrected"):
        entry = totals.get(name)
        if entry:
            entry["intervals"] = run_intervals(entry, independence, factors)


def half_width(entry: Mapping[str, Any], key: str = TARGET_KEY) -> float | None:
    """The relative half-width of ``key``'s interval in an entry with ``intervals``
    (``(high - low) / 2 / value``), or None when there is none."""
    iv = entry.get("intervals") or {}
    return relative_half_width((iv.get("ranges") or {}).get(key),
                               entry.get("percentiles", {}).get(key))


def precision_verdict(target: float, entry: Mapping[str, Any], *, stopped_at_s: float | None,
                      cap_s: float, live_half_width: float | None = None,
                      percentile: str = TARGET_KEY) -> dict[str, Any]:
    """``load.json``'s ``precision``: the target, the targeted ``percentile``'s final relative
    half-width (from the run's own intervals, thinning included), whether it is at or below
    the target, and when the run stopped for it (None: it ran to the cap)."""
    hw = half_width(entry, percentile)
    why = (entry.get("intervals") or {}).get("basis", {}).get("withheld")
    reached = within(hw, target)
    return {"target": target, "percentile": percentile,
            "half_width": None if hw is None else round(hw, 5), "reached": reached,
            "stopped_at_s": stopped_at_s, "cap_s": cap_s,
            "live_half_width": None if live_half_width is None else round(live_half_width, 5),
            "why": None if hw is not None else (why or f"too few samples beyond the p{percentile}")}


def round_up(n: int) -> int:
    """``n`` rounded up to two significant digits (12,345 -> 13,000)."""
    step = 10 ** max(0, len(str(n)) - 2)
    return -(-n // step) * step


def longer_fix(flag: str, cap_s: float, half_widths: Sequence[float | None],
               target: float) -> str:
    """The change that would let every run reach ``target``: a longer ``flag`` (``--duration``,
    ``--window``) from the widest half-width (an interval narrows as 1/√n: the cap times
    (widest / target)², with a margin; four times the cap when a run had no interval), or a
    wider target the widest run met."""
    known = [hw for hw in half_widths if hw is not None]
    need = max([cap_s * (hw / target) ** 2 * 1.2 for hw in known]
               + [4 * cap_s] * (len(known) < len(half_widths)) + [cap_s + 1])
    text = f"`{flag} {round_up(math.ceil(need))}` (what the widest needs)"
    if known:
        text += f", or a wider `--precision {math.ceil(100 * max(known) * 1.1):g}%`"
    return text


def precision_text(p: Mapping[str, Any] | None) -> str | None:
    """One line: "p99 ±4.1 % reached after 6.5 s" or "precision NOT reached in 30 s: p99 ±9 %
    (target ±5 %)", of the percentile the target was on."""
    if not p:
        return None
    pct = f"p{p.get('percentile') or TARGET_KEY}"
    hw = "interval not given: " + str(p["why"]) if p["half_width"] is None \
        else f"±{num(100 * p['half_width'], 2)} %"
    if p["reached"]:
        when = p["stopped_at_s"] if p["stopped_at_s"] is not None else p["cap_s"]
        return (f"precision: {pct} {hw} reached after {when:g} s "
                f"(target ±{100 * p['target']:g} %)")
    if p["stopped_at_s"] is not None:  # stopped on the live interval, which the final
        # verdict (thinned for independence) does not confirm
        live = p.get("live_half_width")
        live_text = "" if live is None else f"±{num(100 * live, 2)} %, "
        return (f"precision NOT reached: stopped after {p['stopped_at_s']:g} s on the live "
                f"{pct} interval ({live_text}samples taken as independent), "
                f"but {pct} {hw} (target ±{100 * p['target']:g} %) → "
                + (f"a wider `--precision {math.ceil(110 * p['half_width']):g}%`, or "
                   if p["half_width"] is not None else "")
                + "a quieter machine (latencies that depend on each other widen the final "
                "interval)")
    return (f"precision NOT reached in {p['cap_s']:g} s: {pct} {hw} "
            f"(target ±{100 * p['target']:g} %) → "
            + longer_fix("--duration", float(p["cap_s"]), [p["half_width"]], float(p["target"])))


def interval_lines(totals: Mapping[str, Any], open_loop: bool) -> list[str]:
    """The latency table's interval rows: each shown percentile's 95 % interval (µs), "n/a (k)"
    when too few samples lie beyond it, or why no interval is given."""
    lines = []
    for name in ("corrected", "uncorrected"):
        entry = totals.get(name)
        iv = (entry or {}).get("intervals")
        if not iv:
            continue
        label = (name if open_loop else "latency") + " 95 %"
        basis = iv["basis"]
        if iv["ranges"] is None:
            lines.append(f"{label:17}interval not given: {basis['withheld']}")
            continue
        cells = []
        for key in SHOWN:
            rng = iv["ranges"].get(key)
            cells.append(f"p{key} " + (f"n/a ({iv['tail'][key]})" if rng is None
                                       else f"{us(rng[0])}–{us(rng[1])}"))
        lines.append(f"{label:17}" + ", ".join(cells) + _basis_note(basis))
    return lines


def _basis_note(basis: Mapping[str, Any]) -> str:
    """How the intervals were made, when not from every sample as independent: thinned, or
    the block bootstrap (its p99's block length and effective samples)."""
    k = basis.get("thinning")
    if k and k > 1:
        return f"  ({basis['effective']} effective samples, 1 in {k})"
    p99 = (basis.get("factors") or {}).get(TARGET_KEY)
    if basis.get("method") == "block bootstrap":
        return ("  (block bootstrap: latencies not independent; p99 on "
                + (f"{basis['effective']} effective samples, blocks of {p99['block']})"
                   if p99 else "no sample beyond it)"))
    return ""


class Watch:
    """Live, at each finished interval: whether the measured ``percentile`` (p99 by default) is
    known to within ``target`` (a share of it), by two intervals that must both be that
    tight —

    * the order-statistic interval of the intervals after the warm-up merged, which takes the
      latencies as independent (the final verdict's thinning or block bootstrap may widen it);
    * the batch-means interval: the intervals' own percentiles taken as batches, ``t`` × their
      standard deviation / √k (batch quantiles, Seila 1982), which sees the dependence the
      first one ignores. It needs :data:`MIN_BATCHES` intervals of at least
      :data:`MIN_BATCH_SAMPLES` latencies, so a run never stops before that many intervals.

    On a busy machine the first alone stopped 14 of 18 scale runs early that the final verdict
    did not confirm (benches/runs/2026-11-27-run-time-precision.md)."""

    def __init__(self, target: float, interval_s: float, warmup_s: float,
                 percentile: str = TARGET_KEY) -> None:
        self.target, self.interval_s, self.warmup_s = target, interval_s, warmup_s
        self.percentile = float(percentile)
        self.seen = 0
        #: The measured intervals' latencies so far, merged (one histogram, kept up to date:
        #: a long run does not re-merge every interval at every poll).
        self.merged: str | None = None
        #: Each measured interval's percentile (ns), the batches of the batch-means interval.
        self.batches: list[float] = []
        self.reached_at_s: float | None = None
        #: The live relative half-width at the latest finished interval (the wider of the
        #: two; the order statistics' alone until there are enough batches).
        self.half_width: float | None = None
        # deferred: scipy takes up to seconds to import on a busy machine; import it before
        # the run rather than in its first poll
        from scipy.stats import t as student_t
        self._t = student_t

    def poll(self, progress: Any) -> bool:
        """Reads the intervals finished since the last poll; True once the target is met."""
        new = progress.interval_histograms(self.seen)
        self.seen += len(new)
        measured = [h for idx, h in new if idx * self.interval_s + 1e-9 >= self.warmup_s]
        if measured:
            self.merged = _core.hist_merge(([self.merged] if self.merged else []) + measured)
            for h in measured:
                if int(_core.hist_summary(h)["count"]) >= MIN_BATCH_SAMPLES:
                    self.batches.append(float(_core.hist_percentiles(h, [self.percentile])[0]))
        if not measured or self.reached_at_s is not None:
            return self.reached_at_s is not None
        merged = self.merged
        n = int(_core.hist_summary(merged)["count"])
        rng = interval(merged, n, self.percentile)
        value = _core.hist_percentiles(merged, [self.percentile])[0]
        self.half_width = relative_half_width(rng, value)
        k = len(self.batches)
        if self.half_width is not None and k >= MIN_BATCHES:
            mean = sum(self.batches) / k
            sd = math.sqrt(sum((b - mean) ** 2 for b in self.batches) / (k - 1))
            batch_hw = float(self._t.ppf(0.975, k - 1)) * sd / math.sqrt(k) / value
            self.half_width = max(self.half_width, batch_hw)
            if self.half_width <= self.target:
                self.reached_at_s = round((max(i for i, _ in new) + 1) * self.interval_s, 3)
        return self.reached_at_s is not None
