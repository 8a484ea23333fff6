"""Latency profiles (cachelab.profiles): the built-in App Engine profile, saving and loading,
spec checks, and the private server's item size."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict
from pathlib import Path

import pytest

import cachelab
from cachelab import _core
from cachelab.errors import InputError, UsageError
from cachelab.profiles import LatencyProfile, ProfileSpec, item_size_for, load_profile, profile
from cachelab.servers import PrivateMemcached

SEED = (
    Path(__file__).resolve().parents[1].parent / "shared/seeds/khan-academy-profiling-memcached.md"
)

#: How far a percentile read from the built-in profile may be from the published number.
GOLDEN_TOLERANCE = 0.005


# -- the published tables, read straight from the article ---------------------------------------


def _column(header: str) -> int:
    """A column heading of the appendix tables: ``1B``, ``100KB``, ``1MB``, ``3 keys``."""
    m = re.fullmatch(r"(\d+)\s*(K|M)?B", header)
    if m:
        return int(m.group(1)) * {None: 1, "K": 1000, "M": 1000_000}[m.group(2)]
    m = re.fullmatch(r"(\d+) keys?", header)
    assert m, f"unexpected column heading {header!r} in the article"
    return int(m.group(1))


def published_tables() -> dict[str, dict]:
    """{section title: {columns, rows: {percentile: [ms per column]}, samples, caption}}."""
    if not SEED.is_file():
        pytest.skip(f"the seed article is not at {SEED}")
    text = SEED.read_text()
    tables = {}
    for title, body in re.findall(r"^### (.+?)\n(.*?)</table>", text, re.S | re.M):
        head = re.search(r"<thead>(.*?)</thead>", body, re.S)
        assert head, title
        columns = [_column(h) for h in re.findall(r"<th>([^<]*)</th>", head.group(1))[1:]]
        rows = {}
        # The article closes some row headings with </td>; accept either.
        for pct, cells in re.findall(r"<tr><th>([\d.]+)</t[hd]>(.*?)</tr>", body):
            values = [float(v) for v in re.findall(r"<td>([\d.]+)</td>", cells)]
            assert len(values) == len(columns), (title, pct)
            rows[float(pct)] = values
        caption = re.search(r"<caption>(.*?)</caption>", body, re.S)
        assert caption, title
        samples = re.search(r"over ([\d,]+) samples", caption.group(1))
        assert samples, caption.group(1)
        tables[title.strip()] = {
            "columns": columns,
            "rows": rows,
            "samples": int(samples.group(1).replace(",", "")),
            "caption": " ".join(caption.group(1).split()),
        }
    assert set(tables) == {"Fetch latency by size", "Multi-get latency"}, list(tables)
    return tables


def _compare(table: dict, cells: dict[int, cachelab.profiles.Cell]) -> list[str]:
    """Every published point that the built-in cell does not reproduce, as readable lines."""
    assert sorted(cells) == sorted(table["columns"])
    misses = []
    for pct, values in table["rows"].items():
        for column, published_ms in zip(table["columns"], values):
            (got_ns,) = cells[column].at([pct])
            got_ms = got_ns / 1e6
            error = abs(got_ms - published_ms) / published_ms
            if error > GOLDEN_TOLERANCE:
                misses.append(
                    f"{column} p{pct:g}: published {published_ms} ms, "
                    f"profile {got_ms:.3f} ms ({error:.1%} off)"
                )
    return misses


def test_appengine_2017_reproduces_the_published_get_table() -> None:
    table = published_tables()["Fetch latency by size"]
    p = load_profile("appengine-2017")
    assert p.source == "published" and p.name == "appengine-2017"
    gets = {c.value_size: c for c in p.cells_of("get")}
    assert all(c.samples == table["samples"] for c in gets.values())
    misses = _compare(table, gets)
    assert not misses, "\n".join(misses)


def test_appengine_2017_reproduces_the_published_multiget_table() -> None:
    table = published_tables()["Multi-get latency"]
    assert "1KB" in table["caption"]
    p = load_profile("appengine-2017")
    multigets = {c.keys: c for c in p.cells_of("multiget")}
    assert {c.value_size for c in multigets.values()} == {1000}
    assert all(c.samples == table["samples"] for c in multigets.values())
    misses = _compare(table, multigets)
    assert not misses, "\n".join(misses)


def test_appengine_2017_has_only_the_published_operations() -> None:
    p = load_profile("appengine-2017")
    assert {c.op for c in p.cells} == {"get", "multiget"}
    assert p.floor is None
    assert p.problems() == {}
    # Each histogram holds as many values as the cell says, and the table percentiles match it.
    for c in p.cells:
        assert _core.hist_summary(c.histogram)["count"] == c.samples
        assert c.percentiles["50"] == c.at([50.0])[0]


# -- save and load ------------------------------------------------------------------------------


TINY = ProfileSpec(samples=20, warmup=2, sizes=(1, 1000), key_counts=(1, 3))


@pytest.fixture(scope="module")
def measured(memcached: PrivateMemcached) -> LatencyProfile:
    spec = ProfileSpec(**asdict(TINY))
    return profile(spec, server=memcached.address)


def test_measured_profile_has_every_cell(measured: LatencyProfile) -> None:
    assert [(c.op, c.value_size, c.keys) for c in measured.cells] == [
        ("floor", 0, 0),
        ("get", 1, 1), ("get", 1000, 1),
        ("set", 1, 1), ("set", 1000, 1),
        ("multiget", 1000, 1), ("multiget", 1000, 3),
    ]
    for c in measured.cells:
        assert c.samples == 20
        assert _core.hist_summary(c.histogram)["count"] == 20
    assert measured.problems() == {}
    assert measured.run["leftover_keys"] == 0


def test_save_and_load_round_trip(measured: LatencyProfile, tmp_path: Path) -> None:
    path = measured.save(tmp_path / "profile.json")
    for where in (path, str(path), tmp_path):  # a file, its name, or its directory
        back = load_profile(where)
        assert [asdict(c) for c in back.cells] == [asdict(c) for c in measured.cells]
        assert back.to_dict() == measured.to_dict()
        points = [5.0, 50.0, 99.0, 99.9, 100.0]
        assert [c.at(points) for c in back.cells] == [c.at(points) for c in measured.cells]


def test_rank_sequence_ranks_each_sample_within_its_cell_in_the_order_taken(
    tmp_path: Path,
) -> None:
    from cachelab.profiles import TierCell, rank_sequence, tier_profile

    a = TierCell("get", 100, ["k"], latencies=[10, 30, 20, 40])
    b = TierCell("get", 1000, ["k"], latencies=[5, 5])
    # Taken as: a10 b5 a30 | a20 b5 a40 — mid-ranks: 10 is the lowest of four (1/8), 5 ties
    # both of b's samples (1/2), 30 the third (5/8), 20 the second (3/8), 40 the top (7/8).
    seq = rank_sequence([a, b], [[(0, 10), (1, 5), (0, 30)], [(0, 20), (1, 5), (0, 40)]])
    assert seq["ranks"] == [0.125, 0.5, 0.625, 0.375, 0.5, 0.875]
    assert seq["segments"] == [3, 3]
    # Kept in the profile, and read back.
    cells = [a, b]
    p = tier_profile(cells, address="x", version="1", client={}, started=0.0,
                              sequence=[[(0, 10), (1, 5), (0, 30)], [(0, 20), (1, 5), (0, 40)]])
    back = load_profile(p.save(tmp_path / "p.json"))
    assert back.sequence == p.sequence and back.sequence["ranks"] == seq["ranks"]
    # A steady climb is perfectly correlated from one sample to the next.
    c = TierCell("get", 1, ["k"], latencies=list(range(1, 101)))
    assert rank_sequence([c], [[(0, v) for v in range(1, 101)]])["lag1"] == 1.0


def test_builtin_round_trips_too(tmp_path: Path) -> None:
    original = load_profile("appengine-2017")
    back = load_profile(original.save(tmp_path / "p.json"))
    assert back.to_dict() == original.to_dict()
    assert back.published == original.published


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def _without(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


def _first_cell(doc: dict, change) -> dict:
    return {**doc, "cells": [change(doc["cells"][0])]}


MALFORMED = {
    "wrong schema": lambda d: {**d, "schema": "cachelab.load-result"},
    "no schema": lambda d: _without(d, "schema"),
    "wrong version": lambda d: {**d, "schema_version": 2},
    "version as text": lambda d: {**d, "schema_version": "1"},
    "no cells": lambda d: _without(d, "cells"),
    "cells not a list": lambda d: {**d, "cells": {"get": d["cells"][0]}},
    "cell without histogram": lambda d: _first_cell(d, lambda c: _without(c, "histogram")),
    "cell without op": lambda d: _first_cell(d, lambda c: _without(c, "op")),
    "cell with bad samples": lambda d: _first_cell(d, lambda c: {**c, "samples": "many"}),
    "cell not an object": lambda d: {**d, "cells": [1]},
    "sequence rank of 1": lambda d: {**d, "sequence": {"ranks": [0.5, 1.0], "segments": [2]}},
    "sequence segments short": lambda d: {**d, "sequence": {"ranks": [0.5, 0.2],
                                                            "segments": [1]}},
    "sequence without ranks": lambda d: {**d, "sequence": {"segments": [1]}},
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_profile_is_an_input_error_naming_the_file(
    measured: LatencyProfile, tmp_path: Path, case: str
) -> None:
    path = _write(tmp_path, MALFORMED[case](measured.to_dict()))
    with pytest.raises(InputError) as err:
        load_profile(path)
    assert str(path) in str(err.value), str(err.value)


def test_a_corrupt_histogram_is_an_input_error_naming_the_file(
    measured: LatencyProfile, tmp_path: Path
) -> None:
    doc = measured.to_dict()
    doc["cells"][1]["histogram"] = "bm90IGEgaGlzdG9ncmFt"  # base64 of "not a histogram"
    path = _write(tmp_path, doc)
    with pytest.raises(InputError) as err:
        p = load_profile(path)
        p.cells[1].at([50.0])  # at the latest when it is used
    assert str(path) in str(err.value), str(err.value)


def test_invalid_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    path.write_text('{\n "schema": "cachelab.latency-profile",\n\n "cells": [,]\n}\n')
    with pytest.raises(InputError, match=re.escape(f"{path}:4")):
        load_profile(path)
    path.write_text("[1, 2, 3]\n")
    with pytest.raises(InputError, match=re.escape(str(path))):
        load_profile(path)


def test_a_missing_file_names_it_and_the_builtins(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(InputError) as err:
        load_profile(missing)
    assert str(missing) in str(err.value) and "appengine-2017" in str(err.value)
    with pytest.raises(InputError, match=re.escape(str(tmp_path))):
        load_profile(tmp_path)  # a directory without a profile.json


# -- ProfileSpec.check ------------------------------------------------------------------------

BAD_SPECS = [
    ({"protocol": "binary"}, "protocol"),
    ({"samples": 0}, "samples"),
    ({"samples": -5}, "samples"),
    ({"warmup": -1}, "warm-up"),
    ({"concurrency": 0}, "concurrency"),
    ({"concurrency": 1025}, "concurrency"),
    ({"sizes": (), "key_counts": ()}, "nothing to measure"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": -1.0}, "timeout"),
    ({"timeout": 3601}, "timeout"),
    ({"timeout": math.nan}, "timeout"),
    ({"timeout": math.inf}, "timeout"),
    ({"connect_timeout": 0}, "connect-timeout"),
    ({"give_up_after": 0}, "give-up-after"),
]


@pytest.mark.parametrize(("fields", "named"), BAD_SPECS, ids=[str(f) for f, _ in BAD_SPECS])
def test_check_refuses_bad_fields(fields: dict, named: str) -> None:
    with pytest.raises(UsageError, match=re.escape(named)):
        ProfileSpec(**fields).check()


def test_check_accepts_the_defaults_and_quick() -> None:
    ProfileSpec().check()
    quick = ProfileSpec.quick()
    quick.check()
    assert (quick.samples, quick.warmup) == (500, 20)
    assert ProfileSpec.quick(samples=7).samples == 7
    ProfileSpec(sizes=(), key_counts=(1,)).check()  # multi-get only
    ProfileSpec(sizes=(1,), key_counts=()).check()  # get and set only


ENGINE_REFUSES = [
    {"sizes": (0,)},
    {"key_counts": (0,)},
    {"sizes": (2**30 + 1,)},
    {"key_counts": (10_001,)},
]


@pytest.mark.parametrize("fields", ENGINE_REFUSES, ids=[str(f) for f in ENGINE_REFUSES])
def test_check_refuses_what_the_engine_refuses(
    memcached: PrivateMemcached, fields: dict
) -> None:
    """A spec check() lets through must not be refused later by the engine (by then a private
    server may have been started for it, or have failed to start with a misleading error)."""
    spec = ProfileSpec(samples=1, warmup=0, **fields)
    with pytest.raises(UsageError):
        profile(spec, server=memcached.address)  # the engine refuses it...
    with pytest.raises(UsageError):
        spec.check()  # ...so check() must too


# -- the private server's item size ---------------------------------------------------------------

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"sizes": (1, 1000, 1_000_000)}, None),  # the default sizes fit the default 1m
        ({"sizes": (MIB - 4096,)}, None),  # the largest that leaves room for the item header
        ({"sizes": (MIB - 4095,)}, "2m"),
        ({"sizes": (MIB,)}, "2m"),
        ({"sizes": (2 * MIB,)}, "4m"),
        ({"sizes": (3_000_000,)}, "4m"),
        ({"sizes": (1,), "multi_value_size": 2_000_000}, "2m"),  # multi-get values count too
        ({"sizes": (1,), "multi_value_size": 2_000_000, "key_counts": ()}, None),  # unless unused
    ],
)
def test_item_size_for(fields: dict, expected: str | None) -> None:
    assert item_size_for(ProfileSpec(**fields)) == expected


def _store(address: str, size: int) -> bool:
    with _core.Client(address, timeout=5) as c:
        key = f"cachelab-test:item-size:{size}"
        try:
            stored = c.set(key, b"x" * size)
        except cachelab.errors.ServerReplyError:  # SERVER_ERROR object too large for cache
            return False
        got = c.get(key)
        c.delete(key)
        return stored and got is not None and len(got) == size


def test_item_size_for_matches_what_memcached_stores(memcached: PrivateMemcached) -> None:
    # Values item_size_for says fit do fit a default server...
    fits = MIB - 4096
    assert item_size_for(ProfileSpec(sizes=(fits,))) is None
    assert _store(memcached.address, fits)
    # ...and a value it sizes a server for does not fit a default one, but fits that server.
    big = MIB
    item_size = item_size_for(ProfileSpec(sizes=(big,)))
    assert item_size is not None
    assert not _store(memcached.address, big)
    with PrivateMemcached(item_size_max=item_size) as server:
        assert _store(server.address, big)
