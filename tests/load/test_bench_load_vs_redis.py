"""benches/load_vs_redis.py's pure parts against the real redis-benchmark: its ``--csv`` output
parsed, and its ``key:__rand_int__`` keys named as the bench prefills them (so the peer's gets
hit). No timing is asserted."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
import load_vs_redis  # noqa: E402

BENCH = shutil.which("redis-benchmark")
pytestmark = pytest.mark.skipif(BENCH is None, reason="redis-benchmark is not installed")


def _bench(redis, *args: str) -> str:
    argv = [BENCH, "-h", "127.0.0.1", "-p", str(redis.port), "-a", redis.password, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout


def test_parse_csv_reads_redis_benchmarks_gets(redis):
    rows = load_vs_redis.parse_csv(_bench(redis, "-t", "get", "-n", "200", "-c", "2", "-d",
                                          "100", "-r", "10", "--csv"))
    assert set(rows) == {"GET"}
    assert rows["GET"]["rps"] > 0
    assert rows["GET"]["p99_latency_ms"] >= rows["GET"]["p50_latency_ms"] >= 0


def test_parse_csv_refuses_other_output():
    with pytest.raises(ValueError, match="not redis-benchmark CSV"):
        load_vs_redis.parse_csv("GET: 1234.5 requests per second\n")


def test_bench_key_names_redis_benchmarks_random_keys(redis):
    # 300 SETs over 3 random numbers: each drawn with near certainty ((2/3)^300 to miss one).
    _bench(redis, "-t", "set", "-n", "300", "-c", "1", "-d", "1", "-r", "3", "-q")
    with redis.client() as c:
        assert c.unlink(*(load_vs_redis.bench_key(i) for i in range(3))) == 3
        assert c.dbsize() == 0
