"""The Universal Scalability Law: fit X(N) = γN / (1 + α(N−1) + βN(N−1)) to measurements.

γ is the throughput of one unit of load, α the cost of contention (waiting for a shared
resource), β the cost of coherency (units exchanging data pairwise). Throughput peaks at
Nmax = sqrt((1−α)/β); with β = 0 the law is Amdahl's and throughput approaches γ/α::

    from cachelab.usl import fit_usl, fit_csv
    f = fit_usl([1, 2, 4, 8, 16, 32], [955, 1879, 3549, 6531, 9897, 12074])
    f.alpha, f.beta, f.gamma, f.peak["n_max"], f.ci["alpha"]
    f.predict([48, 64])          # X(N) and R(N) = N/X(N) with intervals
    f = fit_csv("data.csv", n="threads", x="qps", method="unbounded")

The fitting is Rust (``cachelab-usl``): bounded Levenberg–Marquardt with an analytic Jacobian
from several starting points, standard errors from (JᵀJ)⁻¹·s², Student-t intervals, and a
seeded residual bootstrap for Nmax and the peak. See ``docs/usl.md``.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cachelab import _core
from cachelab.artifacts import check_schema, read_json, write_json
from cachelab.errors import InputError, UsageError

__all__ = [
    "METHODS", "MIN_POINTS", "SCHEMA", "SCHEMA_VERSION", "UslFit", "fit_csv", "fit_usl",
    "read_csv", "read_usl_result", "t_quantile",
]

SCHEMA = "cachelab.usl"
SCHEMA_VERSION = 1
MIN_POINTS = 6
#: Fitting methods by name, with a one-line description each.
METHODS: dict[str, str] = dict(_core.usl_methods())
PARAMS = ("gamma", "alpha", "beta")


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom."""
    return float(_core.t_quantile(float(p), float(df)))


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
    #: Where the data came from (file and columns), when known.
    source: dict[str, Any] = field(default_factory=dict)
    created: str = ""

    @classmethod
    def _from_core(cls, raw: Mapping[str, Any], source: Mapping[str, Any]) -> UslFit:
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
            source=dict(source), created=_now(),
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
        ns = [_number(v, "N") for v in ns]
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

def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


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


def _number(v: object, what: str) -> float:
    if isinstance(v, bool):
        raise UsageError(f"{what} must be a number, not {v!r}")
    try:
        return float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number, not {v!r}") from None


def fit_usl(
    n: Sequence[float],
    x: Sequence[float],
    method: str = "bounded",
    *,
    level: float = 0.95,
    bootstrap: int = 1000,
    seed: int = 0,
    predict: Iterable[float] = (),
    threads: int = 0,
    source: Mapping[str, Any] | None = None,
) -> UslFit:
    """Fits the USL to loads ``n`` (fractional values are kept as they are) and throughputs
    ``x``. ``method`` is one of :data:`METHODS` (``bounded``: α, β ∈ [0, 1], γ ≥ 0, as R
    ``usl`` 3.x; ``unbounded``; ``fixed-gamma``: γ = X(1); ``linearised``: the book's
    regression with γ = X(1); ``amdahl``: β = 0). ``bootstrap`` residual resamples (seeded by
    ``seed``) give intervals for Nmax and the peak; 0 skips them. Raises UsageError for fewer
    than 6 points, mismatched lengths, non-finite values, N ≤ 0 or X < 0."""
    if method not in METHODS and method != "linearized":
        raise UsageError(f"unknown USL method {method!r}; known: {', '.join(METHODS)}")
    if not (isinstance(bootstrap, int) and bootstrap >= 0):
        raise UsageError(f"bootstrap must be a whole number >= 0, not {bootstrap!r}")
    ns = [_number(v, "N") for v in n]
    xs = [_number(v, "X") for v in x]
    raw = _core.usl_fit(ns, xs, method, level=float(level), bootstrap=bootstrap,
                        seed=int(seed) & (2**64 - 1), threads=int(threads),
                        predict=[_number(v, "N") for v in predict])
    return UslFit._from_core(raw, source or {})


def read_csv(
    path: str | Path, n: str | None = None, x: str | None = None
) -> tuple[list[float], list[float], tuple[str, str]]:
    """Loads and throughputs from the columns named ``n`` and ``x`` of a CSV file with a
    header row (default: the first two columns). Blank lines and lines starting with ``#``
    are skipped. Returns (N values, X values, (N column, X column)). A malformed row raises
    InputError naming the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"{path}: empty file; expected a header row and data rows")
    rows = list(zip([i for i, _ in lines], csv.reader(line for _, line in lines)))
    header_line, header = rows[0]
    header = [h.strip() for h in header]
    if len(header) < 2:
        raise InputError(f"{path}:{header_line}: expected a header with at least two columns, "
                         f"got {','.join(header)!r}")
    n_col = n if n is not None else header[0]
    x_col = x if x is not None else header[1]
    idx = []
    for col in (n_col, x_col):
        if col not in header:
            raise InputError(f"{path}:{header_line}: no column {col!r}; columns: "
                             f"{', '.join(header)}")
        idx.append(header.index(col))
    ns: list[float] = []
    xs: list[float] = []
    for line_no, row in rows[1:]:
        values = []
        for col, i in zip((n_col, x_col), idx):
            if i >= len(row):
                raise InputError(f"{path}:{line_no}: missing column {col!r} "
                                 f"({len(row)} field(s), expected {len(header)})")
            cell = row[i].strip()
            try:
                v = float(cell)
            except ValueError:
                raise InputError(f"{path}:{line_no}: {col} {cell!r} is not a number") from None
            if not math.isfinite(v):
                raise InputError(f"{path}:{line_no}: {col} {cell!r} is not a finite number")
            values.append(v)
        if values[0] <= 0:
            raise InputError(f"{path}:{line_no}: load {n_col} = {row[idx[0]].strip()} must be "
                             "above 0")
        if values[1] < 0:
            raise InputError(f"{path}:{line_no}: throughput {x_col} = {row[idx[1]].strip()} "
                             "must not be negative")
        ns.append(values[0])
        xs.append(values[1])
    if len(ns) < MIN_POINTS:
        raise InputError(
            f"{path}: {len(ns)} data row(s) is too few to fit the USL's three parameters: "
            f"give at least {MIN_POINTS}"
        )
    return ns, xs, (n_col, x_col)


def fit_csv(path: str | Path, n: str | None = None, x: str | None = None,
            **kwargs: Any) -> UslFit:
    """:func:`read_csv` then :func:`fit_usl`; data problems are InputErrors naming the file."""
    ns, xs, (n_col, x_col) = read_csv(path, n, x)
    try:
        return fit_usl(ns, xs, source={"file": str(path), "n": n_col, "x": x_col}, **kwargs)
    except InputError:
        raise
    except UsageError as e:
        if "method" in str(e) or "bootstrap" in str(e) or "level" in str(e):
            raise
        raise InputError(f"{path}: {e}") from None


def read_usl_result(path: str | Path) -> UslFit:
    """A fit saved as ``usl.json`` (or a directory holding one)."""
    path, data = read_json(path, "usl.json")
    return UslFit.from_dict(data, str(path))
