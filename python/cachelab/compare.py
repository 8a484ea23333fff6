"""A/B comparison of saved results of one kind: :func:`compare`.

The first result is the baseline A; every other one is compared with it. Each row of the
result is one item (a profile cell, a strategy, a load N, the whole run) and one metric
(a percentile, throughput, hit ratio), with the change relative to A and an interval:

* **latency percentiles** (profiles, load runs): a bootstrap over each HdrHistogram's samples.
  Resampling n values from a histogram and taking the nearest-rank percentile q gives the
  k-th smallest of n uniform draws mapped through the histogram's quantile function, k =
  ⌈q·n⌉; that order statistic is Beta(k, n − k + 1) distributed, so each resample costs one
  Beta draw and one quantile lookup per histogram — exact for the recorded histogram, with
  no need to expand it into samples. The interval is the percentile interval of the
  resampled ratio B/A − 1.
* **throughput** (load runs: the steady window's intervals; scale sweeps: the repeats at each
  N): Welch's t interval for the difference of means, as a share of A's mean.
* **simulations**: the band over repeated latency draws that ``simulate`` reports (min–max);
  the interval runs from the least to the most favourable pairing of the two bands.

A verdict ("higher"/"lower") is given only when the interval excludes zero; otherwise "no
clear difference". Percentiles with fewer than 10 samples beyond them get "too few samples".
Results of different kinds, or measured with settings that change what is measured (protocol,
concurrency, load mode and mix, a simulation's trace), are refused unless
``allow_different``.
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cachelab import _core, environment
from cachelab.artifacts import write_json
from cachelab.errors import UsageError
from cachelab.report.discover import Artifact, find_artifacts, read_artifact
from cachelab.report.sections import band_at
from cachelab.tables import text_table

__all__ = ["SCHEMA", "SCHEMA_VERSION", "CompareResult", "compare", "compare_artifacts",
           "compare_plot", "compare_servers", "load_for_compare", "parse_server_cmd", "render"]

SCHEMA = "cachelab.compare"
SCHEMA_VERSION = 1

#: Percentiles compared for latency distributions.
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
#: Fewer samples than this beyond a percentile and its interval is not trusted.
MIN_TAIL = 10

_KIND_NAMES = {"profile": "latency profile", "load": "load result", "scale": "scale result",
               "simulation": "simulation result", "usl": "USL fit", "tiers": "tiers result",
               "replay": "replay result", "run": "run summary", "compare": "comparison"}
_DEFAULT_FILES = {"profile": "profile.json", "load": "load.json", "scale": "scale.json",
                  "simulation": "simulate.json", "tiers": "tiers.json"}


@dataclass
class CompareResult:
    """Rows of (item, metric, pair) with values, relative change, interval and verdict."""

    kind: str
    names: list[str]
    sources: list[str]
    method: str
    rows: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), allow_nan=False)


# -- loading ------------------------------------------------------------------------------


def load_for_compare(path: str | Path) -> Artifact:
    """The one result in ``path``: a result file, or a directory holding exactly one
    comparable result (a run's directory is not one: name its step directories)."""
    p = Path(path)
    if p.is_file():
        return read_artifact(p)
    if not p.exists():
        raise UsageError(f"{p}: no such file or directory")
    found = [a for a in find_artifacts([p]) if a.kind in _DEFAULT_FILES]
    direct = [a for a in found if a.path.parent == p]
    pick = direct or found
    if len(pick) == 1:
        return pick[0]
    if not pick:
        raise UsageError(f"{p}: no profile, load, scale, simulation or tiers result found")
    listing = ", ".join(str(a.path) for a in pick[:4]) + (" …" if len(pick) > 4 else "")
    raise UsageError(f"{p}: holds {len(pick)} results ({listing}); name one of them")


def _label(a: Artifact, i: int) -> str:
    return f"{chr(65 + i)}: {a.path.parent.name}/{a.path.name}" if i < 26 else str(a.path)


# -- statistics ---------------------------------------------------------------------------


def _boot_percentile(hist: str, n: int, q: float, rng: np.random.Generator,
                     resamples: int) -> np.ndarray:
    """Bootstrap replicates of the nearest-rank ``q`` percentile of the histogram's n values."""
    k = max(1, min(n, math.ceil(q / 100.0 * n)))
    u = rng.beta(k, n - k + 1, size=resamples)
    return np.asarray(_core.hist_percentiles(hist, [float(x) for x in 100.0 * u]), dtype=float)


def _verdict(lo: float | None, hi: float | None, *, higher_is_better: bool,
             few: bool = False) -> tuple[str, str]:
    if few:
        return "too few samples", ""
    if lo is None or hi is None:
        return "no interval", ""
    if lo > 0:
        return "higher", "better" if higher_is_better else "worse"
    if hi < 0:
        return "lower", "worse" if higher_is_better else "better"
    return "no clear difference", ""


def _row(item: str, metric: str, versus: str, a: float, b: float, lo: float | None,
         hi: float | None, *, higher_is_better: bool, few: bool = False,
         unit: str = "") -> dict[str, Any]:
    rel = (b / a - 1.0) if a else None
    verdict, direction = _verdict(lo, hi, higher_is_better=higher_is_better, few=few)
    return {"item": item, "metric": metric, "versus": versus, "a": a, "b": b, "unit": unit,
            "delta": b - a, "relative": rel, "ci_low": lo, "ci_high": hi, "verdict": verdict,
            "direction": direction}


def _hist_rows(item: str, versus: str, ha: str, na: int, hb: str, nb: int,
               rng: np.random.Generator, resamples: int, level: float) -> list[dict[str, Any]]:
    out = []
    alpha = (1 - level) / 2
    for q in PERCENTILES:
        a = float(_core.hist_percentiles(ha, [q])[0])
        b = float(_core.hist_percentiles(hb, [q])[0])
        few = min(na, nb) * (1 - q / 100.0) < MIN_TAIL
        ba = _boot_percentile(ha, na, q, rng, resamples)
        bb = _boot_percentile(hb, nb, q, rng, resamples)
        ratio = bb / np.maximum(ba, 1.0) - 1.0
        lo, hi = (float(x) for x in np.quantile(ratio, [alpha, 1 - alpha]))
        out.append(_row(item, f"p{q:g}", versus, a, b, lo, hi, higher_is_better=False, few=few,
                        unit="ns"))
    return out


def _welch(xa: Sequence[float], xb: Sequence[float], level: float) -> tuple[float, float] | None:
    """Welch's interval for mean(b) − mean(a), as a share of mean(a); None below 2 values."""
    from cachelab.usl import t_quantile

    if len(xa) < 2 or len(xb) < 2:
        return None
    ma, mb = statistics.fmean(xa), statistics.fmean(xb)
    va, vb = statistics.variance(xa) / len(xa), statistics.variance(xb) / len(xb)
    se = math.sqrt(va + vb)
    if se == 0 or ma == 0:
        return (mb / ma - 1, mb / ma - 1) if ma else None
    df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))
    t = t_quantile(1 - (1 - level) / 2, max(1.0, df))
    d = mb - ma
    return (d - t * se) / ma, (d + t * se) / ma


# -- per kind -----------------------------------------------------------------------------


def _same(arts: Sequence[Artifact], get: Callable[[dict[str, Any]], Any], what: str,
          problems: list[str]) -> None:
    values = [get(a.data) for a in arts]
    if any(v != values[0] for v in values[1:]):
        shown = "; ".join(f"{chr(65 + i)} {v!r}" for i, v in enumerate(values))
        problems.append(f"different {what} ({shown})")


def _profiles(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int,
              level: float, problems: list[str], warnings: list[str]) -> list[dict[str, Any]]:
    from cachelab.report.sections import _cell_label

    _same(arts, lambda d: d.get("client", {}).get("protocol"), "protocol", problems)
    _same(arts, lambda d: d.get("client", {}).get("concurrency"), "concurrency", problems)
    keyed = [{(c["op"], c["value_size"], c["keys"]): c for c in a.data["cells"]
              if c.get("samples")} for a in arts]
    common = [k for k in keyed[0] if all(k in m for m in keyed[1:])]
    if not common:
        raise UsageError("these profiles have no measured cell in common (same operation, value "
                         "size and key count): nothing to compare")
    dropped = sum(len(m) for m in keyed) - len(common) * len(keyed)
    if dropped:
        warnings.append(f"{dropped} cell(s) measured in only some of the profiles were left out")
    rows = []
    for j in range(1, len(arts)):
        versus = f"{chr(65 + j)} vs A"
        for key in common:
            ca, cb = keyed[0][key], keyed[j][key]
            item = "floor" if key[0] == "floor" else f"{key[0]} {_cell_label(ca)}"
            rows += _hist_rows(item, versus, ca["histogram"], ca["samples"], cb["histogram"],
                               cb["samples"], rng, resamples, level)
    return rows


def _steady_throughputs(d: dict[str, Any]) -> list[float]:
    t = d["totals"]
    ivs = d["intervals"][t["first_index"]:t["first_index"] + t["intervals"]]
    return [iv["replies"] / iv["duration_s"] for iv in ivs if iv["duration_s"] > 0]


def _loads(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int, level: float,
           problems: list[str], warnings: list[str]) -> list[dict[str, Any]]:
    _same(arts, lambda d: d["mode"], "load mode (open/closed loop)", problems)
    for f in ("mix", "value_size", "key_space", "key_dist", "pipeline", "rate"):
        _same(arts, lambda d, f=f: d["spec"].get(f), f"workload {f.replace('_', ' ')}", problems)
    rows = []
    base = arts[0].data
    for j in range(1, len(arts)):
        versus = f"{chr(65 + j)} vs A"
        other = arts[j].data
        xa, xb = _steady_throughputs(base), _steady_throughputs(other)
        ci = _welch(xa, xb, level)
        rows.append(_row("run", "throughput", versus, base["totals"]["throughput"],
                         other["totals"]["throughput"], *(ci or (None, None)),
                         higher_is_better=True, unit="/s"))
        which = "corrected" if base["totals"].get("corrected") else "uncorrected"
        la, lb = base["totals"][which], other["totals"].get(which)
        if lb is None or not la.get("count") or not lb.get("count"):
            warnings.append(f"{versus}: no {which} latency histogram in both results")
            continue
        rows += _hist_rows(f"{which} latency", versus, la["histogram"], la["count"],
                           lb["histogram"], lb["count"], rng, resamples, level)
    warnings.append("latency intervals treat the samples as independent; samples of one run "
                    "are correlated in time, so the intervals are narrower than repeats would "
                    "give — compare repeated, interleaved runs before trusting a small change")
    return rows


def _scales(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int, level: float,
            problems: list[str], warnings: list[str]) -> list[dict[str, Any]]:
    _same(arts, lambda d: d["spec"]["vary"], "swept variable", problems)
    _same(arts, lambda d: d["spec"].get("workload"), "workload", problems)
    rows = []
    for j in range(1, len(arts)):
        versus = f"{chr(65 + j)} vs A"
        common = sorted({r["n"] for r in arts[0].data["runs"]}
                        & {r["n"] for r in arts[j].data["runs"]})
        if not common:
            raise UsageError("these sweeps share no load N: nothing to compare")
        for n in common:
            xa = [r["throughput"] for r in arts[0].data["runs"] if r["n"] == n]
            xb = [r["throughput"] for r in arts[j].data["runs"] if r["n"] == n]
            ci = _welch(xa, xb, level)
            rows.append(_row(f"N = {n}", "throughput", versus, statistics.fmean(xa),
                             statistics.fmean(xb), *(ci or (None, None)),
                             higher_is_better=True, unit="/s"))
    if any(len(a.data["runs"]) <= len(a.data["summary"]) for a in arts):
        warnings.append("a sweep has one run per N: its throughput has no interval (use "
                        "--repeats 2 or more)")
    return rows


def _exact_row(item: str, metric: str, versus: str, a: float, b: float, *,
               higher_is_better: bool, unit: str = "") -> dict[str, Any]:
    """A row for a value with no sampling error (a count, a deterministic simulation): the
    interval is the difference itself, and equal values are "same"."""
    exact = (b / a - 1) if a else (0.0 if b == a else None)
    row = _row(item, metric, versus, a, b, exact, exact, higher_is_better=higher_is_better,
               unit=unit)
    if b == a:
        row["verdict"] = "same"
    return row


def _flat_simulations(arts: Sequence[Artifact], problems: list[str],
                      warnings: list[str]) -> list[dict[str, Any]]:
    """Miss ratios of flat-trace simulations: per (policy, capacity) run both have, and the
    LRU miss-ratio curve at the capacities both curves have. These are deterministic (no
    draws), so a difference is exact — except for a SHARDS-sampled curve, whose points get no
    interval and no verdict."""
    if any(a.data.get("mode") != "flat" for a in arts):
        raise UsageError("cannot compare a flat (miss-ratio) simulation with a request-level one")
    _same(arts, lambda d: {k: d["trace"].get(k) for k in ("requests", "unique_keys",
                                                          "total_bytes")},
          "trace (requests, unique keys, bytes)", problems)
    _same(arts, lambda d: d.get("unit"), "capacity unit", problems)
    rows: list[dict[str, Any]] = []
    runs = [{(r["policy"], int(r["capacity"])): r for r in a.data.get("results") or []}
            for a in arts]
    curves = [a.data.get("mrc") for a in arts]
    unit = arts[0].data.get("unit") or "objects"
    for j in range(1, len(arts)):
        versus = f"{chr(65 + j)} vs A"
        common = [k for k in runs[0] if k in runs[j]]
        for policy, cap in common:
            ra, rb = runs[0][(policy, cap)], runs[j][(policy, cap)]
            item = f"{policy} @ {cap:,} {unit}"
            for metric in ("miss_ratio", "byte_miss_ratio"):
                if ra.get(metric) is None or rb.get(metric) is None:
                    continue
                rows.append(_exact_row(item, metric.replace("_", " "), versus,
                                       float(ra[metric]), float(rb[metric]),
                                       higher_is_better=False))
        ca, cb = curves[0], curves[j]
        if ca and cb:
            pa = dict(zip(ca["capacities"], ca["miss_ratios"]))
            pb = dict(zip(cb["capacities"], cb["miss_ratios"]))
            shared = [c for c in ca["capacities"] if c in pb]
            # A handful of points along the curve, not hundreds of rows.
            step = max(1, len(shared) // 8)
            picked = shared[::step] + ([shared[-1]] if shared and
                                       (len(shared) - 1) % step else [])
            sampled = not (ca.get("exact", True) and cb.get("exact", True))
            for c in picked:
                item = f"LRU curve @ {c:,} {ca.get('unit', unit)}"
                if sampled:
                    rows.append(_row(item, "miss ratio", versus, float(pa[c]), float(pb[c]),
                                     None, None, higher_is_better=False))
                else:
                    rows.append(_exact_row(item, "miss ratio", versus, float(pa[c]),
                                           float(pb[c]), higher_is_better=False))
            if sampled and picked:
                warnings.append("a miss-ratio curve is SHARDS-sampled: its points carry sampling "
                                "error that is not estimated, so they get no verdict")
    if not rows:
        if problems:
            raise UsageError(f"incompatible flat simulations: {'; '.join(problems)}")
        raise UsageError("these flat simulations share no (policy, capacity) run and no "
                         "miss-ratio curve points: nothing to compare")
    return rows


def _simulations(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int,
                 level: float, problems: list[str],
                 warnings: list[str]) -> list[dict[str, Any]]:
    if any(a.data.get("mode") == "flat" for a in arts):
        return _flat_simulations(arts, problems, warnings)
    _same(arts, lambda d: {k: d["trace"].get(k) for k in ("requests", "items", "source")},
          "trace", problems)
    _same(arts, lambda d: (d["trace"].get("generator") or {}).get("params"),
          "synthetic trace parameters", problems)
    _same(arts, lambda d: d["spec"].get("train"), "training share", problems)
    rows = []
    base = {s["strategy"]: s for s in arts[0].data["strategies"]}
    for j in range(1, len(arts)):
        versus = f"{chr(65 + j)} vs A"
        other = {s["strategy"]: s for s in arts[j].data["strategies"]}
        common = [k for k in base if k in other]
        if not common:
            raise UsageError("these simulations share no strategy: nothing to compare")
        for name in common:
            sa, sb = base[name], other[name]
            for field_, key, at, metric in (("percentiles", "percentile", 50.0, "p50 increase"),
                                            ("percentiles", "percentile", 90.0, "p90 increase"),
                                            ("percentiles", "percentile", 99.0, "p99 increase"),
                                            ("slowed", "threshold", 0.1, "slowed ≥10 %")):
                ba, bb = band_at(sa, field_, key, at), band_at(sb, field_, key, at)
                if not ba or not bb or ba["median"] <= 0:
                    continue
                lo = bb["low"] / ba["high"] - 1 if ba["high"] > 0 else None
                hi = bb["high"] / ba["low"] - 1 if ba["low"] > 0 else None
                rows.append(_row(name, metric, versus, ba["median"], bb["median"], lo, hi,
                                 higher_is_better=False))
            # Hit ratios do not depend on the latency draws: a difference is exact.
            rows.append(_exact_row(name, "hit ratio", versus, float(sa["hit_ratio"]),
                                   float(sb["hit_ratio"]), higher_is_better=True))
    return rows


def _tiers(arts: Sequence[Artifact], rng: np.random.Generator, resamples: int, level: float,
           problems: list[str], warnings: list[str]) -> list[dict[str, Any]]:
    """Read time per (shape, method) from each row's histogram (bootstrap, as for profiles),
    CPU per read (means only: no interval) and stored bytes (exact)."""
    _same(arts, lambda d: d.get("store"), "store", problems)
    _same(arts, lambda d: {k: (d.get("spec") or {}).get(k) for k in ("record_bytes",
                                                                      "list_items",
                                                                      "item_bytes", "codec")},
          "data shapes and codec", problems)
    keyed = [{(r["shape"], r["method"]): r for r in a.data.get("rows") or []
              if r.get("histogram") and r.get("reads")} for a in arts]
    common = [k for k in keyed[0] if all(k in m for m in keyed[1:])]
    if not common:
        raise UsageError("these tiers results have no (shape, method) in common: nothing to "
                         "compare")
    rows: list[dict[str, Any]] = []
    for j in range(1, len(arts)):
        versus = f"{chr(65 + j)} vs A"
        for key in common:
            ra, rb = keyed[0][key], keyed[j][key]
            item = f"{key[0]} / {key[1]}"
            rows += [r for r in _hist_rows(item, versus, ra["histogram"], int(ra["reads"]),
                                           rb["histogram"], int(rb["reads"]), rng, resamples,
                                           level) if r["metric"] in ("p50", "p90", "p99")]
            if ra.get("cpu_mean_us") is not None and rb.get("cpu_mean_us") is not None:
                rows.append(_row(item, "CPU per read (mean)", versus,
                                 float(ra["cpu_mean_us"]) * 1000, float(rb["cpu_mean_us"]) * 1000,
                                 None, None, higher_is_better=False, unit="ns"))
            if ra.get("stored_bytes") and rb.get("stored_bytes"):
                rows.append(_exact_row(item, "stored bytes", versus, float(ra["stored_bytes"]),
                                       float(rb["stored_bytes"]), higher_is_better=False))
    return rows


#: Result kind -> the comparison of results of that kind.
COMPARERS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "profile": _profiles,
    "load": _loads,
    "scale": _scales,
    "simulation": _simulations,
    "tiers": _tiers,
}

_METHODS = {
    "profile": "Latency percentiles per cell; intervals: bootstrap over each HdrHistogram.",
    "load": "Steady-window throughput (Welch interval over the time-series intervals) and "
            "latency percentiles (bootstrap over the HdrHistogram).",
    "scale": "Mean throughput at each N; intervals: Welch's t over the repeats.",
    "simulation": "Request-level: medians over latency draws; intervals: the min–max bands "
                  "paired least and most favourably. Flat: miss ratios are deterministic, so "
                  "differences are exact.",
    "tiers": "Read time per shape and method: percentiles with a bootstrap over each "
             "HdrHistogram; CPU per read: means, no interval; stored bytes: exact.",
}


def compare_artifacts(arts: Sequence[Artifact], *, resamples: int = 2000, level: float = 0.95,
                      seed: int = 0, allow_different: bool = False) -> CompareResult:
    """Compare already loaded results (the first is the baseline)."""
    if len(arts) < 2:
        raise UsageError("compare needs at least two results")
    if len(arts) > 26:
        raise UsageError("compare takes at most 26 results")
    if not 100 <= resamples <= 1_000_000:
        raise UsageError(f"resamples must be 100 to 1,000,000, not {resamples}")
    if not 0.5 <= level < 1:
        raise UsageError(f"level must be in [0.5, 1), not {level}")
    kinds = [a.kind for a in arts]
    if len(set(kinds)) > 1:
        listing = ", ".join(f"{a.path} is a {_KIND_NAMES.get(a.kind, a.kind)}" for a in arts)
        raise UsageError(f"cannot compare results of different kinds: {listing}")
    kind = kinds[0]
    if kind not in COMPARERS:
        raise UsageError(f"comparing {_KIND_NAMES.get(kind, kind)}s is not supported; compare "
                         "profiles, load results, scale results, simulations or tiers results")
    rng = np.random.default_rng(seed)
    problems: list[str] = []
    warnings: list[str] = []
    rows = COMPARERS[kind](arts, rng, resamples, level, problems, warnings)
    if problems:
        msg = f"incompatible {_KIND_NAMES[kind]}s: {'; '.join(problems)}"
        if not allow_different:
            raise UsageError(msg + " (--allow-different compares them anyway)")
        warnings.insert(0, msg)
    names = [_label(a, i) for i, a in enumerate(arts)]
    result = CompareResult(
        kind=kind, names=names, sources=[str(a.path) for a in arts],
        method=_METHODS[kind] + f" Level {level:g}, {resamples} resamples, seed {seed}.",
        rows=rows, warnings=warnings,
        settings={"resamples": resamples, "level": level, "seed": seed,
                  "allow_different": allow_different},
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), environment=environment.facts(),
    )
    result.summary = _summary(result)
    return result


def compare(paths: Sequence[str | Path], **options: Any) -> CompareResult:
    """Compare the results at ``paths`` (files, or directories holding one result each); the
    first is the baseline. Options: ``resamples``, ``level``, ``seed``, ``allow_different``."""
    return compare_artifacts([load_for_compare(p) for p in paths], **options)


def _summary(r: CompareResult) -> list[str]:
    out = []
    for versus in dict.fromkeys(row["versus"] for row in r.rows):
        rows = [x for x in r.rows if x["versus"] == versus]
        better = [x for x in rows if x["direction"] == "better"]
        worse = [x for x in rows if x["direction"] == "worse"]
        same = sum(1 for x in rows if x["verdict"] == "same")
        unclear = len(rows) - len(better) - len(worse) - same
        text = (f"{versus}: {len(better)} better, {len(worse)} worse, "
                + (f"{same} the same, " if same else "")
                + f"{unclear} without a clear difference")
        if rows:
            big = max((x for x in better + worse if x["relative"] is not None),
                      key=lambda x: abs(x["relative"]), default=None)
            if big is not None:
                text += (f"; largest: {big['item']} {big['metric']} "
                         f"{100 * big['relative']:+.0f} %")
        out.append(text + ".")
    return out


# -- output -------------------------------------------------------------------------------


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "ns":
        from cachelab.report.sections import dur

        return dur(v)
    if unit == "/s":
        return f"{v:,.0f}/s"
    return f"{v:.4g}"


def render(r: CompareResult) -> str:
    """The comparison as a text table."""
    header = ["item", "metric", "pair", "A", "other", "change", "interval", "verdict"]
    rows = []
    for x in r.rows:
        iv = ("—" if x["ci_low"] is None or x["ci_high"] is None
              else f"[{100 * x['ci_low']:+.1f}%, {100 * x['ci_high']:+.1f}%]")
        rows.append([x["item"], x["metric"], x["versus"], _fmt(x["a"], x["unit"]),
                     _fmt(x["b"], x["unit"]),
                     "—" if x["relative"] is None else f"{100 * x['relative']:+.1f}%", iv,
                     x["verdict"] + (f" ({x['direction']})" if x["direction"] else "")])
    lines = [*(f"{chr(65 + i) if i < 26 else '?'} = {n.split(': ', 1)[-1]}" for i, n in
               enumerate(r.names)), r.method, ""]
    lines += text_table(header, rows, left=3)
    lines.append("")
    lines += r.summary
    lines += [f"note: {w}" for w in r.warnings]
    return "\n".join(lines)


def compare_plot(result: CompareResult | dict[str, Any], out_base: Path,
                 max_rows: int = 48) -> list[Path]:
    """A forest plot: one row per (item, metric), the relative change of each other result
    against A with its interval; writes ``<out_base>.png`` and ``.svg``."""
    from cachelab.plots.figure import new_figure, save

    d = result.to_dict() if hasattr(result, "to_dict") else result
    rows = [x for x in d["rows"] if x["relative"] is not None][: max_rows * 4]
    labels = list(dict.fromkeys(f"{x['item']} · {x['metric']}" for x in rows))[:max_rows]
    pairs = list(dict.fromkeys(x["versus"] for x in rows))
    fig = new_figure((8.0, 1.6 + 0.22 * max(1, len(labels))))
    ax = fig.add_subplot()
    colours = {"better": "#2f8f46", "worse": "#c0392b", "": "#6b7785"}
    for pi, pair in enumerate(pairs):
        off = (pi - (len(pairs) - 1) / 2) * 0.22
        for x in rows:
            lab = f"{x['item']} · {x['metric']}"
            if x["versus"] != pair or lab not in labels:
                continue
            y = labels.index(lab) + off
            v = 100 * x["relative"]
            c = colours.get(x["direction"], "#6b7785")
            if x["ci_low"] is not None and x["ci_high"] is not None:
                ax.plot([100 * x["ci_low"], 100 * x["ci_high"]], [y, y], color=c, linewidth=1.6)
            ax.plot([v], [y], marker="os^dv"[pi % 5], color=c, markersize=4.5)
    if len(pairs) > 1:
        for pi, pair in enumerate(pairs):
            ax.plot([], [], marker="os^dv"[pi % 5], color="#6b7785", linestyle="", label=pair)
        ax.legend(fontsize=7, loc="best")
    ax.axvline(0, color="#333", linewidth=0.8)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("change relative to A (%), with its interval")
    ax.set_title(f"{d['kind']}: {' · '.join(pairs)}  (green better, red worse, grey unclear)",
                 fontsize=9, loc="left")
    ax.grid(axis="x", alpha=0.3)
    return save(fig, out_base)


# -- live A/B of server commands ----------------------------------------------------------

#: memcached flags the A/B sets itself (a private loopback port, no UDP) or cannot allow
#: (daemonizing would hide the pid whose /proc schedstat is read).
_OWN_FLAGS = ("-p", "--port", "-l", "--listen", "-U", "--udp-port", "-s", "--unix-socket",
              "-d", "--daemon")


def parse_server_cmd(text: str) -> tuple[list[str], list[str]]:
    """``"chrt -f 50 memcached -t 2"`` -> (``["chrt", "-f", "50", "/usr/bin/memcached"]``,
    ``["-t", "2"]``): the wrappers with memcached's path, and memcached's own flags.

    The command must end in a memcached invocation: wrappers that exec it (chrt, taskset,
    numactl, nice) come first, then ``memcached`` and its flags, without the listening flags
    that the A/B sets itself. Raises UsageError otherwise."""
    import shlex

    from cachelab.servers import find_memcached

    try:
        words = shlex.split(text)
    except ValueError as e:
        raise UsageError(f"--server-cmd {text!r}: {e}") from None
    at = next((i for i, w in enumerate(words) if Path(w).name == "memcached"), None)
    if at is None:
        raise UsageError(f"--server-cmd {text!r} does not end in a memcached invocation "
                         "(e.g. 'chrt -f 50 memcached -t 2')")
    flags = words[at + 1:]
    own = [f for f in flags if f.split("=", 1)[0] in _OWN_FLAGS
           or (len(f) > 2 and f[:2] in ("-p", "-l", "-U", "-s") and not f.startswith("--"))]
    if own:
        raise UsageError(f"--server-cmd {text!r}: leave out {' '.join(own)} (the A/B listens "
                         "on a private loopback port, without UDP, in the foreground)")
    binary = find_memcached(words[at] if "/" in words[at] else None)
    wrappers = words[:at]
    if wrappers and shutil.which(wrappers[0]) is None:
        raise UsageError(f"--server-cmd {text!r}: {wrappers[0]} is not installed")
    return [*wrappers, binary], flags


def _server_for(text: str) -> Any:
    """A PrivateMemcached that runs the command ``text`` (see :func:`parse_server_cmd`): its
    wrapper and binary on a private loopback port, with the command's ``-t`` and ``-m`` (or
    the private server's defaults) and its other flags."""
    from cachelab import servers

    prefix, flags = parse_server_cmd(text)
    settings = {"-t": 4, "-m": 64}  # the private server's defaults, unless the command sets them
    rest: list[str] = []
    words = iter(flags)
    for w in words:
        if w in settings:
            value = next(words, "")
            if not value.isdigit() or int(value) < 1:
                raise UsageError(f"--server-cmd {text!r}: {w} needs a positive number")
            settings[w] = int(value)
        else:
            rest.append(w)
    return servers.PrivateMemcached(
        wrapper=prefix[:-1], binary=prefix[-1], threads=settings["-t"],
        memory_mb=settings["-m"], extra_args=rest, start_timeout=10.0,
    )


def _start(text: str, label: str) -> Any:
    from cachelab.errors import ServerError

    mc = _server_for(text)
    try:
        return mc.start()
    except ServerError as e:
        why = str(e).replace("memcached did not start: ", "")
        hint = (" (real-time scheduling needs root or CAP_SYS_NICE)"
                if "not permitted" in why and "chrt" in text else "")
        raise type(e)(f"{label} server {text!r} did not start: {why}{hint}") from None


def _rep_metrics(r: Any) -> dict[str, float | None]:
    """What one repetition contributes: throughput, latency percentiles, run-queue wait."""
    t = r.totals
    which = "corrected" if t.get("corrected") else "uncorrected"
    lat = t.get(which) or {}
    out: dict[str, float | None] = {"throughput": t["throughput"]}
    for q in PERCENTILES[:3]:
        out[f"p{q:g}"] = (float(_core.hist_percentiles(lat["histogram"], [q])[0])
                          if lat.get("count") else None)
    sched = r.server.get("schedstat") or {}
    out["run-queue wait"] = sched.get("wait_per_wall")
    out["wait per CPU s"] = sched.get("wait_per_cpu")
    return out


def compare_servers(
    commands: Sequence[str],
    *,
    repeats: int = 4,
    duration: float = 2.0,
    level: float = 0.95,
    seed: int = 0,
    out: Path | None = None,
    on_run: Callable[[int, int, str], None] | None = None,
) -> CompareResult:
    """Start each server command (the first is A) on a private loopback port and run
    ``repeats`` interleaved rounds of a short closed-loop load (``duration`` seconds after a
    0.5 s warm-up) against each, in ABBA order so that drift over time hits both alike. Each
    round yields throughput, p50/p90/p99 latency and the server's run-queue wait (from
    /proc/PID/task/*/schedstat: seconds spent waiting for a CPU per second of wall time);
    rows compare the means over rounds, with Welch's t interval — the rounds are the
    independent units. With ``out``, each round's load result is saved there.

    ``on_run(done, total, label)`` is called before each load run."""
    from cachelab.load import LoadSpec, load

    if not 2 <= len(commands) <= 26:
        raise UsageError(f"give 2 to 26 --server-cmd, not {len(commands)}")
    if not 2 <= repeats <= 1000:
        raise UsageError(f"--repeats must be 2 to 1000 (intervals need two rounds), not "
                         f"{repeats}")
    if not 0.2 <= duration <= 3600:
        raise UsageError(f"--duration must be 0.2 to 3600 s, not {duration:g}")
    if not 0.5 <= level < 1:
        raise UsageError(f"level must be in [0.5, 1), not {level}")
    for c in commands:
        parse_server_cmd(c)
    labels = [chr(65 + i) for i in range(len(commands))]
    per: list[list[dict[str, float | None]]] = [[] for _ in commands]
    runs: list[dict[str, Any]] = []
    started = []
    try:
        for c, lab in zip(commands, labels):
            started.append(_start(c, lab))
        total, done = repeats * len(commands), 0
        for rep in range(repeats):
            order = list(range(len(commands)))
            if rep % 2:
                order.reverse()
            for i in order:
                mc = started[i]
                if on_run:
                    on_run(done, total, f"{labels[i]} round {rep + 1}")
                spec = LoadSpec.quick(duration=duration, warmup=0.5, interval=0.5,
                                      seed=seed + rep)
                r = load(spec, server=mc.address, server_pid=mc.pid,
                         server_facts={"private": True, "argv": mc.argv,
                                       "command": commands[i]})
                done += 1
                per[i].append(_rep_metrics(r))
                runs.append({"server": labels[i], "round": rep + 1, **per[i][-1]})
                if out is not None:
                    r.save(Path(out) / "rounds" / f"{labels[i]}-{rep + 1}" / "load.json")
        facts = [{"command": c, "argv": mc.argv, "version": mc.version}
                 for c, mc in zip(commands, started)]
    finally:
        for mc in started:
            mc.stop()
    rows = []
    warnings: list[str] = []
    higher_better = {"throughput": True}
    units = {"throughput": "/s", "p50": "ns", "p90": "ns", "p99": "ns"}
    for j in range(1, len(commands)):
        versus = f"{labels[j]} vs A"
        for metric in per[0][0]:
            xa = [m[metric] for m in per[0] if m[metric] is not None]
            xb = [m[metric] for m in per[j] if m[metric] is not None]
            if not xa or not xb:
                warnings.append(f"{versus}: no {metric} (is /proc/PID/task/*/schedstat "
                                "readable?)" if "wait" in metric else f"{versus}: no {metric}")
                continue
            ci = _welch(xa, xb, level)
            row = _row("server", metric, versus, statistics.fmean(xa), statistics.fmean(xb),
                       *(ci or (None, None)), higher_is_better=higher_better.get(metric, False),
                       unit=units.get(metric, ""))
            rows.append(row)
    warnings.append("each row compares the mean over rounds, with Welch's t interval over the "
                    "rounds; with few rounds the intervals are wide by design")
    names = [f"{lab}: {c}" for lab, c in zip(labels, commands)]
    result = CompareResult(
        kind="servers", names=names, sources=list(commands),
        method=(f"{repeats} interleaved rounds (ABBA) of {duration:g} s closed-loop load per "
                "server; means over rounds with Welch's t intervals; run-queue wait is the "
                f"server's /proc schedstat wait per wall second. Level {level:g}."),
        rows=rows, warnings=warnings,
        settings={"repeats": repeats, "duration": duration, "level": level, "seed": seed,
                  "servers": facts, "rounds": runs},
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), environment=environment.facts(),
    )
    result.summary = _summary(result)
    return result
