"""Request traces converted part by part: the same files as the whole-trace writers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cachelab.errors import InputError
from cachelab.traces import SynthParams, load_request_trace, save_request_trace, synthesize
from cachelab.traces.stream import PART_MULTIPLE, convert_in_parts, open_request_parts


def test_conversion_in_parts_writes_what_the_whole_trace_writes(tmp_path: Path) -> None:
    trace = synthesize(SynthParams(requests=2 * PART_MULTIPLE + 300, seed=8))
    whole = save_request_trace(trace, tmp_path / "whole.jsonl")
    counts = convert_in_parts(whole, tmp_path / "p.parquet", "jsonl", "parquet",
                              part_requests=PART_MULTIPLE)
    assert counts == {"requests": len(trace), "items": trace.n_items,
                      "touches": trace.n_touches}
    assert load_request_trace(tmp_path / "p.parquet").equals(trace)
    convert_in_parts(tmp_path / "p.parquet", tmp_path / "back.jsonl", "parquet", "jsonl",
                     part_requests=PART_MULTIPLE)
    assert (tmp_path / "back.jsonl").read_bytes() == whole.read_bytes()


def test_a_bad_line_in_a_later_part_leaves_nothing_written(tmp_path: Path) -> None:
    trace = synthesize(SynthParams(requests=PART_MULTIPLE + 50, seed=8))
    src = save_request_trace(trace, tmp_path / "t.jsonl")
    lines = src.read_text().splitlines()
    bad = 1 + trace.n_items + PART_MULTIPLE + 10  # a request line in the second part
    lines[bad] = lines[bad].replace('"base_ms":', '"base_ms":-')
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        convert_in_parts(src, tmp_path / "out.parquet", "jsonl", "parquet",
                         part_requests=PART_MULTIPLE)
    assert f"line {bad + 1}" in str(e.value) and "base_ms" in str(e.value)
    assert not (tmp_path / "out.parquet").exists()


# -- Parquet item names, read dictionary-encoded ------------------------------------------


def _rewritten(src: Path, edit=None, **write) -> Path:
    """``src``'s requests written again with ``write``'s options (row groups that parts cross,
    plain pages), the table changed by ``edit`` first."""
    table = pq.read_table(src / "requests.parquet")
    pq.write_table(edit(table) if edit else table, src / "requests.parquet", **write)
    return src


@pytest.mark.parametrize("write", [dict(row_group_size=3000),
                                   dict(row_group_size=5000, use_dictionary=False)],
                         ids=["row groups across parts", "plain pages"])
def test_parquet_parts_intern_item_names_as_the_trace_has_them(tmp_path: Path, write) -> None:
    trace = synthesize(SynthParams(requests=2 * PART_MULTIPLE + 300, seed=5))
    src = _rewritten(save_request_trace(trace, tmp_path / "t.parquet"), **write)
    parts = open_request_parts(src, "parquet", part_requests=PART_MULTIPLE)
    got = list(parts.parts())
    assert [len(p) for p in got] == [PART_MULTIPLE, PART_MULTIPLE, 300]
    items = np.concatenate([p.touch_items for p in got])
    assert items.dtype == np.uint32 and items.tolist() == trace.touch_items.tolist()
    offsets = [0]
    for p in got:
        offsets += (p.touch_offsets[1:] + offsets[-1]).tolist()
    assert offsets == trace.touch_offsets.tolist()
    names = [parts.route_names[c] for p in got for c in p.route]
    assert names == [trace.route_names[c] for c in trace.route]
    assert load_request_trace(src).equals(trace)  # the whole file read at once, likewise


def _items_at(row: int, value: pa.Array):
    """An edit putting ``value`` (a one-string array) as the first item of request ``row``."""
    def edit(table: pa.Table) -> pa.Table:
        col = table.column("items").combine_chunks()
        flat = col.values
        at = col.offsets[row].as_py()
        values = pa.concat_arrays([flat.slice(0, at), value, flat.slice(at + 1)])
        i = table.schema.get_field_index("items")
        return table.set_column(i, "items", pa.ListArray.from_arrays(col.offsets, values))
    return edit


@pytest.mark.parametrize("value,words", [
    (pa.array(["zzz"]), "item 'zzz' is not in the catalog"),
    (pa.array([b"\x80zz"], pa.binary()).view(pa.string()), "items is not valid UTF-8"),
], ids=["unknown item", "not UTF-8"])
def test_a_bad_item_name_in_a_later_parquet_part_names_file_and_row(
        tmp_path: Path, value: pa.Array, words: str) -> None:
    trace = synthesize(SynthParams(requests=PART_MULTIPLE + 50, seed=8))
    row = PART_MULTIPLE + 10  # 0-based, in the second part
    assert trace.touch_offsets[row + 1] > trace.touch_offsets[row]
    src = _rewritten(save_request_trace(trace, tmp_path / "t.parquet"), _items_at(row, value),
                     row_group_size=3000)
    parts = open_request_parts(src, "parquet", part_requests=PART_MULTIPLE)
    with pytest.raises(InputError) as e:
        list(parts.parts())
    assert str(e.value) == f"{src / 'requests.parquet'}: row {row + 1}: {words}"
    with pytest.raises(InputError) as whole:
        load_request_trace(src)
    assert str(whole.value) == str(e.value)


@pytest.mark.parametrize(("file", "column"), [("requests.parquet", b"route"),
                                              ("catalog.parquet", b"kind")])
def test_a_footer_whose_column_names_are_not_utf8_is_refused_naming_the_file(
        tmp_path: Path, file: str, column: bytes) -> None:
    """A damaged footer (a column name's bytes not UTF-8: pyarrow raises UnicodeDecodeError
    when it decodes them) is an InputError naming the trace, read whole or in parts."""
    path = tmp_path / "t.parquet"
    save_request_trace(synthesize(SynthParams(requests=50, seed=1)), path)
    target = path / file
    # Every copy of the name: the footer's schema and column chunks (and the header's JSON)
    target.write_bytes(target.read_bytes().replace(column, b"\xff" * len(column)))

    def in_parts() -> None:
        for _ in open_request_parts(path, "parquet", PART_MULTIPLE).parts():
            pass

    for read in (lambda: load_request_trace(path), in_parts):
        with pytest.raises(InputError) as e:
            read()
        assert str(e.value).startswith(str(path)), e.value
