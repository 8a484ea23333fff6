"""``cachelab usl`` on the command line: table, artifacts, plot, exit codes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from clitools import InProcess, one_error_line

DATA = Path(__file__).parents[1] / "data" / "usl"


def test_fit_writes_json_csv_and_plots(cli: InProcess, tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = cli("usl", DATA / "specsdm91.csv", "--n", "load", "--x", "throughput", "--predict",
            "50,500", "--out", out, "--format", "table", "--bootstrap", "200", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "alpha" in p.stdout and "Nmax = 96.52" in p.stdout
    assert "extrapolation" in p.stdout  # 500 > 2 x 216
    data = json.loads((out / "usl.json").read_text())
    assert data["schema"] == "cachelab.usl"
    assert [pr["n"] for pr in data["predictions"]] == [50.0, 500.0]
    with (out / "usl.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["kind"] for r in rows].count("measured") == 7
    assert rows[-1]["kind"] == "predicted" and rows[-1]["extrapolated"] == "1"
    for ext in ("png", "svg"):
        assert (out / f"usl.{ext}").stat().st_size > 1000
    svg = (out / "usl.svg").read_text()
    for gid in ("cachelab-usl-fit", "cachelab-usl-band", "cachelab-usl-linear",
                "cachelab-usl-measured"):
        assert gid in svg
    assert "Nmax = 96.5" in svg


def test_json_to_stdout(cli: InProcess, tmp_path: Path) -> None:
    p = cli("usl", DATA / "psa_cisco_mysql.csv", "--method", "unbounded", "--bootstrap", "0",
            "--no-plots", "--out", tmp_path / "o", "--format", "json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["method"] == "unbounded" and d["peak"]["n_max_floor"] == 35


def test_malformed_csv_exits_2_naming_file_and_line(cli: InProcess, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("n,x\n1,10\n2,19\nthree,27\n")
    p = cli("usl", bad, "--out", tmp_path / "o", cwd=tmp_path)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    line = p.stderr.strip().splitlines()
    assert len(line) == 1 and f"{bad}:4:" in line[0], p.stderr


def test_too_few_points_and_bad_flags_exit_2(cli: InProcess, tmp_path: Path) -> None:
    few = tmp_path / "few.csv"
    few.write_text("n,x\n1,1\n2,2\n3,3\n4,4\n5,5\n")
    p = cli("usl", few, "--out", tmp_path / "o", cwd=tmp_path)
    assert p.returncode == 2 and "at least 6" in p.stderr
    p = cli("usl", DATA / "raytracer.csv", "--predict", "10,x", cwd=tmp_path)
    assert p.returncode == 2 and "'x' is not a number" in p.stderr
    p = cli("usl", DATA / "raytracer.csv", "--n", "cores", cwd=tmp_path)
    assert p.returncode == 2 and "no column 'cores'" in p.stderr


def test_subnormal_throughputs_are_refused_and_the_same_data_in_its_unit_fits(
        cli: InProcess, tmp_path: Path) -> None:
    """Throughputs near 1e-310 (their squares underflow to 0) left alpha and beta at their
    start values and printed "residual standard error 0": refused, exit 2, saying why; the
    same published data at its own scale still fits."""
    rows = (DATA / "specsdm91.csv").read_text().splitlines()
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("\n".join([rows[0]] + [f"{r.split(',')[0]},{float(r.split(',')[1]) * 1e-312!r}"
                                           for r in rows[1:]]) + "\n")
    p = cli("usl", tiny, "--n", "load", "--x", "throughput", "--bootstrap", "0",
            "--no-plots", "--out", tmp_path / "o", "--format", "table", cwd=tmp_path)
    assert p.returncode == 2, p.stdout
    line = one_error_line(p)
    assert str(tiny) in line and "too small" in line and "double precision" in line, line
    assert not (tmp_path / "o" / "usl.json").exists()
    p = cli("usl", DATA / "specsdm91.csv", "--n", "load", "--x", "throughput",
            "--bootstrap", "0", "--no-plots", "--out", tmp_path / "g", "--format", "json",
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["sigma"] > 0 and d["iterations"] > 1
    assert abs(d["peak"]["n_max"] - 96.52) < 0.01


def test_level_is_a_fraction_strictly_between_0_and_1(cli: InProcess, tmp_path: Path) -> None:
    for bad in ("2", "95", "1", "0", "-0.5", "nan"):
        p = cli("usl", DATA / "raytracer.csv", "--level", bad, "--no-plots",
                "--out", tmp_path / "o", cwd=tmp_path)
        assert p.returncode == 2, (bad, p.stdout)
        line = one_error_line(p)
        assert "--level" in line and "above 0 and below 1" in line, line
    p = cli("usl", DATA / "raytracer.csv", "--level", "0.9", "--bootstrap", "0",
            "--no-plots", "--out", tmp_path / "o", "--format", "table", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "90 % interval" in p.stdout
