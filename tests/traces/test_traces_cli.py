"""``cachelab trace synth|inspect|convert``: artifacts, stdout, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachelab.cli import run as cli_run
from cachelab.traces import load_request_trace
from clitools import InProcess, cachelab, one_error_line

RUN_TIMEOUT = 60






@pytest.mark.slow
def test_synth_inspect_convert_end_to_end(tmp_path: Path) -> None:
    p = cachelab("trace", "synth", "--requests", "2000", "--seed", "3", "t.jsonl", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)  # not a terminal: JSON on stdout
    assert summary["requests"] == 2000 and summary["params"]["seed"] == 3
    assert p.stderr.strip() == "wrote t.jsonl"

    p = cachelab("trace", "inspect", "t.jsonl", "--out", "insp", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["requests"] == 2000 and result["kind"] == "request"
    assert json.loads((tmp_path / "insp" / "trace-inspect.json").read_text()) == result

    p = cachelab("trace", "convert", "t.jsonl", "t.parquet", "--format", "table", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("t.jsonl (jsonl) -> t.parquet (parquet): 2,000 requests")
    assert load_request_trace(tmp_path / "t.parquet").equals(
        load_request_trace(tmp_path / "t.jsonl"))


def test_synth_in_parts_is_the_same_trace_and_simulates_alike(
        cli: InProcess, tmp_path: Path) -> None:
    args = ("trace", "synth", "--requests", "5000", "--seed", "2")
    for name, part in (("w.jsonl", []), ("p.jsonl", ["--part", "999"]),
                       ("p.parquet", ["--part", "1024"])):
        p = cli(*args, *part, name, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["touches"] == load_request_trace(tmp_path / name).n_touches
    assert (tmp_path / "p.jsonl").read_bytes() == (tmp_path / "w.jsonl").read_bytes()
    assert load_request_trace(tmp_path / "p.parquet").equals(
        load_request_trace(tmp_path / "w.jsonl"))
    p = cli("trace", "convert", "p.parquet", "c.jsonl", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "c.jsonl").read_bytes() == (tmp_path / "w.jsonl").read_bytes()
    p = cli("trace", "inspect", "p.parquet", cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout)["requests"] == 5000, p.stderr
    outs = []
    for extra in ([], ["--in-memory"]):
        p = cli("simulate", "p.parquet", "--strategies", "none,lru:300", "--draws", "1",
                "--format", "json", "--no-plots", "--out", "o", *extra, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        outs.append(json.loads(p.stdout))
    assert outs[0]["strategies"] == outs[1]["strategies"]


def test_synth_out_directory_and_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = cli_run(["trace", "synth", "--quick", "--requests", "500", "--out",
                    str(tmp_path / "d"), "--format", "table"])
    out = capsys.readouterr().out
    assert code == 0
    assert (tmp_path / "d" / "trace.jsonl").is_file()
    assert out.splitlines()[0].startswith("500 requests")
    assert out.splitlines()[-1] == f"wrote {tmp_path / 'd' / 'trace.jsonl'}"


def test_synth_parquet_and_set(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = cli_run(["trace", "synth", "--requests", "300", "--set", "instances=2",
                    "--set", 'route_mix={"topic": 1}', str(tmp_path / "s.parquet")])
    assert code == 0
    t = load_request_trace(tmp_path / "s.parquet")
    assert t.route_names == ["topic"] and set(t.instance.tolist()) <= {0, 1}
    capsys.readouterr()


def test_synth_preset_then_flags(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = cli_run(["trace", "synth", "--preset", "heavy-pages", "--quick", "--requests", "300",
                    "--alpha", "1.1", "--format", "json", str(tmp_path / "h.jsonl")])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    params = summary["params"]
    assert summary["preset"] == "heavy-pages"
    assert (params["requests"], params["alpha"], params["base_ms_median"]) == (300, 1.1, 40.0)
    assert "api" not in load_request_trace(tmp_path / "h.jsonl").route_names
    assert cli_run(["trace", "synth", "--quick", "--format", "table",
                    str(tmp_path / "a.jsonl")]) == 0
    assert "(preset appengine-article, seed 1)" in capsys.readouterr().out


def test_inspect_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cli_run(["trace", "synth", "--requests", "300", str(tmp_path / "t.jsonl")])
    capsys.readouterr()
    assert cli_run(["trace", "inspect", str(tmp_path / "t.jsonl"), "--format", "table"]) == 0
    out = capsys.readouterr().out
    for words in ("requests", "unique keys touched", "working set bytes", "zipf alpha",
                  "top1pct share", "items per request", "route"):
        assert words in out


def test_request_to_flat_csv(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cli_run(["trace", "synth", "--requests", "200", str(tmp_path / "t.jsonl")])
    capsys.readouterr()
    assert cli_run(["trace", "convert", str(tmp_path / "t.jsonl"), str(tmp_path / "f.csv"),
                    "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    lines = (tmp_path / "f.csv").read_text().splitlines()
    assert lines[0] == "time,key,size"
    assert len(lines) - 1 == summary["accesses"] > 0


BAD_TRACE = "\n".join([
    '{"schema": "cachelab.request-trace", "version": 1, "generator": null}',
    '{"item": "a", "size": 1, "kind": "video"}',
    '{"request": 1, "time": 0, "instance": 0, "route": "r", "base_ms": 5, "items": ["b"]}',
]) + "\n"


@pytest.mark.parametrize("argv,words", [
    (["trace", "inspect", "bad.jsonl"], "bad.jsonl: line 3: request 1: item 'b' is not in the"),
    (["trace", "convert", "bad.jsonl", "out.parquet"], "bad.jsonl: line 3:"),
    (["trace", "convert", "bad.jsonl", "out.csv"], "bad.jsonl: line 3:"),
    (["trace", "inspect", "missing.jsonl"], "missing.jsonl: cannot read"),
    (["trace", "inspect", "x.dat"], "cannot tell the trace format"),
    (["trace", "convert", "bad.jsonl", "o.jsonl", "--to", "xml"], "unknown trace format 'xml'"),
    (["trace", "synth", "--alpha", "-1", "o.jsonl"],
     "--alpha: must be a number from 0 to 5, got -1"),
    (["trace", "synth", "--set", "nope=1", "o.jsonl"], "unknown synth parameter(s): nope"),
    (["trace", "synth", "--preset", "light", "o.jsonl"],
     "invalid choice: 'light' (choose from 'appengine-article', 'heavy-pages')"),
    (["trace", "synth", "--set", 'base_ms_by_route={"search": 9}', "o.jsonl"],
     "base_ms_by_route keys must be among home, dashboard"),
    (["trace", "synth", "o.csv"], "synth writes request traces"),
    (["trace", "synth", "a.jsonl", "--out", "b.jsonl"], "not both"),
    (["trace", "synth", "--part", "0", "o.jsonl"], "--part: must be an integer from 1"),
    (["trace", "frobnicate"], "invalid choice"),
    (["trace", "inspect"], "required"),
])
def test_errors_exit_2_with_one_line(
        cli: InProcess, tmp_path: Path, argv: list[str], words: str) -> None:
    (tmp_path / "bad.jsonl").write_text(BAD_TRACE)
    p = cli(*argv, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert words in one_error_line(p.stderr)
    assert p.stdout == ""
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.jsonl"]


@pytest.mark.parametrize("verb", [[], ["synth"], ["inspect"], ["convert"]])
def test_help(verb: list[str], capsys: pytest.CaptureFixture) -> None:
    assert cli_run(["trace", *verb, "--help"]) == 0
    assert "usage: cachelab trace" in capsys.readouterr().out


def test_unwritable_destination_is_one_line(cli: InProcess, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    p = cli("trace", "synth", "--requests", "10", "afile/t.jsonl", cwd=tmp_path)
    assert p.returncode == 2
    assert "afile/t.jsonl: afile is a file, not a directory" in one_error_line(p.stderr)


def test_request_to_flat_agrees_with_flat_inspect(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    """The flat view read back by the Rust core has the request trace's keys and sizes."""
    cli_run(["trace", "synth", "--requests", "500", str(tmp_path / "t.jsonl")])
    for dst in ("f.csv", "f.bin"):
        assert cli_run(["trace", "convert", str(tmp_path / "t.jsonl"), str(tmp_path / dst)]) == 0
    assert cli_run(["trace", "convert", str(tmp_path / "f.bin"), str(tmp_path / "g.txt")]) == 0
    capsys.readouterr()
    req = json.loads(_inspect(tmp_path / "t.jsonl", capsys))
    for name in ("f.csv", "f.bin"):
        flat = json.loads(_inspect(tmp_path / name, capsys))
        assert flat["kind"] == "flat"
        assert flat["requests"] == req["first_touches"]
        assert flat["unique_keys"] == req["unique_keys_touched"]
        assert flat["working_set_bytes"] == req["working_set_bytes"]
    lines = json.loads(_inspect(tmp_path / "g.txt", capsys))
    assert lines["requests"] == req["first_touches"]


def _inspect(path: Path, capsys: pytest.CaptureFixture) -> str:
    assert cli_run(["trace", "inspect", str(path), "--format", "json"]) == 0
    return capsys.readouterr().out


def test_malformed_flat_trace_names_the_line(cli: InProcess, tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_text("time,key,size\n1,a,1\n2,b,-5\n")
    p = cli("trace", "convert", "bad.csv", "out.bin", cwd=tmp_path)
    assert p.returncode == 2
    assert "bad.csv" in one_error_line(p.stderr) and "3" in p.stderr
    assert not (tmp_path / "out.bin").exists()


def _oracle_records(sizes: list[int]) -> bytes:
    """oracleGeneral records (libCacheSim's layout: u32 time, u64 id, u32 size, i64 next)."""
    import struct
    return b"".join(struct.pack("<IQIq", 1000 + i, i % 50, s, -1) for i, s in enumerate(sizes))


def test_random_bytes_named_oracle_general_are_refused(cli: InProcess, tmp_path: Path) -> None:
    import random
    f = tmp_path / "noise.oracleGeneral.bin"
    f.write_bytes(random.Random(7).randbytes(24 * 200))
    for verb in (["trace", "inspect"], ["simulate"]):
        p = cli(*verb, str(f), "--out", str(tmp_path / "o"), cwd=tmp_path) \
            if verb == ["simulate"] else cli(*verb, str(f), cwd=tmp_path)
        assert p.returncode == 2, p.stderr
        line = one_error_line(p.stderr)
        assert f"{f}: record 1: " in line and "is this an oracleGeneral trace?" in line


def test_a_few_implausible_records_are_read_with_a_warning(cli: InProcess, tmp_path: Path) -> None:
    f = tmp_path / "t.oracleGeneral.bin"
    f.write_bytes(_oracle_records([2**31 if i in (5, 77, 300) else 100 for i in range(1000)]))
    p = cli("trace", "inspect", str(f), "--format", "table", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (f"warning: {f}: 3 of 1000 records are implausible and were read as they are "
            "(the first: record 6: object size 2147483648 B") in p.stdout
    clean = tmp_path / "c.oracleGeneral.bin"
    clean.write_bytes(_oracle_records([100] * 1000))
    p = cli("trace", "inspect", str(clean), "--format", "json", cwd=tmp_path)
    assert json.loads(p.stdout)["doubts"] is None
