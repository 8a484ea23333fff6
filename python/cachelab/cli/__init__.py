"""The ``cachelab`` command: one subcommand per verb, each a thin layer over the library.

Exit codes (every verb; :mod:`cachelab.cli.output`, the one place that picks them):

    0    measured and written (verdicts and caveats are inside the result)
    1    a check asked for with --fail-on failed (one line on stderr names it)
    2    usage or input error, or an --out that cannot be written (one line, no traceback)
    3    the server or network failed
    130  interrupted (Ctrl-C or SIGTERM); partial results were saved
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cachelab._core import __version__
from cachelab.cli.common import Parser
from cachelab.cli.output import (
    EXIT_CHECK,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SERVER,
    EXIT_USAGE,
)
from cachelab.errors import CachelabError, Interrupted

__all__ = ["EXIT_CHECK", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_SERVER",
           "EXIT_USAGE", "Parser", "build_parser", "main", "run"]


if TYPE_CHECKING:  # the verbs' modules, imported by name below (readers and tools see them)
    from cachelab.cli import (  # noqa: F401
        compare,
        load,
        profile,
        replay,
        report,
        scale,
        simulate,
        size,
        study,
        tiers,
        trace,
        usl,
    )

#: The verbs, in the order ``cachelab --help`` lists them: each verb's name and the module
#: of cachelab.cli that adds its parser (imported when needed: a command line that names
#: its verb first imports that verb's module alone, not every verb's libraries — pyarrow,
#: pandas, the simulators … — which would cost each ``cachelab load`` ~0.2 CPU-s).
VERBS = (("run", "study"), ("profile", "profile"), ("load", "load"), ("scale", "scale"),
         ("usl", "usl"), ("trace", "trace"), ("simulate", "simulate"), ("size", "size"),
         ("tiers", "tiers"), ("replay", "replay"), ("compare", "compare"),
         ("report", "report"))


def build_parser(verb: str | None = None) -> Parser:
    """The command's parser: every verb's, or only ``verb``'s (a name in :data:`VERBS`),
    which parses that verb's command lines exactly as the whole parser does."""
    parser = Parser(
        prog="cachelab",
        description="Measure, model and simulate memcached: latency profiles, load, "
        "scalability and caching strategies.",
        epilog="Exit codes: 0 measured and written, verdicts and caveats inside the result; "
        "1 a check asked for with --fail-on (invalid, precision, replay, problems) "
        "failed; 2 usage or input, or an --out that cannot be written; 3 server or network; "
        "130 interrupted (partial results written and marked). Every non-zero exit says why "
        "on stderr. The same in every verb; run 'cachelab VERB --help' for a verb's flags and "
        "examples.",
    )
    parser.add_argument("--version", action="version", version=f"cachelab {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    sub.required = True
    for name, module in VERBS:
        if verb is None or name == verb:
            importlib.import_module(f"cachelab.cli.{module}").add_parser(sub)
    return parser


def _on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script. Returns the exit code (and exits with it)."""
    code = run(argv)
    sys.exit(code)


def run(argv: Sequence[str] | None = None) -> int:
    """Runs one command line and returns its exit code, printing errors as one line."""
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        args_ = list(sys.argv[1:] if argv is None else argv)
        verb = args_[0] if args_ and args_[0] in dict(VERBS) else None
        try:
            args = build_parser(verb).parse_args(args_)
        except SystemExit as e:  # a usage error (exit 2) or --help (exit 0), already printed
            return e.code if isinstance(e.code, int) else EXIT_USAGE
        return int(args.func(args))
    except CachelabError as e:
        # One line, whatever the message holds (e.g. a driver's error text with newlines).
        print(f"cachelab: error: {' '.join(str(e).split())}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("cachelab: interrupted", file=sys.stderr)
        return Interrupted.exit_code
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error of ours. Point stdout at
        # /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
