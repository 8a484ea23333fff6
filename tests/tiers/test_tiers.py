"""``cachelab tiers``: every method reads back the data it stored, sizes make sense, the seed's
findings are checked and reported, and the CLI writes its artifacts."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from cachelab import tiers as lib
from cachelab.cli import run as cli
from cachelab.errors import UsageError
from cachelab.servers import PrivateMemcached
from cachelab.tiered import ValueFormat
from cachelab.tiers.stores import PostgresStore

SMALL = dict(reads=3, warmup=1, record_bytes=5_000, list_items=50)


def test_every_method_and_shape(memcached: PrivateMemcached) -> None:
    spec = lib.TiersSpec(**SMALL)
    result = lib.tiers(spec, server=memcached.address)
    methods = {(r["shape"], r["method"]) for r in result.rows}
    for shape in lib.SHAPES:
        for m in ("store", "memcached raw", "memcached + msgpack", "memcached + msgpack + zlib",
                  "memcached + msgpack + zstd", "memcached + msgpack + lz4", "memory ready",
                  "memory + msgpack", "memory + msgpack + zlib"):
            assert (shape, m) in methods
    for r in result.rows:
        assert r["reads"] == 3 and r["wall_p50_us"] > 0
    plain = result.row("record", "memcached + msgpack")["stored_bytes"]
    assert plain > 5_000 * 0.9
    for comp in ("zlib", "zstd", "lz4"):
        assert result.row("record", f"memcached + msgpack + {comp}")["stored_bytes"] < plain
    assert [f["claim"] for f in result.findings] and all(
        isinstance(f["reproduces"], bool) for f in result.findings)
    text = lib.render(result)
    assert "memory ready" in text and "findings" in text


def test_data_shapes_match_the_seed() -> None:
    record, items = lib.make_data(lib.TiersSpec())
    assert 58_000 <= len(record["body"]) + len(record["title"]) <= 61_000
    assert len(items) == 1_000
    per_item = len(ValueFormat("msgpack").encode(items).data) / len(items)
    assert 80 <= per_item <= 130


@pytest.mark.parametrize("bad", [
    dict(reads=0), dict(codec="yaml"), dict(compressions=("snappy",)), dict(record_bytes=10),
])
def test_bad_specs_are_usage_errors(bad: dict) -> None:
    with pytest.raises(UsageError):
        lib.TiersSpec(**bad).check()


def test_cli_writes_table_json_csv_and_chart(
    memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t"
    code = cli(["tiers", "--reads", "2", "--quick", "--server", memcached.address,
                "--out", str(out), "--format", "json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "cachelab.tiers" and doc["store"] == "sqlite"
    for name in ("tiers.json", "tiers.csv", "tiers.png", "tiers.svg"):
        assert (out / name).stat().st_size > 0


def test_cli_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["tiers", "--compressions", "snappy", "--no-plots"]) == 2
    assert "snappy" in capsys.readouterr().err


def test_dsn_without_psycopg_is_a_usage_error(
    memcached: PrivateMemcached, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    with pytest.raises(UsageError, match="psycopg"):
        lib.tiers(lib.TiersSpec(**SMALL, dsn="postgresql://nowhere"), server=memcached.address)


# -- PostgreSQL as the store: a private cluster (tests/privatepg.py) or CACHELAB_TEST_PG_DSN --


def _schemas(dsn: str) -> set[str]:
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(dsn) as db:
        rows = db.execute("SELECT schema_name FROM information_schema.schemata").fetchall()
    return {r[0] for r in rows if r[0].startswith("cachelab_tiers_")}


def test_postgresql_store_reads_back_what_it_stored(postgresql_dsn: str) -> None:
    pytest.importorskip("psycopg")
    spec = lib.TiersSpec(**SMALL, dsn=postgresql_dsn)
    record, items = lib.make_data(spec)
    before = _schemas(postgresql_dsn)
    store = PostgresStore(postgresql_dsn, record, items)
    try:
        assert len(_schemas(postgresql_dsn) - before) == 1
        assert store.read_record() == record
        expected = sorted((i for i in items if i["post"] == 1), key=lambda i: i["id"])
        assert expected and store.read_list() == expected
    finally:
        store.close()
    assert _schemas(postgresql_dsn) == before  # its schema is dropped


def test_cli_with_a_postgresql_store(
    memcached: PrivateMemcached, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    postgresql_dsn: str,
) -> None:
    pytest.importorskip("psycopg")
    before = _schemas(postgresql_dsn)
    code = cli(["tiers", "--reads", "2", "--quick", "--server", memcached.address,
                "--dsn", postgresql_dsn, "--out", str(tmp_path / "t"), "--format", "json",
                "--no-plots"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["store"] == "postgresql"
    assert {r["method"] for r in doc["rows"] if r["shape"] == "list"} >= {"store", "memory ready"}
    assert _schemas(postgresql_dsn) == before


def test_unreachable_postgresql_is_a_usage_error(memcached: PrivateMemcached) -> None:
    pytest.importorskip("psycopg")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dsn = f"postgresql://nobody@127.0.0.1:{port}/none?connect_timeout=2"
    with pytest.raises(UsageError, match="cannot connect to PostgreSQL"):
        lib.tiers(lib.TiersSpec(**SMALL, dsn=dsn), server=memcached.address)
