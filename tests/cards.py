"""Reading an answer card (:mod:`cachelab.answers`) back from what a user sees."""

from __future__ import annotations

import re
from typing import Any

from cachelab.scale import ScaleSpec
from cachelab.scale.result import ScaleResult
from cachelab.scale.sweep import _result

__all__ = ["POINTS", "card_of", "fake_sweep", "invalid_load", "without_card", "x_of"]

#: The loads of :func:`fake_sweep`.
POINTS = [1, 2, 4, 6, 8, 10, 12, 16]


def card_of(stdout: str) -> dict[str, tuple[str, str]]:
    """The first card in ``stdout``, by question: (value, trust mark with its reason)."""
    lines = stdout.splitlines()
    start = lines.index("answer:")
    out = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        question, rest = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        value, mark = rest.rsplit("  — ", 1)
        out[question] = (value, mark)
    return out


def invalid_load(cli: Any, address: str, out: Any) -> Any:
    """``cachelab load`` certain to be INVALID: one request in flight at 200,000/s, so sends
    leave late (``cli``: a :class:`clitools.InProcess`)."""
    return cli("load", "--server", address, "--rate", "200000", "--connections", "1",
               "--max-outstanding", "1", "--duration", "1", "--warmup", "0.25",
               "--key-space", "100", "--format", "table", "--no-plots", "--out", out)


def without_card(text: str) -> str:
    """``text`` without its answer card and its "what to trust:" block (the "answer:" line,
    the block's, their indented lines and the blank line after them): the headline, then the
    table's own lines."""
    lines = text.splitlines()
    if "answer:" not in lines:
        return text
    start = lines.index("answer:")
    end = start + 1
    while end < len(lines) and (lines[end].startswith("  ") or lines[end] == "what to trust:"):
        end += 1
    if end < len(lines) and not lines[end].strip():
        end += 1
    return "\n".join(lines[:start] + lines[end:])


def x_of(n: int) -> float:
    """A clean USL curve peaking at N ≈ 9.9."""
    return 1000 * n / (1 + 0.02 * (n - 1) + 0.01 * n * (n - 1))


def _run(n: int, x: float, rep: int, *, saturated: bool, stalled: bool) -> dict[str, Any]:
    """A run as the sweep records it, with the verdict chosen: the client saturated (its
    latencies INVALID), or a stall (its throughput INVALID)."""
    failed = (["client"] if saturated else []) + (["stationary"] if stalled else [])
    reasons = (["CLIENT SATURATED"] if saturated else []) + (
        ["not stationary: 1 stall(s)"] if stalled else [])
    return {"n": n, "repeat": rep, "throughput": x, "latency": {"histogram": None},
            "errors": 0, "lost": 0, "steady_reached": True,
            "verdict": "INVALID" if reasons else "VALID", "invalid_reasons": reasons,
            "failed_checks": failed,
            "throughput_reasons": ["not stationary: 1 stall(s)"] if stalled else []}


def fake_sweep(saturated_from: int | None = None, repeats: int = 2, bootstrap: int = 200,
               stalled_from: int | None = None, scale: float = 1.0,
               points: list[int] | None = None) -> ScaleResult:
    """A sweep's result from the sweep's own result builder over made-up runs on
    :func:`x_of` (× ``scale``; repeat r 1 % above the first): the verdicts are chosen, not
    measured."""
    pts = points or POINTS
    runs = [_run(n, scale * x_of(n) * (1 + 0.01 * rep), rep,
                 saturated=saturated_from is not None and n >= saturated_from,
                 stalled=stalled_from is not None and n >= stalled_from)
            for rep in range(repeats) for n in pts]
    return _result(ScaleSpec(points=pts, repeats=repeats, bootstrap=bootstrap), runs,
                   {"address": "x"})
