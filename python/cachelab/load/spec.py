"""The workload of a load run: :class:`LoadSpec` (built in Python, from command-line flags, or
from a TOML file), the parsers of its mix, key distribution and value sizes, and its checks.

:meth:`LoadSpec.to_core` turns a checked spec into the dict ``_core.load_run`` takes; the
engine (:mod:`cachelab.load.engine`) runs it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import cachelab._core as _core
from cachelab.errors import InputError, UsageError
from cachelab.intervals import check_precision, check_precision_percentile
from cachelab.load.drill import Event, changes_of, parse_event
from cachelab.load.precision import SHOWN
from cachelab.pool import DISTRIBUTIONS, parse_server
from cachelab.tls import TlsOptions, core_tls
from cachelab.units import check_limit, limited, limits_of, parse_size

try:
    import tomllib  # type: ignore[import-not-found]
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["KEY_DISTS", "LIMITS", "MAX_PROBE_RATE", "OPS", "PROTOCOLS", "SIZE_DISTS", "LoadSpec",
           "memory_mb", "parse_key_dist", "parse_mix", "parse_value_size"]

OPS = ("get", "multiget", "set", "delete")
#: The protocols a load speaks (``LoadSpec.protocol``; the engine's ``Protocol``).
PROTOCOLS = ("text", "resp")
KEY_DISTS = ("uniform", "zipf", "gaussian", "sequential", "hotset")
SIZE_DISTS = ("fixed", "uniform", "lognormal", "histogram")

#: The range of each numeric field, ``{field: {"lo", "hi", "above", "unit"}}``: the engine's
#: (crates/load/src/spec.rs, ``limits``), which checks them, and those of the few fields only
#: Python checks (written beside their field, :func:`~cachelab.units.limited`); the command
#: line's flags read them.
LIMITS: dict[str, dict[str, Any]] = dict(_core.LOAD_LIMITS)

#: The pool's member failure settings by default: the engine's (a single server's too).
_POOL_DEFAULTS: dict[str, Any] = _core.LOAD_DEFAULTS

#: The highest ``probe_rate``, requests/s (the engine's cap): a probe measures latency at a
#: low rate; above this it is load.
MAX_PROBE_RATE = float(LIMITS["probe_rate"]["hi"])

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
    #: The reconnect budget: the run ends (server gone, exit 3) when no request has succeeded
    #: for this long. Reconnects back off from 10 ms, doubling to 1 s: about 11 tries in 5 s.
    give_up_after: float = 5.0
    #: A reply that took this long (from its intended time in open loop), a request that timed
    #: out, or a connection down this long is listed as a stall (``stalls`` in load.json).
    stall_ms: float = 100.0
    seed: int | None = None
    #: Run length by precision: stop once the measured p99's (``precision_percentile``'s)
    #: 95 % interval has a relative half-width at or below this (0.05: ±5 %), checked at each
    #: interval end; ``duration`` is the cap. None: run the whole duration. See
    #: docs/load.md, "Percentile intervals and precision".
    precision: float | None = None
    #: The percentile ``precision`` targets: one the table shows with an interval ("50",
    #: "90", "99", "99.9"). p99 by default: at 10,000 replies/s a 10 s run has ~1,000 beyond
    #: it, and the live check needs 5 intervals of 200 (cachelab.intervals, MIN_TAIL).
    precision_percentile: str = "99"
    #: Hysteresis: run the measurement this many times (a fresh private memcached for each;
    #: a user's server is not restarted) and compare the runs' spread with their intervals.
    #: See docs/load.md, "Repeats".
    repeats: int = limited(1, 1, 100)
    #: With ``precision``: seconds after the warm-up before the precision is watched — the
    #: latencies it counts start there, so the run lasts at least this long (``scale`` sets
    #: its ``settle``, so that a run has a steady state to measure before it may stop).
    precision_after: float = 0.0
    #: With replies outstanding, each client thread polls its sockets for up to this many µs
    #: before it sleeps (0: never): removes the thread's own wake-up from the latencies it
    #: measures, at the price of the CPU spent polling. See docs/load.md.
    busy_poll_us: int = 0
    #: Open loop: a client thread whose next send is due within this many µs waits for it
    #: awake, reading the clock, and sends it on time instead of when its timer's signal
    #: reaches it (tens of µs late on a virtual machine, and every send due meanwhile at
    #: once). The time spent so is pacing, reported apart from the client's work (0: off).
    #: See docs/load.md, "Sending on time".
    spin_us: int = 0
    #: Closed loop: a connection sends new requests only once this many of its ``pipeline``
    #: slots are free (1: after every reply), so each write carries that many requests.
    #: Fewer, larger writes cost client and server less CPU per request. See docs/load.md.
    send_batch: int = 1
    #: Latency probe: one more connection, on its own thread, sending the same mix over the
    #: same keys at this low open-loop Poisson rate (requests/s, above 0 and at most
    #: :data:`MAX_PROBE_RATE`) beside the load connections; its latencies are kept and
    #: reported apart (``probe`` in load.json). None: no probe. See docs/load.md, "Latency
    #: probe and client saturation".
    probe_rate: float | None = None
    #: The protocol spoken: ``text`` (memcached's text protocol) or ``resp`` (Redis, Valkey:
    #: RESP2, ``GET``/``MGET``/``SET … EX``/``DEL``). A ``redis://`` or ``rediss://`` server
    #: speaks ``resp`` whatever this says. See docs/resp.md, "load".
    protocol: str = "text"
    #: TLS to a memcached started with ``-Z`` (None: plain TCP). Not part of the workload:
    #: how it reaches the server. See docs/load.md, "TLS".
    tls: TlsOptions | None = None
    #: A pool to drive, as ``host:port[:weight]`` members in order (None: the server given to
    #: :func:`cachelab.load.load`, or a private one). See docs/load.md, "Pools".
    servers: list[str] | None = None
    #: How a pool spreads its keys: ``ketama``, ``ketama-plain``, ``rendezvous``, ``modula``.
    distribution: str = DISTRIBUTIONS[0]
    #: In a pool, a member that fails this many times in a row is marked down …
    member_failure_limit: int = _POOL_DEFAULTS["member_failure_limit"]
    #: … for this many seconds: meanwhile its requests fail at once (``member_down``).
    member_retry: float = _POOL_DEFAULTS["member_retry"]
    #: The member-health deadline, seconds: a member with requests waiting that has answered
    #: nothing for this long has failed (one of its ``member_failure_limit``), whatever
    #: ``timeout`` is. See docs/pools.md, "A member that stops answering".
    member_timeout: float = _POOL_DEFAULTS["member_timeout"]
    #: What a client does with a member marked down: ``keep`` (its keys fail at once, not
    #: remapped: libmemcached's default) or ``remap`` (it leaves the distribution while down
    #: and its keys go to the others: libmemcached's ``remove_failed_servers``, pymemcache's
    #: dead-server removal).
    on_member_down: str = "keep"
    #: ``set``: read-through (cache-aside) — a get that misses is followed by a set of its key,
    #: as an application refills its cache on a miss; ``none``: no refill.
    on_miss: str = "none"
    #: Failure drills (docs/pools.md, "Failure drills"): ``MEMBER@T`` members added or
    #: removed from the client's member list at T seconds (from the start of sending), and
    #: ``MEMBER@T[:stop|kill|restart][:S]`` members of the private pool failed for real.
    add: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    fail: list[str] = field(default_factory=list)
    #: Start a private pool of this many memcached servers for the run (stopped at the end),
    #: the only servers ``fail`` may touch. None: one private server, or the servers given.
    private_pool: int | None = limited(None, 2, 64)
    #: With ``private_pool``: send through a private twemproxy (nutcracker) in front of it,
    #: its ``auto_eject_hosts`` on with ``on_member_down="remap"`` (``server_failure_limit``
    #: the member failure limit, ``server_retry_timeout`` the member retry, ``timeout`` the
    #: member timeout); ``distribution`` ketama (twemproxy's ketama with md5) or a
    #: ``twemproxy-*`` kind.
    private_proxy: bool = False

    @classmethod
    def quick(cls, **overrides: Any) -> LoadSpec:
        """The same shape, small: 3 s after a 1 s warm-up, 1,000 keys."""
        return cls(**{"duration": 3.0, "warmup": 1.0, "key_space": 1000, **overrides})

    @classmethod
    def from_toml(cls, path: str | Path, **overrides: Any) -> LoadSpec:
        """A spec from a TOML file whose keys are this class's fields (``-`` or ``_``)."""
        path = Path(path)
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
            values[name] = TlsOptions.from_dict(value) if name == "tls" and \
                isinstance(value, dict) else value
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
        """Raises UsageError naming the first bad field, the engine's caps included."""
        servers: str | list[str] = self.servers or "127.0.0.1:1"
        if self.private_pool is not None and not self.servers:
            check_limit("private_pool", LIMITS["private_pool"], self.private_pool)
            servers = [f"127.0.0.1:{i + 1}" for i in range(self.private_pool)]
        spares = [f"127.0.0.1:{i + 1}" for i in range(len(servers), len(servers) + 64)]
        spec = self
        if not self.servers and self.private_pool is None and (self.add or self.remove):
            # The members are not known yet (given to load() apart): the events are parsed
            # here and resolved against the members when the run starts.
            self.events()
            spec = dataclasses.replace(self, add=[], remove=[])
        _core.load_check(spec.to_core(servers, "check", spares=spares))
        if self.fail and self.private_pool is None:
            raise UsageError(
                "--fail stops, kills or restarts a server: only a member of the private pool "
                "this run starts (--private-pool N); cachelab never signals a server it did "
                "not start")
        if self.private_proxy:
            if self.private_pool is None:
                raise UsageError("--private-proxy puts a twemproxy in front of the private "
                                 "pool: give --private-pool N")
            if self.add or self.remove:
                raise UsageError("--add/--remove change a client's member list; through "
                                 "twemproxy the proxy holds the list: use --fail")
            twemproxy_settings(self.distribution)
        if self.fail and self.duration is None:
            raise UsageError("a failure drill needs a --duration (its clock), not --requests")

    def events(self) -> list[Event]:
        """The drill's events, parsed (UsageError naming a bad one)."""
        return ([parse_event("add", t) for t in self.add]
                + [parse_event("remove", t) for t in self.remove]
                + [parse_event("fail", t) for t in self.fail])

    def spares(self) -> int:
        """Spare private servers the pool needs: one per ``--add new``."""
        return sum(1 for e in self.events() if e.kind == "add" and e.member == "new")

    def to_core(self, servers: str | Sequence[str], run_id: str, *,
                spares: Sequence[str] = ()) -> dict[str, Any]:
        """The dict ``_core.load_run`` takes, for the server ``servers`` (``host:port`` or
        ``unix:/path``) or the pool of ``host:port[:weight]`` members (then the members
        ``--add`` names, ``new`` ones taken from ``spares``)."""
        members = pool_members(servers)
        for list_name in ("add", "remove", "fail"):
            if not isinstance(getattr(self, list_name), list):
                raise UsageError(f"{list_name} must be a list of MEMBER@T, not "
                                 f"{getattr(self, list_name)!r}")
        changes = changes_of(self.events(), members, spares)
        address = members[0][0]
        if self.tls is not None:
            if not isinstance(self.tls, TlsOptions):
                raise UsageError("tls must be a TlsOptions (cachelab.tls) or None")
            if address.startswith(("unix:", "/")):
                raise UsageError("TLS is for TCP servers (HOST:PORT), not a Unix socket")
            self.tls.check()
        check_limit("repeats", LIMITS["repeats"], self.repeats)
        check_precision_percentile(self.precision_percentile, list(SHOWN))
        if self.precision is not None:
            check_precision(self.precision)
            if self.duration is None:
                raise UsageError("precision needs a duration (its time cap), not a request count")
        if not _number(self.precision_after) or self.precision_after < 0:
            raise UsageError("precision-after must be a number of seconds >= 0, not "
                             f"{self.precision_after!r}")
        if not isinstance(self.prefix, str) or not _PREFIX_RE.fullmatch(self.prefix):
            raise UsageError(
                f"key prefix {self.prefix!r} must be 1-80 characters of letters, digits and _.:-"
            )
        if self.protocol not in PROTOCOLS:
            raise UsageError(f"protocol {self.protocol!r}: expected one of "
                             f"{', '.join(PROTOCOLS)}")
        mix = parse_mix(self.mix)
        prefill = self.prefill
        if prefill is None:
            prefill = mix.get("get", 0) + mix.get("multiget", 0) > 0
        # Every field as it is, but those resolved here; the engine's Spec reads the fields
        # it has (and checks them: their ranges are the engine's, _core.LOAD_LIMITS).
        core = {f.name: getattr(self, f.name) for f in fields(self)}
        core.update(
            servers=members, changes=changes, mix=mix, key_dist=parse_key_dist(self.key_dist),
            value_size=parse_value_size(self.value_size), prefix=f"{self.prefix}:{run_id}",
            prefill=bool(prefill), seed=self.seed if self.seed is not None else 0,
            server_pid=None, behind=None, tls=core_tls(self.tls),
            # (the login, when there is one, is the target's: added by the engine's caller)
            protocol={"resp": {}} if self.protocol == "resp" else "memcached",
        )
        return core


LIMITS.update(limits_of(LoadSpec))


def twemproxy_settings(distribution: str) -> tuple[str, str]:
    """twemproxy's ``distribution`` and ``hash`` for a pool distribution it can run:
    ``ketama`` (its ketama with md5: the same placement) or ``twemproxy-KIND-HASH``."""
    if distribution == "ketama":
        return "ketama", "md5"
    if distribution.startswith("twemproxy-"):
        _, kind, hash_ = distribution.split("-", 2)
        return kind, hash_
    raise UsageError(f"--private-proxy runs twemproxy, which places keys by ketama or a "
                     f"twemproxy-* distribution, not {distribution!r}")


def pool_members(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``(address, weight)`` of each member: one server (``host:port`` or ``unix:/path``),
    or a pool's ``host:port[:weight]`` members in order. UsageError for a member that is not
    ``host:port[:weight]`` or an empty pool."""
    if isinstance(servers, str):
        servers = [servers]
    servers = list(servers)
    if not servers:
        raise UsageError("a pool needs at least one server")
    if len(servers) == 1:
        try:  # a single server: as given (its weight, if any, plays no part)
            return [(parse_server(servers[0]).address, 1)]
        except UsageError:  # unix:/path, or for the engine to refuse in its own words
            return [(servers[0], 1)]
    out = []
    for spec in servers:
        if not isinstance(spec, str):
            raise UsageError(f"a pool member must be 'host:port[:weight]', not {spec!r}")
        member = parse_server(spec)
        out.append((member.address, member.weight))
    return out


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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


def memory_mb(spec: LoadSpec) -> int:
    """Megabytes a private server needs to hold the whole key space at its largest values
    (at most 4096 + 16); :func:`cachelab.servers.serve` takes the larger of this and the
    server options' memory."""
    name, params = parse_value_size(spec.value_size)
    largest = {"fixed": lambda p: p[0], "uniform": lambda p: p[1],
               "lognormal": lambda p: p[0] * math.exp(2 * p[1]),
               "histogram": lambda p: max(p[0::2])}[name](params)
    need = spec.key_space * (min(largest, 1e6) + 100) * 1.3 / 2**20
    return int(min(need, 4096)) + 16
