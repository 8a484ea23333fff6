"""`cachelab size`: the memory for a hit ratio, checked against the LRU simulator (an
independent code path from the stack-distance curve, itself golden-tested against
libCacheSim), the reachable maximum, and a real capture's prediction against what the server
did."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cachelab import _core
from cachelab.servers import PrivateMemcached
from cachelab.simulate.flat import simulate_flat
from cachelab.size.sizing import SizeSpec, size
from cachelab.traces.capture import CaptureSpec, capture
from cachelab.units import human_bytes, pct, times
from clitools import InProcess


def _zipf_csv(path: Path, requests: int = 20_000, keys: int = 4_000, seed: int = 3) -> Path:
    rng = np.random.default_rng(seed)
    p = np.arange(1, keys + 1, dtype=float) ** -0.8
    p /= p.sum()
    picks = rng.choice(keys, size=requests, p=p)
    sizes = 100 + (np.arange(keys) * 7919) % 4000       # a fixed size per key
    lines = ["time,key,size"] + [f"{i // 100},{k},{sizes[k]}" for i, k in enumerate(picks)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _lru_hit(trace: Path, capacity: int) -> float:
    r = simulate_flat(str(trace), ["lru"], [capacity], "bytes", threads=1).results[0]
    return 1 - r.miss_ratio


def test_the_memory_for_a_hit_ratio_is_the_least_that_reaches_it(tmp_path: Path) -> None:
    trace = _zipf_csv(tmp_path / "z.csv")
    r = size(SizeSpec(trace=str(trace), hit_ratios=(0.5, 0.7), memory=2_000_000))
    for t in r.targets:
        assert t["bytes"] is not None
        need, (lo, hi) = int(t["bytes"]), t["bracket"]
        assert hi == need and lo < need
        # The LRU simulator agrees: the answer reaches the target, the bracket's low end not.
        assert _lru_hit(trace, need) >= t["hit_ratio"]
        assert _lru_hit(trace, int(lo)) < t["hit_ratio"]
        assert (hi - lo) / hi < 0.05          # refined to within a few percent
    # Hit ratios at multiples of the memory equal the simulator's.
    for row in r.at_memory:
        assert row["hit_ratio"] == pytest.approx(_lru_hit(trace, int(row["bytes"])), abs=1e-12)


def test_a_target_beyond_the_first_access_misses_is_out_of_reach(tmp_path: Path) -> None:
    trace = _zipf_csv(tmp_path / "z.csv")
    r = size(SizeSpec(trace=str(trace), hit_ratios=(0.99,)))
    info = _core.FlatTrace.load(str(trace), "csv").inspect()
    assert r.max_hit_ratio == pytest.approx(1 - info["unique_keys"] / info["requests"])
    assert r.max_hit_ratio < 0.99 and r.targets[0]["bytes"] is None
    assert "out of reach" in r.render()


def test_the_cli_writes_its_artifacts_and_refuses_bad_targets(
        cli: InProcess, tmp_path: Path) -> None:
    trace = _zipf_csv(tmp_path / "z.csv")
    p = cli("size", trace, "--memory", "1MB", "--hit-ratios", "60,80", "--out",
            tmp_path / "out", "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["schema"] == "cachelab.size" and [t["hit_ratio"] for t in d["targets"]] == [0.6, 0.8]
    assert {f.name for f in (tmp_path / "out").iterdir()} >= {"size.json", "size.csv", "size.png"}
    small = cli("size", trace, "--hit-ratios", "0.5%,0.9", "--format", "json", "--out",
                tmp_path / "small")
    assert small.returncode == 0, small.stderr
    assert [t["hit_ratio"] for t in json.loads(small.stdout)["targets"]] == [0.005, 0.9]
    bad = cli("size", trace, "--hit-ratios", "150")
    assert bad.returncode == 2 and "--hit-ratios" in bad.stderr
    wrong = cli("size", trace, "--accounting", "memcached")
    assert wrong.returncode == 2 and "capture" in wrong.stderr


def test_a_capture_predicts_what_the_server_did(tmp_path: Path) -> None:
    """A look-aside zipf workload against an 8 MB memcached that must evict: the prediction at
    the server's memory, counted as memcached counts memory, lands close to the hit ratio the
    server had, and closer than counting value bytes only."""
    path = tmp_path / "z.capture.parquet"
    with PrivateMemcached(memory_mb=8, threads=2) as mc:
        done = threading.Event()
        holder: dict[str, object] = {}
        t = threading.Thread(target=lambda: holder.setdefault(
            "r", capture(CaptureSpec(mc.address, duration=60), path, stop=done.is_set)))
        t.start()
        time.sleep(0.3)
        rng = np.random.default_rng(1)
        p = np.arange(1, 10_001, dtype=float) ** -0.9
        p /= p.sum()
        value = b"v" * 2000
        with _core.Client(mc.address) as c:
            for k in rng.choice(10_000, size=20_000, p=p):
                key = f"z:{int(k)}"
                if c.get(key) is None:
                    c.set(key, value)
                if int(k) % 50 == 0:
                    time.sleep(0)            # let the capture keep up
        time.sleep(0.3)
        done.set()
        t.join(20)
    mem = size(SizeSpec(trace=str(path), hit_ratios=(0.5,)))
    val = size(SizeSpec(trace=str(path), hit_ratios=(0.5,), accounting="value"))
    assert mem.accounting == "memcached" and mem.memory == 8 * 2**20
    k, kv = mem.check, val.check
    assert k is not None and kv is not None
    observed = k["observed"]
    assert 0.3 < observed < 0.9                                       # it did evict
    assert abs(observed - k["predicted_warm"]) < 0.015, k
    assert abs(observed - k["predicted_warm"]) < abs(observed - kv["predicted_warm"])


def test_the_table_opens_with_the_answers_and_the_advice(cli: InProcess, tmp_path: Path) -> None:
    """Before the tables: the memory each target needs against the server's, what the
    server's memory gets, and what doubling and halving it would — numbers as the tables
    show them."""
    trace = _zipf_csv(tmp_path / "z.csv")
    p = cli("size", trace, "--memory", "200KB", "--hit-ratios", "30,99", "--format", "table",
            "--no-plots", "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    d = json.loads((tmp_path / "out" / "size.json").read_text())
    lines = p.stdout.splitlines()
    table = next(i for i, line in enumerate(lines) if line.split() == ["hit", "ratio",
                                                                       "memory", "needed"])
    need = next(line for line in lines[:table] if line.startswith("Memory for a hit ratio:"))
    low, high = d["targets"]
    assert low["bytes"] is not None and high["bytes"] is None, d["targets"]
    assert (f"30.0 % needs {human_bytes(low['bytes'])} "
            f"({times(low['bytes'], 200_000)} the server's)") in need
    assert "99.0 % is out of reach" in need and pct(d["max_hit_ratio"], 2) in need
    at = {r["multiple"]: r["hit_ratio"] for r in d["at_memory"]}
    advice = next(line for line in lines[:table] if line.startswith("At the server's 200 kB"))
    assert f"an LRU gets {pct(at[1.0])} starting empty" in advice
    assert (f"Doubling it to 400 kB gives {pct(at[2.0])} "
            f"({100 * (at[2.0] - at[1.0]):+.1f} points); halving it to 100 kB, "
            f"{pct(at[0.5])}.") in advice
