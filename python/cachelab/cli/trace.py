"""``cachelab trace``: synthesize, inspect and convert request and flat key traces."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import cachelab.trace as lib
from cachelab.cli import common, output
from cachelab.cli.common import Parser
from cachelab.cli.target import target_from
from cachelab.errors import UsageError
from cachelab.progress import Progress
from cachelab.resp import is_url, redact
from cachelab.trace import CaptureFileSpec, ConvertSpec, InspectSpec, SynthSpec
from cachelab.traces.capture_spec import LIMITS as _CAPTURE
from cachelab.traces.capture_spec import READERS, CaptureSpec
from cachelab.traces.formats import REQUEST_FORMATS, detect_format, format_name
from cachelab.traces.inspect import INSPECT_FILE
from cachelab.traces.synth import (
    DEFAULT_PRESET,
    PRESETS,
    SYNTH_PART,
    SYNTH_PART_LIMIT,
    SynthParams,
)
from cachelab.traces.synth import LIMITS as _SYNTH
from cachelab.units import flag_text

#: Each flag's default as --help states it: the synthetic model's (``SynthParams``'s field
#: defaults, the default preset), the small trace's (``--quick``), and the capture's
#: (``CaptureSpec``'s).
_S = SynthParams.preset(DEFAULT_PRESET)
_SQ = SynthParams.quick()
_HEAVY = SynthParams.preset("heavy-pages")
_C = CaptureSpec()
#: ``--max-mb``'s range: the capture's ``max_bytes``, in MiB.
_MAX_MB = {**_CAPTURE["max_bytes"], "lo": _CAPTURE["max_bytes"]["lo"] // 2**20,
           "hi": _CAPTURE["max_bytes"]["hi"] // 2**20, "unit": "MiB"}
#: ``--buffer-mb``'s range: the capture's ``max_buffer``, in MiB.
_BUFFER_MB = {**_CAPTURE["max_buffer"], "lo": _CAPTURE["max_buffer"]["lo"] // 2**20,
              "hi": _CAPTURE["max_buffer"]["hi"] // 2**20, "unit": "MiB"}

DESCRIPTION = """\
Request traces (a content catalog plus requests that each touch an ordered list of items;
JSONL or a Parquet directory) and flat key traces (CSV time,key,size[,op], libCacheSim
oracleGeneral binary, one key per line), and captures of a live memcached's key stream
(read as flat traces of their gets). The format follows from the file name (.jsonl,
.jsonl.gz, .parquet, .capture.parquet, .csv, .bin/.oracleGeneral, .txt) unless --from/--to
name it.
See docs/traces.md.
"""

EXAMPLES = """\
cachelab trace synth --quick --out traces          # traces/trace.jsonl
cachelab trace inspect traces/trace.jsonl
cachelab trace capture --server 10.0.0.5:11211 --duration 600 --out day
cachelab trace convert traces/trace.jsonl flat.csv
"""

SYNTH_EXAMPLES = """\
cachelab trace synth --quick --out traces          # traces/trace.jsonl
cachelab trace synth site.parquet --requests 1000000 --seed 7
cachelab trace synth --preset heavy-pages --set route_mix='{"topic": 0.5, "video": 0.5}' t.jsonl
"""

INSPECT_EXAMPLES = """\
cachelab trace inspect traces/trace.jsonl
cachelab trace inspect day/trace.capture.parquet --format json --out day
"""

CAPTURE_EXAMPLES = """\
cachelab trace capture --server 10.0.0.5:11211 --duration 600 --out day
cachelab trace capture --servers-file pool.txt --duration 60 --sample 0.1 --out pool
cachelab trace capture --socket /run/memcached.sock --fail-on problems   # exit 1 on lost lines
cachelab trace capture --server redis://:PASSWORD@10.0.0.6:6379 --duration 60   # MONITOR
"""

CONVERT_EXAMPLES = """\
cachelab trace convert traces/trace.jsonl traces/trace.parquet
cachelab trace convert traces/trace.jsonl flat.csv        # each first touch, one access
cachelab trace convert day/trace.capture.parquet day.oracleGeneral
"""

SYNTH_DESCRIPTION = """\
Generate a content-site request trace shaped like Khan Academy's (domains > subjects >
topics > tutorials > videos/exercises/articles): Zipf page popularity, topic pages that
touch their descendants, item pages that touch breadcrumbs and their tutorial, the API
calls those pages make, a homepage and per-user dashboards, lognormal item sizes and base
latencies by route, several app instances and a diurnal request rate over one day. The
same parameters and seed give the same file, byte for byte. Writes PATH (or --out: a
.jsonl/.parquet path, or a directory that gets trace.jsonl); prints a summary.

The requests are made and written in parts (--part, 65,536 by default: Parquet row groups,
JSONL lines), so memory holds the catalog and one part (about 250 MiB in all) however many
requests there are: a 50 M-request trace needs no more memory than a 1 M one. A progress
bar shows on a terminal. The part size does not change the trace.

The defaults are the preset appengine-article: calibrated so that `cachelab simulate` with
the appengine-2017 model reproduces the aggregates Khan Academy's article reports (API calls
that touch one item, content pages, topic pages that touch their descendants; base latencies
by route). --preset heavy-pages is the shape before that calibration (every page touches
about 21 items, 40 ms base latency). Any parameter of the model can be set on top with --set
NAME=VALUE (VALUE is JSON, e.g. --set route_mix='{"topic": 0.5, "video": 0.5}'); see
docs/traces.md for the list.
"""

INSPECT_DESCRIPTION = """\
Summarise a trace: requests, catalog items, touches, unique keys touched, working-set
bytes, popularity skew (Zipf alpha fitted to the rank-frequency curve on log-log axes, and
the share of touches that go to the top 1 % of keys), items per request (p50/p90/p99/max)
and requests per route. Flat key traces get the flat summary. A table on a terminal, the
JSON otherwise; --out DIR also writes DIR/trace-inspect.json.
"""

CAPTURE_DESCRIPTION = """\
Capture a live memcached's key stream (memcached 1.6+, `watch fetchers mutations`) for
--duration seconds into a capture file (Parquet: time, key, operation, hit or miss, size,
slab class, client connection, and a request id grouping the keys of one multi-get). Keys
are pseudonymised with a keyed hash whose secret is random per capture and never written
(--keep-keys to keep them). The capture is a flat trace of its gets for `trace inspect`,
`trace convert` and `simulate`. The server's own counters over the capture are recorded
beside it and compared with what was captured. A thread of the capture drains the stream
into memory as fast as the server writes (at most 1 GiB waiting to be parsed, then it
stops, with a warning), and it keeps the server's logger thread awake (a connection opened
and closed every 10 ms while the stream is quiet, seen through `watch connevents`), which
otherwise sleeps up to a second when idle and drops much of a burst; it waits (at most 3 s)
for the logger to answer before its clock starts. Lines the server still loses (its worker
threads' log buffers full, or skipped because the capture fell behind) are counted by cause
and said first in the headline and on stderr (exit 1 with --fail-on problems).
Ctrl-C (or SIGTERM) at any moment ends it early and keeps what was read (exit 130, PARTIAL);
so does a server whose stream closes mid-capture, stopped or restarted (exit 3, one line on
stderr naming it). An empty capture exits 0 with a warning on stderr. Costs the server a
little per request while it runs (docs/traces.md). Give --server more than once (or
--servers-file) to capture a pool: every member at once, one secret for all (a key has one
pseudonym on any member), merged by time into one file with a member column; lost lines are
counted per member. A proxy has no key stream: capture the servers behind it. See
docs/traces.md, "Capturing a trace".

A Redis or Valkey (--server redis://[user:pass@]HOST:PORT[/db], or HOST:PORT with --protocol
resp) is captured through MONITOR into the same file: a row per key of each GET, MGET, SET
(its value's length as the size), SETEX, GETEX, DEL, UNLINK, ... with its database (a /db in
the URL keeps that database alone); hits are not in the stream (the server's keyspace_hits
and misses are shown beside it). MONITOR is dear: the server copies every command to the
capture, and the table's second line states the cost measured (docs/resp.md, "trace
capture"); rediss:// (or --tls) reads it over TLS.
"""

CONVERT_DESCRIPTION = """\
Convert SRC to DST: between request formats (jsonl <-> parquet), from a request trace to a
flat key trace (each first touch of an item within a request becomes one access at the
request's time, with the item's size), or between flat formats. Nothing is written when
SRC is malformed; DST appears complete or not at all.
"""


def _action(actions: argparse._SubParsersAction, name: str, help: str, description: str,
            examples: str) -> argparse.ArgumentParser:
    """A subcommand's parser, with its description and the --help ending every verb has."""
    return actions.add_parser(name, help=help, description=description,
                              epilog=common.help_epilog(examples),
                              formatter_class=argparse.RawDescriptionHelpFormatter)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = common.verb_parser(sub, "trace", help="synthesize, inspect and convert traces",
                           description=DESCRIPTION, examples=EXAMPLES)
    actions = p.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    actions.required = True

    s = _action(actions, "synth", "generate a synthetic content-site request trace",
                SYNTH_DESCRIPTION, SYNTH_EXAMPLES)
    s.add_argument("path", nargs="?", type=Path, metavar="PATH",
                   help="the trace to write (.jsonl, .jsonl.gz or .parquet)")
    s.add_argument("--to", metavar="FMT", help="jsonl or parquet (default: from the name)")
    s.add_argument("--requests", type=common.limit_range(_SYNTH["requests"]), metavar="N",
                   help=f"requests to generate (default {_S.requests}; {_SQ.requests} with "
                   "--quick)")
    s.add_argument("--seed", type=common.limit_range(_SYNTH["seed"]), metavar="N",
                   help=f"seed of every draw (default {_S.seed})")
    s.add_argument("--quick", action="store_true", help="a small trace of the same shape")
    s.add_argument("--preset", choices=tuple(PRESETS), default=None, metavar="NAME",
                   help="the shape to start from: " + ", ".join(PRESETS) + f" (default "
                   f"{DEFAULT_PRESET}, calibrated to the seed article; heavy-pages: the "
                   "shape before that calibration); flags and --set apply on top")
    s.add_argument("--alpha", type=common.limit_range(_SYNTH["alpha"]), metavar="A",
                   help="Zipf exponent of page popularity within a route (default "
                   f"{flag_text(_S.alpha)}; heavy-pages {flag_text(_HEAVY.alpha)})")
    s.add_argument("--instances", type=common.limit_range(_SYNTH["instances"]), metavar="N",
                   help=f"app instances (default {_S.instances})")
    s.add_argument("--duration", type=common.limit_range(_SYNTH["duration_s"]),
                   metavar="S",
                   help=f"seconds the requests span (default {flag_text(_S.duration_s)}, one day)")
    s.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="set any model parameter (repeatable); VALUE is JSON or a bare string")
    s.add_argument("--part", type=common.limit_range(SYNTH_PART_LIMIT), default=SYNTH_PART,
                   metavar="N",
                   help=f"requests made and written at a time (default {SYNTH_PART:,}): memory "
                   "holds the catalog and one part; the trace is the same whatever N")
    output.add_output_options(
        s, "trace", out_help="a directory to write trace.jsonl into (trace.parquet with --to "
        "parquet; default: cachelab-out/trace-<date>-<time>/); to name the file, give PATH "
        "(a trace path as --out is deprecated)")
    s.set_defaults(func=run_synth)

    i = _action(actions, "inspect", "summarise a trace", INSPECT_DESCRIPTION, INSPECT_EXAMPLES)
    i.add_argument("path", type=Path, metavar="PATH", help="the trace file (or .parquet dir)")
    i.add_argument("--from", dest="from_format", metavar="FMT",
                   help="jsonl, parquet, csv, oracle or lines (default: from the name)")
    output.add_output_options(i, "trace", out_help=f"also write DIR/{INSPECT_FILE}")
    i.set_defaults(func=run_inspect)

    k = _action(actions, "capture", "capture a live memcached's key stream (or a Redis's "
                "commands, through MONITOR) into a trace",
                CAPTURE_DESCRIPTION, CAPTURE_EXAMPLES)
    k.add_argument("--duration", type=common.limit_range(_CAPTURE["duration"]),
                   default=_C.duration, metavar="S",
                   help=f"seconds to capture (default {flag_text(_C.duration)})")
    k.add_argument("--sample", type=common.limit_range(_CAPTURE["sample"]), default=_C.sample,
                   metavar="R", help="keep this share of keys, every access of a kept key "
                   f"(default {flag_text(_C.sample)}: all)")
    k.add_argument("--keep-keys", action="store_true",
                   help="write the keys as they are (default: pseudonymised)")
    k.add_argument("--max-events", type=common.limit_range(_CAPTURE["max_events"]),
                   default=_C.max_events, metavar="N",
                   help=f"stop after N accesses written (default {_C.max_events:,})")
    k.add_argument("--max-mb", type=common.limit_range(_MAX_MB), default=_C.max_bytes // 2**20,
                   metavar="MB", help="stop after MB of the server's stream (default "
                   f"{_C.max_bytes // 2**20})")
    k.add_argument("--buffer-mb", type=common.limit_range(_BUFFER_MB),
                   default=_C.max_buffer // 2**20, metavar="MB",
                   help="the most stream read from the server and not parsed yet; past it the "
                   "capture stops with a warning rather than lose lines (default "
                   f"{_C.max_buffer // 2**20}; the rust reader)")
    k.add_argument("--no-wake", action="store_true",
                   help="do not keep the server's logger thread awake (by default a "
                   "connection is opened and closed every 10 ms while the stream is quiet, "
                   "seen through 'watch connevents'; without it a burst after a quiet "
                   "spell can lose lines in the server)")
    k.add_argument("--reader", choices=READERS, default=_C.reader,
                   help=f"the stream reader: {_C.reader} (default; drains the socket in a "
                   "thread of its own, parses with the GIL released, keeps the server's "
                   "logger awake) or python (the reference it matches row for row; no "
                   "drain thread, no waker: it loses lines at rates the rust one does not, "
                   "docs/traces.md)")
    output.add_output_options(
        k, "capture", checks=("problems",),
        out_help="a directory to write trace.capture.parquet into (default: "
        "cachelab-out/capture-<date>-<time>/; a *.capture.parquet path is deprecated)")
    _add_capture_target(k)
    k.add_argument("--protocol", choices=("text", "resp"), default=None,
                   help="what the server speaks: text (memcached, watched with 'watch "
                   "fetchers mutations'; the default) or resp (a Redis or Valkey at --server "
                   "HOST:PORT, captured through MONITOR); a --server redis://[user:pass@]"
                   "HOST:PORT[/db] is resp without it (docs/resp.md)")
    common.add_tls_options(k, needs="a Redis: --server rediss://… is TLS without it",
                           sni_default="the host of --server")
    k.set_defaults(func=run_capture, speaks_resp=True)

    c = _action(actions, "convert", "convert a trace to another format", CONVERT_DESCRIPTION,
                CONVERT_EXAMPLES)
    c.add_argument("src", type=Path, metavar="SRC", help="the trace to read")
    c.add_argument("dst", type=Path, metavar="DST", help="the trace to write")
    c.add_argument("--from", dest="from_format", metavar="FMT",
                   help="format of SRC (default: from its name)")
    c.add_argument("--to", dest="to_format", metavar="FMT",
                   help="format of DST (default: from its name)")
    c.add_argument("--format", choices=("table", "json"), default=None,
                   help="what goes to stdout: one line (default on a terminal) or JSON")
    c.set_defaults(func=run_convert)


def _add_capture_target(p: argparse.ArgumentParser) -> None:
    """The shared target flags a capture takes (one vocabulary, README): --server (repeated
    for a pool), --servers-file, --socket, and --proxy, refused with what to give instead."""
    g = p.add_argument_group("server", textwrap.fill(
        "The memcached to capture (1.6+): --server, or --socket; a pool: --server repeated, "
        "or --servers-file, every member watched at once. A Redis: --server redis://... "
        "(or HOST:PORT with --protocol resp).", width=78))
    g.add_argument("--server", action="append", metavar="HOST:PORT",
                   help="the memcached to capture (HOST:PORT), or a Redis "
                   "(redis://[user:pass@]HOST:PORT[/db]); give a memcached more than once to "
                   "capture a pool: every member at once, merged by time into one file with a "
                   "member column (a member's :WEIGHT is ignored)")
    g.add_argument("--servers-file", type=Path, metavar="FILE",
                   help="capture the pool listed in FILE (one HOST:PORT[:WEIGHT] a line, # "
                   "comments; weights are ignored)")
    g.add_argument("--socket", metavar="PATH",
                   help="capture a memcached listening on a Unix socket")
    g.add_argument("--proxy", metavar="HOST:PORT",
                   help="not for a capture (a proxy has no key stream to watch): give the "
                   "servers behind it as --server or --servers-file")


# -- synth -----------------------------------------------------------------------------------


def _parse_set(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise UsageError(f"--set {text!r}: expected NAME=VALUE")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return name.strip().replace("-", "_"), value


def params_from(args: argparse.Namespace) -> SynthParams:
    """--preset, --quick, --set and the parameter flags -> checked :class:`SynthParams`."""
    values: dict[str, Any] = SynthParams.preset(args.preset or DEFAULT_PRESET).to_dict()
    if args.quick:
        values["requests"] = SynthParams.quick().requests
    for text in args.set:
        name, value = _parse_set(text)
        values[name] = value
    for flag, name in (("requests", "requests"), ("seed", "seed"), ("alpha", "alpha"),
                       ("instances", "instances"), ("duration", "duration_s")):
        value = getattr(args, flag)
        if value is not None:
            values[name] = value
    try:
        params = SynthParams.from_dict(values)
        params.check()
    except TypeError as e:  # a wrongly typed --set value
        raise UsageError(f"bad synth parameter: {e}") from None
    return params


def synth_path(args: argparse.Namespace) -> Path:
    """The trace file synth writes: PATH; ``trace.jsonl`` (or ``.parquet``) in --out or a
    default directory; --out as a trace path, deprecated."""
    if args.path is not None and args.out is not None:
        raise UsageError("give the trace's PATH or --out, not both")
    to = format_name(args.to) if args.to else None
    if to is not None and to not in REQUEST_FORMATS:
        raise UsageError(f"--to {args.to}: synth writes request traces (jsonl or parquet)")
    if args.path is not None:
        path = args.path
    else:
        path = output.output_dir(args, "trace")
        if not path.name.lower().endswith((".jsonl", ".jsonl.gz", ".ndjson", ".parquet")):
            if args.out is not None:
                output.check_out_dir(args.out)
            path = path / ("trace.parquet" if to == "parquet" else "trace.jsonl")
    if detect_format(path, to) not in REQUEST_FORMATS:
        raise UsageError(f"{path}: synth writes request traces (.jsonl, .jsonl.gz or "
                         ".parquet)")
    output.check_out_file(path, "--out" if args.out is not None else "",
                          replaces_dir=detect_format(path, to) == "parquet")
    if args.out is not None and path == args.out:
        print(f"cachelab: --out {path} (a trace path) is deprecated: give the path as PATH, "
              "or --out a directory", file=sys.stderr)
    return path


def run_synth(args: argparse.Namespace) -> int:
    spec = SynthSpec(params=params_from(args), path=synth_path(args), format=args.to,
                     part=args.part, preset=args.preset or DEFAULT_PRESET)
    with Progress(total=None, label="synth") as bar:
        result = lib.run(spec, progress=bar)
    return output.finish(args, result, None, verb="trace", written=spec.path)


# -- inspect ---------------------------------------------------------------------------------


def run_inspect(args: argparse.Namespace) -> int:
    if args.out is not None:
        output.check_out_dir(args.out, files=(INSPECT_FILE,))
    result = lib.run(InspectSpec(path=args.path, format=args.from_format))
    # verb: the name of the file it writes (and of its rescue directory)
    return output.finish(args, result, args.out, verb=INSPECT_FILE.removesuffix(".json"),
                         wrote=INSPECT_FILE)


# -- capture ---------------------------------------------------------------------------------


def capture_path(args: argparse.Namespace) -> Path:
    """The capture file: ``trace.capture.parquet`` in --out or a default directory; --out as
    a ``*.capture.parquet`` path, deprecated."""
    path = output.output_dir(args, "capture")
    if not path.name.lower().endswith(".capture.parquet"):
        if path.suffix:
            raise UsageError(f"--out {path}: a directory (it gets trace.capture.parquet)")
        if args.out is not None:
            output.check_out_dir(args.out)
        path = path / "trace.capture.parquet"
    output.check_out_file(path, "--out" if args.out is not None else "")
    if args.out is not None and path == args.out:
        print(f"cachelab: --out {path} (a capture file) is deprecated: --out is a directory "
              "that gets trace.capture.parquet", file=sys.stderr)
    return path


def _capture_protocol(args: argparse.Namespace) -> None:
    """``--protocol resp`` makes each --server HOST:PORT a ``redis://`` URL; UsageError when
    the flags disagree."""
    urls = [s for s in args.server or [] if is_url(s)]
    if args.protocol == "text" and urls:
        raise UsageError(f"--protocol text, but --server {redact(urls[0])} is a Redis URL: "
                         "give HOST:PORT, or --protocol resp")
    if args.protocol == "resp":
        if args.socket or args.servers_file:
            raise UsageError("--protocol resp captures one Redis at --server HOST:PORT (or "
                             "redis://…): not --socket or --servers-file")
        if not args.server:
            raise UsageError("--protocol resp captures a running Redis: give --server "
                             "HOST:PORT or redis://[user:pass@]HOST:PORT[/db]")
        args.server = [s if is_url(s) else f"redis://{s}" for s in args.server]


def run_capture(args: argparse.Namespace) -> int:
    _capture_protocol(args)
    target = target_from(args)
    what = CaptureSpec(duration=args.duration, sample=args.sample, keep_keys=args.keep_keys,
                       max_events=args.max_events, max_bytes=args.max_mb * 2**20,
                       reader=args.reader, max_buffer=args.buffer_mb * 2**20,
                       wake=not args.no_wake)
    spec = CaptureFileSpec(capture=what, path=capture_path(args), tls=common.tls_options(args))
    with Progress(total=None, label="capture") as bar:
        result = lib.run(spec, target, progress=bar)
    kept = f"{result.gets + result.stores:,} accesses kept in {result.path} (PARTIAL)"
    # No "wrote" line: the summary's second line says where the capture is.
    return output.finish(args, result, None, verb="capture", written=Path(result.path),
                         wrote=None, interrupted=result.ended == "interrupted", kept=kept,
                         aborted=f"{result.aborted}; {kept}" if result.aborted else None,
                         see="the notes")


# -- convert ---------------------------------------------------------------------------------


def _parquet(path: Path, fmt: str | None) -> bool:
    """Whether ``path`` names a Parquet trace (a directory, replaced whole when written); an
    unknown format is left to :func:`convert` to refuse."""
    try:
        return detect_format(path, fmt) == "parquet"
    except UsageError:
        return False


def run_convert(args: argparse.Namespace) -> int:
    output.check_out_file(args.dst, replaces_dir=_parquet(args.dst, args.to_format))
    result = lib.run(ConvertSpec(src=args.src, dst=args.dst, from_format=args.from_format,
                                 to_format=args.to_format))
    return output.finish(args, result, None, verb="trace", written=args.dst)
