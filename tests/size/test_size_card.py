"""size's answer card (issue 31): the memory each target hit ratio needs and what the server's
memory gets, *predicted* (an LRU simulated on the trace), first in the table output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cachelab.answers import PREDICTED
from cachelab.units import human_bytes, pct, times
from clitools import InProcess


def _zipf_csv(path: Path, requests: int = 20_000, keys: int = 4_000) -> Path:
    rng = np.random.default_rng(3)
    p = np.arange(1, keys + 1, dtype=float) ** -0.8
    p /= p.sum()
    picks = rng.choice(keys, size=requests, p=p)
    sizes = 100 + (np.arange(keys) * 7919) % 4000
    lines = ["time,key,size"] + [f"{i // 100},{k},{sizes[k]}" for i, k in enumerate(picks)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_card_gives_the_memory_each_target_needs(cli: InProcess, tmp_path: Path) -> None:
    trace = _zipf_csv(tmp_path / "z.csv")
    p = cli("size", trace, "--memory", "200KB", "--hit-ratios", "30,99", "--format", "table",
            "--no-plots", "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    d = json.loads((tmp_path / "out" / "size.json").read_text())
    lines = p.stdout.splitlines()
    assert lines[0] == "answer:", p.stdout
    card = {}
    for line in lines[1:lines.index("")]:
        question, rest = line.strip().split("  ", 1)
        value, mark = rest.strip().rsplit(" — ", 1)
        card[question] = value.strip()
        assert mark == f"{PREDICTED} (an LRU simulated on the trace)", line
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
