"""The latency profile (cachelab.profile.model, .loader): a measured one holds every cell,
saves and loads back, and a malformed file is an input error naming it."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.errors import InputError
from cachelab.profile import LatencyProfile, ProfileSpec, load_profile, profile
from cachelab.servers import PrivateMemcached

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



# -- its files and tables -----------------------------------------------------------------------


def test_write_puts_the_json_the_csv_and_the_figures_in_the_directory(
    measured: LatencyProfile, tmp_path: Path
) -> None:
    out = tmp_path / "new" / "dir"
    written = measured.write(out, plots=False)
    assert written == [out / "profile.json", out / "profile.csv"]
    assert load_profile(out).to_dict() == measured.to_dict()
    rows = (out / "profile.csv").read_text().splitlines()
    assert rows[0].startswith("op,value_size,keys,samples,errors,mismatches,misses,p5_ns,")
    assert rows[0].endswith(",p99.9_ns,max_ns") and len(rows) == 1 + len(measured.cells)
    figures = {p.name for p in measured.write(out)} - {"profile.json", "profile.csv"}
    assert figures == {f"{base}.{ext}" for base in ("get-by-size", "set-by-size",
                                                    "multiget-by-keys") for ext in ("png", "svg")}


def test_render_prints_the_header_the_floor_and_a_table_per_operation(
    measured: LatencyProfile,
) -> None:
    text = measured.render()
    first = text.splitlines()[0]
    assert first.startswith(f"memcached {measured.server['version']} at ")
    assert "text protocol, 1 connection(s), 20 samples per cell after 2 warm-up" in first
    assert re.search(r"^loopback floor \(mn on the measuring connection\): p50 .*p99 .*max ",
                     text, re.M)
    for title in ("Get latency by value size", "Set latency by value size",
                  "Multi-get latency by key count, 1KB values"):
        assert title in text
    assert len(re.findall(r"^p50/floor ", text, re.M)) == 3
    published = load_profile("appengine-2017").render()
    assert published.startswith("appengine-2017: Ben Kraft")
    assert "p50/floor" not in published and "Set latency" not in published
