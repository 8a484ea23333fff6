"""Options every verb shares (see DESIGN.md, "The CLI contract"), and their handling."""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cachelab import _core
from cachelab.artifacts import describe_entry, in_the_way, write_through
from cachelab.errors import Interrupted, UsageError
from cachelab.intervals import parse_precision
from cachelab.pool import DISTRIBUTIONS, parse_members, read_servers_file
from cachelab.servers import ServerOptions
from cachelab.tls import TlsOptions

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


#: The largest seed: the Rust core keeps seeds as u64.
MAX_SEED = 2**64 - 1


def int_range(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type=`` for a whole number from ``lo`` to ``hi``: anything else (a
    fraction, a word, a number the Rust core could not hold) is refused with the range, as
    ``argument --samples: must be an integer from 1 to 10000000, got 99999999999999999999``."""

    def integer(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {lo} to {hi}, got {text.strip()}")
        return value

    return integer


def limit_range(limit: dict[str, Any]) -> Callable[[str], Any]:
    """An argparse ``type=`` for a spec field whose range the engine gives
    (``cachelab.load.LIMITS["connections"]``: ``{"lo", "hi", "above", "unit"}``): an
    :func:`int_range` for a whole number, else a :func:`float_range`."""
    if isinstance(limit["lo"], int):
        return int_range(limit["lo"], limit["hi"])
    return float_range(limit["lo"], limit["hi"], above=limit["above"])


def float_range(lo: float, hi: float, *, above: bool = False,
                below: bool = False) -> Callable[[str], float]:
    """An argparse ``type=`` for a finite number from ``lo`` to ``hi``; ``above`` and
    ``below`` leave out the ends (``--timeout`` must be above 0). The refusal says the range."""
    low = f"above {_num(lo)}" if above else f"from {_num(lo)}"
    high = f"below {_num(hi)}" if below else f"{'at most' if above else 'to'} {_num(hi)}"
    if below and not above:
        low = f"at least {_num(lo)} and"
    elif above:
        low += " and"

    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (lo < value if above else lo <= value) and \
            (value < hi if below else value <= hi)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be a number {low} {high}, got {text.strip()}")
        return value

    return number


def precision_arg(text: str) -> float:
    """``--precision``'s type (load, profile, scale, run): ``5%`` -> 0.05 by
    :func:`cachelab.load.precision.parse_precision`; the refusal says what is allowed."""
    try:
        return float(parse_precision(text) or 0.0)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e).split(": ", 1)[-1]) from None


def _num(v: float) -> str:
    """A range's end as typed: 3600, not 3600.0; 0.01 as is."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


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
    pool: bool = False,
    tls: bool = False,
) -> None:
    """The options that end every verb's parser, in one order everywhere: ``--quick`` (with
    its help text), ``--no-plots``, ``--out`` and ``--format``, the server options, the pool
    options, the TLS options; then the function that runs the verb."""
    if quick:
        p.add_argument("--quick", action="store_true", help=quick)
    if plots:
        p.add_argument("--no-plots", action="store_true", help=plots)
    add_output_options(p, verb)
    if server:
        add_server_options(p)
    if pool:
        add_pool_options(p)
    if tls:
        add_tls_options(p)
    p.set_defaults(func=run)


def add_output_options(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument(
        "--out", type=Path, metavar="DIR",
        help=f"write {verb}.json, CSV tables and plots into this directory, created if missing "
        f"and checked before anything runs (default: cachelab-out/{verb}-<date>-<time>)",
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
        help="the memcached to measure (repeatable for a pool, where the verb supports one: "
        "HOST:PORT[:WEIGHT])",
    )
    g.add_argument("--socket", metavar="PATH", help="a memcached listening on a Unix socket")
    g.add_argument(
        "--server-threads", type=int_range(1, 1024), default=None, metavar="N",
        help="threads of the private memcached (-t; default 4, replay 1)",
    )
    g.add_argument(
        "--server-memory", type=int_range(1, 2**20), default=64, metavar="MB",
        help="memory of the private memcached (-m; default 64)",
    )
    g.add_argument(
        "--server-args", default="", metavar="ARGS",
        help="extra memcached flags for the private server, e.g. \"-o modern -B ascii\"",
    )


def add_pool_options(p: argparse.ArgumentParser) -> None:
    """A pool of servers: ``--servers-file``, ``--distribution`` and the member failure
    settings (libmemcached's ``server_failure_limit`` and ``retry_timeout``). Read them with
    :func:`server_members` and :func:`pool_settings`; docs/load.md, "Pools"."""
    g = p.add_argument_group(
        "pool", "Give --server more than once (HOST:PORT[:WEIGHT]), or --servers-file, to "
        "drive a pool: each key goes to the member its distribution picks, as production "
        "clients pick it (docs/pools.md)."
    )
    g.add_argument("--servers-file", type=Path, metavar="FILE",
                   help="the pool's members, one HOST:PORT[:WEIGHT] a line (# comments)")
    g.add_argument("--distribution", choices=DISTRIBUTIONS,
                   help="how keys are spread: ketama (libmemcached's weighted, the default), "
                   "ketama-plain, rendezvous (pymemcache) or modula")
    g.add_argument("--member-failure-limit",
                   type=limit_range(_core.LOAD_LIMITS["member_failure_limit"]), metavar="N",
                   help="mark a member down after N failures in a row (failed connects, timed-"
                   "out requests, dropped connections; a reply resets the count; default 2)")
    g.add_argument("--member-retry", type=limit_range(_core.LOAD_LIMITS["member_retry"]),
                   metavar="S",
                   help="keep a member marked down for S seconds before trying it again "
                   "(default 2); meanwhile its requests fail at once as member_down and are "
                   "not sent to another member")
    g.add_argument("--proxy", metavar="HOST:PORT",
                   help="send every request to this proxy (twemproxy); --server or "
                   "--servers-file then name the memcached servers behind it, whose stats are "
                   "read and whose room is checked (load and scale check each server's "
                   "share of the keys as --distribution places them, default "
                   "twemproxy-ketama-fnv1a_64; docs/pools.md, 'Through twemproxy')")


def proxy_address(args: argparse.Namespace) -> str | None:
    """``--proxy`` checked (``HOST:PORT``, with the servers behind it given), or None."""
    proxy = getattr(args, "proxy", None)
    if proxy is None:
        return None
    if ":" not in proxy or not proxy.rsplit(":", 1)[1].isdigit():
        raise UsageError(f"--proxy {proxy!r} is not HOST:PORT")
    if not (args.server or getattr(args, "servers_file", None)):
        raise UsageError("--proxy needs the servers behind it: --server (repeatable) or "
                         "--servers-file, so their stats can be read")
    return str(proxy)


#: The pool flags and the settings they set (see :func:`pool_settings`).
_POOL_FLAGS = (("--distribution", "distribution"),
               ("--member-failure-limit", "member_failure_limit"),
               ("--member-retry", "member_retry"))


def server_members(args: argparse.Namespace) -> list[str] | None:
    """The servers to drive: ``[address]`` for one (``--server`` once, or ``--socket``), a
    pool's ``HOST:PORT[:WEIGHT]`` members in order (``--server`` repeated, or
    ``--servers-file``), or None for a private server. UsageError for a bad member or
    flags that do not go together; InputError naming the file and line for a bad servers
    file."""
    listed = args.server or []
    path = getattr(args, "servers_file", None)
    if path is not None:
        if listed or args.socket:
            raise UsageError("give --servers-file or --server/--socket, not both")
        return [s.spec for s in read_servers_file(path)]
    if len(listed) > 1:
        if args.socket:
            raise UsageError("give --server or --socket, not both")
        parse_members(listed)  # names a bad one, and two that are the same server
        return list(listed)
    address = server_address(args)
    if address is None:
        given = [flag for flag, name in _POOL_FLAGS if getattr(args, name, None) is not None]
        if given:
            raise UsageError(f"{given[0]} is for a pool: give --server (repeated) or "
                             "--servers-file")
        return None
    return [address]


def pool_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The pool settings given on the command line (``distribution``,
    ``member_failure_limit``, ``member_retry``), to override a spec's."""
    return {name: getattr(args, name) for _, name in _POOL_FLAGS
            if getattr(args, name, None) is not None}


def add_tls_options(p: argparse.ArgumentParser, *, needs: str = "--server",
                    sni_default: str = "the host of --server") -> None:
    """memtier_benchmark's TLS flags, for a memcached started with ``-Z`` (see docs/load.md,
    "TLS"). ``needs``: what ``--tls`` goes with; ``sni_default``: the name sent without
    ``--sni``. (``finish_parser(tls=True)`` adds them with these defaults.)"""
    g = p.add_argument_group(
        "TLS", "For a memcached started with -Z. Without --cacert the server's certificate must "
        "chain to the Mozilla roots built into cachelab (not the system store)."
    )
    g.add_argument("--tls", action="store_true", help=f"connect over TLS (needs {needs})")
    g.add_argument("--cacert", metavar="FILE",
                   help="PEM file of the certificate authorities to trust")
    g.add_argument("--cert", metavar="FILE",
                   help="PEM client certificate (chain), for a server that asks for one")
    g.add_argument("--key", metavar="FILE", help="PEM private key of --cert")
    g.add_argument("--tls-skip-verify", action="store_true",
                   help="accept any server certificate (encrypted, but unauthenticated)")
    g.add_argument("--sni", metavar="NAME",
                   help=f"server name to send and verify (default: {sni_default})")


def tls_options(args: argparse.Namespace) -> TlsOptions | None:
    """The TLS settings from the flags of :func:`add_tls_options`, checked (files exist and
    are readable, --cert with --key), or None without ``--tls``. UsageError for a TLS flag
    without ``--tls``, and for ``--tls`` with ``--socket``."""
    given = [flag for flag, value in (("--cacert", args.cacert), ("--cert", args.cert),
                                      ("--key", args.key), ("--sni", args.sni),
                                      ("--tls-skip-verify", args.tls_skip_verify)) if value]
    if not args.tls:
        if given:
            raise UsageError(f"{given[0]} needs --tls")
        return None
    if getattr(args, "socket", None):
        raise UsageError("--tls is for TCP servers (--server HOST:PORT), not --socket")
    if hasattr(args, "server") and not args.server and not getattr(args, "servers_file", None):
        raise UsageError("--tls needs --server HOST:PORT: the private memcached runs without TLS")
    tls = TlsOptions(cacert=args.cacert, cert=args.cert, key=args.key,
                     skip_verify=args.tls_skip_verify, sni=args.sni)
    tls.check()
    return tls


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


# -- output paths: checked before the work, written so that results survive ----------------


def prepare_out(args: argparse.Namespace, verb: str) -> Path:
    """The directory the verb writes into (``--out`` or the default), checked before it
    measures or reads anything expensive, so a bad ``--out`` costs nothing (see
    :func:`check_out_dir`; its ``VERB.json`` too, which every verb writes)."""
    out = output_dir(args, verb)
    check_out_dir(out, files=(f"{verb}.json",))
    return out


def check_out_dir(path: Path, flag: str = "--out", *, files: tuple[str, ...] = ()) -> None:
    """UsageError (one line naming ``flag``, the path and why) unless ``path`` is a writable
    directory or one that can be made: nothing else in its place (a regular file, a device, a
    FIFO, a socket, a symlink to one of those or to nothing), under a directory (its nearest
    existing ancestor) in which files can be created; and none of ``files`` (the names the
    verb will write there) already in it as anything but a regular file. Writability is
    tried, by creating and removing a scratch file or directory, because permission bits lie
    (root, read-only mounts, /proc)."""
    what = in_the_way(path, directory=True)
    if what is not None:
        what = "an existing file" if what == "a regular file" else what
        raise UsageError(f"{_named(flag, path)}: is {what}, not a directory")
    if path.is_dir():
        for name in files:
            inside = in_the_way(path / name)
            if inside is not None:
                raise UsageError(f"{_named(flag, path)}: {name} there is {inside}, not a "
                                 "regular file: cachelab will not replace it")
        _probe(path, flag, path, "cannot write files there")
        return
    parent = _existing_ancestor(path, flag)
    _probe(path, flag, parent, f"cannot create a directory in {parent}", directory=True)


def check_out_file(path: Path, flag: str = "", *, replaces_dir: bool = False) -> None:
    """UsageError unless a file can be written at ``path``: nothing there, or a regular file
    (or a directory, when the writer replaces one whole, ``replaces_dir``: a Parquet trace) —
    never a device, FIFO, socket or a symlink to one —, in a directory that exists and takes
    files or can be made. ``flag`` names the option ("" for a positional argument)."""
    what = in_the_way(path, directory=replaces_dir)
    if what is not None:
        kind = "a regular file or directory" if replaces_dir else "a regular file"
        raise UsageError(f"{_named(flag, path)}: is {what}, not {kind}: cachelab writes only "
                         "regular files")
    parent = _existing_ancestor(path.parent, flag, shown=path)
    where = "there" if parent == path.parent else f"in {parent}"
    _probe(path, flag, parent, f"cannot create files {where}")


def _existing_ancestor(path: Path, flag: str, *, shown: Path | None = None) -> Path:
    """The nearest directory at or above ``path`` that exists; UsageError when something
    else is in the way (``--out results.json/x``, ``--out /dev/null/x``)."""
    for candidate in (path, *path.absolute().parents):
        if candidate.is_dir():
            return candidate
        what = describe_entry(candidate)
        if what is not None:
            what = "a file" if what == "a regular file" else what
            raise UsageError(f"{_named(flag, shown or path)}: {candidate} is {what}, "
                             "not a directory")
    return Path(path.anchor or "/")


def _probe(path: Path, flag: str, where: Path, what: str, *, directory: bool = False) -> None:
    """Create and remove a scratch entry in ``where``; UsageError saying ``what`` on failure."""
    try:
        if directory:
            os.rmdir(tempfile.mkdtemp(prefix=".cachelab-probe-", dir=where))
        else:
            fd, name = tempfile.mkstemp(prefix=".cachelab-probe-", dir=where)
            os.close(fd)
            os.remove(name)
    except OSError as e:
        # ENOENT for a directory that exists: a file system that takes no new entries (/proc).
        reason = "the file system does not allow it" if e.errno == errno.ENOENT else \
            (e.strerror or str(e))
        raise UsageError(f"{_named(flag, path)}: {what}: {reason}") from None


def _named(flag: str, path: Path) -> str:
    """``--out PATH``, or the bare path for a positional argument (no flag)."""
    return f"{flag} {path}" if flag else str(path)


@dataclass
class Saved:
    """Where a verb's results are: the target, the directory they were rescued to, or None
    when they could not be saved at all."""

    directory: Path | None
    #: True when they are not where asked (the run then cannot exit 0).
    moved: bool = False
    #: The one file rescued when the others could not be (None: all of them are there).
    only: str | None = None

    def exit_code(self, code: int) -> int:
        """The run's exit code, made 1 (problems) when its files are not where asked."""
        return (code or EXIT_PROBLEMS) if self.moved else code

    def say_wrote(self, files: str = "", *, stream: Any = None) -> None:
        """``wrote DIR[/FILES]``, the last line of a run, unless nothing was saved."""
        files = self.only or files
        if self.directory is not None:
            print(f"wrote {self.directory}" + (f"/{files}" if files else ""),
                  file=stream or sys.stdout)

    def interrupted(self) -> Interrupted:
        """The error a run stopped by a signal ends with (exit 130): where its partial
        results are."""
        where = f"saved in {self.directory}" if self.directory else "not saved"
        return Interrupted(f"interrupted; partial results {where}")


def save(result: Any, out: Path, verb: str, **write_options: Any) -> Saved:
    """``result.write(out, **write_options)`` through :func:`~cachelab.artifacts.write_through`.
    When ``out`` fails (disk full, removed or made read-only during the run), the results go
    to a fresh directory under the system's temporary directory and one line on stderr says
    where; when that fails too, it says so (with ``--format json`` the result is on stdout)."""
    done = write_through(lambda d: result.write(d, **write_options), out, name=verb,
                         essential=lambda d: [result.save(d / f"{verb}.json")])
    if done.failure is None:
        return Saved(out)
    if done.directory is not None:
        only = None if done.rescue_failure is None else f"{verb}.json"
        what = f"{only} is" if only else "the results are"
        print(f"cachelab: error: cannot write {done.failure}; {what} saved in "
              f"{done.directory} instead", file=sys.stderr)
        return Saved(done.directory, moved=True, only=only)
    print(f"cachelab: error: cannot write {done.failure}, nor {done.rescue_failure}: the "
          "results are not saved", file=sys.stderr)
    return Saved(None, moved=True)


def stdout_format(args: argparse.Namespace) -> str:
    if args.format:
        return args.format
    return "table" if sys.stdout.isatty() else "json"


def measured(call: Callable[[], T]) -> tuple[T, bool]:
    """Runs a measuring verb's library ``call``: its result and False, or — stopped by Ctrl-C
    or SIGTERM — the partial result it kept (``Interrupted.partial``, marked PARTIAL) and
    True, for :func:`finish_run` to save and show before exiting 130. An
    :class:`~cachelab.errors.Interrupted` that kept nothing is raised on."""
    try:
        return call(), False
    except Interrupted as e:
        if e.partial is None:
            raise
        return e.partial, True


def finish_run(
    result: Any,
    saved: Saved,
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
    ``aborted`` reason); its artifacts are already in ``saved.directory``.
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
    saved.say_wrote(wrote, stream=sys.stderr if fmt == "json" else sys.stdout)
    if interrupted:
        raise saved.interrupted()
    if aborted:
        return EXIT_SERVER
    return saved.exit_code(EXIT_PROBLEMS if problems else EXIT_OK)
