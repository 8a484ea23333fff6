"""Load generation: :func:`load` runs a workload on memcached and returns a :class:`LoadResult`.

The workload is a :class:`LoadSpec`, built in Python, from command-line flags, or from a TOML
file (:meth:`LoadSpec.from_toml`). The run itself is Rust (``cachelab-load``) with the GIL
released: closed loop (``pipeline`` requests outstanding per connection) or open loop (a target
``rate`` with Poisson or evenly spaced arrivals per connection; latency counted from the
intended send time — the *corrected* histogram — and from the actual send — *uncorrected*).

The result (schema ``cachelab.load``, version 1, see ``docs/load.md``) holds the spec, a
per-interval time series, the steady-state window and totals over it, error counts by kind,
the server's ``stats`` deltas and, for a server on this machine, its run-queue wait.
"""

from __future__ import annotations

import math
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cachelab import _core, environment
from cachelab.artifacts import check_schema, read_json, write_json
from cachelab.errors import InputError, Interrupted, UsageError
from cachelab.progress import run_cancellable
from cachelab.units import parse_size

SCHEMA = "cachelab.load"
SCHEMA_VERSION = 1

OPS = ("get", "multiget", "set", "delete")
KEY_DISTS = ("uniform", "zipf", "gaussian", "sequential", "hotset")
SIZE_DISTS = ("fixed", "uniform", "lognormal", "histogram")
#: An open-loop run held its rate when no more than this share of the requests sent (or one
#: request) was still due but unsent at the end.
RATE_BACKLOG = 0.01

_PREFIX_RE = re.compile(r"[A-Za-z0-9_.:-]{1,80}")


@dataclass
class LoadSpec:
    """A workload. Defaults: 4 connections, 90 % get / 10 % set over 10,000 uniform keys of
    100-byte values, closed loop with one request outstanding, 10 s after a 1 s warm-up."""

    connections: int = 4
    threads: int = 1
    #: Closed loop: requests outstanding per connection.
    pipeline: int = 1
    #: Open loop: the most requests in flight per connection.
    max_outstanding: int = 100
    #: Requests per second over all connections; None for closed loop.
    rate: float | None = None
    arrivals: str = "poisson"
    mix: dict[str, float] = field(default_factory=lambda: {"get": 0.9, "set": 0.1})
    multiget_keys: int = 10
    key_space: int = 10_000
    #: ``uniform``, ``zipf:S``, ``gaussian[:SD]``, ``sequential``, ``hotset:X%:Y%``.
    key_dist: str = "uniform"
    #: ``SIZE``, ``fixed:SIZE``, ``uniform:MIN:MAX``, ``lognormal:MEDIAN:SIGMA``,
    #: ``histogram:SIZE=WEIGHT,...`` or ``histogram:FILE`` (lines of ``size,weight``).
    value_size: str = "100"
    #: Added in front of a unique per-run part: keys are ``<prefix>:<run id>:<index>``.
    prefix: str = "cachelab"
    ttl: int = 0
    duration: float | None = 10.0
    requests: int | None = None
    warmup: float = 1.0
    #: Set every key before the run (so gets hit); None means "when the mix has gets".
    prefill: bool | None = None
    interval: float = 1.0
    timeout: float = 1.0
    connect_timeout: float = 2.0
    give_up_after: float = 10.0
    seed: int | None = None
    #: With replies outstanding, each client thread polls its sockets for up to this many µs
    #: before it sleeps (0: never): removes the thread's own wake-up from the latencies it
    #: measures, at the price of the CPU spent polling. See docs/load.md.
    busy_poll_us: int = 0
    #: Closed loop: a connection sends new requests only once this many of its ``pipeline``
    #: slots are free (1: after every reply), so each write carries that many requests.
    #: Fewer, larger writes cost client and server less CPU per request. See docs/load.md.
    send_batch: int = 1

    @classmethod
    def quick(cls, **overrides: Any) -> LoadSpec:
        """The same shape, small: 3 s after a 1 s warm-up, 1,000 keys."""
        return cls(**{"duration": 3.0, "warmup": 1.0, "key_space": 1000, **overrides})

    @classmethod
    def from_toml(cls, path: str | Path, **overrides: Any) -> LoadSpec:
        """A spec from a TOML file whose keys are this class's fields (``-`` or ``_``)."""
        path = Path(path)
        try:
            import tomllib  # type: ignore[import-not-found]
        except ModuleNotFoundError:  # Python < 3.11
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except OSError as e:
            raise InputError(f"{path}: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"{path}: not valid TOML: {e}") from None
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = key.replace("-", "_")
            if name not in known:
                line = _line_of(path, key)
                raise InputError(
                    f"{path}:{line}: unknown setting {key!r}; known: {', '.join(sorted(known))}"
                )
            values[name] = value
        values.update(overrides)
        try:
            spec = cls(**values)
            spec.check()
        except UsageError as e:
            raise InputError(f"{path}: {e}") from None
        except TypeError as e:
            raise InputError(f"{path}: {e}") from None
        return spec

    def check(self) -> None:
        """Raises UsageError naming the first bad field (the Rust side checks the caps again)."""
        self.to_core("127.0.0.1:1", "check")

    def to_core(self, address: str, run_id: str) -> dict[str, Any]:
        """The dict ``_core.load_run`` takes."""
        _int("connections", self.connections, 1)
        _int("threads", self.threads, 1)
        _int("pipeline", self.pipeline, 1)
        _int("max_outstanding", self.max_outstanding, 1)
        _int("multiget_keys", self.multiget_keys, 1)
        _int("key_space", self.key_space, 1)
        _int("ttl", self.ttl, 0)
        _int("send_batch", self.send_batch, 1)
        if self.send_batch > 1 and self.rate is not None:
            raise UsageError("send-batch is for the closed loop only: an open loop sends each "
                             "request at its scheduled time")
        if self.send_batch > self.pipeline:
            raise UsageError(f"send-batch must be at most the pipeline depth ({self.pipeline}), "
                             f"not {self.send_batch}")
        bp = self.busy_poll_us
        if not isinstance(bp, int) or isinstance(bp, bool) or not 0 <= bp <= 1000:
            raise UsageError(f"busy-poll must be a whole number of µs from 0 to 1000, not {bp!r}")
        if self.arrivals not in ("poisson", "uniform"):
            raise UsageError(f"arrivals must be poisson or uniform, not {self.arrivals!r}")
        if self.rate is not None and not (_number(self.rate) and self.rate > 0):
            raise UsageError(f"rate must be a positive number of requests/s, not {self.rate!r}")
        if (self.duration is None) == (self.requests is None):
            raise UsageError("give a duration or a request count (not both)")
        if self.duration is not None and not (_number(self.duration) and self.duration > 0):
            raise UsageError(f"duration must be a positive number of seconds: {self.duration!r}")
        if self.requests is not None:
            _int("requests", self.requests, 1)
        for name in ("warmup", "interval", "timeout", "connect_timeout", "give_up_after"):
            v = getattr(self, name)
            if not _number(v) or v < 0 or (v == 0 and name != "warmup"):
                raise UsageError(f"{name.replace('_', '-')} must be a positive number of seconds")
        if not isinstance(self.prefix, str) or not _PREFIX_RE.fullmatch(self.prefix):
            raise UsageError(
                f"key prefix {self.prefix!r} must be 1-80 characters of letters, digits and _.:-"
            )
        mix = parse_mix(self.mix)
        prefill = self.prefill
        if prefill is None:
            prefill = mix.get("get", 0) + mix.get("multiget", 0) > 0
        seed = self.seed if self.seed is not None else 0
        return {
            "address": address,
            "connections": self.connections,
            "threads": self.threads,
            "pipeline": self.pipeline,
            "max_outstanding": self.max_outstanding,
            "rate": None if self.rate is None else float(self.rate),
            "arrivals": self.arrivals,
            "mix": mix,
            "multiget_keys": self.multiget_keys,
            "key_space": self.key_space,
            "key_dist": parse_key_dist(self.key_dist),
            "value_size": parse_value_size(self.value_size),
            "prefix": f"{self.prefix}:{run_id}",
            "ttl": self.ttl,
            "duration": None if self.duration is None else float(self.duration),
            "requests": self.requests,
            "warmup": float(self.warmup),
            "prefill": bool(prefill),
            "interval": float(self.interval),
            "timeout": float(self.timeout),
            "connect_timeout": float(self.connect_timeout),
            "give_up_after": float(self.give_up_after),
            "seed": int(seed),
            "server_pid": None,
            "busy_poll_us": self.busy_poll_us,
            "send_batch": self.send_batch,
        }


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(name: str, v: object, minimum: int) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise UsageError(f"{name.replace('_', '-')} must be a whole number >= {minimum}, not {v!r}")


def _line_of(path: Path, key: str) -> int:
    """The line of ``path`` that sets ``key`` (1 if not found)."""
    try:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip().startswith(key):
                return n
    except OSError:
        pass
    return 1


def parse_mix(mix: str | Mapping[str, Any]) -> dict[str, float]:
    """``"get=90,set=10"`` or ``{"get": 0.9, "set": 0.1}`` -> shares by operation."""
    if isinstance(mix, str):
        items: dict[str, Any] = {}
        for part in mix.split(","):
            name, sep, value = part.strip().partition("=")
            if not sep:
                raise UsageError(
                    f"op mix {mix!r}: expected OP=SHARE items separated by commas, "
                    f"e.g. get=90,set=10 (operations: {', '.join(OPS)})"
                )
            try:
                items[name.strip()] = float(value)
            except ValueError:
                raise UsageError(f"op mix {mix!r}: {value!r} is not a number") from None
        mix = items
    if not isinstance(mix, Mapping):
        raise UsageError(f"op mix must be OP=SHARE items or a table, not {mix!r}")
    out: dict[str, float] = {}
    for name, value in mix.items():
        if name not in OPS:
            raise UsageError(f"op mix: unknown operation {name!r}; known: {', '.join(OPS)}")
        if not _number(value) or value < 0:
            raise UsageError(f"op mix: share of {name} must be a number >= 0, not {value!r}")
        out[name] = float(value)
    if sum(out.values()) <= 0:
        raise UsageError("op mix: at least one share must be above 0")
    return out


def _fraction(text: str, what: str) -> float:
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a number or percentage") from None
    return v


def parse_key_dist(text: str) -> tuple[str, list[float]]:
    """``uniform``, ``zipf:0.99``, ``gaussian[:SD]``, ``sequential``, ``hotset:20%:80%``."""
    name, *params = str(text).split(":")
    if name not in KEY_DISTS:
        raise UsageError(
            f"key distribution {text!r}: unknown {name!r}; known: {', '.join(KEY_DISTS)} "
            "(e.g. zipf:0.99, hotset:20%:80%)"
        )
    values = [_fraction(p, f"key distribution {text!r}") for p in params]
    arity = {"uniform": (0,), "zipf": (1,), "gaussian": (0, 1), "sequential": (0,),
             "hotset": (2,)}[name]
    if len(values) not in arity:
        raise UsageError(
            f"key distribution {text!r}: {name} takes {' or '.join(map(str, arity))} parameter(s)"
        )
    return name, values


def _size(text: str, what: str) -> float:
    try:
        return float(parse_size(text))
    except UsageError as e:
        raise UsageError(f"{what}: {e}") from None


def parse_value_size(text: str) -> tuple[str, list[float]]:
    """``100``, ``fixed:1K``, ``uniform:10:1K``, ``lognormal:1K:0.5``,
    ``histogram:100=3,1K=1`` or ``histogram:FILE`` (lines ``size,weight``; ``#`` comments)."""
    text = str(text)
    what = f"value size {text!r}"
    name, sep, rest = text.partition(":")
    if not sep:
        return "fixed", [_size(text, what)]
    if name not in SIZE_DISTS:
        raise UsageError(f"{what}: unknown distribution {name!r}; known: {', '.join(SIZE_DISTS)}")
    if name == "histogram":
        return name, _histogram(rest, what)
    parts = rest.split(":")
    if name == "fixed" and len(parts) == 1:
        return name, [_size(parts[0], what)]
    if name == "uniform" and len(parts) == 2:
        return name, [_size(parts[0], what), _size(parts[1], what)]
    if name == "lognormal" and len(parts) == 2:
        return name, [_size(parts[0], what), _fraction(parts[1], what)]
    shapes = {"fixed": "fixed:SIZE", "uniform": "uniform:MIN:MAX",
              "lognormal": "lognormal:MEDIAN:SIGMA"}
    raise UsageError(f"{what}: expected {shapes[name]}")


def _histogram(rest: str, what: str) -> list[float]:
    pairs: list[tuple[str, str, str]] = []  # (size, weight, where)
    if "=" in rest:
        for item in rest.split(","):
            size, _, weight = item.partition("=")
            pairs.append((size, weight, what))
    else:
        path = Path(rest)
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            raise InputError(f"{path}: {e.strerror or e}") from None
        for n, line in enumerate(lines, 1):
            line = line.split("#", 1)[0].strip()
            if not line or line.lower().startswith("size"):
                continue
            size, sep, weight = line.partition(",")
            if not sep:
                raise InputError(f"{path}:{n}: expected 'size,weight', got {line!r}")
            pairs.append((size, weight, f"{path}:{n}"))
    out: list[float] = []
    for size, weight, where in pairs:
        try:
            w = float(weight)
            if not math.isfinite(w) or w < 0:
                raise ValueError
        except ValueError:
            err = InputError if where != what else UsageError
            raise err(f"{where}: weight {weight!r} must be a number >= 0") from None
        try:
            out += [float(parse_size(size.strip())), w]
        except UsageError as e:
            err = InputError if where != what else UsageError
            raise err(f"{where}: {e}") from None
    if not out or sum(out[1::2]) <= 0:
        raise UsageError(f"{what}: the histogram needs at least one size with a weight above 0")
    return out


# -- the result -----------------------------------------------------------------------------


@dataclass
class LoadResult:
    """A finished (or interrupted) load run: everything ``load.json`` holds."""

    created: str
    spec: dict[str, Any]
    mode: str  # "closed" or "open"
    intervals: list[dict[str, Any]]
    steady: dict[str, Any]
    totals: dict[str, Any]  # over the steady window
    all: dict[str, Any]  # over every interval, warm-up included
    server: dict[str, Any]
    client: dict[str, Any]
    schedule: dict[str, Any] | None
    run: dict[str, Any]
    environment: dict[str, Any] = field(default_factory=dict)

    def latency(self, which: str = "best", scope: str = "totals") -> dict[str, Any]:
        """A histogram entry: ``corrected``, ``uncorrected``, or ``best`` (corrected in open
        loop, where it exists)."""
        src = self.totals if scope == "totals" else self.all
        if which == "best":
            which = "corrected" if src.get("corrected") else "uncorrected"
        return src[which]

    def problems(self) -> dict[str, int]:
        """What makes the CLI exit 1: errors, lost requests, keys left behind, a missed rate."""
        out = {
            "errors": sum(self.all["errors"].values()),
            "lost_requests": int(self.all["lost"]),
            "leftover_keys": int(self.run.get("leftover_keys", 0)),
            "rate_not_held": int(bool(self.schedule and not self.schedule.get("held", True))),
        }
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **asdict(self)}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "load result") -> LoadResult:
        check_schema(d, SCHEMA, SCHEMA_VERSION, "load result", where)
        try:
            return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})
        except TypeError as e:
            raise InputError(f"{where}: {e}") from None


def read_result(path: str | Path) -> LoadResult:
    path, data = read_json(path, "load.json")
    return LoadResult.from_dict(data, str(path))


#: ``stats`` fields whose change over the run is reported.
DELTA_STATS = ("get_hits", "get_misses", "cmd_get", "cmd_set", "delete_hits", "delete_misses",
               "evictions", "total_connections", "bytes_read", "bytes_written")


def server_deltas(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, Any]:
    """Counters' changes, CPU seconds used (rusage), and connections before and after."""
    out: dict[str, Any] = {}
    if not before or not after:
        return out
    for k in DELTA_STATS:
        if k in before and k in after:
            out[k] = int(after[k]) - int(before[k])
    for k in ("rusage_user", "rusage_system"):
        if k in before and k in after:
            out[f"{k}_s"] = round(float(after[k]) - float(before[k]), 6)
    for k in ("curr_connections", "curr_items"):
        if k in before and k in after:
            out[k] = {"before": int(before[k]), "after": int(after[k])}
    return out


def _sched(server: Mapping[str, Any], elapsed: float) -> dict[str, Any] | None:
    b, a = server.get("schedstat_before"), server.get("schedstat_after")
    if not b or not a or elapsed <= 0:
        return None
    wait = a["wait_ns"] - b["wait_ns"]
    cpu = a["on_cpu_ns"] - b["on_cpu_ns"]
    return {
        "pid": server.get("pid"),
        "threads": a["threads"],
        "run_queue_wait_s": wait / 1e9,
        "on_cpu_s": cpu / 1e9,
        "timeslices": a["slices"] - b["slices"],
        "wait_per_wall": wait / 1e9 / elapsed,
        "wait_per_cpu": wait / cpu if cpu else None,
    }


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _run_with_progress(
    core: dict[str, Any], on_progress: Callable[[Any], None] | None
) -> dict[str, Any]:
    """Runs the Rust load in a thread; polls progress; Ctrl-C stops it and keeps the results."""
    progress = _core.LoadProgress()
    return run_cancellable(
        lambda: _core.load_run(core, progress), progress.cancel, name="cachelab-load",
        poll=(lambda: on_progress(progress)) if on_progress else None,
    )


def load(
    spec: LoadSpec | Mapping[str, Any] | str | Path | None = None,
    *,
    server: str | None = None,
    server_pid: int | None = None,
    server_facts: Mapping[str, Any] | None = None,
    on_progress: Callable[[Any], None] | None = None,
) -> LoadResult:
    """Runs a workload against ``server`` (``host:port`` or ``unix:/path``), or against a
    private memcached started for the run when ``server`` is None.

    ``spec`` is a :class:`LoadSpec`, a dict of its fields, or the path of a TOML file. The run
    holds no GIL. Ctrl-C stops sending, waits for replies in flight, deletes the keys written
    and raises :class:`~cachelab.errors.Interrupted` with the partial result as ``err.partial``.
    A server that cannot be reached at the start raises a ServerError subclass; failures later
    are counted in the result.
    """
    if spec is None:
        spec = LoadSpec()
    elif isinstance(spec, (str, Path)):
        spec = LoadSpec.from_toml(spec)
    elif isinstance(spec, Mapping):
        try:
            spec = LoadSpec(**spec)
        except TypeError as e:
            raise UsageError(f"load spec: {e}") from None
    spec.check()
    if server is None:
        from cachelab.servers import PrivateMemcached

        with PrivateMemcached(memory_mb=max(64, _memory_mb(spec))) as mc:
            facts = {"private": True, "argv": mc.argv}
            return load(spec, server=mc.address, server_pid=mc.pid, server_facts=facts,
                        on_progress=on_progress)

    run_id = secrets.token_hex(6)
    core = spec.to_core(server, run_id)
    core["server_pid"] = server_pid
    if spec.seed is None:
        core["seed"] = secrets.randbits(63)
    started = time.time()
    raw = _run_with_progress(core, on_progress)
    open_loop = spec.rate is not None
    window, everything = raw["window"], raw["all"]
    schedule = raw["schedule"]
    if schedule is not None:
        # Held: (almost) every request the schedule made due was sent. The achieved rate is
        # reported too, but a Poisson schedule's own count varies by sqrt(n), so it is not
        # the test.
        schedule["achieved_rate"] = window["throughput"]
        schedule["held"] = bool(
            schedule["backlog_at_end"] <= max(1, RATE_BACKLOG * everything["sent"])
        )
    cpu = raw["client_cpu_user_s"] + raw["client_cpu_system_s"]
    replies = everything["replies"]
    server_view = raw["server"]
    result = LoadResult(
        created=_now(),
        spec={**asdict(spec), "seed": core["seed"], "prefix_used": core["prefix"],
              "prefill": core["prefill"], "key_dist_parsed": core["key_dist"],
              "value_size_parsed": core["value_size"]},
        mode="open" if open_loop else "closed",
        intervals=raw["intervals"],
        steady=raw["steady"],
        totals=window,
        all=everything,
        server={
            "address": server,
            "private": False,
            **dict(server_facts or {}),
            "version": server_view["version"],
            "deltas": server_deltas(server_view["before"], server_view["after"]),
            "schedstat": _sched(server_view, raw["elapsed_s"]),
            "stats_before": server_view["before"],
            "stats_after": server_view["after"],
        },
        client={
            "cpu_user_s": round(raw["client_cpu_user_s"], 6),
            "cpu_system_s": round(raw["client_cpu_system_s"], 6),
            "cpu_us_per_op": round(cpu * 1e6 / replies, 4) if replies else None,
            # The whole process over the same phase: client threads plus everything else it
            # ran meanwhile (Python, the progress display), without start-up, prefill or
            # clean-up.
            "process_cpu_s": round(raw["process_cpu_s"], 6),
            "process_cpu_us_per_op": (
                round(raw["process_cpu_s"] * 1e6 / replies, 4) if replies else None
            ),
            "run_queue_wait_s": round(raw["client_wait_s"], 6),
            "run_queue_wait_us_per_op": (
                round(raw["client_wait_s"] * 1e6 / replies, 4) if replies else None
            ),
            "sleeps": raw["client_sleeps"],
            "preempted": raw["client_preempted"],
            "busy_polls": raw["client_busy_polls"],
            "busy_caught": raw["client_busy_caught"],
            "writes": raw["client_writes"],
            "requests_per_write": (
                round(everything["sent"] / raw["client_writes"], 3) if raw["client_writes"]
                else None
            ),
        },
        schedule=schedule,
        run={
            "started_unix": round(started, 3),
            "elapsed_s": round(raw["elapsed_s"], 3),
            "prefilled_keys": raw["prefilled_keys"],
            "prefill_s": round(raw["prefill_s"], 3),
            "deleted_keys": raw["deleted_keys"],
            "leftover_keys": raw["leftover_keys"],
            "cancelled": raw["cancelled"],
            "aborted": raw["aborted"],
        },
        environment=environment.facts(),
    )
    if raw["cancelled"]:
        err = Interrupted("stopped by a signal; partial results kept")
        err.partial = result  # type: ignore[attr-defined]
        raise err
    return result


def _memory_mb(spec: LoadSpec) -> int:
    """Enough memory for a private server to hold the whole key space at its largest values."""
    name, params = parse_value_size(spec.value_size)
    largest = {"fixed": lambda p: p[0], "uniform": lambda p: p[1],
               "lognormal": lambda p: p[0] * math.exp(2 * p[1]),
               "histogram": lambda p: max(p[0::2])}[name](params)
    need = spec.key_space * (min(largest, 1e6) + 100) * 1.3 / 2**20
    return int(min(need, 4096)) + 16


# -- HdrHistogram interval log ----------------------------------------------------------------


def hlog_text(result: LoadResult) -> str:
    """The intervals as an HdrHistogram interval log (format 1.3): one tagged line per interval
    and histogram (``corrected`` in open loop, ``uncorrected`` always), timestamps in seconds
    from StartTime, the interval max in milliseconds, histograms in ns, V2 compressed base64."""
    start = float(result.run.get("started_unix", 0.0))
    human = datetime.fromtimestamp(start, timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")
    lines = [
        "#[Histogram log format version 1.3]",
        f"#[StartTime: {start:.3f} (seconds since epoch), {human}]",
        f"#[BaseTime: {start:.3f} (seconds since epoch)]",
        "#[Latencies in nanoseconds; Interval_Max in milliseconds]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]
    for iv in result.intervals:
        for tag in ("corrected", "uncorrected"):
            h = iv.get(tag)
            if not h:
                continue
            lines.append(
                f"Tag={tag},{iv['start_s']:.3f},{iv['duration_s']:.3f},"
                f"{h['max'] / 1e6:.3f},{h['histogram']}"
            )
    return "\n".join(lines) + "\n"
