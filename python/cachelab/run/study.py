"""The whole study in one call: :func:`run_study` measures a memcached and ends in one HTML page.

Steps, each writing its verb's artifacts into a subdirectory of ``out``:

1. ``profile``  — latency of get / set by value size and multi-get by key count;
2. ``scale``    — a concurrency sweep with a USL fit;
3. ``simulate`` — caching strategies on a request trace (synthetic unless given), with the
   profile just measured as the latency model (``simulate/``), and with the published
   ``appengine-2017`` profile for reference (``simulate-appengine-2017/``);
4. ``tiers``    — store vs memcached (+codec, +compression) vs process memory;
5. ``replay``   — the best simulated strategy run for real through ``cachelab.tiered``, beside
   no cache, compared with the simulation's prediction.

One memcached serves every step: the one given, or a private one started for the run (the
scale sweep then starts its own private server with the same flags, so that it can read the
server's scheduler statistics). A Redis or Valkey (``resp``, its login) serves profile, scale
and simulate the same way (a private redis-server when none is given); tiers and replay,
which measure memcached, are skipped with the reason (docs/resp.md, "run"). A step
that fails — raises, or ran but failed its check (replay's prediction vs measurement) — is
recorded as ``failed`` (with its error) and the run goes on; the steps after it that need its
result fall back (simulate uses the reference model alone without a profile) or are skipped
with the reason. At the end come ``run.json`` (schema ``cachelab.run`` v1, the step table) and
``report.html`` (every artifact on one page, see :mod:`cachelab.report`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import cachelab._core as _core
import cachelab.environment as environment
from cachelab.artifacts import created_now
from cachelab.capacity import EvictionWatch, PoolWatch, Writes, evicted_message, guard_resp
from cachelab.errors import CachelabError, Interrupted, ServerError, UsageError
from cachelab.report import write_report
from cachelab.resp import RespLogin, read_info
from cachelab.run.fits import check_study
from cachelab.run.result import (
    PRIVATE_ITEM_SIZE_MAX,
    PRIVATE_MEMORY_MB,
    RunResult,
    RunSpec,
    StepOutcome,
)
from cachelab.run.steps import RUNNERS, CheckFailed, Skip, State
from cachelab.servers import ServerOptions
from cachelab.target import Target
from cachelab.tls import TlsOptions, core_tls

__all__ = ["run_study"]


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return text if isinstance(e, CachelabError) else f"{type(e).__name__}: {text}"


def _check_server(address: str) -> str:
    with _core.Client(address, timeout=2.0) as c:
        return str(c.version())


def _run_step(name: str, st: State, server_error: str | None) -> StepOutcome:
    """One step, timed; its failure is recorded, not raised (except an interrupt)."""
    t0 = time.perf_counter()
    outcome = StepOutcome(name=name, status="ok", dir=name)
    try:
        summary, problems = RUNNERS[name](st)
        outcome.summary = summary
        outcome.status = "problems" if problems else "ok"
    except Skip as e:
        outcome.status, outcome.error, outcome.dir = "skipped", str(e), None
        if server_error and str(e) == "no memcached to measure":
            outcome.error = f"no memcached to measure: {server_error}"
            outcome.server_failure = True
    except CheckFailed as e:  # it ran, and its result says it failed
        outcome.status, outcome.summary, outcome.error = "failed", e.summary, str(e)
        outcome.check = e.check
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as e:  # a failed step is reported; the run goes on
        outcome.status, outcome.error = "failed", _one_line(e)
        outcome.server_failure = isinstance(e, ServerError)
        outcome.input_failure = isinstance(e, UsageError)
        if not isinstance(e, CachelabError):
            outcome.traceback = traceback.format_exc(limit=-6).rstrip().splitlines()
            st.log(f"{name} failed: {outcome.traceback[-1]}")
    outcome.answers = [a.to_dict() for a in st.answers.get(name, [])]
    outcome.caveats = list(st.caveats.get(name, []))
    outcome.elapsed_s = round(time.perf_counter() - t0, 2)
    return outcome


def _open_resp(stack: contextlib.ExitStack, server: str | None,
               options: ServerOptions | None, login: RespLogin,
               result: RunResult) -> tuple[Any, PoolWatch | None]:
    """The study's Redis or Valkey, opened in ``stack``: the one given (read for its version;
    its ``evicted_keys`` watched from now) or a private redis-server; ``result.server`` gets
    its facts."""
    tls = core_tls(TlsOptions()) if login.tls else None
    target = stack.enter_context(Target.of(server, options=options or ServerOptions(),
                                           resp=login).open(memory_mb=PRIVATE_MEMORY_MB))
    info = read_info(target.address, login, tls=tls)
    version = next((f"{k[:-8]} {info[k]}" for k in ("valkey_version", "redis_version")
                    if k in info), "?")
    result.server.update(address=target.address, version=version, protocol="resp")
    if server is None:
        result.server["argv"] = target.facts["argv"]
        return target, None
    # (each step checks its own writes against maxmemory: nothing to add here but the watch)
    return target, guard_resp([(target.address, Writes("run", "keys", "", ""))], login,
                              private=False, tls=TlsOptions() if login.tls else None)


def run_study(
    spec: RunSpec | None = None,
    out: str | Path = "cachelab-out/run",
    *,
    server: str | None = None,
    server_options: ServerOptions | None = None,
    log: Callable[[str], None] | None = None,
    resp: RespLogin | None = None,
) -> RunResult:
    """Runs the steps of ``spec`` against ``server`` (``host:port`` / ``unix:/path``) or a
    private memcached (started from ``server_options``), writing into ``out``; returns the
    outcome of every step. Never raises for a failed step; raises
    :class:`~cachelab.errors.Interrupted` (with ``partial``, the result so far, whose report is
    written) on Ctrl-C; the step cut short writes what it measured (its verb's partial
    result). A step whose server failed writes its partial result too, and the run's
    ``aborted`` names the first such step. A ``server`` cachelab did not start is checked
    first: a study with a step that would not fit raises
    :class:`~cachelab.capacity.WontFit` before any step runs (:mod:`cachelab.run.fits`); and
    once it evicts items, the steps left are skipped (``server.user_items_lost`` counts
    them). With ``resp`` (a login), the server is a Redis or Valkey (a private redis-server
    when ``server`` is None): each step checks its own writes against ``maxmemory`` before
    it writes, and the run watches ``evicted_keys``."""
    spec = spec or RunSpec()
    spec.check()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    say = log or (lambda _msg: None)
    started = time.perf_counter()
    result = RunResult(created=created_now(), spec=asdict(spec), server={"address": server,
                       "private": server is None}, steps=[], environment=environment.facts())
    st = State(out=out, target=None, spec=spec, log=say)
    server_error: str | None = None
    #: A server cachelab did not start: checked before the first step, its evictions watched.
    watch: EvictionWatch | PoolWatch | None = None
    stopped: str | None = None
    with contextlib.ExitStack() as stack:
        try:
            if resp is not None:
                target, watch = _open_resp(stack, server, server_options, resp, result)
                say(f"{'private ' if server is None else ''}{result.server['version']} at "
                    f"{target.address}")
            elif server is None:
                # Big enough for replay's catalog and tiers' largest record.
                target = stack.enter_context(Target(
                    options=server_options or ServerOptions()).open(
                        memory_mb=PRIVATE_MEMORY_MB, item_size_max=PRIVATE_ITEM_SIZE_MAX))
                st.server_options = server_options or ServerOptions()
                mc = target.private
                result.server.update(address=target.address, argv=target.facts["argv"],
                                     version=mc.version if mc else None)
                say(f"private memcached {result.server['version']} at {target.address}")
            else:
                result.server["version"] = _check_server(server)
                watch = check_study(spec, server)
                target = stack.enter_context(Target.of(server).open())
            st.target = dataclasses.replace(target.handed(), resp=resp)
            if resp is not None and server is None:
                st.server_options = server_options or ServerOptions()
        except ServerError as e:
            server_error = _one_line(e)
            say(f"no server: {server_error}")
        for i, name in enumerate(spec.steps, 1):
            try:
                say(f"[{i}/{len(spec.steps)}] {name}")
                outcome = _run_step(name, st, server_error)
                result.steps.append(outcome)
                if outcome.server_failure and result.aborted is None:
                    result.aborted = f"step {name}: {outcome.error}"
                say(f"{name}: {outcome.status} in {outcome.elapsed_s:.1f} s"
                    + (f": {outcome.summary}" if outcome.summary else "")
                    + (f" ({outcome.error})" if outcome.error else ""))
            except (KeyboardInterrupt, Interrupted):
                if not result.steps or result.steps[-1].name != name:
                    result.steps.append(StepOutcome(name=name, status="failed", dir=name,
                                                    error="interrupted"))
                result.interrupted = True
                break
            if watch is not None and watch.poll(force=True):
                stopped = evicted_message(watch.evicted)
                say(stopped)
                result.aborted = result.aborted or stopped
                break
    if watch is not None:
        result.server["user_items_lost"] = watch.poll(force=True)
    done = {s.name for s in result.steps}
    for name in spec.steps:
        if name not in done:
            result.steps.append(StepOutcome(name=name, status="skipped",
                                            error=stopped or "interrupted",
                                            server_failure=stopped is not None))
    result.elapsed_s = round(time.perf_counter() - started, 2)
    result.save(out / "run.json")
    if spec.report:
        try:
            # This run's results only: a re-used --out may hold older ones.
            write_report([out / "run.json", *st.produced], out / "report.html",
                         title="cachelab run")
            result.report = str(out / "report.html")
        except Exception as e:  # the results are saved; say why the page is missing
            say(f"report failed: {_one_line(e)}")
        result.elapsed_s = round(time.perf_counter() - started, 2)
        result.save(out / "run.json")
    if result.interrupted:
        raise Interrupted(f"interrupted; partial results and report in {out}", partial=result)
    return result
