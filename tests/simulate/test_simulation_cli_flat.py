"""``cachelab simulate`` on flat key traces: libCacheSim's published miss ratios through the
CLI, sizes as shares of the working set, artifacts, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachelab.errors import UsageError
from cachelab.simulate.flat_run import parse_sizes
from clitools import InProcess, one_error_line

DATA = Path(__file__).parents[1] / "data" / "traces"






# libCacheSim (commit aa0fc40) on zipf_1.0.txt, capacity in objects: tests/data/traces/README.md
ZIPF_GOLDEN = {10: (0.7894, 0.8177), 100: (0.4247, 0.4802), 300: (0.2298, 0.2756)}


def test_cli_reproduces_libcachesim_on_the_zipf_trace(cli: InProcess, tmp_path: Path) -> None:
    p = cli("simulate", DATA / "zipf_1.0.txt", "--policies", "lru,fifo",
            "--sizes", "10,100,300", "--mrc", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["mode"] == "flat" and doc["trace"]["requests"] == 1_000_000
    got = {(r["policy"], r["capacity"]): r["miss_ratio"] for r in doc["results"]}
    for size, (lru, fifo) in ZIPF_GOLDEN.items():
        assert round(got[("lru", size)], 4) == lru
        assert round(got[("fifo", size)], 4) == fifo
    # LRU's stack property: the one-pass curve never rises with capacity.
    ratios = doc["mrc"]["miss_ratios"]
    assert len(ratios) > 10 and all(b <= a for a, b in zip(ratios, ratios[1:]))
    for name in ("simulate.json", "simulate.csv", "simulate-mrc.csv",
                 "simulate-miss-ratio.png", "simulate-miss-ratio.svg"):
        assert (tmp_path / "o" / name).stat().st_size > 0, name


def test_cli_sizes_as_shares_of_the_working_set(cli: InProcess, tmp_path: Path) -> None:
    p = cli("simulate", DATA / "cloudPhysicsIO.csv", "--policies", "lru",
            "--sizes", "0.1%,1%,10%", "--no-plots", "--out", "o", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    # 48,974 unique objects: libCacheSim's 48 / 489 / 4897 (and its LRU 0.9030 / 0.8380 / 0.8049)
    assert doc["capacities"] == [48, 489, 4897]
    assert [round(r["miss_ratio"], 4) for r in doc["results"]] == [0.9030, 0.8380, 0.8049]


def test_parse_sizes() -> None:
    assert parse_sizes("10, 1Ki,0.5%") == [10, 1024, 0.005]
    for bad in ("", "0%", "150%", "x%", "-3"):
        with pytest.raises(UsageError):
            parse_sizes(bad)
    # The unit named is --unit's: objects by default, not bytes.
    with pytest.raises(UsageError, match="at least 1 object$"):
        parse_sizes("0")
    with pytest.raises(UsageError, match="is not a number of objects"):
        parse_sizes("1.5")
    with pytest.raises(UsageError, match="at least 1 byte$"):
        parse_sizes("0", "bytes")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--policies", "lru,mru"], "mru"),
        (["--strategies", "none"], "--strategies"),
        (["--shards", "0.1"], "--shards"),
        (["--sizes", "200%"], "200%"),
        (["--sizes", "0"], "at least 1 object"),
        (["--sizes", "0", "--unit", "bytes"], "at least 1 byte"),
    ],
)
def test_cli_bad_options_end_in_one_line(
        cli: InProcess, tmp_path: Path, args: list[str], needle: str) -> None:
    p = cli("simulate", DATA / "zipf_1.0.txt", *args, "--out", "o", cwd=tmp_path)
    assert p.returncode == 2
    assert needle in one_error_line(p)


def test_cli_malformed_flat_trace_names_file_and_line(cli: InProcess, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("time,key,size\n1,a,10\n2,b,-5\n")
    p = cli("simulate", bad, "--out", "o", cwd=tmp_path)
    assert p.returncode == 2
    line = one_error_line(p)
    assert "bad.csv:3" in line
    assert not (tmp_path / "o").exists()
