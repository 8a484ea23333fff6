"""Options every verb shares (see DESIGN.md, "The CLI contract"; the README's flag table),
and their handling. What a verb writes, prints and exits with is :mod:`cachelab.cli.output`."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from cachelab import _core
from cachelab.cli.output import (
    EXIT_CODES_HELP,
    EXIT_USAGE,
    add_output_options,
    measured,
    prepare_out,
)
from cachelab.errors import UsageError
from cachelab.intervals import parse_precision
from cachelab.load.engine import PROXY_DISTRIBUTION
from cachelab.pool import DISTRIBUTIONS, parse_members, read_servers_file
from cachelab.progress import Progress
from cachelab.resp import is_url, redact
from cachelab.scale.pinning import PIN_MAX_CPUS
from cachelab.servers import DEFAULT_THREADS, SERVER_LIMITS, ServerOptions
from cachelab.tls import TlsOptions


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line: what is wrong and where to look."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


T = TypeVar("T")


class _Deprecated(argparse.Action):
    """An old spelling of a flag: stores as the new one does, and says once on stderr
    ``cachelab: --concurrency is deprecated: use --connections``; hidden from --help."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, use: str,
                 const: Any = None, nargs: Any = None, **kwargs: Any) -> None:
        self.use = use
        super().__init__(option_strings, dest, nargs=nargs, const=const, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"cachelab: {option_string} is deprecated: use {self.use}", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def deprecated(p: argparse.ArgumentParser | Any, old: str, use: str, *, dest: str,
               flag: bool = False, **kwargs: Any) -> None:
    """Adds ``old`` as a hidden alias of the flag ``use`` (same ``dest``; ``flag``: a switch
    taking no value); using it prints one deprecation line on stderr."""
    if flag:
        kwargs.update(nargs=0, const=True)
    p.add_argument(old, dest=dest, action=_Deprecated, use=use, help=argparse.SUPPRESS,
                   default=argparse.SUPPRESS, **kwargs)


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


#: A seed's range: the Rust core keeps seeds as u64 (the engine's range), up to MAX_SEED.
SEED_LIMIT: dict[str, Any] = _core.LOAD_LIMITS["seed"]
MAX_SEED: int = SEED_LIMIT["hi"]


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


def limit_range(limit: dict[str, Any], *, scale: float = 1) -> Callable[[str], Any]:
    """An argparse ``type=`` for a spec field whose range the engine gives
    (``cachelab.load.LIMITS["connections"]``: ``{"lo", "hi", "above", "unit"}``): an
    :func:`int_range` for a whole number, else a :func:`float_range`; ``scale``: the flag
    counts in smaller units (1000: milliseconds for a field in seconds)."""
    if isinstance(limit["lo"], int) and scale == 1:
        return int_range(limit["lo"], limit["hi"])
    return float_range(limit["lo"] * scale, limit["hi"] * scale, above=limit["above"],
                       below=limit.get("below", False))


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


def measure(args: argparse.Namespace, verb: str, bar: Progress,
            work: Callable[[Progress], T]) -> tuple[Path, T, bool]:
    """A measuring verb's third step, after its spec and target: ``--out`` checked first
    (:func:`~cachelab.cli.output.prepare_out`: a bad one costs nothing), then ``work(bar)``
    (the verb's ``lib.run(spec, target, progress=bar)``) under ``bar``, its partial result
    kept on Ctrl-C (:func:`~cachelab.cli.output.measured`). Returns the directory, the
    result and whether it was interrupted: what :func:`~cachelab.cli.output.finish` takes."""
    out = prepare_out(args, verb)
    with bar:
        result, interrupted = measured(lambda: work(bar))
    return out, result, interrupted


def add_no_pin(p: argparse.ArgumentParser | Any, what: str = "the sweep") -> None:
    """``--no-pin``: on a machine with at most :data:`PIN_MAX_CPUS` CPUs, ``scale`` (and
    ``run``'s scale step) pins its private memcached and the load client to separate CPUs
    (``what`` names the sweep in the help)."""
    p.add_argument("--no-pin", dest="pin", action="store_false",
                   help=f"let the private memcached and the load client share every CPU in "
                   f"{what} (default: with {PIN_MAX_CPUS} CPUs or fewer, the server is pinned "
                   "to the first CPUs and the client to the rest, e.g. server on CPU 0, client "
                   "on CPU 1; a server given by --server is never pinned)")


def add_seed(p: argparse.ArgumentParser | Any, what: str, default: int | None = 0) -> None:
    """``--seed``, the same flag in every verb: a whole number the Rust core holds (0 to
    :data:`MAX_SEED`); ``what`` it seeds, and its ``default`` (None: a random one, which the
    verb picks)."""
    shown = "random" if default is None else default
    p.add_argument("--seed", type=limit_range(SEED_LIMIT), default=default,
                   help=f"{what} (default{':' if default is None else ''} {shown})")


def verb_parser(sub: argparse._SubParsersAction, name: str, *, help: str,
                description: str, examples: str) -> argparse.ArgumentParser:
    """A verb's parser: its one line in ``cachelab --help``, its description kept as written,
    and its help's end: the exit codes, then ``examples`` (2 to 4 command lines, with
    comments), the last thing ``cachelab VERB --help`` prints."""
    return sub.add_parser(name, help=help, description=description,
                          epilog=help_epilog(examples),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def help_epilog(examples: str) -> str:
    """The end of every --help: the exit codes (one policy) and the examples."""
    codes = textwrap.fill(EXIT_CODES_HELP, width=92)
    return f"{codes}\n\nExamples:\n{textwrap.indent(textwrap.dedent(examples).strip(), '  ')}\n"


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
    checks: Iterable[str] = (),
    server_memory: int = ServerOptions.memory_mb,
    server_threads: str = f"{DEFAULT_THREADS}",
    server_note: str = "",
) -> None:
    """The options that end every verb's parser, in one order everywhere: ``--quick`` (with
    its help text), ``--no-plots``, ``--out``, ``--format`` and ``--fail-on`` (the ``checks``
    the verb offers), the server options (with the private server's real defaults), the pool
    options, the TLS options; then the function that runs the verb."""
    if quick:
        p.add_argument("--quick", action="store_true", help=quick)
    if plots:
        p.add_argument("--no-plots", action="store_true", help=plots)
    add_output_options(p, verb, checks=checks)
    if server:
        add_server_options(p, memory=server_memory, threads=server_threads, note=server_note)
    if pool:
        add_pool_options(p)
    if tls:
        add_tls_options(p)
    p.set_defaults(func=run)


def add_server_options(p: argparse.ArgumentParser, *, memory: int = ServerOptions.memory_mb,
                       threads: str = f"{DEFAULT_THREADS}", note: str = "") -> None:
    """``--server``, ``--socket`` and the private server's ``--server-threads``,
    ``--server-memory`` (``memory``: the verb's default, in MB) and ``--server-args``; their
    help states the verb's real defaults (``threads``, ``note``: what else it starts with)."""
    g = p.add_argument_group(
        "server", textwrap.fill(
            "Without --server or --socket, a private memcached is started on a free loopback "
            "port and stopped at exit" + (f" ({note})" if note else "") + ".", width=78))
    g.add_argument(
        "--server", action="append", metavar="HOST:PORT",
        help="the memcached to measure (repeatable for a pool, where the verb supports one: "
        "HOST:PORT[:WEIGHT]); where the verb speaks RESP, a Redis or Valkey as "
        "redis://[USER:PASSWORD@]HOST[:PORT][/DB] or rediss://… (TLS)",
    )
    g.add_argument("--socket", metavar="PATH", help="a memcached listening on a Unix socket")
    g.add_argument(
        "--server-threads", type=limit_range(SERVER_LIMITS["threads"]), default=None, metavar="N",
        help=f"threads of the private memcached (-t; default {threads})",
    )
    g.add_argument(
        "--server-memory", type=limit_range(SERVER_LIMITS["memory_mb"]), default=memory,
        metavar="MB",
        help=f"memory of the private memcached (-m; default {memory}, raised when the run's "
        "keys and values need more)",
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
                   help="how keys are spread: ketama (libmemcached's weighted), ketama-plain, "
                   f"rendezvous (pymemcache) or modula (default {DISTRIBUTIONS[0]})")
    g.add_argument("--member-failure-limit",
                   type=limit_range(_core.LOAD_LIMITS["member_failure_limit"]), metavar="N",
                   help="mark a member down after N failures in a row (failed connects, timed-"
                   "out requests, dropped connections; a reply resets the count; default "
                   f"{_POOL_DEFAULTS['member_failure_limit']})")
    g.add_argument("--member-retry", type=limit_range(_core.LOAD_LIMITS["member_retry"]),
                   metavar="S",
                   help="keep a member marked down for S seconds before trying it again "
                   f"(default {_POOL_DEFAULTS['member_retry']:g}); meanwhile its requests fail "
                   "at once as member_down and are not sent to another member")
    g.add_argument("--proxy", metavar="HOST:PORT",
                   help="send every request to this proxy (twemproxy); --server or "
                   "--servers-file then name the memcached servers behind it, whose stats are "
                   "read and whose room is checked (load and scale check each server's "
                   "share of the keys as --distribution places them, default "
                   f"{PROXY_DISTRIBUTION}; docs/pools.md, 'Through twemproxy')")


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


#: The pool's member failure settings by default: the engine's (``LoadSpec``'s too).
_POOL_DEFAULTS = _core.LOAD_DEFAULTS

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
        if any(is_url(s) for s in listed):  # Redis servers: the target parses them
            return list(listed)
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
    ``member_failure_limit``, ``member_retry``): the Target's, which the verb puts in its spec."""
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
    are readable, --cert with --key), or None without ``--tls``. A ``rediss://`` server is
    TLS without ``--tls``. UsageError for a TLS flag without ``--tls``, and for ``--tls`` with
    ``--socket``."""
    given = [flag for flag, value in (("--cacert", args.cacert), ("--cert", args.cert),
                                      ("--key", args.key), ("--sni", args.sni),
                                      ("--tls-skip-verify", args.tls_skip_verify)) if value]
    rediss = any(s.startswith("rediss://") for s in getattr(args, "server", None) or [])
    if not args.tls and not rediss:
        if given:
            raise UsageError(f"{given[0]} needs --tls (or a rediss:// server)")
        return None
    if getattr(args, "socket", None):
        raise UsageError("--tls is for TCP servers (--server HOST:PORT), not --socket")
    if hasattr(args, "server") and not args.server and not getattr(args, "servers_file", None):
        raise UsageError("--tls needs --server HOST:PORT: the private memcached runs without TLS")
    tls = TlsOptions(cacert=args.cacert, cert=args.cert, key=args.key,
                     skip_verify=args.tls_skip_verify, sni=args.sni)
    tls.check()
    return tls


#: ``--protocol``'s values, one vocabulary for every verb: memcached's text or meta protocol,
#: or RESP (Redis, Valkey). Each verb refuses in one line those it does not speak.
PROTOCOL_CHOICES = ("text", "meta", "resp")


def add_protocol_option(p: argparse.ArgumentParser) -> None:
    """``--protocol text|resp`` for ``load``: what the servers speak (a ``redis://`` server
    speaks RESP without it; ``meta`` is refused: load speaks memcached's text protocol)."""
    p.add_argument("--protocol", choices=PROTOCOL_CHOICES, default=None,
                   help="what the servers speak: text (memcached's text protocol), or resp "
                   "(Redis, Valkey: RESP2) for a --server HOST:PORT, or a private "
                   "redis-server when no --server is given (--server-memory its maxmemory, "
                   "allkeys-lru); a --server redis://… or rediss://… speaks resp without it "
                   "(default text; meta is profile's; docs/resp.md)")
    p.set_defaults(speaks_resp=True)  # (the verbs without it refuse a redis:// server)


def protocol_of(args: argparse.Namespace) -> str | None:
    """The protocol the flags name: ``resp`` for ``--protocol resp`` or a ``redis://``
    server, ``memcached`` when asked, None when neither says; UsageError when they disagree."""
    urls = [s for s in (getattr(args, "server", None) or []) if is_url(s)]
    asked = getattr(args, "protocol", None)
    if asked == "meta":
        raise UsageError("--protocol meta: load speaks memcached's text protocol (meta is "
                         "profile's); give --protocol text or resp")
    if urls and asked == "text":
        raise UsageError(f"--protocol text, but --server {redact(urls[0])} is a Redis "
                         "URL: give HOST:PORT, or --protocol resp")
    asked = "memcached" if asked == "text" else asked
    return "resp" if urls else asked


def server_address(args: argparse.Namespace, *, pool: bool = False) -> str | None:
    """The one address to use (a ``redis://`` URL as given), or None for a private server."""
    servers = args.server or []
    if args.socket and servers:
        raise UsageError("give --server or --socket, not both")
    if len(servers) > 1 and not pool:
        raise UsageError(f"this verb measures one server; got {len(servers)} --server options")
    if args.socket:
        return f"unix:{args.socket}"
    if servers and is_url(servers[0]):
        return str(servers[0])
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
