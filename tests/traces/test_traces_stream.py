"""Request traces converted part by part: the same files as the whole-trace writers."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachelab.errors import InputError
from cachelab.traces import SynthParams, load_request_trace, save_request_trace, synthesize
from cachelab.traces.stream import PART_MULTIPLE, convert_in_parts


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
