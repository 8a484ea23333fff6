"""The USL fitter from Python: published fits (a table of cases), the result artifact, CSV
errors naming file and line, and refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cachelab.errors import InputError, UsageError
from cachelab.usl import UslFit, fit_csv, fit_usl, read_csv, read_usl_result, t_quantile

DATA = Path(__file__).parents[1] / "data" / "usl"


def sig3(got: float, want: float) -> bool:
    """Agrees within half a unit of the third significant figure."""
    return abs(got - want) <= 0.5 * 10 ** (math.floor(math.log10(abs(want))) - 2)


# (file, method, {quantity: published value}); sources in tests/data/usl/README.md.
# A value of exactly 0 must be reproduced exactly (a parameter on its bound).
GOLDEN = [
    ("raytracer.csv", "bounded", {"alpha": 0.057771, "beta": 0.0, "gamma": 21.848843,
                                  "se_alpha": 0.013293, "se_gamma": 2.196165, "sigma": 9.34}),
    ("raytracer.csv", "linearised", {"alpha": 0.05002394, "beta": 4.708e-6}),
    ("specsdm91.csv", "bounded", {"alpha": 0.0277285, "beta": 0.0001044, "gamma": 89.9952,
                                  "se_alpha": 0.0091217, "se_beta": 0.0000199,
                                  "se_gamma": 14.2134906, "sigma": 82.8, "n_max": 96.52,
                                  "x_max": 1884}),
    ("r_usl_tests_synthetic.csv", "bounded", {"alpha": 0.02, "beta": 0.02, "gamma": 1.0}),
    ("psa_cisco_mysql.csv", "unbounded", {"gamma": 995.6486, "alpha": 0.02671591,
                                          "beta": 0.0007690945, "x_max": 12341}),
]


def quantity(f: UslFit, name: str) -> float:
    if name.startswith("se_"):
        return f.se[name[3:]]
    if name in ("n_max", "x_max"):
        return f.peak[name]
    return getattr(f, name)


@pytest.mark.parametrize(("file", "method", "want"), GOLDEN,
                         ids=[f"{f}-{m}" for f, m, _ in GOLDEN])
def test_published_fits(file: str, method: str, want: dict[str, float]) -> None:
    f = fit_csv(DATA / file, method=method, bootstrap=0)
    for name, value in want.items():
        got = quantity(f, name)
        ok = got == 0.0 if value == 0.0 else sig3(got, value)
        assert ok, f"{name}: ours {got!r}, published {value!r}"


def test_schwartz_nmax_is_35() -> None:
    f = fit_csv(DATA / "psa_cisco_mysql.csv", method="unbounded", bootstrap=0)
    assert f.peak["n_max_floor"] == 35
    assert f.peak["n_max_integer"] in (35, 36)
    assert 35 <= f.peak["n_max"] < 36


def test_t_quantile_against_printed_tables() -> None:
    assert abs(t_quantile(0.975, 8) - 2.306) < 6e-4
    assert abs(t_quantile(0.95, 10) - 1.812) < 6e-4


def test_result_round_trips_through_json(tmp_path: Path) -> None:
    f = fit_csv(DATA / "raytracer.csv", bootstrap=200, seed=1, predict=[100])
    assert math.isinf(f.peak["n_max"])  # beta = 0
    path = f.save(tmp_path / "usl.json")
    raw = json.loads(path.read_text())
    assert raw["schema"] == "cachelab.usl" and raw["schema_version"] == 1
    assert raw["peak"]["n_max"] is None and raw["peak"]["n_max_infinite"] is True
    back = read_usl_result(tmp_path)
    assert math.isinf(back.peak["n_max"])
    assert back.params == f.params
    assert back.predict([100]) == f.predict([100])
    assert back.predictions[0]["extrapolated"] is False  # 100 < 2 x 64


def test_wrong_schema_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "usl.json").write_text('{"schema": "cachelab.load", "schema_version": 1}')
    with pytest.raises(InputError, match="not a cachelab USL result"):
        read_usl_result(tmp_path)


def test_bootstrap_is_reproducible() -> None:
    a = fit_csv(DATA / "specsdm91.csv", bootstrap=300, seed=5)
    b = fit_csv(DATA / "specsdm91.csv", bootstrap=300, seed=5, threads=1)
    assert a.bootstrap == b.bootstrap
    lo, hi = a.bootstrap["n_max"]["lo"], a.bootstrap["n_max"]["hi"]
    assert lo < a.peak["n_max"] < hi


def test_fractional_loads_are_not_truncated() -> None:
    n = [0.5, 1.25, 2.5, 3.75, 5.5, 8.25, 12.5]
    x = [2 * v / (1 + 0.05 * (v - 1) + 0.004 * v * (v - 1)) for v in n]
    f = fit_usl(n, x, bootstrap=0)
    assert f.n == n
    assert abs(f.alpha - 0.05) < 1e-6 and abs(f.beta - 0.004) < 1e-7


def test_fewer_than_six_points_refused() -> None:
    with pytest.raises(UsageError, match="at least 6"):
        fit_usl([1, 2, 3, 4, 5], [1, 2, 3, 4, 5])


def test_unknown_method() -> None:
    with pytest.raises(UsageError, match="unknown USL method 'nls'"):
        fit_usl([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], method="nls")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("n,x\n1,1\n2,abc\n", ":3: x 'abc' is not a number"),
        ("n,x\n1,1\n2\n", ":3: missing column 'x'"),
        ("n,x\n1,1\n0,2\n", ":3: load n = 0 must be above 0"),
        ("n,x\n1,1\n2,-1\n", ":3: throughput x = -1 must not be negative"),
        ("n,x\n1,1\n2,inf\n", ":3: x 'inf' is not a finite number"),
        ("n,x\n1,1\n2,2\n3,3\n", "3 data row(s) is too few"),
        ("a,b\n1,1\n", ":1: no column 'n'"),
    ],
)
def test_malformed_csv_names_file_and_line(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "data.csv"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        if needle.startswith(":1: no column"):
            read_csv(path, "n", "x")
        else:
            read_csv(path)
    assert str(e.value).startswith(str(path))
    assert needle in str(e.value)


def test_comments_and_column_choice(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("# comment\nx,threads,qps\n" + "".join(
        f"{i},{n},{q}\n" for i, (n, q) in enumerate(zip([1, 2, 4, 6, 8, 10],
                                                        [1, 1.8868, 3.0769, 3.5294, 3.5398,
                                                         3.3557]))))
    ns, xs, cols = read_csv(path, "threads", "qps")
    assert cols == ("threads", "qps") and ns[2] == 4 and xs[-1] == 3.3557


def test_write_and_render(tmp_path: Path) -> None:
    f = fit_csv(DATA / "raytracer.csv", bootstrap=0, predict=[100])
    written = f.write(tmp_path, plots=False)
    assert [p.name for p in written] == ["usl.json", "usl.csv"]
    assert read_usl_result(tmp_path).params == f.params
    lines = (tmp_path / "usl.csv").read_text().splitlines()
    assert lines[0].startswith("kind,n,x_measured") and lines[-1].startswith("predicted,100")
    text = f.render()
    assert text.startswith(f"USL fit of {DATA / 'raytracer.csv'} (processors → throughput), "
                           "11 points, method bounded")
    assert "Nmax: ∞ (beta = 0: Amdahl's law)" in text
