"""`cachelab size` for a Redis: Redis's own eviction simulated at each size (``--policy``),
and memory counted as Redis counts it (``--accounting redis``: bytes per key, the hash table
and the empty server's baseline), so a memory compares with ``maxmemory``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cachelab.errors import UsageError
from cachelab.simulate.flat import simulate_flat
from cachelab.simulate.redis_memory import BASELINE, key_bytes, table_bytes
from cachelab.size.sizing import SizeSpec, size
from clitools import InProcess


def _zipf_csv(path: Path, requests: int = 12_000, keys: int = 2_000, value: int = 1000) -> Path:
    rng = np.random.default_rng(5)
    p = np.arange(1, keys + 1, dtype=float) ** -0.9
    p /= p.sum()
    picks = rng.choice(keys, size=requests, p=p)
    lines = ["time,key,size"] + [f"{1_700_000_000 + i // 200},{k},{value}"
                                 for i, k in enumerate(picks)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_redis_memory_and_policy_at_maxmemory(tmp_path: Path) -> None:
    trace = _zipf_csv(tmp_path / "z.csv")
    keys = len({line.split(",")[1] for line in trace.read_text().splitlines()[1:]})
    # Exactly what Redis needs for every key of the trace: 8-byte keys, 1,000-byte values
    # (1,088 B a key), the hash table, the empty server.
    full = BASELINE + keys * key_bytes(8, 1000) + table_bytes(keys)
    r = size(SizeSpec(trace=str(trace), memory=full, hit_ratios=(0.5,), policy="redis-lru",
                      accounting="redis", key_length=8))
    at = {row["multiple"]: row["hit_ratio"] for row in r.at_memory}
    assert r.policy == "redis-lru" and r.accounting == "redis"
    assert at[1.0] == pytest.approx(r.max_hit_ratio, abs=1e-12)   # everything fits
    assert at[0.5] < at[1.0] - 0.05
    # Half the memory holds what redis-lru holds in the bytes left once the baseline and the
    # table are paid: fewer keys than half the working set.
    half_keys = (full // 2 - BASELINE) // key_bytes(8, 1000)
    sim = simulate_flat(str(trace), ["redis-lru"], [int(half_keys)], "objects").results[0]
    assert at[0.5] == pytest.approx(1 - sim.miss_ratio, abs=0.02)
    # Counting value bytes only, the same memory holds everything and more.
    v = size(SizeSpec(trace=str(trace), memory=full // 2, hit_ratios=(0.5,),
                      policy="redis-lru"))
    assert {row["multiple"]: row["hit_ratio"] for row in v.at_memory}[1.0] > at[0.5]
    # The memory a target needs is the maxmemory: at least the baseline above the keys.
    need = r.targets[0]["bytes"]
    assert need is not None and BASELINE < need < full


def test_cli_size_for_redis_and_its_errors(cli: InProcess, tmp_path: Path) -> None:
    _zipf_csv(tmp_path / "z.csv")
    p = cli("size", "z.csv", "--policy", "redis-lfu", "--accounting", "redis", "--memory",
            "1500KB", "--hit-ratios", "40", "--no-plots", "--out", "o", "--format", "table",
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    first = next(line for line in p.stdout.splitlines() if line.startswith("cache size"))
    assert "Redis's memory per key" in first and "redis-lfu simulated" in first
    doc = json.loads((tmp_path / "o" / "size.json").read_text())
    assert doc["policy"] == "redis-lfu" and doc["spec"]["key_length"] == 16
    for bad, words in ((["--policy", "nope"], "--policy 'nope'"),
                       (["--policy", "redis-lru", "--shards", "0.1"], "--shards")):
        p = cli("size", "z.csv", *bad, "--no-plots", "--out", "x", cwd=tmp_path)
        assert p.returncode == 2 and words in p.stderr, p.stderr
    with pytest.raises(UsageError, match="accounting"):
        SizeSpec(trace="z.csv", accounting="bytes").check()
