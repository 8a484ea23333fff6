"""``cachelab usl``: fit the Universal Scalability Law to any CSV of (load, throughput)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import cachelab.usl as lib
from cachelab.cli import common, output
from cachelab.errors import UsageError
from cachelab.units import flag_text

#: Each flag's default as --help states it: the spec's (``UslSpec``'s field defaults; the
#: file has none).
_D = lib.UslSpec(file="")

DESCRIPTION = """\
Fit X(N) = gamma*N / (1 + alpha*(N-1) + beta*N*(N-1)) to measured throughput X at load N
(users, threads, connections; fractional N from Little's law is kept as is) and report the
coefficients with standard errors and t intervals, the residual standard error, Nmax
(continuous, best whole N, floor), the peak throughput with bootstrap intervals, and
predictions of X(N) and R(N) = N/X(N). A bounded fit that hides a superlinear start (alpha
< 0 when fitted without bounds) says so, with the payback load N-cross = -alpha/beta.

Methods:
""" + "\n".join(f"  {name:12} {summary}" for name, summary in lib.METHODS.items()) + """

Artifacts: usl.json (schema cachelab.usl v1), usl.csv (measured and predicted rows),
usl.png/svg (points, fit with band, linear scaling, Nmax).
"""

EXAMPLES = """\
cachelab usl data.csv --n threads --x qps
cachelab usl data.csv --n users --x tps --method unbounded --predict 48,64
cachelab usl sweep/scale.csv --n n --x throughput --format json --out fit   # a scale sweep
cachelab usl data.csv --n threads --x qps --format csv > fit.csv   # measured vs fitted
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


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "usl", help="fit the Universal Scalability Law to a CSV of load and throughput",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument("file", type=Path, metavar="FILE.csv", help="CSV with a header row")
    p.add_argument("--n", metavar="COL", help="column of the load N (default: the first)")
    p.add_argument("--x", metavar="COL", help="column of the throughput X (default: the second)")
    p.add_argument("--method", choices=list(lib.METHODS), default=_D.method,
                   help=f"fitting method (default {_D.method})")
    p.add_argument("--predict", type=common.arg_type(_loads), metavar="N,...",
                   help="loads to predict X(N) and R(N) at")
    p.add_argument("--level", type=common.limit_range(lib.LIMITS["level"]),
                   default=_D.level, metavar="L",
                   help="confidence level of every interval, a fraction above 0 and below 1 "
                   f"(default {flag_text(_D.level)})")
    p.add_argument("--bootstrap", type=common.limit_range(lib.LIMITS["bootstrap"]),
                   default=_D.bootstrap, metavar="R",
                   help="bootstrap resamples for Nmax and the peak (default "
                   f"{_D.bootstrap}; 0: none)")
    common.add_seed(p, "bootstrap seed", default=_D.seed)
    common.finish_parser(p, "usl", run, plots="skip the PNG/SVG plot")


def run(args: argparse.Namespace) -> int:
    out = output.prepare_out(args, "usl")
    spec = lib.UslSpec(file=args.file, n=args.n, x=args.x, method=args.method,
                       level=args.level, bootstrap=args.bootstrap, seed=args.seed,
                       predict=tuple(args.predict or ()))
    fit = lib.run(spec)
    return output.finish(args, fit, out, verb="usl", write={"plots": not args.no_plots},
                         wrote="usl.json, usl.csv" + ("" if args.no_plots else " and plots"))
