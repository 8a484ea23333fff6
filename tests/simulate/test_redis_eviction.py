"""The simulator's Redis policies against the real redis-server: a Zipf trace replayed into
private servers (allkeys-lru and allkeys-lfu, three sizes each) as a look-aside cache, paced
so that Redis's second-resolution LRU clock ticks, and the servers' own keyspace hit ratio
(INFO stats) next to the simulated one on the same requests and the same clock
(tests/redisreplay.py); and the memory model that turns ``maxmemory`` into a capacity,
against figures measured on Redis 7.0.15."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.simulate.flat import simulate_flat
from cachelab.simulate.redis_memory import (
    capacity_keys,
    dataset_bytes,
    jemalloc_size,
    key_bytes,
    table_bytes,
)
from clitools import InProcess
from redisreplay import Target, replay, zipf_ids

needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="redis-server is not installed")

#: Capacities in keys, each of the two policies at each.
SIZES = (500, 1500, 4000)
#: The bound the test holds the simulation to (the bench reports the actual differences
#: against the issue's goal of 1 point; the sampling is random on both sides).
POINTS = 3.0


@needs_redis
@pytest.mark.slow
def test_simulated_hit_ratio_matches_redis_server_at_three_sizes() -> None:
    n, rate = 14_000, 1_000.0
    ids = zipf_ids(n, keys=10_000, alpha=0.9, seed=11)
    targets = [Target(policy, keys) for policy in ("allkeys-lru", "allkeys-lfu")
               for keys in SIZES]
    run = replay(targets, ids, key_len=8, value_len=1000, rate=rate)
    # The replay kept its pace: the clock it recorded spans the run.
    assert run.times[-1] - run.times[0] >= n / rate - 2
    trace = _core.FlatTrace.from_arrays(ids.tolist(), [1] * n, run.times.tolist())
    sim = simulate_flat(trace, ["redis-lru", "redis-lfu"], list(SIZES), "objects")
    simulated = {(r.policy, r.capacity): 1 - r.miss_ratio for r in sim.results}
    report = []
    for t in targets:
        assert t.hits + t.misses == n, (t.policy, t.hits, t.misses)
        assert t.answered_hits == t.hits  # the script's answers are the server's count
        assert t.evicted > 0, f"{t.policy} at {t.keys} keys never evicted"
        # The memory model: the keys the server held under maxmemory (14 fewer in the bench's
        # runs: the client's buffers vary by some 15 kB), within 8 %.
        assert abs(t.held - t.keys) <= 0.08 * t.keys, (t.policy, t.keys, t.held)
        got = simulated[("redis-" + t.policy.split("-")[1], t.keys)]
        report.append(f"{t.policy} {t.keys}: server {t.hit_ratio:.4f} simulated {got:.4f}")
        assert abs(got - t.hit_ratio) * 100 <= POINTS, "; ".join(report)


def test_key_bytes_are_what_redis_7_measured() -> None:
    # used_memory per key, less the hash table's 8 B a bucket, for 5,000 keys set on
    # redis-server 7.0.15 (jemalloc 5.3): (key length, value length) -> bytes.
    measured = {(8, 10): 80, (8, 40): 112, (8, 45): 128, (8, 100): 176, (8, 500): 576,
                (8, 1000): 1088, (8, 4000): 4160, (16, 10): 96, (16, 500): 592,
                (40, 10): 112, (40, 45): 160, (40, 4000): 4192}
    for (k, v), b in measured.items():
        assert key_bytes(k, v) == b, (k, v)
    assert [jemalloc_size(n) for n in (1, 9, 24, 129, 257, 1006, 4006, 5000)] == \
        [8, 16, 32, 160, 320, 1024, 4096, 5120]
    assert table_bytes(5000) == 8 * 8192 and table_bytes(4096) == 8 * 4096
    assert key_bytes(8, 10, ttl=True) == 80 + 32
    # The most keys under a limit, the table's step included.
    limit = 964_000 + dataset_bytes(1500, 8, 1000)
    assert capacity_keys(limit, 8, 1000) == 1500
    assert capacity_keys(limit - 1, 8, 1000) == 1499
    assert capacity_keys(100, 8, 1000) == 0


def test_cli_runs_the_redis_policies(cli: InProcess, tmp_path: Path) -> None:
    lines = ["time,key,size"] + [f"{1_700_000_000 + i // 50},{(i * 7919) % 97 % (1 + i % 13)},1"
                                 for i in range(3000)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    p = cli("simulate", "t.csv", "--policies", "lru,redis-lru,redis-lfu,redis-random",
            "--sizes", "5,20", "--no-plots", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert {r["policy"] for r in doc["results"]} == {"lru", "redis-lru", "redis-lfu",
                                                     "redis-random"}
    assert all(0 < r["miss_ratio"] < 1 for r in doc["results"])
