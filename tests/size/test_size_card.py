"""size's answer card (issue 31): the memory each target hit ratio needs and what the server's
memory gets, *predicted* (an LRU simulated on the trace), first in the table output."""

from __future__ import annotations

import json
from pathlib import Path

from test_size import _zipf_csv  # the same Zipf trace as the size tests

from cachelab.answers import PREDICTED
from cachelab.units import human_bytes, pct, times
from cards import card_of
from clitools import InProcess


def test_the_card_gives_the_memory_each_target_needs(cli: InProcess, tmp_path: Path) -> None:
    trace = _zipf_csv(tmp_path / "z.csv")
    p = cli("size", trace, "--memory", "200KB", "--hit-ratios", "30,99", "--format", "table",
            "--no-plots", "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    d = json.loads((tmp_path / "out" / "size.json").read_text())
    lines = p.stdout.splitlines()
    assert lines[0] == "answer:", p.stdout
    card = {q: value for q, (value, mark) in card_of(p.stdout).items()}
    for q, (_, mark) in card_of(p.stdout).items():
        assert mark == f"{PREDICTED} (an LRU simulated on the trace)", q
    low, high = d["targets"]
    assert low["bytes"] is not None and high["bytes"] is None, d["targets"]
    assert card["memory for 30.0 % hits"] == (f"{human_bytes(low['bytes'])} "
                                              f"({times(low['bytes'], 200_000)} the server's "
                                              "200 kB)")
    assert card["memory for 99.0 % hits"].startswith(
        f"out of reach: no size does better than {pct(d['max_hit_ratio'], 2)}")
    at = {r["multiple"]: r["hit_ratio"] for r in d["at_memory"]}
    assert card["hit ratio at the server's 200 kB"] == (
        f"{pct(at[1.0])} starting empty; twice the memory: {pct(at[2.0])}")
