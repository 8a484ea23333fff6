"""A USL fit, :class:`UslFit` (schema ``cachelab.usl`` v1, docs/usl.md), and everything made
from it: ``usl.json``, ``usl.csv`` (measured and predicted rows), ``usl.png``/``.svg`` and the
human summary."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import cachelab._core as _core
from cachelab.answers import Answer
from cachelab.artifacts import check_schema, created_now, read_json, write_json
from cachelab.errors import InputError, UsageError
from cachelab.tables import write_json_and_csv
from cachelab.units import num
from cachelab.usl.answers import bound_text, usl_answers
from cachelab.usl.quality import relative_se

__all__ = ["CSV_HEADER", "PARAMS", "SCHEMA", "SCHEMA_VERSION", "UslFit", "csv_rows",
           "read_usl_result"]

SCHEMA = "cachelab.usl"
SCHEMA_VERSION = 1
PARAMS = ("gamma", "alpha", "beta")
CSV_HEADER = ["kind", "n", "x_measured", "x_fit", "residual", "x_lo", "x_hi", "x_pred_lo",
              "x_pred_hi", "r_fit", "r_lo", "r_hi", "extrapolated"]


@dataclass
class UslFit:
    """A fitted USL: coefficients, their uncertainty, fit quality and derived figures.

    ``se``, ``ci``, ``free`` and ``at_bound`` are keyed by ``"gamma"``, ``"alpha"``, ``"beta"``.
    ``peak`` has ``n_max`` (continuous; ``inf`` when β = 0, None when throughput never rises),
    ``n_max_integer`` (the whole N of highest throughput), ``n_max_floor``, ``x_max`` and
    ``amdahl_limit`` (γ/α). ``bootstrap`` holds percentile intervals (``lo``, ``median``,
    ``hi``) of the coefficients, ``n_max`` and ``x_max``. ``warnings`` are ``{code, message}``.
    """

    method: str
    level: float
    n: list[float]
    x: list[float]
    gamma: float
    alpha: float
    beta: float
    se: dict[str, float | None]
    ci: dict[str, list[float] | None]
    cov: list[list[float]] | None
    free: dict[str, bool]
    at_bound: dict[str, bool]
    sse: float
    sigma: float
    df: int
    t: float
    r_squared: float
    fitted: list[float]
    residuals: list[float]
    iterations: int
    converged: bool
    peak: dict[str, Any]
    bootstrap: dict[str, Any] | None
    warnings: list[dict[str, str]]
    predictions: list[dict[str, Any]] = field(default_factory=list)
    #: A superlinear start the bounds hide (:mod:`cachelab.usl.superlinear`), else None.
    superlinear: dict[str, Any] | None = None
    #: Where the data came from (file and columns), when known.
    source: dict[str, Any] = field(default_factory=dict)
    created: str = ""

    @classmethod
    def from_core(cls, raw: Mapping[str, Any], source: Mapping[str, Any]) -> UslFit:
        """The fit from what ``_core.usl_fit`` returns, with where the data came from."""
        params = raw["params"]
        return cls(
            method=raw["method"], level=raw["level"], n=list(raw["n"]), x=list(raw["x"]),
            gamma=params["gamma"], alpha=params["alpha"], beta=params["beta"],
            se=dict(raw["se"]), ci=dict(raw["ci"]), cov=raw["cov"], free=dict(raw["free"]),
            at_bound=dict(raw["at_bound"]), sse=raw["sse"], sigma=raw["sigma"], df=raw["df"],
            t=raw["t"], r_squared=raw["r_squared"], fitted=list(raw["fitted"]),
            residuals=list(raw["residuals"]), iterations=raw["iterations"],
            converged=raw["converged"], peak=dict(raw["peak"]), bootstrap=raw["bootstrap"],
            warnings=list(raw["warnings"]), predictions=list(raw["predictions"]),
            source=dict(source), created=created_now(),
        )

    @property
    def params(self) -> dict[str, float]:
        return {"gamma": self.gamma, "alpha": self.alpha, "beta": self.beta}

    @property
    def amdahl(self) -> bool:
        """True when β is zero: the fit is Amdahl's law and has no finite peak."""
        return self.beta == 0.0

    def throughput(self, n: float) -> float:
        """X(N) from the coefficients."""
        return self.gamma * n / (1 + self.alpha * (n - 1) + self.beta * n * (n - 1))

    def predict(self, ns: Iterable[float]) -> list[dict[str, Any]]:
        """X(N) and R(N) = N/X(N) at each N (fractional N allowed): ``x``, ``x_se``,
        ``x_lo``/``x_hi`` (confidence interval of the mean), ``x_pred_lo``/``x_pred_hi``
        (prediction interval of one new measurement), ``r``, ``r_lo``, ``r_hi``, and
        ``extrapolated`` (N beyond 2x the largest measured N)."""
        ns = [as_number(v, "N") for v in ns]
        return list(_core.usl_predict(self.gamma, self.alpha, self.beta, self.cov, self.sigma,
                                      self.t, max(self.n), ns))

    def to_dict(self) -> dict[str, Any]:
        """The ``usl.json`` content: JSON-safe (non-finite numbers become null;
        ``peak.n_max_infinite`` tells an infinite Nmax from a missing one)."""
        d = asdict(self)
        d["peak"] = {**d["peak"], "n_max_infinite": _is_inf(self.peak.get("n_max"))}
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **_json_safe(d)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "usl result") -> UslFit:
        check_schema(d, SCHEMA, SCHEMA_VERSION, "USL result", where)
        try:
            values = {f.name: d[f.name] for f in fields(cls) if f.name in d}
            peak = dict(values["peak"])
            if peak.pop("n_max_infinite", False):
                peak["n_max"] = math.inf
            values["peak"] = peak
            return cls(**values)
        except (KeyError, TypeError) as e:
            raise InputError(f"{where}: missing or bad field {e}") from None

    def save(self, path: str | Path) -> Path:
        return write_json(path, self.to_dict(), allow_nan=False)

    def csv_table(self) -> tuple[list[str], list[list[object]]]:
        """``usl.csv`` (and ``--format csv``): :data:`CSV_HEADER` and its rows."""
        return CSV_HEADER, csv_rows(self)

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """``usl.json``, ``usl.csv`` and, unless told not to, ``usl.png``/``.svg`` in
        ``out_dir``."""
        written = write_json_and_csv(self, out_dir, "usl")
        if plots:
            # deferred: matplotlib takes ~0.4 s to import; only drawing needs it
            from cachelab.usl.plots import usl_plot

            src = self.source
            written += usl_plot(self, out_dir / "usl",
                                xlabel=f"load N ({src['n']})" if src else "load N",
                                ylabel=f"throughput X ({src['x']})" if src else "throughput X(N)")
        return written

    def answers(self) -> list[Answer]:
        """The answer card (:mod:`cachelab.answers`): α, β, Nmax and the peak throughput,
        each with the fit's interval and a trust mark from the fit's quality."""
        return usl_answers(self)

    def render(self) -> str:
        """The human summary: coefficients with their intervals, fit quality, the peak,
        predictions and warnings."""
        return "\n".join(_summary_lines(self))


def read_usl_result(path: str | Path) -> UslFit:
    """A fit saved as ``usl.json`` (or a directory holding one)."""
    path, data = read_json(path, "usl.json")
    return UslFit.from_dict(data, str(path))


def _is_inf(v: object) -> bool:
    return isinstance(v, float) and math.isinf(v)


def _json_safe(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Mapping):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def as_number(v: object, what: str) -> float:
    """``v`` as a float; UsageError naming ``what`` for anything else (booleans too)."""
    if isinstance(v, bool):
        raise UsageError(f"{what} must be a number, not {v!r}")
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number, not {v!r}") from None


def _cell(v: object) -> object:
    if isinstance(v, float):
        return "" if not math.isfinite(v) else repr(v)
    return v


def csv_rows(f: UslFit) -> list[list[object]]:
    """The rows of ``usl.csv`` (columns :data:`CSV_HEADER`): the measured points with the
    fit at each, then the predictions."""
    rows = []
    measured = f.predict(f.n)
    for n, x, res, p in zip(f.n, f.x, f.residuals, measured):
        rows.append(["measured", n, x, p["x"], res, p["x_lo"], p["x_hi"], p["x_pred_lo"],
                     p["x_pred_hi"], p["r"], p["r_lo"], p["r_hi"], int(p["extrapolated"])])
    for p in f.predictions:
        rows.append(["predicted", p["n"], "", p["x"], "", p["x_lo"], p["x_hi"], p["x_pred_lo"],
                     p["x_pred_hi"], p["r"], p["r_lo"], p["r_hi"], int(p["extrapolated"])])
    return [[_cell(v) for v in row] for row in rows]


# -- the human summary ----------------------------------------------------------------------


def _g(v: float | None, digits: int = 4) -> str:
    """``v`` to ``digits`` significant digits (:func:`~cachelab.units.num`); ∞ for infinity, —
    for none or NaN."""
    if v is None:
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    if isinstance(v, float) and math.isnan(v):
        return "—"
    return num(v, digits)  # never an exponent: 12,340, not 1.234e+04


def _summary_lines(f: UslFit) -> list[str]:
    src = f.source
    origin = src.get("file") or (f"a {src['sweep']} sweep" if src.get("sweep") else "")
    what = f"{origin} ({src.get('n')} → {src.get('x')}), " if origin else ""
    level = f"{f.level * 100:g} %"
    lines = [
        f"USL fit of {what}{len(f.n)} points, method {f.method}",
        "",
        f"{'':8}{'estimate':>12}{'std err':>12}{level + ' interval':>28}",
    ]
    for name in PARAMS:
        value = f.params[name]
        if not f.free[name]:
            note = "fixed to X(1)" if name == "gamma" else "fixed to 0"
            lines.append(f"{name:8}{_g(value, 6):>12}{'':>12}{note:>28}")
            continue
        ci = f.ci[name]
        interval = f"[{_g(ci[0])}, {_g(ci[1])}]" if ci else "—"
        mark = "  (at bound)" if f.at_bound[name] else ""
        lines.append(f"{name:8}{_g(value, 6):>12}{_g(f.se[name]):>12}{interval:>28}{mark}")
    lines += [
        "",
        f"residual standard error {_g(f.sigma)} on {f.df} degrees of freedom "
        f"({_g(relative_se(f.x, f.sigma), 2)} % of the mean X)",
    ]
    pk = f.peak
    b = f.bootstrap or {}
    bn = b.get("n_max")
    bx = b.get("x_max")
    boot_n = (f"; bootstrap {level} [{_g(bn['lo'])}, {bound_text(bn['hi'], 4)}]" if bn
              else "")
    boot_x = f"; bootstrap {level} [{_g(bx['lo'])}, {_g(bx['hi'])}]" if bx else ""
    if pk["n_max"] is None:
        lines.append("Nmax: none (throughput never rises with load)")
    elif math.isinf(pk["n_max"]):
        lines.append(f"Nmax: ∞ (beta = 0: Amdahl's law); throughput approaches "
                     f"gamma/alpha = {_g(pk['amdahl_limit'])}{boot_x}")
    else:
        lines.append(f"Nmax = {_g(pk['n_max'])} (best whole N {pk['n_max_integer']}, floor "
                     f"{pk['n_max_floor']}){boot_n}")
        lines.append(f"peak X = {_g(pk['x_max'])}{boot_x}")
    if b and b.get("infinite_n_max"):
        lines.append(f"  ({b['infinite_n_max']:.0%} of {b['resamples']} bootstrap resamples "
                     "have beta = 0, i.e. no finite peak)")
    if f.predictions:
        lines += ["", f"{'N':>8}{'X(N)':>12}{level + ' interval':>26}{'R(N) = N/X':>14}"
                  f"{'R interval':>26}"]
        for p in f.predictions:
            lines.append(
                f"{_g(p['n']):>8}{_g(p['x']):>12}"
                f"{'[' + _g(p['x_lo']) + ', ' + _g(p['x_hi']) + ']':>26}{_g(p['r']):>14}"
                f"{'[' + _g(p['r_lo']) + ', ' + _g(p['r_hi']) + ']':>26}"
                + ("  extrapolated" if p["extrapolated"] else "")
            )
    if f.warnings:
        lines.append("")
        lines += [f"warning: {w['message']}" for w in f.warnings]
    return lines
