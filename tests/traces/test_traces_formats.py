"""Request traces on disk: JSONL and Parquet round trips, malformed input, atomic writes."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cachelab.errors import InputError, UsageError
from cachelab.traces import (
    RequestTrace,
    SynthParams,
    convert,
    detect_format,
    load_request_trace,
    save_request_trace,
    synthesize,
)
from cachelab.traces import jsonl as jsonl_mod
from cachelab.traces import parquet as parquet_mod

HEADER = {"schema": "cachelab.request-trace", "version": 1, "generator": None}
CATALOG = [
    {"item": "topic:a", "size": 100, "kind": "topic", "children": ["video:1", "video:2"]},
    {"item": "video:1", "size": 2000, "kind": "video"},
    {"item": "video:2", "size": 0, "kind": "video"},
    {"item": "ex:é\"q", "size": 7, "kind": "exercise"},
]
REQUESTS = [
    {"request": 10, "time": 0.5, "instance": 0, "route": "topic", "base_ms": 12.5,
     "items": ["topic:a", "video:1", "video:2", "video:1"]},
    {"request": 11, "time": 1.25, "instance": 3, "route": "video", "base_ms": 40.0,
     "items": ["video:2"]},
    {"request": 12, "time": 2.0, "instance": 0, "route": "home", "base_ms": 0.001,
     "items": []},
    {"request": 7, "time": 3.0, "instance": 1, "route": "video", "base_ms": 3,
     "items": ["ex:é\"q", "topic:a"]},
]


def lines_of(header=HEADER, catalog=CATALOG, requests=REQUESTS) -> list[str]:
    return [json.dumps(x) for x in [header, *catalog, *requests]]


def write_lines(path: Path, lines: list[str], end: str = "\n") -> Path:
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


@pytest.fixture
def tiny() -> RequestTrace:
    return RequestTrace.from_records(CATALOG, REQUESTS)


def test_tiny_trace_columns(tiny: RequestTrace) -> None:
    assert tiny.item_keys == ["topic:a", "video:1", "video:2", "ex:é\"q"]
    assert tiny.item_sizes.tolist() == [100, 2000, 0, 7]
    assert [tiny.item_kind(i) for i in range(4)] == ["topic", "video", "video", "exercise"]
    assert tiny.child_offsets.tolist() == [0, 2, 2, 2, 2]
    assert tiny.child_items.tolist() == [1, 2]
    assert tiny.request_ids.tolist() == [10, 11, 12, 7]
    assert tiny.instance.tolist() == [0, 3, 0, 1]
    assert [tiny.route_name(r) for r in range(4)] == ["topic", "video", "home", "video"]
    assert tiny.touch_offsets.tolist() == [0, 4, 5, 5, 7]
    assert tiny.touch_items.tolist() == [0, 1, 2, 1, 2, 3, 0]
    assert tiny.first_touch_mask().tolist() == [True, True, True, False, True, True, True]
    assert tiny.item_sizes.dtype == np.uint64 and tiny.touch_offsets.dtype == np.uint64
    assert tiny.touch_items.dtype == np.uint32 and tiny.child_offsets.dtype == np.uint32
    tiny.check()


def test_jsonl_reads_handwritten_file(tmp_path: Path, tiny: RequestTrace) -> None:
    path = write_lines(tmp_path / "t.jsonl", lines_of())
    assert load_request_trace(path).equals(tiny)


def test_jsonl_without_final_newline_and_gzip(tmp_path: Path, tiny: RequestTrace) -> None:
    assert load_request_trace(write_lines(tmp_path / "a.jsonl", lines_of(), end="")).equals(tiny)
    gz = tmp_path / "b.jsonl.gz"
    gz.write_bytes(gzip.compress(("\n".join(lines_of()) + "\n").encode()))
    assert load_request_trace(gz).equals(tiny)


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz", "t.parquet"])
def test_round_trip_tiny(tmp_path: Path, tiny: RequestTrace, name: str) -> None:
    path = save_request_trace(tiny, tmp_path / name)
    back = load_request_trace(path)
    assert back.equals(tiny)
    assert back.request_records() == tiny.request_records()
    assert back.catalog_records() == tiny.catalog_records()


def test_round_trip_jsonl_parquet_jsonl_synthetic(tmp_path: Path) -> None:
    trace = synthesize(SynthParams(requests=3000, seed=5))
    a = save_request_trace(trace, tmp_path / "a.jsonl")
    convert(a, tmp_path / "b.parquet")
    convert(tmp_path / "b.parquet", tmp_path / "c.jsonl")
    assert a.read_bytes() == (tmp_path / "c.jsonl").read_bytes()
    from_parquet = load_request_trace(tmp_path / "b.parquet")
    assert from_parquet.equals(trace)
    assert from_parquet.generator == trace.generator


def test_parquet_layout(tmp_path: Path, tiny: RequestTrace) -> None:
    tiny.generator = {"name": "hand", "n": 1}
    save_request_trace(tiny, tmp_path / "t.parquet")
    cat = pq.read_table(tmp_path / "t.parquet" / "catalog.parquet")
    req = pq.read_table(tmp_path / "t.parquet" / "requests.parquet")
    assert cat.schema.names == ["key", "size", "kind", "children"]
    assert [str(t) for t in cat.schema.types] == ["string", "int64", "string",
                                                  "list<element: string>"]
    assert req.schema.names == ["id", "time", "instance", "route", "base_ms", "items"]
    assert [str(t) for t in req.schema.types] == ["int64", "double", "int32", "string",
                                                  "double", "list<element: string>"]
    assert cat.column("children").to_pylist() == [["video:1", "video:2"], [], [], []]
    assert req.column("items").to_pylist()[0] == ["topic:a", "video:1", "video:2", "video:1"]
    head = json.loads(req.schema.metadata[b"cachelab.request-trace"])
    assert head == {**HEADER, "generator": {"name": "hand", "n": 1}}


@pytest.mark.parametrize("case", ["synthetic", "tiny", "catalog only", "requests only"])
def test_fast_and_line_readers_agree(tmp_path: Path, case: str) -> None:
    if case == "synthetic":
        path = save_request_trace(synthesize(SynthParams(requests=2000, seed=3)),
                                  tmp_path / "s.jsonl")
    else:
        catalog = [] if case == "requests only" else CATALOG
        requests = {"catalog only": [], "tiny": REQUESTS,
                    "requests only": [dict(REQUESTS[2])]}[case]
        path = write_lines(tmp_path / "s.jsonl", lines_of(catalog=catalog, requests=requests))
    data = path.read_bytes()
    fast = jsonl_mod._read_fast(data, str(path))
    slow = jsonl_mod._read_lines(io.BytesIO(data), str(path))
    assert fast.equals(slow)
    assert (fast.n_items, fast.n_requests) == (slow.n_items, slow.n_requests)


# -- malformed JSONL: (name, edit of the lines, line named, words in the message) ----------

def _set(index: int, **fields):
    def edit(lines: list[str]) -> list[str]:
        obj = json.loads(lines[index])
        for k, v in fields.items():
            if v is _DROP:
                obj.pop(k)
            else:
                obj[k] = v
        lines[index] = json.dumps(obj)
        return lines
    return edit


_DROP = object()
N = 1 + len(CATALOG)  # lines before the first request


MALFORMED = [
    ("bad JSON line", lambda ls: ls[:2] + ['{"item": "x", "size": 1,'] + ls[2:], 3,
     "not valid JSON"),
    ("truncated file", lambda ls: ls[:-1] + [ls[-1][: len(ls[-1]) // 2]], N + 4,
     "not valid JSON"),
    ("unknown item in a request", _set(N + 1, items=["video:1", "nope"]), N + 2,
     "'nope' is not in the catalog"),
    ("negative size", _set(2, size=-5), 3, "negative"),
    ("duplicate key", _set(3, item="video:1"), 4, "duplicate item 'video:1' (first at line 3)"),
    ("unknown child", _set(1, children=["video:1", "ghost"]), 2, "child 'ghost'"),
    ("missing field", _set(N + 1, route=_DROP), N + 2, "missing field(s) 'route'"),
    ("unknown field", _set(2, colour="red"), 3, "unknown field(s) 'colour'"),
    ("size not an integer", _set(2, size="5"), 3, "'size' must be an integer"),
    ("size a float", _set(2, size=5.0), 3, "'size' must be an integer"),
    ("time negative", _set(N + 2, time=-1), N + 3, "'time'"),
    ("base_ms zero", _set(N + 2, base_ms=0), N + 3, "'base_ms'"),
    ("instance a string", _set(N + 1, instance="0"), N + 2, "'instance'"),
    ("items not a list", _set(N + 1, items="video:1"), N + 2, "'items'"),
    ("null in items", _set(N + 1, items=[None]), N + 2, "is not a string"),
    ("invalid key", _set(2, item="has space"), 3, "not a valid memcached key"),
    ("key too long", _set(2, item="k" * 251), 3, "not a valid memcached key"),
    ("duplicate request id", _set(N + 3, request=10), N + 4,
     "duplicate request id 10 (first at line 6)"),
    ("catalog after requests", lambda ls: ls + [json.dumps(CATALOG[1] | {"item": "late"})],
     N + 5, "catalog comes first"),
    ("empty line", lambda ls: ls[:3] + [""] + ls[3:], 4, "empty line"),
    ("not an object", lambda ls: ls[:3] + ["[1, 2]"] + ls[3:], 4, "expected a JSON object"),
    ("neither item nor request", lambda ls: ls[:3] + ['{"x": 1}'] + ls[3:], 4,
     "expected a catalog item"),
    ("wrong schema", _set(0, schema="other"), 1, "not a cachelab request trace"),
    ("unsupported version", _set(0, version=2), 1, "version 2 is not supported"),
    ("two objects on a line", lambda ls: ls[:2] + [ls[2] + " " + ls[3]] + ls[4:], 3,
     "not valid JSON"),
    ("NaN time", lambda ls: ls[:-1] + [ls[-1].replace('"time": 3.0', '"time": NaN')], N + 4,
     "'time'"),
]


@pytest.mark.parametrize("edit,line,words", [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_malformed_jsonl_names_file_and_line(
    tmp_path: Path, edit, line: int, words: str
) -> None:
    path = write_lines(tmp_path / "bad.jsonl", edit(lines_of()))
    with pytest.raises(InputError) as err:
        load_request_trace(path)
    message = str(err.value)
    assert message.startswith(f"{path}: line {line}: "), message
    assert words in message


@pytest.mark.parametrize("edit,line,words", [m[1:] for m in MALFORMED[:6]],
                         ids=[m[0] for m in MALFORMED[:6]])
def test_malformed_input_leaves_no_output(tmp_path: Path, edit, line: int, words: str) -> None:
    path = write_lines(tmp_path / "bad.jsonl", edit(lines_of()))
    for out in ("out.parquet", "out.jsonl", "out.csv"):
        with pytest.raises(InputError):
            convert(path, tmp_path / out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_empty_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_bytes(b"")
    with pytest.raises(InputError, match=r"e\.jsonl: empty file"):
        load_request_trace(tmp_path / "e.jsonl")
    with pytest.raises(InputError, match=r"missing\.jsonl: cannot read"):
        load_request_trace(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match=r"nodir\.parquet: no such directory"):
        load_request_trace(tmp_path / "nodir.parquet")


def test_header_only_is_an_empty_trace(tmp_path: Path) -> None:
    trace = load_request_trace(write_lines(tmp_path / "h.jsonl", lines_of(catalog=[],
                                                                            requests=[])))
    assert trace.n_items == 0 and trace.n_requests == 0
    assert trace.touch_offsets.tolist() == [0] and trace.child_offsets.tolist() == [0]


# -- malformed Parquet ---------------------------------------------------------------------


def _parquet(tmp_path: Path, tiny: RequestTrace, catalog=None, requests=None,
             metadata=None) -> Path:
    d = save_request_trace(tiny, tmp_path / "t.parquet")
    if catalog is not None:
        pq.write_table(catalog(pq.read_table(d / "catalog.parquet")), d / "catalog.parquet")
    if requests is not None or metadata is not None:
        table = pq.read_table(d / "requests.parquet")
        if requests is not None:
            table = requests(table)
        if metadata is not None:
            table = table.replace_schema_metadata(metadata)
        pq.write_table(table, d / "requests.parquet")
    return d


def _replace(name: str, values, type_=None):
    def edit(table: pa.Table) -> pa.Table:
        i = table.schema.get_field_index(name)
        return table.set_column(i, name, pa.array(values, type=type_ or table.schema.types[i]))
    return edit


PARQUET_BAD = [
    ("negative size", dict(catalog=_replace("size", [100, 2000, -1, 7])), "catalog", 3,
     "size -1 is negative"),
    ("duplicate key", dict(catalog=_replace("key", ["topic:a", "video:1", "video:1", "x"])),
     "catalog", 3, "duplicate key 'video:1' (first at row 2)"),
    ("unknown child", dict(catalog=_replace(
        "children", [["video:1", "ghost"], [], [], []])), "catalog", 1, "child 'ghost'"),
    ("null kind", dict(catalog=_replace("kind", ["topic", None, "video", "e"])), "catalog", 2,
     "kind is missing"),
    ("unknown item", dict(requests=_replace(
        "items", [["topic:a"], ["video:2"], ["zzz"], []])), "requests", 3,
     "item 'zzz' is not in the catalog"),
    ("negative time", dict(requests=_replace("time", [0.5, -1.0, 2.0, 3.0])), "requests", 2,
     "time"),
    ("duplicate id", dict(requests=_replace("id", [1, 2, 3, 2])), "requests", 4,
     "duplicate request id 2"),
    ("wrong column type", dict(requests=_replace("time", ["a", "b", "c", "d"], pa.string())),
     "requests", None, "column 'time' is string"),
]


@pytest.mark.parametrize("edits,which,row,words", [b[1:] for b in PARQUET_BAD],
                         ids=[b[0] for b in PARQUET_BAD])
def test_malformed_parquet_names_file_and_row(
    tmp_path: Path, tiny: RequestTrace, edits, which: str, row, words: str
) -> None:
    d = _parquet(tmp_path, tiny, **edits)
    with pytest.raises(InputError) as err:
        load_request_trace(d)
    message = str(err.value)
    where = f"{d / (which + '.parquet')}: " + (f"row {row}: " if row else "")
    assert message.startswith(where), message
    assert words in message


def test_parquet_without_header_metadata(tmp_path: Path, tiny: RequestTrace) -> None:
    d = _parquet(tmp_path, tiny, metadata={b"other": b"1"})
    with pytest.raises(InputError, match="not a cachelab request trace"):
        load_request_trace(d)


def test_parquet_missing_file(tmp_path: Path, tiny: RequestTrace) -> None:
    d = save_request_trace(tiny, tmp_path / "t.parquet")
    (d / "catalog.parquet").unlink()
    with pytest.raises(InputError, match=r"catalog\.parquet: missing"):
        load_request_trace(d)


# -- atomic writes -------------------------------------------------------------------------


def test_jsonl_writer_is_atomic(tmp_path: Path, tiny: RequestTrace,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "t.jsonl"
    target.write_text("old\n")

    def boom(trace, chunk=0):
        yield '{"request": 1}\n'
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(jsonl_mod, "_request_lines", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        save_request_trace(tiny, target)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]


def test_parquet_writer_is_atomic(tmp_path: Path, tiny: RequestTrace,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target = save_request_trace(tiny, tmp_path / "t.parquet")
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    calls = []

    def failing(table, where, **kw):
        calls.append(where)
        if len(calls) == 2:
            raise OSError("no space left")
        return pq.write_table(table, where, **kw)

    monkeypatch.setattr(parquet_mod.pq, "write_table", failing)
    changed = RequestTrace.from_records(CATALOG[1:], [])
    with pytest.raises(OSError, match="no space left"):
        save_request_trace(changed, target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_parquet_replaces_existing_directory(tmp_path: Path, tiny: RequestTrace) -> None:
    target = save_request_trace(tiny, tmp_path / "t.parquet")
    other = RequestTrace.from_records(CATALOG, REQUESTS[:1])
    save_request_trace(other, target)
    assert load_request_trace(target).equals(other)
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


# -- formats -------------------------------------------------------------------------------


@pytest.mark.parametrize("name,fmt", [
    ("a.jsonl", "jsonl"), ("a.JSONL.gz", "jsonl"), ("d.parquet", "parquet"), ("x.csv", "csv"),
    ("x.bin", "oracle"), ("x.oracleGeneral", "oracle"), ("x.oracleGeneral.bin", "oracle"),
    ("k.txt", "lines"),
])
def test_detect_format(name: str, fmt: str) -> None:
    assert detect_format(name) == fmt


def test_detect_format_errors() -> None:
    with pytest.raises(UsageError, match="cannot tell the trace format"):
        detect_format("trace.dat")
    with pytest.raises(UsageError, match="unknown trace format 'xml'"):
        detect_format("trace.jsonl", "xml")
    assert detect_format("trace.dat", "oracleGeneral") == "oracle"


def test_request_to_flat_csv(tmp_path: Path, tiny: RequestTrace) -> None:
    out = tmp_path / "flat.csv"
    summary = convert(write_lines(tmp_path / "t.jsonl", lines_of()), out)
    assert summary["accesses"] == 6
    assert out.read_text(encoding="utf-8").splitlines() == [
        "time,key,size",
        "0.500000,topic:a,100", "0.500000,video:1,2000", "0.500000,video:2,0",
        "1.250000,video:2,0",
        "3.000000,ex:é\"q,7", "3.000000,topic:a,100",
    ]


def test_flat_to_request_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text("time,key,size\n1,a,1\n")
    with pytest.raises(UsageError, match="cannot convert a flat key trace"):
        convert(tmp_path / "f.csv", tmp_path / "r.jsonl")


# -- the Rust core -------------------------------------------------------------------------


def test_to_core_carries_the_columns(tiny: RequestTrace) -> None:
    core = tiny.to_core()
    assert len(core) == tiny.n_requests == 4
    assert core.n_items == tiny.n_items == 4
    assert core.n_touches == tiny.n_touches == 7
    assert core.n_instances == 3


def test_to_core_on_a_synthetic_trace() -> None:
    trace = synthesize(SynthParams(requests=500, seed=2))
    core = trace.to_core()
    assert (len(core), core.n_items, core.n_touches) == (500, trace.n_items, trace.n_touches)
    assert core.n_instances == len(set(trace.instance.tolist()))
