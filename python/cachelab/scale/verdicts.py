"""A sweep's verdicts in words: which runs' throughput was left out of the fit, and at which
N the latencies are INVALID and why (the load verdicts' checks, docs/load.md "Validity")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachelab.load.validity import SHORT, THROUGHPUT_CHECKS

__all__ = ["latency_failures", "latency_verdict", "scale_fix", "series_name", "verdict_lines"]


def latency_failures(run: Mapping[str, Any]) -> list[str]:
    """Why a run's latencies are INVALID, in a few words each (:data:`SHORT`), worst first:
    the checks it failed besides its throughput's; empty when they passed."""
    if run.get("verdict") != "INVALID":
        return []
    if "failed_checks" in run:
        return [SHORT[c] for c in run["failed_checks"] if c not in THROUGHPUT_CHECKS]
    # (a sweep saved before runs named their failed checks)
    extra = len(run.get("invalid_reasons") or []) > len(run.get("throughput_reasons") or [])
    return ["INVALID"] if extra else []


def latency_verdict(runs: list[dict[str, Any]], n: int) -> str:
    """The latencies at ``n`` in a word: "VALID" when every run's passed their checks, else
    what failed ("client saturated"; "not independent (1/2)" when some runs passed); "-" for
    a sweep saved before verdicts existed."""
    at = [r for r in runs if r["n"] == n]
    if not any("verdict" in r for r in at):
        return "-"
    failed = [f for f in (latency_failures(r) for r in at) if f]
    if not failed:
        return "VALID"
    labels = ", ".join(sorted({label for f in failed for label in f}, key=_worst_first))
    return labels if len(failed) == len(at) else f"{labels} ({len(failed)}/{len(at)})"


def verdict_lines(spec: Mapping[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    """The verdicts' headline: how many runs were INVALID for their throughput (left out of
    the fit, or kept by ``--keep-invalid``), and at which N the latencies are INVALID and why
    — their percentiles are shown, but nothing certifies them."""
    lines = []
    bad = [r for r in runs if r["throughput"] > 0 and r.get("throughput_reasons")]
    if bad:
        what = ("kept in the fit (--keep-invalid)" if spec.get("keep_invalid")
                else "left out of the fit")
        lines.append(f"{len(bad)} of {len(runs)} run(s) INVALID for their throughput, {what}: "
                     f"N = {_ns(r['n'] for r in bad)} (reasons in the notes) → "
                     + scale_fix(bad[-1], spec.get("window")))
    at: dict[str, set[int]] = {}
    for r in runs:
        for label in latency_failures(r):
            at.setdefault(label, set()).add(r["n"])
    if at:
        worst = [r for r in runs if latency_failures(r)][-1]
        lines.append("latencies INVALID (percentiles shown, not certified): " + "; ".join(
            f"{label} at N = {_ns(at[label])}" for label in sorted(at, key=_worst_first))
            + " → " + scale_fix(worst, spec.get("window"), latency=True))
    return lines


def scale_fix(run: Mapping[str, Any], window: float | None, *, latency: bool = False) -> str:
    """The change that would make an INVALID run of a sweep valid, in the sweep's own flags:
    its load verdict's fix when that is to quiet the machine; more client machines when the
    client set the pace (one box cannot both load memcached and measure it); a longer
    ``--window`` when the series drifted. ``latency``: for its latency checks."""
    failed = [c for c in run.get("failed_checks") or []
              if not latency or c not in THROUGHPUT_CHECKS]
    fixes = run.get("fixes") or {}
    for c in failed:
        if str(fixes.get(c) or "").startswith("quiet the machine"):
            return str(fixes[c])
    first = failed[0] if failed else None
    if first in ("client", "late", "independent", "arrivals"):
        return ("more client machines (`--ray ray://HEAD:10001`), or fewer connections "
                "(`--points` up to where the client kept up)")
    if first == "stationary":
        return (f"a longer `--window {2 * window:g}`" if window else "a longer `--window`") + \
            " on a quiet machine"
    return "run the sweep again on a quiet machine"


def series_name(row: Mapping[str, Any]) -> str:
    """A summary row's name in the latency figures: "N = 4", with its latencies' verdict
    when they are not VALID ("N = 4 (INVALID: client saturated)")."""
    verdict = row["latency"].get("verdict")
    return f"N = {row['n']}" + ("" if verdict in (None, "VALID", "-") else
                                f" (INVALID: {verdict})")


def _worst_first(label: str) -> int:
    """A failed check's place in the order of the checks (worst first); unnamed ones last."""
    order = list(SHORT.values())
    return order.index(label) if label in order else len(order)


def _ns(ns: Any) -> str:
    """Loads in order without repeats: "1, 2, 4"."""
    return ", ".join(str(n) for n in sorted(set(ns)))
