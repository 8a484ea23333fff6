"""Options every verb shares (see DESIGN.md, "The CLI contract"), and their handling."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cachelab.errors import Interrupted, UsageError
from cachelab.servers import ServerOptions

#: The exit codes of every verb (documented in ``cachelab --help`` and the README).
EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_SERVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line: what is wrong and where to look."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

T = TypeVar("T")


def arg_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse ``type=`` from a parser that raises UsageError: argparse then shows our
    message (what is wrong, what is allowed) instead of its generic "invalid value"."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except UsageError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = parse.__name__
    return convert


def verb_parser(sub: argparse._SubParsersAction, name: str, *, help: str,
                description: str) -> argparse.ArgumentParser:
    """A verb's parser: its one line in ``cachelab --help``, its description kept as written."""
    return sub.add_parser(name, help=help, description=description,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def finish_parser(
    p: argparse.ArgumentParser,
    verb: str,
    run: Callable[[argparse.Namespace], int],
    *,
    quick: str | None = None,
    plots: str | None = None,
    server: bool = False,
) -> None:
    """The options that end every verb's parser, in one order everywhere: ``--quick`` (with
    its help text), ``--no-plots``, ``--out`` and ``--format``, the server options; then the
    function that runs the verb."""
    if quick:
        p.add_argument("--quick", action="store_true", help=quick)
    if plots:
        p.add_argument("--no-plots", action="store_true", help=plots)
    add_output_options(p, verb)
    if server:
        add_server_options(p)
    p.set_defaults(func=run)


def add_output_options(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument(
        "--out", type=Path, metavar="DIR",
        help=f"write {verb}.json, CSV tables and plots here "
        f"(default: cachelab-out/{verb}-<date>-<time>)",
    )
    p.add_argument(
        "--format", choices=("table", "json"), default=None,
        help="what goes to stdout: a human table (default on a terminal) or the result JSON",
    )


def add_server_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "server", "Without --server or --socket, a private memcached is started on a free "
        "loopback port and stopped at exit."
    )
    g.add_argument(
        "--server", action="append", metavar="HOST:PORT",
        help="the memcached to measure (repeatable for a pool, where the verb supports one)",
    )
    g.add_argument("--socket", metavar="PATH", help="a memcached listening on a Unix socket")
    g.add_argument(
        "--server-threads", type=int, default=4, metavar="N",
        help="threads of the private memcached (-t; default 4)",
    )
    g.add_argument(
        "--server-memory", type=int, default=64, metavar="MB",
        help="memory of the private memcached (-m; default 64)",
    )
    g.add_argument(
        "--server-args", default="", metavar="ARGS",
        help="extra memcached flags for the private server, e.g. \"-o modern -B ascii\"",
    )


def server_address(args: argparse.Namespace, *, pool: bool = False) -> str | None:
    """The one address to use, or None for a private server."""
    servers = args.server or []
    if args.socket and servers:
        raise UsageError("give --server or --socket, not both")
    if len(servers) > 1 and not pool:
        raise UsageError(f"this verb measures one server; got {len(servers)} --server options")
    if args.socket:
        return f"unix:{args.socket}"
    if servers:
        s = servers[0]
        if ":" not in s or not s.rsplit(":", 1)[1].isdigit():
            raise UsageError(f"--server {s!r} is not HOST:PORT")
        return s
    if args.server_threads < 1 or args.server_memory < 1:
        raise UsageError("--server-threads and --server-memory must be at least 1")
    return None


def server_options(args: argparse.Namespace) -> ServerOptions:
    """The private memcached to start when no server is named, from the --server-* options."""
    try:
        extra = tuple(shlex.split(args.server_args))
    except ValueError as e:
        raise UsageError(f"--server-args: {e}") from None
    return ServerOptions(memory_mb=args.server_memory, threads=args.server_threads,
                         extra_args=extra)


def output_dir(args: argparse.Namespace, verb: str) -> Path:
    if args.out is not None:
        return args.out
    return Path("cachelab-out") / f"{verb}-{time.strftime('%Y%m%d-%H%M%S')}"


def stdout_format(args: argparse.Namespace) -> str:
    if args.format:
        return args.format
    return "table" if sys.stdout.isatty() else "json"


def finish_run(
    result: Any,
    out: Path,
    *,
    fmt: str,
    render: Callable[[Any], str],
    wrote: str,
    see: str,
    interrupted: bool,
) -> int:
    """The end every measuring verb shares: print the result (table or JSON), report problems
    and an abort on stderr, name what was written, and turn the outcome into the exit code.

    ``result`` has ``to_dict()``, ``problems()`` (counts by kind) and ``run`` (with an optional
    ``aborted`` reason); its artifacts are already in ``out``.
    """
    if fmt == "json":
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print(render(result))
    problems = result.problems()
    aborted = result.run.get("aborted")
    if aborted:
        print(f"cachelab: error: {aborted}", file=sys.stderr)
    elif problems:
        summary = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in problems.items())
        print(f"cachelab: found problems: {summary} (see {see})", file=sys.stderr)
    print(f"wrote {out}/{wrote}", file=sys.stderr if fmt == "json" else sys.stdout)
    if interrupted:
        raise Interrupted(f"interrupted; partial results saved in {out}")
    if aborted:
        return EXIT_SERVER
    return EXIT_PROBLEMS if problems else EXIT_OK
