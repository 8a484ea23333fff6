"""simulate's answer card (issue 31): the best strategy and what it saves against no cache, with
the draws' bands and the model named; a flat trace's miss ratio per policy and size and the best
policy; a failure drill's dips — every line *predicted*."""

from __future__ import annotations

import json
from pathlib import Path

from cachelab.answers import PREDICTED
from cachelab.simulate.answers import request_answers
from cachelab.simulate.drill import DrillPrediction
from cachelab.units import dur, pct, share
from cards import card_of
from clitools import InProcess

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"


def test_the_card_names_the_best_strategy_and_what_it_saves(cli: InProcess,
                                                            tmp_path: Path) -> None:
    p = cli("simulate", "--quick", "--requests", "2000", "--strategies", "none,lru:100,fixed:100",
            "--format", "table", "--no-plots", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("answer:"), p.stdout[:300]
    d = json.loads((tmp_path / "o" / "simulate.json").read_text())
    by = {s["strategy"]: s for s in d["strategies"]}

    def p90(s: dict) -> float:
        return next(b["median"] for b in s["percentiles"] if b["percentile"] == 90.0)

    best = min(d["strategies"], key=p90)["strategy"]
    assert best != "none"
    got = card_of(p.stdout)
    value, mark = got["best strategy"]
    assert mark == f"{PREDICTED} (model appengine-2017)"
    saved = by["none"]["mean_added_ms"]["median"] - by[best]["mean_added_ms"]["median"]
    assert value.startswith(f"{best} saves {dur(saved * 1e6)} per request against no cache")
    assert "from the draws' bands: " in value  # 3 draws: a band
    assert value.endswith(f"{dur(by[best]['mean_added_ms']['median'] * 1e6)} added instead of "
                          f"{dur(by['none']['mean_added_ms']['median'] * 1e6)}")
    value, mark = got["p90 added, best"]
    assert value.startswith(f"+{share(p90(by[best]))}") and "min–max of 3 draws: " in value
    assert f"no cache +{share(p90(by['none']))}" in value
    assert mark.startswith(PREDICTED)


def test_the_flat_card_gives_each_policys_miss_ratio_and_the_best(cli: InProcess,
                                                                  tmp_path: Path) -> None:
    # 1,000 keys: at 1,000 objects every policy holds them all and they tie.
    p = cli("simulate", DATA / "zipf_1.0.txt", "--policies", "fifo,lru", "--sizes", "100,1000",
            "--format", "table", "--no-plots", "--out", tmp_path / "o")
    assert p.returncode == 0, p.stderr
    d = json.loads((tmp_path / "o" / "simulate.json").read_text())
    miss = {(r["policy"], r["capacity"]): r["miss_ratio"] for r in d["results"]}
    assert miss[("lru", 100)] < miss[("fifo", 100)]
    got = card_of(p.stdout)
    value, mark = got["miss ratio at 100 objects"]
    assert value == f"lru {pct(miss[('lru', 100)], 2)}, fifo {pct(miss[('fifo', 100)], 2)}"
    assert mark == f"{PREDICTED} (simulated on the trace)"
    assert "miss ratio at 1,000 objects" in got
    # The tie at 1,000 is nobody's win.
    assert got["best policy"][0] == "lru: the lowest miss ratio at 1 of 2 size(s)"


def test_a_drill_prediction_s_card_gives_each_dip() -> None:
    pred = DrillPrediction(
        created="now", source="load.json", distribution="ketama", interval_s=1.0, events=[],
        intervals=[], dips=[{"event": "remove 127.0.0.1:1 at 5 s", "at_s": 5.0,
                             "measured": 24.0, "predicted": {"ketama": 25.5, "modula": 60.0},
                             "difference": 1.5}])
    [a] = pred.answers()
    assert a.question == "hit-ratio dip, remove 127.0.0.1:1 at 5 s" and a.trust == PREDICTED
    assert a.value == ("measured 24.0 points; predicted (ketama) 25.5 points (+1.5 from the "
                       "measurement); the least dip: ketama 25.5 points")


def _strategy(name: str, added_ms: float, p50: float, p90: float) -> dict:
    def band(v: float) -> dict:
        return {"median": v, "low": v, "high": v}  # one draw: no band

    return {"strategy": name, "draws": 1, "band": "min-max", "mean_added_ms": band(added_ms),
            "percentiles": [{**band(p50), "percentile": 50.0}, {**band(p90), "percentile": 90.0}],
            "round_trips_per_request": 1.0}


def test_a_measured_model_is_named_and_one_draw_has_no_band() -> None:
    d = {"model": {"name": "memcached 1.6 at 10.0.0.5:11211"}, "spec": {"draws": 1},
         "strategies": [_strategy("none", 20.0, 0.1, 0.5), _strategy("lru:10", 5.0, 0.0, 0.1)]}
    best, p50, p90 = request_answers(d)
    assert best.why == "model: measured profile memcached 1.6 at 10.0.0.5:11211"
    assert best.value == "lru:10 saves 15 ms per request against no cache, 5 ms added instead " \
                         "of 20 ms"
    assert p90.value == "+10.0% of the base latency; no cache +50.0%"
