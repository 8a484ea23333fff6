"""The one output door of every verb: ``--out`` checked before the work, the artifacts
written (temporary name, then rename; rescued elsewhere when the disk fails), the result
printed (``--format table|json|csv``: csv where the verb has a table, :data:`CSV_TABLES`), the
checks the user asked for (``--fail-on``) and the
exit code. A verb's ``run(args)`` reads its spec and target from the flags, calls the
library, and ends with ``return output.finish(args, result, out, verb=...)``.

Exit codes (every verb; README, "Exit codes"):

    0    measured and written: verdicts and caveats (INVALID, precision NOT reached, errors
         counted, a replay prediction off) are inside the result and its first lines
    1    a check the user asked for with --fail-on failed; stderr names it
    2    usage or input: a bad flag or file, an --out that cannot be written (checked before
         the run; when writing fails during it, the results go to a temporary directory that
         stderr names, and the exit is 2 as well)
    3    the server or network failed (partial results written and marked)
    130  interrupted (Ctrl-C or SIGTERM; partial results written and marked)

Every non-zero exit says why on stderr, one line, whatever ``--format`` is.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cachelab.answers import with_card
from cachelab.artifacts import describe_entry, in_the_way, write_through
from cachelab.errors import Interrupted, UsageError
from cachelab.tables import CsvTable, write_csv_rows

__all__ = [
    "CHECKS", "CSV_TABLES", "EXIT_CHECK", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_SERVER",
    "EXIT_USAGE", "EXIT_WRITE", "EXIT_CODES_HELP", "Saved", "add_output_options",
    "check_out_dir", "check_out_file", "checks_of", "finish", "measured", "output_dir",
    "prepare_out", "problems_text", "save", "stdout_format",
]

#: The exit codes of every verb (documented in ``cachelab --help``, each verb's --help and
#: the README).
EXIT_OK, EXIT_CHECK, EXIT_USAGE, EXIT_SERVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: Results that could not be written where asked (--out): an output problem, exit 2 as a bad
#: --out is before the run (the results are rescued to a temporary directory stderr names).
EXIT_WRITE = EXIT_USAGE

#: The checks ``--fail-on`` can ask for, and what each fails on (a verb offers those it has).
CHECKS: dict[str, str] = {
    "invalid": "the load verdict is INVALID (load; scale: any run)",
    "precision": "a --precision target was not reached (a p99 interval wider than asked)",
    "replay": "replay's prediction missed the measured added time by more than 15 %",
    "problems": "problems were counted: errors, lost requests, keys left behind, a member "
    "down or a server stopped (or unused) behind the proxy, a rate not held, mismatches; "
    "lines lost by a capture; a run step that failed",
}

#: The exit-code paragraph every verb's --help ends its description with.
EXIT_CODES_HELP = ("Exit codes: 0 measured and written (verdicts inside the result); 1 a "
                   "--fail-on check failed; 2 usage or input (also an --out that cannot be "
                   "written); 3 server or network; 130 interrupted (partial results kept).")

#: The verbs whose result has one main table, and the file in --out that holds it:
#: ``--format csv`` prints that table (the result's ``csv_table()``, :class:`CsvTable`) on
#: stdout; the other verbs do not offer ``--format csv``.
CSV_TABLES: dict[str, str] = {
    "compare": "compare.csv",
    "load": "load.csv",
    "profile": "profile.csv (a pool: profile-pool.csv)",
    "replay": "replay.csv",
    "scale": "scale.csv",
    "simulate": "simulate.csv (--drill: drill-prediction.csv)",
    "size": "size.csv",
    "tiers": "tiers.csv",
    "usl": "usl.csv",
}

T = TypeVar("T")


# -- the flags -------------------------------------------------------------------------------


def add_output_options(p: argparse.ArgumentParser, verb: str, *,
                       checks: Iterable[str] = (), out_help: str | None = None) -> None:
    """``--out DIR``, ``--format table|json`` (``|csv`` for a verb in :data:`CSV_TABLES`)
    and, for a verb with ``checks``, ``--fail-on``."""
    p.add_argument(
        "--out", type=Path, metavar="DIR",
        help=out_help or f"write {verb}.json, CSV tables and plots into this directory, "
        "created if missing and checked before anything runs (default: "
        f"cachelab-out/{verb}-<date>-<time>)",
    )
    table = CSV_TABLES.get(verb)
    p.add_argument(
        "--format", choices=("table", "json", "csv") if table else ("table", "json"),
        default=None,
        help="what goes to stdout: table, the human summary (default on a terminal); json, "
        "the result JSON (default otherwise)" + (f"; csv, the rows of {table}, header first "
                                                  "(RFC 4180)" if table else ""),
    )
    checks = tuple(checks)
    if checks:
        p.add_argument(
            "--fail-on", type=_checks_arg(checks), default=(), metavar="CHECK,...",
            help="exit 1 (one line on stderr naming it) when one of these checks fails; "
            "without it the run exits 0 and its verdicts are in the result: "
            + "; ".join(f"{c}: {CHECKS[c]}" for c in checks).replace("%", "%%"),
        )


def _checks_arg(allowed: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    def fail_on(text: str) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"{bad[0] if bad else text!r} is not a check of this verb: choose from "
                + ",".join(allowed))
        return names

    return fail_on


# -- output paths: checked before the work, written so that results survive ----------------


def output_dir(args: argparse.Namespace, verb: str) -> Path:
    """``--out``, or ``cachelab-out/VERB-<date>-<time>``."""
    if args.out is not None:
        return Path(args.out)
    return Path("cachelab-out") / f"{verb}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_out(args: argparse.Namespace, verb: str, *, files: tuple[str, ...] = ()) -> Path:
    """The directory the verb writes into (``--out`` or the default), checked before it
    measures or reads anything expensive, so a bad ``--out`` costs nothing (see
    :func:`check_out_dir`; its ``VERB.json`` too, which every verb writes, and ``files``)."""
    out = output_dir(args, verb)
    check_out_dir(out, files=(f"{verb}.json", *files))
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
    #: True when they are not where asked (the run then exits :data:`EXIT_WRITE`, unless the
    #: server failed: 3 is the first thing to fix).
    moved: bool = False
    #: The one file rescued when the others could not be (None: all of them are there).
    only: str | None = None

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
    """``--format``, or ``table`` on a terminal and ``json`` otherwise."""
    if getattr(args, "format", None):
        return str(args.format)
    return "table" if sys.stdout.isatty() else "json"


def measured(call: Callable[[], T]) -> tuple[T, bool]:
    """Runs a measuring verb's library ``call``: its result and False, or — stopped by Ctrl-C
    or SIGTERM — the partial result it kept (``Interrupted.partial``, marked PARTIAL) and
    True, for :func:`finish` to save and show before exiting 130. An
    :class:`~cachelab.errors.Interrupted` that kept nothing is raised on."""
    try:
        return call(), False
    except Interrupted as e:
        if e.partial is None:
            raise
        return e.partial, True


# -- checks ----------------------------------------------------------------------------------


def problems_text(problems: Mapping[str, int]) -> str:
    """``3 errors, 1 members down``: a result's problem counts in one phrase."""
    return ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in problems.items())


def checks_of(result: Any) -> dict[str, str]:
    """The checks ``result`` failed, each with its one-line reason: its ``failed_checks()``
    (the verdicts it carries: ``invalid``, ``precision``, ``replay``), and ``problems`` when
    its ``problems()`` counts any."""
    failed: dict[str, str] = (dict(result.failed_checks())
                              if hasattr(result, "failed_checks") else {})
    if "problems" not in failed and hasattr(result, "problems"):
        counted = result.problems()
        if counted:
            failed["problems"] = problems_text(counted)
    return failed


# -- the end of every verb -------------------------------------------------------------------


def finish(
    args: argparse.Namespace,
    result: Any,
    out: Path | None,
    *,
    verb: str,
    render: Callable[[Any], str] | None = None,
    write: Mapping[str, Any] | None = None,
    written: Path | None = None,
    wrote: str | None = "",
    see: str = "the summary",
    interrupted: bool = False,
    aborted: str | None = None,
    aborted_code: int = EXIT_SERVER,
    kept: str | None = None,
) -> int:
    """The end every verb shares, the only place that writes, prints and picks the exit code.

    ``result``: the library's result (``to_dict()``, ``render()``, ``write(dir, **write)``;
    optionally ``problems()``, ``failed_checks()``, ``run`` with an ``aborted`` reason,
    ``warnings``) or a plain dict with ``render``. It is written into ``out`` (unless ``out``
    is None, or the library wrote it already: ``written``, the file or directory it made),
    printed as a table, JSON or CSV (its ``csv_table()``), its warnings, an abort and its
    problems said on stderr, then ``wrote …``; the exit code is 130 when ``interrupted``
    (raised, with where the partial results are), 3 when the run gave up on the server (its
    ``run.aborted``, or ``aborted``, whose exit code is ``aborted_code``), 2 when the results
    are not where asked, 1 when a check named by ``--fail-on`` failed (one line naming it),
    else 0.
    ``wrote``: the files named after the directory in the last line (None: no such line, the
    result says where it is); ``kept``: what an interrupted run kept, said instead of where
    its results are.
    """
    fmt = stdout_format(args)
    if written is not None:
        saved: Saved | None = Saved(written)
    elif out is not None:
        saved = save(result, out, verb, **(write or {}))
    else:
        saved = None
    warnings = [str(w["message"]) if isinstance(w, dict) else str(w)
                for w in getattr(result, "warnings", None) or []]
    for warning in warnings:  # on stderr, which scripts read; the table's block has them too
        print(f"cachelab: warning: {warning}", file=sys.stderr)
    doc = result if isinstance(result, dict) else result.to_dict()
    if fmt == "json":
        print(json.dumps(doc, indent=1))
    elif fmt == "csv":
        table: CsvTable = result  # a verb of CSV_TABLES: its results have one
        write_csv_rows(sys.stdout, *table.csv_table())
    else:
        text = render(result) if render is not None else result.render()
        # The headline, the answer card, "what to trust:" (the other verdicts and alarms,
        # the warnings), then the rest (issue 31).
        answers = getattr(result, "answers", None)
        print(with_card(text, answers() if callable(answers) else [], warnings))
    if aborted is None:
        run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
        aborted = run.get("aborted") or None
    failed = {} if isinstance(result, dict) else checks_of(result)
    asked = tuple(getattr(args, "fail_on", ()) or ())
    if aborted:
        print(f"cachelab: error: {aborted}", file=sys.stderr)
    elif not interrupted:
        # Caveats said whether asked or not; the table's first lines carry the others.
        if "problems" in failed and "problems" not in asked:
            print(f"cachelab: found problems: {failed['problems']} (see {see})",
                  file=sys.stderr)
        if "replay" in failed and "replay" not in asked:
            print(f"{verb}: {failed['replay']}", file=sys.stderr)
    if saved is not None and wrote is not None:
        saved.say_wrote(wrote, stream=sys.stdout if fmt == "table" else sys.stderr)
    if interrupted:
        raise (Interrupted(f"interrupted; {kept}") if kept
               else (saved or Saved(None)).interrupted())
    if aborted:
        return aborted_code
    if saved is not None and saved.moved:
        return EXIT_WRITE
    hits = [name for name in asked if name in failed]
    if hits:
        print("cachelab: check failed: "
              + "; ".join(f"--fail-on {name}: {failed[name]}" for name in hits),
              file=sys.stderr)
        return EXIT_CHECK
    return EXIT_OK
