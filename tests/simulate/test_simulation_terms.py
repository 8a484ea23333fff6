"""simulate's two tables count the same requests: the strategies table and "Where the
predicted memcached time goes" show the same round trips and KB per request, and
simulate.json's ``terms.per_request`` holds the counts the strategy's own fields hold (a term in
ms shares its name with the column it counts; the ms once overwrote the counts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachelab.simulate import SimulateSpec, simulate, simulate_file
from cachelab.traces import SynthParams, save_request_trace, synthesize
from clitools import InProcess

STRATEGIES = "none,lru:100,fixed:100+prefetch-children,lru:200+prefetch:depth=2"


def tables(text: str) -> list[dict[str, dict[str, str]]]:
    """Every table in ``text`` whose header starts with ``strategy``: per strategy, its cells by
    column name. Columns are found from the rule under the header (runs of dashes), not from
    their positions."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines[:-1]):
        rule = lines[i + 1]
        if not line.startswith("strategy") or not rule.startswith("-"):
            continue
        spans, start = [], None
        for j, ch in enumerate(rule + " "):
            if ch == "-" and start is None:
                start = j
            elif ch != "-" and start is not None:
                spans.append((start, j))
                start = None
        names = [line[a:b].strip() for a, b in spans]
        rows = {}
        for row in lines[i + 2:]:
            if not row.strip():
                break
            cells = dict(zip(names, (row.ljust(spans[-1][1])[a:b].strip() for a, b in spans)))
            rows[cells["strategy"]] = cells
        found.append(rows)
    return found


def test_both_tables_and_the_json_count_the_same_round_trips_and_bytes(
        cli: InProcess, tmp_path: Path) -> None:
    p = cli("trace", "synth", "--requests", "3000", "t.jsonl", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    p = cli("simulate", "t.jsonl", "--strategies", STRATEGIES, "--draws", "2", "--no-plots",
            "--format", "table", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads((tmp_path / "o" / "simulate.json").read_text())
    found = tables(p.stdout)
    assert len(found) >= 2, p.stdout
    strategies, terms = found[0], next(t for t in found[1:] if "prefetched/req" in
                                       next(iter(t.values())))
    assert list(strategies) == list(terms) == STRATEGIES.split(",")
    for s in d["strategies"]:
        name, per, counts = s["strategy"], s["terms"]["per_request"], s["counts"]
        n = counts["requests"]
        assert n > 0
        # The result object: the terms' counts are the strategy's.
        assert per["round_trips"] == pytest.approx(s["round_trips_per_request"], rel=1e-12)
        assert per["kb"] == pytest.approx(s["bytes_per_request"] / 1000, rel=1e-12)
        assert per["multiget_keys"] == pytest.approx(counts["multiget_keys"] / n, rel=1e-12)
        assert per["l1_hits"] == pytest.approx(counts["l1_hits"] / n, rel=1e-12)
        assert per["prefetch_hits"] == pytest.approx(counts["prefetch_hits"] / n, rel=1e-12)
        # The rendered text: both tables show those numbers.
        rt, kb = f"{s['round_trips_per_request']:.2f}", f"{s['bytes_per_request'] / 1000:.1f}"
        assert (strategies[name]["RT/req"], strategies[name]["KB/req"]) == (rt, kb), name
        assert (terms[name]["RT/req"], terms[name]["KB/req"]) == (rt, kb), name
    none = d["strategies"][0]
    assert none["round_trips_per_request"] > 1 and none["bytes_per_request"] > 0


def test_the_terms_counts_past_the_exact_limit_are_the_strategys(tmp_path: Path) -> None:
    """Past the exact limit the terms' means come from running sums: the counts' sums apart
    from the terms' (ms), the same numbers the whole trace in memory gives."""
    trace = synthesize(SynthParams(requests=6000, seed=5))
    path = save_request_trace(trace, tmp_path / "t.parquet")
    spec = SimulateSpec(strategies=("none", "lru:200+prefetch:depth=2"), draws=1)
    whole = simulate(trace, spec).to_dict()
    parts = simulate_file(path, spec, exact_limit=400).to_dict()
    assert "from histograms" in parts["trace"]["percentiles"]
    for a, b in zip(parts["strategies"], whole["strategies"]):
        for s in (a, b):
            per = s["terms"]["per_request"]
            assert per["round_trips"] == pytest.approx(s["round_trips_per_request"], rel=1e-9)
            assert per["kb"] == pytest.approx(s["bytes_per_request"] / 1000, rel=1e-9)
        assert a["terms"]["per_request"] == pytest.approx(b["terms"]["per_request"], rel=1e-9)
        for name, ms in a["terms"]["ms"].items():
            assert ms["mean"] == pytest.approx(b["terms"]["ms"][name]["mean"], rel=1e-9,
                                               abs=1e-12)
        assert a["terms"]["share"] == pytest.approx(b["terms"]["share"], rel=1e-9, abs=1e-12)
