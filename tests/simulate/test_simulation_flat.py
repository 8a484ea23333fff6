"""Flat-trace simulation through the Python API and the Rust binding."""

from __future__ import annotations

import csv
import struct
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.errors import InputError, UsageError
from cachelab.simulate.flat import (
    load_trace,
    miss_ratio_curve,
    policies,
    resolve_sizes,
    simulate_flat,
)
from cachelab.simulate.flat_run import FlatSimulateSpec, simulate_flat_trace

TRACES = Path(__file__).parents[1] / "data" / "traces"
CP_BIN = TRACES / "cloudPhysicsIO.oracleGeneral.bin"
ZIPF = TRACES / "zipf_1.0.txt"


def test_golden_lru_and_fifo_through_the_binding() -> None:
    # libCacheSim cachesim (tests/data/traces/README.md), printed with %.4f.
    sim = simulate_flat(ZIPF, policies=["lru", "fifo"], sizes=[10, 100, 300], threads=2)
    got = {(r.policy, r.capacity): f"{r.miss_ratio:.4f}" for r in sim.results}
    assert got == {
        ("lru", 10): "0.7894",
        ("lru", 100): "0.4247",
        ("lru", 300): "0.2298",
        ("fifo", 10): "0.8177",
        ("fifo", 100): "0.4802",
        ("fifo", 300): "0.2756",
    }


def test_fractional_sizes_use_the_working_set_like_cachesim() -> None:
    t = load_trace(CP_BIN)
    assert resolve_sizes(t, [0.001, 0.01, 0.1], "bytes") == [2029769, 20297697, 202976972]
    assert resolve_sizes(t, [0.001, 0.01, 0.1, 7], "objects") == [48, 489, 4897, 7]
    sim = simulate_flat(t, policies=["lru"], sizes=[0.001], unit="bytes")
    (r,) = sim.results
    assert (f"{r.miss_ratio:.4f}", f"{r.byte_miss_ratio:.4f}") == ("0.8512", "0.9837")
    assert sim.trace is None and r.unit == "bytes" and r.requests == 113_872


def test_bad_line_error_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("time,key,size\n1,2,3\n1,2,-4\n")
    with pytest.raises(InputError, match=r"bad\.csv:3: negative size"):
        load_trace(p)


def test_truncated_binary_names_the_offset(tmp_path: Path) -> None:
    p = tmp_path / "t.bin"
    p.write_bytes(struct.pack("<IQIq", 1, 2, 3, -1) + b"\0" * 7)
    with pytest.raises(InputError, match=r"t\.bin: byte 24: truncated record"):
        simulate_flat(p)


def test_usage_errors() -> None:
    t = load_trace(ZIPF)
    with pytest.raises(UsageError, match="unknown policy"):
        simulate_flat(t, policies=["nope"], sizes=[1])
    with pytest.raises(UsageError, match="unit"):
        simulate_flat(t, sizes=[1], unit="pages")
    with pytest.raises(UsageError):
        simulate_flat(t, sizes=[1.5])
    with pytest.raises(UsageError, match="format"):
        load_trace(ZIPF, format="parquet")
    with pytest.raises(UsageError, match="sample_rate"):
        miss_ratio_curve(t, sample_rate=0.0)


def test_trace_methods_round_trip(tmp_path: Path) -> None:
    t = load_trace(CP_BIN)
    assert len(t) == 113_872
    info = t.inspect()
    assert (info["unique_keys"], info["working_set_bytes"]) == (48_974, 2_029_769_728)
    ids = struct.unpack(f"<{len(t)}Q", t.ids_bytes())
    sizes = struct.unpack(f"<{len(t)}I", t.sizes_bytes())
    times = struct.unpack(f"<{len(t)}I", t.times_bytes())
    first = struct.unpack_from("<IQI", CP_BIN.read_bytes(), 0)
    assert (times[0], ids[0], sizes[0]) == first
    out = tmp_path / "copy.oracleGeneral.bin"
    t.write(str(out))
    assert out.read_bytes() == CP_BIN.read_bytes()
    made = _core.FlatTrace.from_arrays(list(ids[:10]), list(sizes[:10]))
    assert len(made) == 10


def test_curve_matches_simulation_and_writes_csv(tmp_path: Path) -> None:
    curve = miss_ratio_curve(ZIPF, sizes=[10, 100, 300])
    sim = simulate_flat(ZIPF, policies=["lru"], sizes=[10, 100, 300])
    assert curve.exact and curve.capacities == (10, 100, 300)
    assert list(curve.miss_ratios) == [r.miss_ratio for r in sim.results]
    p = curve.write_csv(tmp_path / "mrc.csv")
    with p.open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["capacity"]) for r in rows] == [10, 100, 300]
    q = sim.write_csv(tmp_path / "sim.csv")
    with q.open() as f:
        assert next(csv.DictReader(f))["policy"] == "lru"
    assert sim.to_dict()["results"][0]["capacity"] == 10


def test_policies_come_from_the_registry() -> None:
    names = policies()
    assert {"lru", "fifo", "lfu", "arc", "s3fifo", "sieve", "belady"} <= set(names)


def test_plot_writes_png_and_svg(tmp_path: Path) -> None:
    from cachelab.simulate.plots import miss_ratio_plot

    sim = simulate_flat(ZIPF, policies=["lru", "s3fifo"], sizes=[10, 30, 100, 300])
    curve = miss_ratio_curve(ZIPF, points=20)
    png, svg = miss_ratio_plot(sim, curve, title="zipf 1.0", out_base=tmp_path / "p" / "mrc")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text()
    assert "cachelab-series-1" in text and "cachelab-mrc" in text


def test_a_flat_run_writes_every_artifact_and_renders_its_tables(tmp_path: Path) -> None:
    spec = FlatSimulateSpec(policies=("lru", "fifo"), sizes=(10, 100, 0.5), unit="bytes",
                            mrc=True, shards=0.5)
    result = simulate_flat_trace(ZIPF, spec)
    d = result.to_dict()
    assert d["mode"] == "flat" and d["policies"] == ["lru", "fifo"]
    assert d["capacities"][:2] == [10, 100] and d["mrc"]["sample_rate"] == 0.5
    written = result.write(tmp_path / "o")
    assert sorted(p.name for p in written) == [
        "simulate-byte-miss-ratio.png", "simulate-byte-miss-ratio.svg", "simulate-miss-ratio.png",
        "simulate-miss-ratio.svg", "simulate-mrc.csv", "simulate.csv", "simulate.json"]
    text = result.render()
    assert text.startswith(f"{ZIPF}: 1,000,000 requests")
    assert "Miss ratio (byte miss ratio) by capacity in bytes" in text
    assert "LRU miss-ratio curve (SHARDS, rate 0.5" in text
    names = [p.name for p in simulate_flat_trace(ZIPF, FlatSimulateSpec(
        policies=("lru",), sizes=(10,))).write(tmp_path / "q", plots=False)]
    assert names == ["simulate.json", "simulate.csv"]


def test_a_flat_spec_refuses_what_cannot_run() -> None:
    for spec, needle in ((FlatSimulateSpec(policies=("mru",)), "mru"),
                         (FlatSimulateSpec(policies=()), "none given"),
                         (FlatSimulateSpec(shards=0.0), "shards must be a number above 0"),
                         (FlatSimulateSpec(threads=-1), "threads must be a whole number from 0")):
        with pytest.raises(UsageError, match=needle):
            spec.check()
