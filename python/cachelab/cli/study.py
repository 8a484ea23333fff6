"""``cachelab run``: the whole study in one command, ending in one self-contained HTML page.

(This module is not ``cli/run.py``: that name would shadow :func:`cachelab.cli.run`, the
function that runs a command line, once imported.)
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import cachelab.run as lib
from cachelab.cli import common, output
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.resp import RespLogin
from cachelab.simulate.verb import SYNTHETIC, SYNTHETIC_QUICK

DESCRIPTION = """\
Measure a memcached and decide what to cache, in one command:

  profile   latency of get/set by value size and multi-get by key count
  scale     a concurrency sweep with a Universal Scalability Law fit
  simulate  caching strategies on a request trace (synthetic unless --trace), with the
            profile just measured as the latency model, and appengine-2017 for reference
  tiers     store vs memcached (+codec, +compression) vs process memory
  replay    the best simulated strategy run for real through cachelab.tiered

One memcached serves every step: the one given, or a private one started for the run. Each
step writes its artifacts into a subdirectory of --out; a step that fails is reported and the
run goes on. The end: run.json (the step table) and report.html (every result on one page,
viewable offline). --quick takes about a minute; the default about four.

A Redis or Valkey (--server redis://…, rediss://…, or --protocol resp: a private
redis-server when no --server is given): profile and scale over RESP, simulate with the
Redis profile as its latency model; tiers and replay, which measure memcached through
cachelab.tiered, are skipped with the reason (docs/resp.md, "run").

A step that reports problems, or whose check fails (replay's prediction off by more than 15 %,
likely on a busy machine), is marked in the table and the run exits 0: --fail-on replay,
problems makes either exit 1. A server failure exits 3. Cut short — Ctrl-C or SIGTERM, or the
server failing — the steps finished are kept, the step under way writes what it
measured (marked partial), run.json says so (interrupted, aborted: the first step that failed
on the server) and the report is written from what there is; the table's first line says
PARTIAL.
"""

#: Each flag's default as --help states it: the spec's (``RunSpec``'s field defaults; the
#: synthetic trace's length is simulate's).
_D = lib.RunSpec()

EXAMPLES = """\
cachelab run --quick
cachelab run --server 127.0.0.1:11211 --steps profile,scale --out study
cachelab run --quick --fail-on replay,problems   # for CI: exit 1 when a step's check fails
cachelab run --quick --protocol resp   # the study of a private redis-server
"""



def _precision_or_off(text: str) -> float | None:
    """``run --precision``: a percentage as the other verbs take it, or ``off`` (fixed
    samples and windows)."""
    return None if text.strip().lower() == "off" else common.precision_arg(text)

def _steps(text: str) -> tuple[str, ...]:
    steps = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in steps if s not in lib.STEPS]
    if bad or not steps:
        raise UsageError(f"--steps {text!r}: choose from {','.join(lib.STEPS)}")
    return steps


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(
        sub, "run",
        help="the whole study: profile, scale, simulate, tiers, replay, one HTML report",
        description=DESCRIPTION, examples=EXAMPLES,
    )
    p.add_argument("--quick", action="store_true", help="a small study of the same shape "
                   "(about a minute)")
    p.add_argument("--steps", type=common.arg_type(_steps), metavar="LIST",
                   default=_D.steps, help=f"steps to run (default {','.join(_D.steps)})")
    p.add_argument("--trace", metavar="FILE",
                   help="a request trace (.jsonl, .parquet) for simulate (default: synthetic)")
    p.add_argument("--requests", type=common.limit_range(lib.LIMITS["requests"]), metavar="N",
                   help=f"requests in the synthetic trace (default {SYNTHETIC}; {SYNTHETIC_QUICK} "
                   "with --quick)")
    # The trace's seed is this one + 1: one below the largest (RunSpec's range).
    p.add_argument("--seed", type=common.limit_range(lib.LIMITS["seed"]), default=_D.seed,
                   help=f"seed of every random choice (default {_D.seed})")
    p.add_argument("--precision", type=_precision_or_off, metavar="P%|off",
                   default=lib.DEFAULT_PRECISION,
                   help="the precision profile and scale run to (as their --precision: "
                   "each profile cell sampled until its p99's 95 %% interval is within ±P %%, "
                   "its samples the cap; each scale run stopped once its p99 is, its window "
                   "the cap; --quick's target is the p50, which its samples can certify: 500 put "
                   f"5 beyond a p99; default {100 * lib.DEFAULT_PRECISION:g}%%; off: fixed "
                   "samples and windows); the report gives each number's precision")
    p.add_argument("--no-report", action="store_true", help="skip report.html")
    common.add_no_pin(p, "the scale step")
    common.add_protocol_option(p)
    common.finish_parser(p, "run", run, server=True, checks=("replay", "problems"),
                         server_memory=lib.PRIVATE_MEMORY_MB,
                         server_note=f"-I {lib.PRIVATE_ITEM_SIZE_MAX}: replay's catalog and "
                         "tiers' largest record need the room")


def run(args: argparse.Namespace) -> int:
    if args.trace is not None and args.requests is not None:
        raise UsageError("give --trace or --requests, not both")
    spec = lib.RunSpec(quick=args.quick, steps=args.steps, seed=args.seed, trace=args.trace,
                       requests=args.requests, report=not args.no_report,
                       precision=args.precision, pin=args.pin)
    spec.check()
    target = target_from(args)
    if common.protocol_of(args) == "resp" and target.resp is None:
        target = dataclasses.replace(target, resp=RespLogin())
    out = output.prepare_out(args, "run")
    try:
        # A line per stage on stderr (no bar).
        with Progress(None, "run", enabled=False) as lines:
            result, interrupted = output.measured(
                lambda: lib.run(spec, target, progress=lines, out=out))
    except OSError as e:
        # Only run.json is written outside a step (a step's failure is in its table row),
        # so the steps' results are in place; say so rather than print a traceback.
        print(f"cachelab: error: cannot write {e.filename or out}: {e.strerror or e}; the "
              f"steps' results written before are in {out}", file=sys.stderr)
        return output.EXIT_WRITE
    aborted, code = None, output.EXIT_SERVER
    bad_input = [s for s in result.steps if s.input_failure]
    if any(s.server_failure for s in result.steps):
        aborted = (f"{result.aborted or 'the server failed'}; the results measured are "
                   f"saved in {out}")
    elif bad_input:  # a malformed --trace: the steps that need it failed, the others ran
        aborted, code = (f"step {bad_input[0].name}: {bad_input[0].error}; the other steps' "
                         f"results are saved in {out}"), output.EXIT_USAGE
    return output.finish(args, result, out, verb="run", written=out, aborted=aborted,
                         aborted_code=code,
                         wrote="run.json" + (f" and {result.report}" if result.report else ""),
                         see="the table", interrupted=interrupted)


__all__ = ["add_parser", "run"]
