"""The built-in profiles (cachelab.profile.builtin): App Engine's, 2017, reproduces the
published tables and survives a save and load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cachelab import _core
from cachelab.profile import Cell, load_profile

SEED = (
    Path(__file__).resolve().parents[2].parent / "shared/seeds/khan-academy-profiling-memcached.md"
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



def _compare(table: dict, cells: dict[int, Cell]) -> list[str]:
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



def test_builtin_round_trips_too(tmp_path: Path) -> None:
    original = load_profile("appengine-2017")
    back = load_profile(original.save(tmp_path / "p.json"))
    assert back.to_dict() == original.to_dict()
    assert back.published == original.published
