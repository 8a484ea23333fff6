"""Request traces simulated part by part: the same results as the whole trace in memory (the
independently tested path), a reader that holds one part at a time, time order enforced."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cachelab.simulate import SimulateSpec, simulate, simulate_file, simulate_trace_file
from cachelab.simulate import streamed as streamed_mod
from cachelab.simulate.streamed import TraceOutOfOrder
from cachelab.traces import RequestTrace, SynthParams, save_request_trace, synthesize
from cachelab.traces.stream import PART_MULTIPLE, open_request_parts
from clitools import InProcess

STRATEGIES = ("none", "lru:300", "lru:200KB", "fixed:300", "fixed:300+prefetch-children",
              "lru:200+prefetch:depth=2")


@pytest.fixture(scope="module")
def trace() -> RequestTrace:
    t = synthesize(SynthParams(requests=3 * PART_MULTIPLE + 700, seed=3))
    assert np.all(np.diff(t.time) >= 0)
    return t


@pytest.fixture(scope="module")
def files(trace: RequestTrace, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("streamed")
    return {fmt: save_request_trace(trace, d / f"t.{fmt}") for fmt in ("jsonl", "parquet")}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_parts_give_the_whole_traces_results_exactly(trace: RequestTrace, files: dict,
                                                     fmt: str) -> None:
    spec = SimulateSpec(strategies=STRATEGIES, draws=3, seed=4)
    whole = simulate(trace, spec).to_dict()
    parts = simulate_file(files[fmt], spec, part_requests=PART_MULTIPLE).to_dict()
    assert parts["strategies"] == whole["strategies"]  # bands, curve, routes, counts, terms
    assert "percentiles" not in parts["trace"]
    assert parts["trace"]["requests"] == len(trace)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_reader_hands_out_parts_of_the_size_asked_and_buffers_little(
        trace: RequestTrace, files: dict, fmt: str) -> None:
    src = open_request_parts(files[fmt], fmt, part_requests=PART_MULTIPLE)
    assert src.n_requests == len(trace)
    sizes, most_buffered = [], 0
    times, items = [], []
    for part in src.parts():
        sizes.append(len(part))
        most_buffered = max(most_buffered, src.buffered)
        times.append(part.time)
        items.append(part.touch_items)
    assert sizes == [PART_MULTIPLE] * 3 + [700]
    # What waits beside the part handed out is less than a part plus one reader batch (the
    # Parquet reader's batches are 16 parts' worth; the JSONL reader's blocks are 16 MB).
    assert most_buffered < PART_MULTIPLE + 16 * PART_MULTIPLE
    assert np.array_equal(np.concatenate(times), trace.time)
    assert np.array_equal(np.concatenate(items), trace.touch_items)


def _unordered(path: Path) -> Path:
    requests = [(0, 0.0, ["a", "b"]), (1, 1.0, ["a"]), (2, 3.0, ["b"]), (3, 2.0, ["a", "b"])]
    path.write_text("\n".join([
        '{"schema": "cachelab.request-trace", "version": 1, "generator": null}',
        '{"item": "a", "size": 10, "kind": "video"}',
        '{"item": "b", "size": 20, "kind": "video"}',
        *(json.dumps({"request": r, "time": t, "instance": 0, "route": "r", "base_ms": 5.0,
                      "items": items}) for r, t, items in requests),
    ]) + "\n")
    return path


def test_a_trace_out_of_order_is_refused_naming_file_and_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _unordered(tmp_path / "unordered.jsonl")
    spec = SimulateSpec(strategies=("none",), draws=1)
    with pytest.raises(TraceOutOfOrder) as e:
        simulate_file(path, spec)
    assert str(e.value).startswith(f"{path}: line 7: this request is earlier")
    # Small enough: simulated whole, by time, with the whole-trace path's warning.
    assert "not in time order" in simulate_trace_file(path, spec).warnings[0]
    monkeypatch.setattr(streamed_mod, "IN_MEMORY_FALLBACK", 3)
    with pytest.raises(TraceOutOfOrder):
        simulate_trace_file(path, spec)


def test_past_the_exact_limit_percentiles_come_from_histograms(trace: RequestTrace,
                                                              files: dict) -> None:
    spec = SimulateSpec(strategies=STRATEGIES[:2], draws=2)
    whole = simulate(trace, spec).to_dict()
    parts = simulate_file(files["parquet"], spec, exact_limit=4000).to_dict()
    assert "from histograms" in parts["trace"]["percentiles"]
    for a, b in zip(parts["strategies"], whole["strategies"]):
        assert (a["counts"], a["slowed"], a["mean_added_ms"]) == (
            b["counts"], b["slowed"], b["mean_added_ms"])
        for x, y in zip(a["percentiles"], b["percentiles"]):
            assert x["median"] == pytest.approx(y["median"], rel=2**-11, abs=1e-12)


def test_cli_simulates_a_file_in_parts_or_whole_alike(
        cli: InProcess, files: dict, tmp_path: Path) -> None:
    outs = []
    for extra in ([], ["--in-memory"]):
        p = cli("simulate", str(files["parquet"]), "--strategies", "none,lru:300",
                "--draws", "2", "--format", "json", "--no-plots", "--out", "o", *extra,
                cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        outs.append(json.loads(p.stdout))
    assert outs[0]["strategies"] == outs[1]["strategies"]
    assert outs[0]["trace"]["read"].startswith("in parts of")


def test_a_damaged_parquet_part_is_one_clear_error(
        cli: InProcess, files: dict, tmp_path: Path) -> None:
    """A data page that does not decompress is found only when its row group is read, in
    the middle of the simulation: still one line naming the file, exit 2, no traceback."""
    import shutil

    from clitools import one_error_line

    bad = tmp_path / "bad.parquet"
    shutil.copytree(files["parquet"], bad)
    data = bad / "requests.parquet"
    raw = bytearray(data.read_bytes())
    mid = len(raw) // 2
    raw[mid:mid + 4096] = bytes(4096)  # zeros over a compressed page (the footer is intact)
    data.write_bytes(bytes(raw))
    p = cli("simulate", str(bad), "--strategies", "none", "--draws", "1", "--no-plots",
            "--out", "o", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p)
    assert "requests.parquet" in line and "not a readable Parquet file" in line, line


def test_part_costs_as_bytes_are_the_lists_values(files: dict) -> None:
    """The cost columns handed over as f64 bytes (what ``simulate`` reads) hold the values
    the lists hold, column by column; an unknown column is a UsageError naming the known."""
    from cachelab import _core
    from cachelab.errors import UsageError
    from cachelab.simulate import latency_model
    from cachelab.simulate.terms import COLUMNS

    src = open_request_parts(files["parquet"], "parquet", PART_MULTIPLE)
    model = latency_model("appengine-2017")
    stream = _core.RequestStream(**src.core_catalog(), model=model.to_core(),
                                 strategies=["lru:300+prefetch:depth=2"],
                                 requests=src.n_requests, train=0.0, draws=1, seed=1,
                                 costs=True)
    part = next(iter(src.parts()))
    stream.feed(**part.core_columns())
    lists = stream.part_costs(0)
    as_bytes = stream.part_costs(0, [*COLUMNS, "prefetch_topic_hit"])
    for name, b in as_bytes.items():
        got = np.frombuffer(b, "<f8")
        assert len(got) == len(part) and np.array_equal(got, np.asarray(lists[name], float))
    assert np.asarray(lists["multigets"]).sum() > 0  # the columns are not all zeros
    with pytest.raises(UsageError, match='no cost column "nope": one of request, added_ms'):
        stream.part_costs(0, ["nope"])
