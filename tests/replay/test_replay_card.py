"""replay's answer card (issue 31): each strategy's measured added time with its 95 % interval
against the prediction — how far off, inside the interval or not — the best strategy measured
against no cache, and whether the replay confirms the prediction; certified only when the
measurement's own checks pass. Built from result objects: a replay takes tens of seconds."""

from __future__ import annotations

from typing import Any

from cachelab.answers import CERTIFIED, INDICATIVE
from cachelab.replay.result import ReplayResult


def _strategy(name: str, measured: dict[str, float], predicted: dict[str, float], *,
              differ: int = 0) -> dict[str, Any]:
    added = {k: {"measured": m, "predicted": predicted[k],
                 "error": (predicted[k] - m) / m, "measured_ci95": [0.9 * m, 1.1 * m]}
             for k, m in measured.items()}
    worst = max(abs(a["error"]) for a in added.values())
    return {"strategy": name, "added_ms": added, "within_tolerance": worst <= 0.15,
            "checks": {"hit_ratio": {"measured": 0.5, "predicted": 0.5},
                       "round_trips_per_request": {"measured": 2.0, "predicted": 2.0},
                       "round_trips_differ_in_requests": differ, "loader_keys": 0,
                       "errors": 0}}


def _result(*strategies: dict[str, Any], busy: bool = False) -> ReplayResult:
    return ReplayResult(
        created="now", trace={"evaluated": 500}, spec={}, server={"address": "x"}, profile={},
        strategies=list(strategies),
        machine={"others_cores": 1.5 if busy else 0.0, "steal_cores": 0.0, "cores": 2,
                 "busy": busy},
        run={"elapsed_s": 10.0, "cancelled": False, "aborted": None})


NONE = _strategy("none", {"50": 2.0, "90": 8.0, "99": 20.0}, {"50": 2.1, "90": 7.6, "99": 21.0})
FIXED = _strategy("fixed:100", {"50": 0.5, "90": 1.0, "99": 4.0},
                  {"50": 0.52, "90": 1.05, "99": 3.9})


def test_a_replay_that_confirms_its_prediction_is_certified() -> None:
    by = {a.question: a for a in _result(NONE, FIXED).answers()}
    best = by["best strategy (lowest p90)"]
    assert best.value == ("fixed:100: p90 1 ms added per request (predicted 1.05 ms) against "
                          "no cache's 8 ms (predicted 7.6 ms)")
    assert best.trust == CERTIFIED
    fixed = by["added, fixed:100"]
    assert fixed.value.startswith("p50 500 µs (95 % 450 µs–550 µs), predicted 520 µs: +4.0 %, "
                                  "inside its interval; p90 1 ms (95 % 900 µs–1.1 ms)")
    assert fixed.trust == CERTIFIED
    assert by["added, none"].value.split("; ")[1].endswith("-5.0 %, inside its interval")
    confirms = by["replay confirms the prediction"]
    assert confirms.value.startswith("yes: every strategy within ±15 %")
    assert confirms.trust == CERTIFIED


def test_a_failed_check_or_a_busy_machine_makes_the_card_indicative() -> None:
    off = _strategy("lru:100", {"50": 1.0, "90": 2.0, "99": 5.0},
                    {"50": 1.5, "90": 2.1, "99": 5.1}, differ=3)
    by = {a.question: a for a in _result(NONE, off).answers()}
    lru = by["added, lru:100"]
    assert "predicted 1.5 ms: +50.0 %, outside its interval" in lru.value
    assert (lru.trust, lru.why) == (INDICATIVE, "round trips differ from the simulator's in "
                                                "3 request(s)")
    assert by["added, none"].trust == CERTIFIED  # its own checks passed
    confirms = by["replay confirms the prediction"]
    assert confirms.value.startswith("NO: prediction off by more than 15 %: lru:100 p50")
    assert confirms.trust == INDICATIVE
    busy = {a.question: a for a in _result(NONE, FIXED, busy=True).answers()}
    assert all(a.trust == INDICATIVE and a.why.startswith("machine busy: 1.50 of 2 cores")
               for a in busy.values())
