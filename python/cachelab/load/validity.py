"""Whether a load run's numbers are worth their conditions: the validity verdict (VALID or
INVALID, with reasons worst first) that every load run, and every scale point, carries.

After Lancet (Kogias et al., USENIX ATC 2019), each check a test as scipy or statsmodels has it
(computed here in numpy and ``scipy.special``, operation for operation: importing
``scipy.stats`` and statsmodels would cost each run's verdict 1-3 CPU-s; statsmodels is
imported only for the ADF test on a series KPSS rejects):

- **rate** (open loop): every measured interval sent within ±10 % of the intended rate (or
  within the Poisson noise of the interval's count, 4 standard deviations, when that is wider).
- **stationary**: no stall (the engine's, ``--stall-ms``) in the measured run, and the measured
  intervals' throughput and p99 series are not shown non-stationary. A series is not
  stationary when KPSS rejects level stationarity *and* the augmented Dickey–Fuller test
  cannot reject a unit root (at 5 %); the two series are one family, held at 5 % by Holm's
  step-down on the KPSS p-values (the smaller must be below 2.5 %, then the other below 5 %).
  Needs :data:`MIN_INTERVALS` full intervals.
- **client**: the load client's threads were busy — on a CPU or waiting for one (their CPU
  time plus run-queue wait, over their wall time) — less than :data:`CLIENT_BUSY` of the
  sending phase. Beyond that the client, not the server, set the pace: CLIENT SATURATED.
  Not checked with busy polling (which keeps the threads on a CPU by design).
- **late** (open loop): at most :data:`LATE_SHARE` of the sends left the engine's late
  threshold (1 ms) or more after their intended time: beyond that the client, not the
  server, set the pace. With the client check's figures the reason says which it was: a
  saturated client, or connections full of requests the server had not yet answered.
- **independent**: consecutive latencies (in send order, inside the engine's blocks of
  consecutive replies) are independent by Spearman's rank correlation at lag k, thinning
  k = 1, 2, 4, … until it passes (p ≥ 1 %); the k that passes is reported.
- **arrivals** (open loop, Poisson arrivals): the sends left one by one — gaps of 0 between
  real send times (inside blocks of consecutive sends) fail it when they are more than 1 % of
  the gaps — and their counts in windows of ten mean gaps are Poisson: variance equal to the
  mean by the index of dispersion (χ², two-sided, p > 1 %). The gaps themselves are not
  tested: below a few µs they are the sender's (one write at a time) and each send's own
  lateness, which the queueing figures report.

A test runs on at most :data:`MAX_TESTED` values (evenly chosen): with hundreds of thousands
a test finds effects far too small to matter (a timer's microseconds of jitter), and the
verdict would say nothing. A check without the data it needs is "not checked", with why; it
does not make a run INVALID.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cachelab.units import num, p_value

__all__ = ["CHECKS", "CLIENT_BUSY", "LATE_SHARE", "MIN_INTERVALS", "RATE_TOLERANCE", "SHORT",
           "THROUGHPUT_CHECKS", "arrivals_check", "client_check", "full_intervals", "headline",
           "independence_check", "late_check", "rate_check", "series_blocks", "stationarity_check",
           "stationary_family", "validity", "with_fix"]

#: The checks, worst first: the order of the reasons (a saturated client first: it explains
#: the others).
CHECKS = ("client", "rate", "stationary", "late", "independent", "arrivals")
#: Each check's failure in a few words, for tables.
SHORT = {"client": "client saturated", "rate": "rate not held", "stationary": "not stationary",
         "late": "late sends", "independent": "not independent",
         "arrivals": "arrivals not Poisson"}
#: The checks a run's throughput depends on (``scale`` leaves a run failing them out of the
#: USL fit); the others concern its latencies.
THROUGHPUT_CHECKS = ("rate", "stationary")
#: An interval held the rate within this share of it.
RATE_TOLERANCE = 0.10
#: The most of their wall time the load client's threads may be busy (on a CPU or waiting
#: for one) before the client is said to be saturated.
CLIENT_BUSY = 0.9
#: The most sends that may leave late, as a share of the sends.
LATE_SHARE = 0.01
#: Full measured intervals the stationarity tests need.
MIN_INTERVALS = 8
#: The most values (gaps, pairs) one test is run on.
MAX_TESTED = 1000
#: The fewest values a test is run on.
MIN_TESTED = 30
#: The arrivals check's window, in mean gaps between sends: long enough that a send's own
#: lateness (µs) seldom moves it into another window, short enough for many windows a run.
WINDOW_SENDS = 10
#: A send this share of a window or more late was held up (it may have joined others in a
#: window not its own): the arrivals check leaves its windows out, and fails a run with
#: more than :data:`LATE_SHARE` of its sends held up.
HELD_UP = 0.5
#: Significance of the independence and arrival tests, and of the stationarity tests.
ALPHA = 0.01
#: The family-wise level of the stationarity check (both series together).
ALPHA_STATIONARY = 0.05
#: The largest thinning tried by the independence test.
MAX_THINNING = 64


def _evenly(x: np.ndarray, most: int = MAX_TESTED) -> np.ndarray:
    """At most ``most`` values of ``x``, evenly spread over it."""
    if len(x) <= most:
        return x
    return x[np.linspace(0, len(x) - 1, most).round().astype(int)]


def series_blocks(samples: Mapping[str, Sequence[int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each block's (times, values), in time order."""
    block = np.asarray(samples.get("block") or [], dtype=np.uint64)
    t = np.asarray(samples.get("t_ns") or [], dtype=np.float64)
    v = np.asarray(samples.get("value_ns") or [], dtype=np.float64)
    out = []
    for b in np.unique(block):
        sel = block == b
        order = np.argsort(t[sel], kind="stable")
        out.append((t[sel][order], v[sel][order]))
    return out


def _not_checked(why: str) -> dict[str, Any]:
    return {"status": "not checked", "why": why}



def full_intervals(intervals: Sequence[Mapping[str, Any]],
                   interval_s: float) -> list[Mapping[str, Any]]:
    """The measured intervals (after the warm-up) at least half an interval long: a run's last
    interval may be cut short."""
    return [iv for iv in intervals if not iv.get("warmup") and iv["duration_s"] >= interval_s / 2]

def rate_check(intervals: Sequence[Mapping[str, Any]], rate: float,
               interval_s: float) -> dict[str, Any]:
    """Open loop: each measured interval's send rate against the intended ``rate``."""
    full = full_intervals(intervals, interval_s)
    if not full:
        return _not_checked("no full measured interval")
    off, worst = [], (0.0, None)
    for iv in full:
        expected = rate * iv["duration_s"]
        dev = iv["sent"] / expected - 1 if expected > 0 else 0.0
        allowed = max(RATE_TOLERANCE, 4 / math.sqrt(expected)) if expected > 0 else 1.0
        if abs(dev) > allowed:
            off.append(iv["index"])
        if abs(dev) >= abs(worst[0]):
            worst = (dev, iv["start_s"])
    out = {"intervals": len(full), "off": off, "worst_deviation": round(worst[0], 4),
           "worst_at_s": worst[1]}
    if off:
        return {**out, "status": "fail",
                "why": f"rate not held: {len(off)} of {len(full)} intervals off the intended "
                       f"{rate:.0f}/s by more than ±{RATE_TOLERANCE:.0%} (or their count's "
                       f"Poisson noise, when wider; worst {worst[0]:+.0%} at {worst[1]:g} s)"}
    return {**out, "status": "pass",
            "why": f"every interval within ±{RATE_TOLERANCE:.0%} of {rate:.0f}/s"}


def _kpss(x: np.ndarray) -> dict[str, Any]:
    """KPSS (level) on one series: its statistic and p-value, interpolated in the table from
    1 % to 10 % (the ends when beyond it). statsmodels' ``kpss(x, regression="c",
    nlags="auto")``, operation for operation (the lags by Hobijn et al.), in numpy: importing
    statsmodels costs a run's verdict 1-2 CPU-s (tests/load/test_load_validity.py checks the
    two agree)."""
    if np.ptp(x) == 0:
        return {"constant": True, "kpss_p": 1.0}
    nobs = x.shape[0]
    resids = x - x.mean()
    lags = min(_kpss_autolag(resids, nobs), nobs - 1)
    eta = np.sum(resids.cumsum() ** 2) / (nobs**2)
    s_hat = np.sum(resids**2)
    for i in range(1, lags + 1):
        s_hat += 2 * np.dot(resids[i:], resids[: nobs - i]) * (1.0 - (i / (lags + 1.0)))
    stat = eta / (s_hat / nobs)
    p = np.interp(stat, _KPSS_CRITICAL, _KPSS_P)
    return {"kpss": round(float(stat), 4), "kpss_p": round(float(p), 4)}


#: KPSS (level) critical values at 10, 5, 2.5 and 1 % (Kwiatkowski et al. 1992, table 1).
_KPSS_CRITICAL = (0.347, 0.463, 0.574, 0.739)
_KPSS_P = (0.10, 0.05, 0.025, 0.01)


def _kpss_autolag(resids: np.ndarray, nobs: int) -> int:
    """The KPSS lags by Hobijn et al. (1998), Bartlett kernel (statsmodels' own)."""
    covlags = int(np.power(nobs, 2.0 / 9.0))
    s0 = np.sum(resids**2) / nobs
    s1 = 0
    for i in range(1, covlags + 1):
        prod = np.dot(resids[i:], resids[: nobs - i])
        prod /= nobs / 2.0
        s0 += prod
        s1 += i * prod
    s_hat = s1 / s0
    pwr = 1.0 / 3.0
    gamma_hat = 1.1447 * np.power(s_hat * s_hat, pwr)
    return int(gamma_hat * np.power(nobs, pwr))


def _adf(x: np.ndarray) -> tuple[float, float]:
    """The augmented Dickey–Fuller test's statistic and p-value (lags by AIC)."""
    # deferred: statsmodels takes 1-2 CPU-s to import; only a series KPSS rejects needs it
    from statsmodels.tsa.stattools import adfuller

    n = len(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ADF warns on tiny samples
        adf = adfuller(x, maxlag=max(0, min(int(12 * (n / 100) ** 0.25), n // 2 - 3)),
                       autolag="AIC")
    return float(adf[0]), float(adf[1])


def stationary_family(series: Mapping[str, Sequence[float]],
                      alpha: float = ALPHA_STATIONARY) -> dict[str, dict[str, Any]]:
    """Each series' KPSS and (where it matters) ADF figures and whether it is stationary, the
    family's error held at ``alpha`` by Holm's step-down on the KPSS p-values.

    A series is not stationary when KPSS rejects level stationarity at its Holm level
    (``alpha`` / m for the smallest p of m, then ``alpha`` / (m − 1), …) *and* ADF cannot
    reject a unit root at ``alpha``. (KPSS alone, on the 8 to 20 intervals of a short run,
    rejects white noise far more often than its level.) ADF is run only on a series KPSS
    rejects: elsewhere its answer cannot change the verdict."""
    xs = {k: np.asarray(x, dtype=float) for k, x in series.items()}
    out = {k: _kpss(x) for k, x in xs.items()}
    m = len(out)
    for step, k in enumerate(sorted(out, key=lambda k: out[k]["kpss_p"])):
        s = out[k]
        s["kpss_level"] = level = alpha / (m - step)
        if s["kpss_p"] >= level:
            break  # Holm stops at the first it cannot reject: this and the rest stationary
        s["adf"], s["adf_p"] = (round(v, 4) for v in _adf(xs[k]))
        s["stationary"] = s["adf_p"] < alpha
    for s in out.values():
        s.setdefault("stationary", True)
    return out


def stationarity_check(throughput: Sequence[float], p99: Sequence[float],
                       stalls: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """KPSS + ADF on the windowed throughput and p99 series (:func:`stationary_family`, the
    pair held at :data:`ALPHA_STATIONARY` together); and the engine's stalls in the
    measured run (a transient the tests on a dozen windows do not see: a stall is a run that
    was, for a while, another run)."""
    if stalls:
        worst = max(stalls, key=lambda s: s["end_s"] - s["start_s"])
        return {"status": "fail", "stalls": len(stalls),
                "why": f"not stationary: {len(stalls)} stall(s) in the measured run, the "
                       f"longest {worst['end_s'] - worst['start_s']:.2f} s from "
                       f"{worst['start_s']:.2f} s"}
    if len(throughput) < MIN_INTERVALS:
        return _not_checked(f"{len(throughput)} full measured interval(s), the tests need "
                            f"{MIN_INTERVALS} (a longer run or a shorter --interval)")
    series = stationary_family({"throughput": throughput, "p99": p99})
    bad = [k for k, s in series.items() if not s["stationary"]]
    out = {"intervals": len(throughput), **series}
    if bad:
        what = " and ".join(f"{k} (ADF {p_value(series[k]['adf_p'])}, KPSS "
                            f"{p_value(series[k]['kpss_p'])})" for k in bad)
        return {**out, "status": "fail",
                "why": f"not stationary: {what} over {len(throughput)} intervals"}
    return {**out, "status": "pass",
            "why": f"throughput and p99 stationary over {len(throughput)} intervals"}


def client_check(busy: Mapping[str, Any] | None, busy_poll_us: int = 0) -> dict[str, Any]:
    """The load threads' busy share (:func:`cachelab.load.probe.client_busy`: CPU plus
    run-queue wait over their wall time) against :data:`CLIENT_BUSY`."""
    if busy is None:
        return _not_checked("no figures of the client's threads (a run merged from agents)")
    if busy_poll_us:
        return {**busy, **_not_checked(f"busy polling ({busy_poll_us} µs) keeps the threads "
                                       "on a CPU by design")}
    share, threads = float(busy["share"]), int(busy["threads"])
    if share >= CLIENT_BUSY:
        return {**busy, "status": "fail",
                "why": f"CLIENT SATURATED: the load client's {threads} thread(s) were busy (on a "
                       f"CPU or waiting for one) {share:.0%} of their wall time: the client, "
                       "not the server, set the pace"}
    return {**busy, "status": "pass",
            "why": f"the load client's {threads} thread(s) busy {share:.0%} of their wall time"}


def late_check(sends: int, late: int, threshold_ns: int, worst_ns: int,
               client: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Open loop: the sends that left at least ``threshold_ns`` after their intended time;
    ``client`` (the client check) says whether a saturated client or full connections
    held them back."""
    if not sends:
        return _not_checked("no sends after the warm-up")
    share = late / sends
    out = {"sends": sends, "late": late, "share": round(share, 6), "threshold_ns": threshold_ns,
           "worst_ns": worst_ns}
    if share > LATE_SHARE:
        status = (client or {}).get("status")
        cause = ("the client could not keep up (saturated)" if status == "fail" else
                 f"not a saturated client (its threads were busy {client['share']:.0%} of "
                 "their wall time): its connections were full of requests the server had not "
                 "answered (--max-outstanding), or its thread woke late (a CPU busy elsewhere)"
                 if status == "pass" and client is not None else
                 "the client could not keep up, or its connections were full")
        return {**out, "status": "fail",
                "why": f"sends left late: {late} ({share:.1%}) left {threshold_ns / 1e6:g} ms or "
                       f"more after their intended time (worst {num(worst_ns / 1e6)} ms): "
                       + cause}
    return {**out, "status": "pass",
            "why": f"{late} send(s) ({share:.2%}) {threshold_ns / 1e6:g} ms or more late"}


def independence_check(blocks: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Lag-k Spearman on latencies in send order, thinning until the pairs are independent."""
    tried = []
    k = 1
    while k <= MAX_THINNING:
        xs, ys = [], []
        for _, v in blocks:
            thinned = v[::k]
            xs.append(thinned[:-1])
            ys.append(thinned[1:])
        x, y = np.concatenate(xs or [np.empty(0)]), np.concatenate(ys or [np.empty(0)])
        if len(x) < MIN_TESTED:
            break
        idx = _evenly(np.arange(len(x)))
        x, y = x[idx], y[idx]
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            return {"status": "pass", "thinning": k, "pairs": len(x),
                    "why": "latencies constant: nothing to correlate"}
        rho, p = _spearman(x, y)
        tried.append({"k": k, "rho": round(float(rho), 4), "p": float(p), "pairs": len(x)})
        if p >= ALPHA:
            return {"status": "pass", "thinning": k, "tried": tried,
                    "why": f"latencies independent at lag {k} (Spearman ρ {rho:+.3f}, "
                           f"{p_value(p)}, {len(x)} pairs)"}
        k *= 2
    if not tried:
        return _not_checked(f"too few consecutive latencies (needs {MIN_TESTED} pairs)")
    last = tried[-1]
    if k <= MAX_THINNING:  # stopped for want of pairs, not because every thinning failed
        return {**_not_checked(f"dependent up to 1 in {last['k']}, and too few consecutive "
                               f"latencies to try 1 in {k} (needs {MIN_TESTED} pairs)"),
                "tried": tried}
    return {"status": "fail", "thinning": None, "tried": tried,
            "why": f"latencies not independent: consecutive latencies correlated even 1 in "
                   f"{last['k']} apart (Spearman ρ {last['rho']:+.3f}, {p_value(last['p'])})"}


def arrivals_check(blocks: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Poisson sends, at the scale of a few sends: no batches, and counts in windows of
    :data:`WINDOW_SENDS` mean gaps whose variance is their mean.

    The gaps between sends themselves are no test of the process: one thread writes one
    request at a time (~4 µs on a VM), so sends due closer than that leave that far apart,
    and every send is moved by its own lateness (µs with ``--spin-us``), which the queueing
    figures and the ``late`` check report. Counts over windows many sends long hardly move
    with either, and a process that is not Poisson — even gaps, uniform ones, bursts — has
    counts too alike or too varied (the index of dispersion, χ² both ways)."""
    gaps = np.concatenate([np.diff(t) for t, _ in blocks] or [np.empty(0)])
    if len(gaps) < MIN_TESTED:
        return _not_checked(f"{len(gaps)} gaps between sends (needs {MIN_TESTED})")
    zeros = int((gaps <= 0).sum())
    if zeros > LATE_SHARE * len(gaps):
        return {"status": "fail", "gaps": len(gaps), "zero_gaps": zeros,
                "why": f"arrivals not Poisson: {zeros / len(gaps):.1%} of the gaps between sends "
                       "are 0 (requests left in batches)"}
    width = WINDOW_SENDS * float(gaps.mean())
    # A send half a window late or more (the client held up: the late check's business) may
    # have moved into another window with the sends it caught up with: the windows it crossed
    # are left out, and such sends counted.
    counts, held, sends = [], 0, 0
    for t, late in blocks:
        c, h = _window_counts(t, late, width, width * HELD_UP)
        counts.append(c)
        held += h
        sends += len(t)
    counts = np.concatenate(counts or [np.empty(0)])
    out = {"zero_gaps": zeros, "window_us": round(width / 1e3, 1), "held_up_sends": held}
    if held > LATE_SHARE * sends:
        return {**out, "status": "fail", "sends": sends,
                "why": f"arrivals not Poisson: {held / sends:.1%} of the sends left "
                       f"{num(width * HELD_UP / 1e3)} µs or more late, bunched after the client "
                       "was held up"}
    if len(counts) < MIN_TESTED:
        return {**out, **_not_checked(f"{len(counts)} windows of {WINDOW_SENDS} sends (needs "
                                      f"{MIN_TESTED})")}
    counts = _evenly(counts)
    d, p = _dispersion(counts)
    out = {**out, "windows": len(counts), "mean_count": round(float(counts.mean()), 3),
           "dispersion": round(d, 4), "p": p}
    if p <= ALPHA:
        way = "too alike (too even)" if d < 1 else "too varied (bursts)"
        return {**out, "status": "fail",
                "why": f"arrivals not Poisson: the sends in {num(width / 1e3)} µs windows are "
                       f"{way}: variance {num(d)}× their mean ({p_value(p)}, {len(counts)} "
                       "windows)"}
    return {**out, "status": "pass",
            "why": f"sends Poisson in {num(width / 1e3)} µs windows (variance {num(d)}× the "
                   f"mean, {p_value(p)}, {len(counts)} windows)"}


def _window_counts(t: np.ndarray, late: np.ndarray, width: float,
                   held_up: float) -> tuple[np.ndarray, int]:
    """The sends of one block (``t``, sorted, each ``late`` by so much) in whole windows of
    ``width`` from its first, but the windows a send ``held_up`` late or more may have crossed
    (from its intended time's window to its own); and how many sends those were."""
    whole = int((t[-1] - t[0]) // width) if len(t) > 1 else 0
    if whole < 1:
        return np.empty(0), 0
    at = ((t - t[0]) // width).astype(np.int64)
    counts = np.bincount(at, minlength=whole + 1)[:whole]
    keep = np.ones(whole, dtype=bool)
    held = np.flatnonzero(late >= held_up)
    for i in held:
        keep[max(0, int((t[i] - late[i] - t[0]) // width)):at[i] + 1] = False
    return counts[keep], len(held)


def _dispersion(counts: np.ndarray) -> tuple[float, float]:
    """The index of dispersion of ``counts`` (variance over mean) and its two-sided p-value:
    (n − 1)·variance/mean is χ² with n − 1 degrees of freedom for Poisson counts."""
    # deferred: scipy.special takes ~0.2 CPU-s to import; only a finished run's verdict needs it
    from scipy.special import gammainc

    n, mean = len(counts), float(counts.mean())
    d = float(counts.var(ddof=1)) / mean if mean > 0 else 0.0
    below = float(gammainc((n - 1) / 2, (n - 1) * d / 2))
    return d, min(1.0, 2 * min(below, 1 - below))


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their average (scipy's ``rankdata``, method "average")."""
    sorter = np.argsort(a, kind="mergesort")
    inv = np.empty(sorter.size, dtype=np.intp)
    inv[sorter] = np.arange(sorter.size, dtype=np.intp)
    s = a[sorter]
    obs = np.r_[True, s[1:] != s[:-1]]
    dense = obs.cumsum()[inv]
    count = np.r_[np.nonzero(obs)[0], len(obs)]
    return 0.5 * (count[dense] + count[dense - 1] + 1)


def _spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman's ρ and its two-sided p-value (Student's t with n − 2 degrees of freedom):
    scipy's ``spearmanr`` on two non-constant series, step for step, with only
    ``scipy.special`` imported (``scipy.stats`` costs ~1 CPU-s to import)."""
    # deferred: scipy.special takes ~0.2 CPU-s to import; only a finished run's verdict needs it
    from scipy.special import stdtr

    rs = np.corrcoef(np.column_stack((_ranks(x), _ranks(y))), rowvar=False)[1, 0]
    dof = len(x) - 2
    with np.errstate(divide="ignore"):
        t = rs * np.sqrt(np.clip(dof / ((rs + 1.0) * (1.0 - rs)), 0, None))
    return float(rs), float(2 * stdtr(dof, -abs(t)))


def validity(
    *, mode: str, arrivals: str | None, rate: float | None, interval_s: float,
    intervals: Sequence[Mapping[str, Any]], samples: Mapping[str, Any] | None,
    stalls: Sequence[Mapping[str, Any]] = (), warmup_s: float = 0.0,
    lateness: Mapping[str, Any] | None, late_sends: int = 0, late_threshold_ns: int = 0,
    client: Mapping[str, Any] | None = None, busy_poll_us: int = 0,
) -> dict[str, Any]:
    """The verdict of one run: ``verdict`` (VALID or INVALID), ``reasons`` (worst first),
    ``failed`` (the names of the checks that failed, worst first), ``not_checked`` and each
    check's figures (``checks``). ``samples`` is the engine's ``samples`` record (None for a
    run merged from agents: the checks that need it are not checked); ``lateness`` its
    ``send_lateness`` histogram (open loop); ``client`` the load threads' busy share
    (:func:`cachelab.load.probe.client_busy`; None: not checked)."""
    merged = "not checked: the run was merged from several agents"
    open_loop = mode == "open"
    full = full_intervals(intervals, interval_s)
    checks: dict[str, dict[str, Any]] = {}
    checks["client"] = client_check(client, busy_poll_us)
    checks["rate"] = (rate_check(intervals, float(rate), interval_s) if open_loop and rate
                      else _not_checked("closed loop: no intended rate"))
    p99 = [(iv.get("corrected") or iv["uncorrected"])["percentiles"]["99"] for iv in full]
    checks["stationary"] = stationarity_check(
        [iv["throughput"] for iv in full], p99, [s for s in stalls if s["end_s"] > warmup_s])
    if not open_loop:
        checks["late"] = _not_checked("closed loop: requests have no intended send time")
    elif samples is None or lateness is None:
        checks["late"] = _not_checked(merged)
    else:
        checks["late"] = late_check(int(samples["sends"]["offered"]), late_sends,
                                    late_threshold_ns, int(lateness["max"]),
                                    None if client is None else checks["client"])
    checks["independent"] = (independence_check(series_blocks(samples["replies"])) if samples
                             else _not_checked(merged))
    if not open_loop or arrivals != "poisson":
        checks["arrivals"] = _not_checked("closed loop" if not open_loop
                                          else f"{arrivals} arrivals asked for, not Poisson")
    else:
        checks["arrivals"] = (arrivals_check(series_blocks(samples["sends"])) if samples
                              else _not_checked(merged))
    reasons = [checks[c]["why"] for c in CHECKS if checks[c]["status"] == "fail"]
    return {
        "verdict": "INVALID" if reasons else "VALID",
        "reasons": reasons,
        "failed": [c for c in CHECKS if checks[c]["status"] == "fail"],
        # What makes the run's throughput untrustworthy (a USL point): the rate not held, or
        # the series not stationary. The other checks are about its latencies.
        "throughput_reasons": [checks[c]["why"] for c in THROUGHPUT_CHECKS
                               if checks[c]["status"] == "fail"],
        "not_checked": [f"{c}: {checks[c]['why']}" for c in CHECKS
                        if checks[c]["status"] == "not checked"],
        "checks": checks,
    }


def with_fix(v: Mapping[str, Any], i: int, more: str = "") -> str:
    """Reason ``i`` of verdict ``v``, then ``more``, then after an arrow the change that would
    fix it ("as above" when an earlier reason has the same fix; a verdict written before
    fixes existed shows the reason alone)."""
    fixes = v.get("fixes") or []
    fix = fixes[i] if i < len(fixes) else ""
    if fix and fix in fixes[:i]:
        fix = "as above"
    return v["reasons"][i] + more + (f" → {fix}" if fix else "")


def headline(v: Mapping[str, Any] | None) -> str | None:
    """The verdict as the table's first line: INVALID with its worst reason first."""
    if not v:
        return None
    if v["verdict"] == "INVALID":
        more = len(v["reasons"]) - 1
        return "INVALID: " + with_fix(v, 0, f" (and {more} more reason(s), below)"
                                      if more > 0 else "")
    # (a load.json written before a check existed has no entry for it)
    status = {c: (v["checks"].get(c) or {}).get("status") for c in CHECKS}
    checked = [c for c in CHECKS if status[c] == "pass"]
    skipped = [c for c in CHECKS if status[c] == "not checked"]
    return ("VALID: " + (", ".join(checked) or "nothing could be checked")
            + (f"; not checked: {', '.join(skipped)}" if skipped else ""))
