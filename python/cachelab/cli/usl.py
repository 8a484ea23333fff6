"""``cachelab usl``: fit the Universal Scalability Law to any CSV of (load, throughput)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from cachelab import usl as lib
from cachelab.cli import EXIT_OK, common
from cachelab.errors import UsageError

DESCRIPTION = """\
Fit X(N) = gamma*N / (1 + alpha*(N-1) + beta*N*(N-1)) to measured throughput X at load N
(users, threads, connections; fractional N from Little's law is kept as is) and report the
coefficients with standard errors and t intervals, R^2, Nmax (continuous, best whole N, floor),
the peak throughput with bootstrap intervals, and predictions of X(N) and R(N) = N/X(N).

Methods:
""" + "\n".join(f"  {name:12} {summary}" for name, summary in lib.METHODS.items()) + """

Artifacts: usl.json (schema cachelab.usl v1), usl.csv (measured and predicted rows),
usl.png/svg (points, fit with band, linear scaling, Nmax).

Examples:
  cachelab usl data.csv --n threads --x qps
  cachelab usl data.csv --n users --x tps --method unbounded --predict 48,64
"""


def _loads(text: str) -> list[float]:
    out = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            raise UsageError(f"--predict {text!r}: {part!r} is not a number") from None
        if not (math.isfinite(v) and v > 0):
            raise UsageError(f"--predict {text!r}: loads must be above 0")
        out.append(v)
    return out


def _level(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"--level {text!r} is not a number") from None
    if v >= 1:
        v /= 100  # 95 means 95 %
    if not 0 < v < 1:
        raise UsageError(f"--level {text!r} must be between 0 and 1 (or a percentage)")
    return v


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "usl", help="fit the Universal Scalability Law to a CSV of load and throughput",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, metavar="FILE.csv", help="CSV with a header row")
    p.add_argument("--n", metavar="COL", help="column of the load N (default: the first)")
    p.add_argument("--x", metavar="COL", help="column of the throughput X (default: the second)")
    p.add_argument("--method", choices=list(lib.METHODS), default="bounded",
                   help="fitting method (default bounded)")
    p.add_argument("--predict", type=common.arg_type(_loads), metavar="N,...",
                   help="loads to predict X(N) and R(N) at")
    p.add_argument("--level", type=common.arg_type(_level), default=0.95, metavar="L",
                   help="confidence level of every interval (default 0.95)")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="R",
                   help="bootstrap resamples for Nmax and the peak (default 1000; 0: none)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG/SVG plot")
    common.add_output_options(p, "usl")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.bootstrap < 0:
        raise UsageError("--bootstrap must be 0 or more")
    fmt = common.stdout_format(args)
    fit = lib.fit_csv(args.file, args.n, args.x, method=args.method, level=args.level,
                      bootstrap=args.bootstrap, seed=args.seed, predict=args.predict or [])
    out = common.output_dir(args, "usl")
    write_artifacts(fit, out, plots=not args.no_plots)
    if fmt == "json":
        print(json.dumps(fit.to_dict(), indent=1))
    else:
        print(render(fit))
    stream = sys.stderr if fmt == "json" else sys.stdout
    print(f"wrote {out}/usl.json, usl.csv" + ("" if args.no_plots else " and plots"),
          file=stream)
    return EXIT_OK


def _g(v: float | None, digits: int = 4) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    if isinstance(v, float) and math.isnan(v):
        return "—"
    return f"{v:.{digits}g}"


def render(f: lib.UslFit) -> str:
    """The human summary."""
    src = f.source
    origin = src.get("file") or (f"a {src['sweep']} sweep" if src.get("sweep") else "")
    what = f"{origin} ({src.get('n')} → {src.get('x')}), " if origin else ""
    level = f"{f.level * 100:g} %"
    lines = [
        f"USL fit of {what}{len(f.n)} points, method {f.method}",
        "",
        f"{'':8}{'estimate':>12}{'std err':>12}{level + ' interval':>28}",
    ]
    for name in lib.PARAMS:
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
        f"residual standard error {_g(f.sigma)} on {f.df} degrees of freedom; "
        f"R² = {_g(f.r_squared, 5)}",
    ]
    pk = f.peak
    b = f.bootstrap or {}
    bn = b.get("n_max")
    bx = b.get("x_max")
    boot_n = f"; bootstrap {level} [{_g(bn['lo'])}, {_g(bn['hi'])}]" if bn else ""
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
    return "\n".join(lines)


CSV_HEADER = ["kind", "n", "x_measured", "x_fit", "residual", "x_lo", "x_hi", "x_pred_lo",
              "x_pred_hi", "r_fit", "r_lo", "r_hi", "extrapolated"]


def _cell(v: object) -> object:
    if isinstance(v, float):
        return "" if not math.isfinite(v) else repr(v)
    return v


def csv_rows(f: lib.UslFit) -> list[list[object]]:
    rows = []
    measured = f.predict(f.n)
    for n, x, res, p in zip(f.n, f.x, f.residuals, measured):
        rows.append(["measured", n, x, p["x"], res, p["x_lo"], p["x_hi"], p["x_pred_lo"],
                     p["x_pred_hi"], p["r"], p["r_lo"], p["r_hi"], int(p["extrapolated"])])
    for p in f.predictions:
        rows.append(["predicted", p["n"], "", p["x"], "", p["x_lo"], p["x_hi"], p["x_pred_lo"],
                     p["x_pred_hi"], p["r"], p["r_lo"], p["r_hi"], int(p["extrapolated"])])
    return [[_cell(v) for v in row] for row in rows]


def write_artifacts(f: lib.UslFit, out: Path, *, plots: bool = True) -> list[Path]:
    """usl.json, usl.csv and, unless told not to, usl.png/svg."""
    from cachelab.tables import write_csv

    out.mkdir(parents=True, exist_ok=True)
    written = [f.save(out / "usl.json")]
    write_csv(out / "usl.csv", CSV_HEADER, csv_rows(f))
    written.append(out / "usl.csv")
    if plots:
        from cachelab.plots.usl import usl_plot

        src = f.source
        written += usl_plot(f, out / "usl", xlabel=f"load N ({src['n']})" if src else "load N",
                            ylabel=f"throughput X ({src['x']})" if src else "throughput X(N)")
    return written
