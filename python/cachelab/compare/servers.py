"""Live A/B of server commands: :func:`compare_servers` starts each memcached command line
(``chrt -f 50 memcached -t 2``) on a private loopback port and runs interleaved rounds of a
short closed-loop load against each; rows compare the means over rounds.

The servers are started here with :class:`~cachelab.servers.PrivateMemcached` rather than
through ``servers.serve``: the command line under test is the input of this comparison (a
wrapper such as ``chrt`` or ``taskset``, memcached's own binary and flags), several servers
run side by side for the whole comparison, and a server that does not start is named with its
command and the reason.

A command may start a Redis or Valkey instead (``redis-server --io-threads 4``, the
program ``redis-server`` or ``valkey-server`` with its own ``--flag value`` arguments): it
runs as :class:`~cachelab.servers.PrivateRedis` does, and each round is a load over RESP
(docs/resp.md, "compare"). The commands of one comparison speak one protocol.

Over TLS (``tls``): each command listens with ``-Z`` and its certificate (a redis-server: its
``--tls-cert-file`` and ``--tls-key-file``; the A/B gives it ``--port 0 --tls-port PORT
--tls-auth-clients no``); the start waits for it to answer over TLS with the same options the
rounds use, and every round's load — its requests and its ``stats`` (``INFO``) — goes over
TLS.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cachelab._core as _core
import cachelab.environment as environment
from cachelab.artifacts import created_now
from cachelab.compare.result import CompareResult, summarize
from cachelab.compare.spec import LIMITS
from cachelab.compare.stats import PERCENTILES, change_row, welch
from cachelab.errors import ServerError, TlsHandshakeFailed, UsageError
from cachelab.load import LoadResult, LoadSpec, load
from cachelab.load.engine import measure as measure_load
from cachelab.resp import RespLogin
from cachelab.servers import PrivateMemcached, PrivateRedis, find_memcached
from cachelab.target import Target
from cachelab.tls import TlsOptions, core_tls, describe_tls, transport_of
from cachelab.units import check_limit

__all__ = ["compare_servers", "parse_server_cmd"]

#: memcached flags the A/B sets itself (a private loopback port, no UDP) or cannot allow
#: (daemonizing would hide the pid whose /proc schedstat is read).
_OWN_FLAGS = ("-p", "--port", "-l", "--listen", "-U", "--udp-port", "-s", "--unix-socket",
              "-d", "--daemon")
#: memcached's flag for TLS listeners.
_TLS_FLAGS = ("-Z", "--enable-ssl")
#: The programs of a Redis or Valkey command, and the flags the A/B sets itself or cannot
#: allow (its port and address, no persistence in a private directory, the foreground).
_REDIS = ("redis-server", "valkey-server")
_REDIS_OWN = ("--port", "--bind", "--unixsocket", "--daemonize", "--dir", "--tls-port",
              "--save", "--appendonly", "--logfile")
#: A redis-server's flags that name a file (its TLS material), made absolute.
_REDIS_FILES = ("--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file",
                "--tls-client-cert-file", "--tls-client-key-file", "--tls-dh-params-file")
_HIGHER_IS_BETTER = {"throughput": True}
_UNITS = {"throughput": "/s", "p50": "ns", "p90": "ns", "p99": "ns"}


def parse_server_cmd(text: str) -> tuple[list[str], list[str]]:
    """``"chrt -f 50 memcached -t 2"`` -> (``["chrt", "-f", "50", "/usr/bin/memcached"]``,
    ``["-t", "2"]``): the wrappers with memcached's path, and memcached's own flags.

    The command must end in a memcached invocation: wrappers that exec it (chrt, taskset,
    numactl, nice) come first, then ``memcached`` and its flags, without the listening flags
    that the A/B sets itself. Raises UsageError otherwise."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise UsageError(f"--server-cmd {text!r}: {e}") from None
    at = next((i for i, w in enumerate(words)
               if Path(w).name in ("memcached", *_REDIS)), None)
    if at is None:
        raise UsageError(f"--server-cmd {text!r} does not end in a memcached invocation (or "
                         "a redis-server one; e.g. 'chrt -f 50 memcached -t 2')")
    flags = words[at + 1:]
    if Path(words[at]).name in _REDIS:
        own = [f for f in flags if f.split("=", 1)[0] in _REDIS_OWN]
        if own:
            raise UsageError(f"--server-cmd {text!r}: leave out {' '.join(own)} (the A/B "
                             "listens on a private loopback port, without persistence, in "
                             "the foreground)")
        binary = shutil.which(words[at])
        if binary is None:
            raise UsageError(f"--server-cmd {text!r}: {words[at]} is not installed")
        if words[:at] and shutil.which(words[0]) is None:
            raise UsageError(f"--server-cmd {text!r}: {words[0]} is not installed")
        return [*words[:at], binary], flags
    own = [f for f in flags if f.split("=", 1)[0] in _OWN_FLAGS
           or (len(f) > 2 and f[:2] in ("-p", "-l", "-U", "-s") and not f.startswith("--"))]
    if own:
        raise UsageError(f"--server-cmd {text!r}: leave out {' '.join(own)} (the A/B listens "
                         "on a private loopback port, without UDP, in the foreground)")
    binary = find_memcached(words[at] if "/" in words[at] else None)
    wrappers = words[:at]
    if wrappers and shutil.which(wrappers[0]) is None:
        raise UsageError(f"--server-cmd {text!r}: {wrappers[0]} is not installed")
    return [*wrappers, binary], flags


def _is_redis(text: str) -> bool:
    """Whether the command ``text`` starts a Redis or Valkey (see :func:`parse_server_cmd`)."""
    return Path(parse_server_cmd(text)[0][-1]).name in _REDIS


def _listens_tls(flags: Sequence[str]) -> bool:
    """Whether memcached's ``flags`` make its listener speak TLS (``-Z``)."""
    return any(f in _TLS_FLAGS for f in flags)


def _server_for(text: str, tls: TlsOptions | None = None) -> PrivateMemcached | PrivateRedis:
    """A PrivateMemcached that runs the command ``text`` (see :func:`parse_server_cmd`): its
    wrapper and binary on a private loopback port, with the command's ``-t`` and ``-m`` (or
    the private server's defaults) and its other flags; with ``tls``, probed over TLS. A
    Redis or Valkey command: a PrivateRedis with the command's flags after its own (so a
    ``--maxmemory`` given wins)."""
    prefix, flags = parse_server_cmd(text)
    if Path(prefix[-1]).name in _REDIS:
        # redis-server reads its TLS files after it moved into its --dir: absolute paths
        flags = [str(Path(f).resolve()) if i and flags[i - 1] in _REDIS_FILES else f
                 for i, f in enumerate(flags)]
        return PrivateRedis(wrapper=prefix[:-1], binary=prefix[-1], extra_args=flags,
                            start_timeout=10.0, tls_options=tls)
    settings = {"-t": 4, "-m": 64}  # the private server's defaults, unless the command sets them
    rest: list[str] = []
    words = iter(flags)
    for w in words:
        if w in settings:
            value = next(words, "")
            if not value.isdigit() or int(value) < 1:
                raise UsageError(f"--server-cmd {text!r}: {w} needs a positive number")
            settings[w] = int(value)
        else:
            rest.append(w)
    return PrivateMemcached(
        wrapper=prefix[:-1], binary=prefix[-1], threads=settings["-t"],
        memory_mb=settings["-m"], extra_args=rest, start_timeout=10.0, tls=tls,
    )


def _start(text: str, label: str,
           tls: TlsOptions | None = None) -> PrivateMemcached | PrivateRedis:
    mc = _server_for(text, tls)
    try:
        return mc.start()
    except ServerError as e:
        why = str(e).replace("memcached did not start: ", "").replace(
            "redis-server did not start: ", "")
        hint = (" (real-time scheduling needs root or CAP_SYS_NICE)"
                if "not permitted" in why and "chrt" in text else "")
        if isinstance(e, TlsHandshakeFailed) and not _is_redis(text) \
                and not _listens_tls(parse_server_cmd(text)[1]):
            hint = ("; with --tls every --server-cmd must listen over TLS: add -Z -o "
                    "ssl_chain_cert=CERT.pem,ssl_key=KEY.pem")
        raise type(e)(f"{label} server {text!r} did not start: {why}{hint}") from None


def _round_metrics(r: LoadResult) -> dict[str, float | None]:
    """What one round contributes: throughput, latency percentiles, run-queue wait."""
    t = r.totals
    which = "corrected" if t.get("corrected") else "uncorrected"
    lat = t.get(which) or {}
    out: dict[str, float | None] = {"throughput": t["throughput"]}
    for q in PERCENTILES[:3]:
        out[f"p{q:g}"] = (float(_core.hist_percentiles(lat["histogram"], [q])[0])
                          if lat.get("count") else None)
    sched = r.server.get("schedstat") or {}
    out["run-queue wait"] = sched.get("wait_per_wall")
    out["wait per CPU s"] = sched.get("wait_per_cpu")
    return out


def _check(commands: Sequence[str], repeats: int, duration: float, level: float,
           tls: TlsOptions | None) -> None:
    if not 2 <= len(commands) <= 26:
        raise UsageError(f"give 2 to 26 --server-cmd, not {len(commands)}")
    for name, value in (("repeats", repeats), ("duration", duration), ("level", level)):
        check_limit(name, LIMITS[name], value)
    if tls is not None:
        if not isinstance(tls, TlsOptions):
            raise UsageError("tls must be a TlsOptions (cachelab.tls) or None")
        tls.check()
    if len({_is_redis(c) for c in commands}) > 1:
        raise UsageError("every --server-cmd speaks one protocol: all memcached, or all "
                         "redis-server (or valkey-server)")
    for c in commands:
        flags = parse_server_cmd(c)[1]
        if tls is not None and _is_redis(c):
            given = {f.split("=", 1)[0] for f in flags}
            missing = [f for f in ("--tls-cert-file", "--tls-key-file") if f not in given]
            if missing:
                raise UsageError(f"--server-cmd {c!r}: with --tls a redis-server needs its "
                                 f"certificate: add {' '.join(f + ' FILE' for f in missing)} "
                                 "(the A/B sets --tls-port itself)")
            continue
        if tls is None and _listens_tls(flags):
            raise UsageError(f"--server-cmd {c!r} listens over TLS (-Z): give --tls (and "
                             "--cacert for a private certificate authority)")


def compare_servers(
    commands: Sequence[str],
    *,
    repeats: int = 4,
    duration: float = 2.0,
    level: float = 0.95,
    seed: int = 0,
    out: Path | None = None,
    on_run: Callable[[int, int, str], None] | None = None,
    tls: TlsOptions | None = None,
) -> CompareResult:
    """Start each server command (the first is A) on a private loopback port and run
    ``repeats`` interleaved rounds of a short closed-loop load (``duration`` seconds after a
    0.5 s warm-up) against each, in ABBA order so that drift over time hits both alike. Each
    round yields throughput, p50/p90/p99 latency and the server's run-queue wait (from
    /proc/PID/task/*/schedstat: seconds spent waiting for a CPU per second of wall time);
    rows compare the means over rounds, with Welch's t interval — the rounds are the
    independent units. With ``out``, each round's load result is saved there as it ends
    (``rounds/A-1/load.json`` …).

    With ``tls``, every command must listen over TLS (``-Z`` and its certificate, valid for
    127.0.0.1 or the ``sni`` given): each start is checked over TLS with these options, and the
    rounds' load and ``stats`` go over TLS (``settings.transport`` is ``tls``).

    ``on_run(done, total, label)`` is called before each load run."""
    _check(commands, repeats, duration, level, tls)
    labels = [chr(65 + i) for i in range(len(commands))]
    per: list[list[dict[str, float | None]]] = [[] for _ in commands]
    runs: list[dict[str, Any]] = []
    started: list[PrivateMemcached | PrivateRedis] = []
    resp = _is_redis(commands[0])
    versions: list[str | None] = [None] * len(commands)
    try:
        for c, lab in zip(commands, labels):
            started.append(_start(c, lab, tls))
        total, done = repeats * len(commands), 0
        for rep in range(repeats):
            order = list(range(len(commands)))
            if rep % 2:
                order.reverse()
            for i in order:
                mc = started[i]
                if on_run:
                    on_run(done, total, f"{labels[i]} round {rep + 1}")
                spec = LoadSpec.quick(duration=duration, warmup=0.5, interval=0.5,
                                      seed=seed + rep, tls=tls)
                facts = {"private": True, "argv": mc.argv, "command": commands[i]}
                if resp:  # a Redis or Valkey: the same load over RESP
                    r = measure_load(dataclasses.replace(spec, protocol="resp"),
                                     Target(servers=(mc.address,),
                                            resp=RespLogin(tls=tls is not None)),
                                     server_pid=mc.pid, server_facts=facts)
                else:
                    r = load(spec, server=mc.address, server_pid=mc.pid, server_facts=facts)
                versions[i] = versions[i] or r.server.get("version")
                done += 1
                per[i].append(_round_metrics(r))
                runs.append({"server": labels[i], "round": rep + 1, **per[i][-1]})
                if out is not None:
                    r.save(Path(out) / "rounds" / f"{labels[i]}-{rep + 1}" / "load.json")
        facts = [{"command": c, "argv": mc.argv,
                  "version": v if resp else getattr(mc, "version", None),
                  "transport": transport_of(mc.address, tls),
                  **({"protocol": "resp", **_io_threads(mc.address, tls)} if resp else {})}
                 for c, mc, v in zip(commands, started, versions)]
    finally:
        for mc in started:
            mc.stop()
    rows, warnings = _rows(per, labels, level)
    names = [f"{lab}: {c}" for lab, c in zip(labels, commands)]
    over = " over TLS" if tls is not None else ""
    result = CompareResult(
        kind="servers", names=names, sources=list(commands),
        method=(f"{repeats} interleaved rounds (ABBA) of {duration:g} s closed-loop load{over} "
                "per server; means over rounds with Welch's t intervals; run-queue wait is the "
                f"server's /proc schedstat wait per wall second. Level {level:g}."),
        rows=rows, warnings=warnings,
        settings={"repeats": repeats, "duration": duration, "level": level, "seed": seed,
                  "transport": "tls" if tls is not None else "tcp",
                  "tls": describe_tls(tls),
                  "servers": facts, "rounds": runs},
        created=created_now(), environment=environment.facts(),
    )
    result.summary = summarize(result)
    return result


def _io_threads(address: str, tls: TlsOptions | None = None) -> dict[str, int]:
    """A Redis's ``io-threads`` (``CONFIG GET``, over TLS with ``tls``), ``{}`` where it does
    not answer."""
    try:
        with RespLogin().client(address, tls=core_tls(tls)) as c:
            found = dict(c.config_get("io-threads"))
    except ServerError:
        return {}
    value = str(found.get("io-threads", ""))
    return {"io_threads": int(value)} if value.isdigit() else {}


def _rows(per: list[list[dict[str, float | None]]], labels: list[str],
          level: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Each server against A, per metric: the means over rounds and Welch's t interval."""
    rows = []
    warnings: list[str] = []
    for j in range(1, len(per)):
        pair = f"{labels[j]} vs A"
        for metric in per[0][0]:
            xa = [m[metric] for m in per[0] if m[metric] is not None]
            xb = [m[metric] for m in per[j] if m[metric] is not None]
            if not xa or not xb:
                warnings.append(f"{pair}: no {metric} (is /proc/PID/task/*/schedstat "
                                "readable?)" if "wait" in metric else f"{pair}: no {metric}")
                continue
            ci = welch(xa, xb, level)
            rows.append(change_row("server", metric, pair, statistics.fmean(xa),
                                   statistics.fmean(xb), *(ci or (None, None)),
                                   higher_is_better=_HIGHER_IS_BETTER.get(metric, False),
                                   unit=_UNITS.get(metric, "")))
    warnings.append("each row compares the mean over rounds, with Welch's t interval over the "
                    "rounds; with few rounds the intervals are wide by design")
    return rows, warnings
