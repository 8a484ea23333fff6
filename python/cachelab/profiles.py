"""Latency profiles: measure them (:func:`profile`), load them (:func:`load_profile`).

A latency profile is the artifact documented in ``docs/artifacts.md`` (schema
``cachelab.latency-profile``, version 1): for each operation — get by value size, set by value
size, multi-get by key count, and the loopback floor — an HdrHistogram of latencies in
nanoseconds plus sample, error, mismatch and miss counts, and the facts needed to trust it.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cachelab import _core, environment
from cachelab.artifacts import write_json
from cachelab.errors import InputError, Interrupted, UsageError
from cachelab.progress import run_cancellable
from cachelab.tables import PERCENTILES, pct_key

SCHEMA = "cachelab.latency-profile"
SCHEMA_VERSION = 1

DEFAULT_SIZES = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
DEFAULT_KEY_COUNTS = (1, 3, 5, 10, 100)
DEFAULT_MULTI_VALUE_SIZE = 1_000
#: The largest value that fits memcached's largest item (-I 1024m) with its header.
MAX_VALUE_SIZE = 2**30 - 4096
MAX_KEY_COUNT = 10_000

#: Rows of the printed tables and keys of each cell's ``percentiles``.
TABLE_ROWS = tuple(pct_key(p) for p in PERCENTILES) + ("max",)

#: The operations a profile holds, in the order they are reported.
OPS = ("get", "set", "multiget")


@dataclass
class ProfileSpec:
    """What ``profile`` measures. Defaults are the seed experiment's: 10,000 samples each."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    key_counts: tuple[int, ...] = DEFAULT_KEY_COUNTS
    multi_value_size: int = DEFAULT_MULTI_VALUE_SIZE
    samples: int = 10_000
    warmup: int = 200
    concurrency: int = 1
    protocol: str = "text"
    timeout: float = 1.0
    connect_timeout: float = 2.0
    #: Give up when no request has succeeded for this long (the server is gone).
    give_up_after: float = 5.0
    seed: int | None = None
    #: Every key written starts with this; made unique per run when not given.
    prefix: str | None = None

    @classmethod
    def quick(cls, **overrides: Any) -> ProfileSpec:
        """The same shape, small: 500 samples per cell after 20 warm-up samples."""
        return cls(**{"samples": 500, "warmup": 20, **overrides})

    def check(self) -> None:
        """Raises UsageError naming the first bad field."""
        if self.protocol not in ("text", "meta"):
            raise UsageError(f"protocol must be text or meta, not {self.protocol!r}")
        if self.samples < 1:
            raise UsageError("samples must be at least 1")
        if self.warmup < 0:
            raise UsageError("warm-up must be 0 or more")
        if not 1 <= self.concurrency <= 1024:
            raise UsageError("concurrency must be between 1 and 1024")
        if not self.sizes and not self.key_counts:
            raise UsageError("nothing to measure: give at least one size or key count")
        sizes = [*self.sizes, *([self.multi_value_size] if self.key_counts else [])]
        if any(not 1 <= s <= MAX_VALUE_SIZE for s in sizes):
            raise UsageError(
                f"value sizes must be between 1 byte and {MAX_VALUE_SIZE} bytes "
                "(memcached's 1 GiB item ceiling, less room for the item header)"
            )
        if any(not 1 <= k <= MAX_KEY_COUNT for k in self.key_counts):
            raise UsageError(f"key counts must be between 1 and {MAX_KEY_COUNT}")
        for name in ("timeout", "connect_timeout", "give_up_after"):
            value = getattr(self, name)
            if not 0 < value <= 3600:
                raise UsageError(f"{name.replace('_', '-')} must be between 0 and 3600 seconds")


@dataclass
class Cell:
    """One measured operation at one value size or key count."""

    op: str
    value_size: int
    keys: int
    samples: int
    histogram: str
    errors: dict[str, int] = field(default_factory=dict)
    mismatches: int = 0
    misses: int = 0
    percentiles: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        from cachelab.units import format_size

        if self.op == "multiget":
            return f"{self.keys} key" + ("" if self.keys == 1 else "s")
        if self.op == "floor":
            return "floor"
        return format_size(self.value_size)

    def at(self, percentiles: list[float]) -> list[int]:
        """Latency (ns) at each percentile, read from the histogram."""
        return _core.hist_percentiles(self.histogram, percentiles) if self.samples else [0] * len(
            percentiles
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> Cell:
        try:
            cell = cls(
                op=str(d["op"]),
                value_size=int(d["value_size"]),
                keys=int(d["keys"]),
                samples=int(d["samples"]),
                histogram=str(d["histogram"]),
                errors={str(k): int(v) for k, v in dict(d.get("errors", {})).items()},
                mismatches=int(d.get("mismatches", 0)),
                misses=int(d.get("misses", 0)),
                percentiles={str(k): int(v) for k, v in dict(d.get("percentiles", {})).items()},
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{where}: a cell is missing or has a bad field: {e}") from None
        try:
            _core.hist_summary(cell.histogram)
        except InputError as e:
            raise InputError(f"{where}: {cell.op} cell: {e}") from None
        return cell


def _with_percentiles(cell: Cell) -> Cell:
    values = cell.at([*PERCENTILES, 100.0])
    cell.percentiles = dict(zip(TABLE_ROWS, values))
    return cell


@dataclass
class LatencyProfile:
    """A latency profile: measured by :func:`profile` or loaded by :func:`load_profile`."""

    name: str
    source: str  # "measured" or "published"
    created: str
    cells: list[Cell]
    server: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    published: dict[str, Any] | None = None
    #: The order the samples were taken in, when it was kept (:func:`rank_sequence`):
    #: ``{"ranks": [...], "segments": [...], "lag1": r}`` — each sample's rank within its own
    #: cell (a quantile in [0, 1)), in time order, cut into segments of back-to-back sampling.
    sequence: dict[str, Any] | None = None

    def cells_of(self, op: str) -> list[Cell]:
        return [c for c in self.cells if c.op == op]

    @property
    def floor(self) -> Cell | None:
        return next(iter(self.cells_of("floor")), None)

    def problems(self) -> dict[str, int]:
        """Counts that make a run's exit code 1: errors, mismatches, misses, keys left behind."""
        out = {
            "errors": sum(sum(c.errors.values()) for c in self.cells),
            "mismatches": sum(c.mismatches for c in self.cells),
            "misses": sum(c.misses for c in self.cells),
            "leftover_keys": int(self.run.get("leftover_keys", 0)),
        }
        return {k: v for k, v in out.items() if v}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "source": self.source,
            "created": self.created,
            "unit": "ns",
            "server": self.server,
            "client": self.client,
            "environment": self.environment,
            "run": self.run,
            "cells": [asdict(c) for c in self.cells],
        }
        if self.published is not None:
            d["published"] = self.published
        if self.sequence is not None:
            d["sequence"] = self.sequence
        return d

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "profile") -> LatencyProfile:
        if d.get("schema") != SCHEMA:
            raise InputError(f"{where}: not a latency profile (schema is {d.get('schema')!r})")
        if d.get("schema_version") != SCHEMA_VERSION:
            raise InputError(
                f"{where}: latency profile schema version {d.get('schema_version')!r} is not "
                f"supported (this cachelab reads version {SCHEMA_VERSION})"
            )
        cells = d.get("cells")
        if not isinstance(cells, list):
            raise InputError(f"{where}: 'cells' must be a list")
        return cls(
            name=str(d.get("name", "")),
            source=str(d.get("source", "measured")),
            created=str(d.get("created", "")),
            cells=[Cell.from_dict(c, where) for c in cells],
            server=dict(d.get("server", {})),
            client=dict(d.get("client", {})),
            environment=dict(d.get("environment", {})),
            run=dict(d.get("run", {})),
            published=d.get("published"),
            sequence=_check_sequence(d.get("sequence"), where),
        )


def _check_sequence(seq: Any, where: str) -> dict[str, Any] | None:
    """A profile's ``sequence`` as stored, checked (None when absent)."""
    if seq is None:
        return None
    ranks = seq.get("ranks") if isinstance(seq, Mapping) else None
    segments = seq.get("segments") if isinstance(seq, Mapping) else None
    if not isinstance(ranks, list) or not isinstance(segments, list) or not ranks:
        raise InputError(f"{where}: 'sequence' needs non-empty 'ranks' and 'segments' lists")
    bad = next((u for u in ranks if not isinstance(u, (int, float)) or not 0 <= u < 1), None)
    if bad is not None:
        raise InputError(f"{where}: sequence ranks must be numbers in [0, 1), got {bad!r}")
    if any(not isinstance(n, int) or n < 1 for n in segments) or sum(segments) != len(ranks):
        raise InputError(f"{where}: sequence segments must be positive whole numbers adding "
                         f"up to the {len(ranks)} ranks")
    return dict(seq)


def rank_sequence(cells: Sequence[Any], segments: Sequence[Sequence[tuple[int, int]]]
                  ) -> dict[str, Any] | None:
    """The ``sequence`` of a profile whose samples were taken in the order given:
    ``segments`` of ``(cell index, latency ns)`` in time order, the latencies being those in
    ``cells[i].latencies``. Each sample's rank is its mid-rank among its cell's latencies,
    ``(below + ties / 2) / n``, in (0, 1). ``lag1`` is the correlation of consecutive ranks
    within segments: how much one call's latency says about the next's."""
    import numpy as np

    sorted_lat = [np.sort(np.asarray(c.latencies, dtype=np.int64)) for c in cells]
    ranks: list[np.ndarray] = []
    for seg in segments:
        if not seg:
            continue
        idx = np.asarray([i for i, _ in seg], dtype=np.int64)
        ns = np.asarray([v for _, v in seg], dtype=np.int64)
        u = np.empty(len(seg))
        for i in np.unique(idx):
            s, at = sorted_lat[i], idx == i
            lo, hi = np.searchsorted(s, ns[at], "left"), np.searchsorted(s, ns[at], "right")
            u[at] = (lo + hi) / (2.0 * len(s))
        ranks.append(u)
    if not ranks:
        return None
    pairs = [(u[:-1], u[1:]) for u in ranks if len(u) > 1]
    a = np.concatenate([p[0] for p in pairs]) if pairs else np.zeros(0)
    b = np.concatenate([p[1] for p in pairs]) if pairs else np.zeros(0)
    lag1 = float(np.corrcoef(a, b)[0, 1]) if len(a) > 2 and a.std() > 0 and b.std() > 0 else None
    # Five decimals, kept below 1 (a cell of more than 100,000 samples would round its top up).
    return {"ranks": [min(round(float(x), 5), 0.99999) for x in np.concatenate(ranks)],
            "segments": [len(u) for u in ranks],
            "lag1": None if lag1 is None else round(lag1, 4)}


def load_profile(name_or_path: str | Path) -> LatencyProfile:
    """A built-in profile by name (``appengine-2017``) or a saved ``profile.json``."""
    from cachelab import builtin

    if str(name_or_path) in builtin.PROFILES:
        return builtin.PROFILES[str(name_or_path)]()
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "profile.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        known = ", ".join(builtin.PROFILES)
        raise InputError(
            f"{name_or_path}: no such file, and not a built-in profile ({known})"
        ) from None
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}:1: expected a JSON object")
    return LatencyProfile.from_dict(data, str(path))


def new_prefix() -> str:
    """A key prefix unique to this run: ``cachelab:<12 hex digits>``."""
    return f"cachelab:{secrets.token_hex(6)}"


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _run_with_progress(
    spec_dict: dict[str, Any], on_progress: Callable[[int, int], None] | None
) -> dict[str, Any]:
    """Runs the Rust profile in a thread; Ctrl-C cancels and keeps the partial result."""
    progress = _core.Progress()
    return run_cancellable(
        lambda: _core.profile_run(spec_dict, progress), progress.cancel,
        name="cachelab-profile",
        poll=(lambda: on_progress(progress.done, progress.total)) if on_progress else None,
    )


def profile(
    spec: ProfileSpec | None = None,
    *,
    server: str | None = None,
    server_facts: Mapping[str, Any] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> LatencyProfile:
    """Measures a latency profile of the memcached at ``server`` (``host:port`` or
    ``unix:/path``), or of a private memcached started for the run when ``server`` is None.

    The measuring runs in Rust with the GIL released. Ctrl-C stops it early: the partial
    profile is attached to the :class:`~cachelab.errors.Interrupted` raised
    (``err.partial``). Server-side failures raise :class:`~cachelab.errors.ServerError`
    subclasses; failures during the run are counted in the cells instead.
    """
    spec = spec or ProfileSpec()
    spec.check()
    if server is None:
        from cachelab.servers import PrivateMemcached

        mc = PrivateMemcached(item_size_max=item_size_for(spec), memory_mb=memory_for(spec, 64))
        with mc:
            facts = {"private": True, "argv": mc.argv}
            return profile(spec, server=mc.address, server_facts=facts, on_progress=on_progress)

    seed = spec.seed if spec.seed is not None else secrets.randbits(63)
    prefix = spec.prefix or new_prefix()
    spec_dict = {
        "address": server,
        "sizes": list(spec.sizes),
        "key_counts": list(spec.key_counts),
        "multi_value_size": spec.multi_value_size,
        "samples": spec.samples,
        "warmup": spec.warmup,
        "concurrency": spec.concurrency,
        "protocol": spec.protocol,
        "timeout": spec.timeout,
        "connect_timeout": spec.connect_timeout,
        "give_up_after": spec.give_up_after,
        "seed": seed,
        "prefix": prefix,
    }
    started = time.time()
    raw = _run_with_progress(spec_dict, on_progress)
    cells = [_with_percentiles(Cell.from_dict(c, "profile run")) for c in raw["cells"]]
    client = {k: v for k, v in spec_dict.items() if k != "address"}
    result = LatencyProfile(
        name=f"memcached {raw['server']['version']} at {server}",
        source="measured",
        created=_now(),
        cells=cells,
        server={
            "address": server,
            "private": False,
            **dict(server_facts or {}),
            "version": raw["server"]["version"],
            "settings": raw["server"]["settings"],
        },
        client={**client, "floor_command": raw["floor_command"]},
        environment=environment.facts(),
        run={
            "started_unix": round(started, 3),
            "elapsed_s": round(raw["elapsed_s"], 3),
            "cancelled": raw["cancelled"],
            "aborted": raw["aborted"],
            "leftover_keys": raw["leftover_keys"],
            "cleaned_up_keys": raw["cleaned_up_keys"],
        },
    )
    if raw["cancelled"]:
        err = Interrupted("stopped by a signal; partial results kept")
        err.partial = result  # type: ignore[attr-defined]
        raise err
    return result


def item_size_mib(spec: ProfileSpec) -> int | None:
    """memcached's ``-I`` (MiB) for a private server when the largest value won't fit the
    default 1 MiB item; None when it does."""
    largest = max([*spec.sizes, spec.multi_value_size if spec.key_counts else 0])
    if largest + 4096 <= 1024 * 1024:
        return None
    mib = 1
    while mib * 1024 * 1024 < largest + 4096:
        mib *= 2
    return min(mib, 1024)


def item_size_for(spec: ProfileSpec) -> str | None:
    """``item_size_mib`` as memcached's ``-I`` argument (e.g. ``"2m"``)."""
    mib = item_size_mib(spec)
    return None if mib is None else f"{mib}m"


def memory_for(spec: ProfileSpec, memory_mb: int) -> int:
    """The private server's ``-m``: at least what was asked, and enough for the largest item
    (memcached refuses an ``-I`` above half its memory) for every connection at once."""
    mib = item_size_mib(spec) or 1
    return max(memory_mb, 2 * mib * (spec.concurrency + 1))


def iter_table_columns(p: LatencyProfile, op: str) -> Iterator[tuple[str, dict[str, float]]]:
    for c in p.cells_of(op):
        yield c.label, {k: float(v) for k, v in c.percentiles.items()} if c.samples else {}


_SPIN_RATE: dict[str, float] = {}


def _spin_rate(cpu: bool) -> float:
    """Iterations of an empty Python loop per nanosecond of wall (or this thread's CPU) time:
    the median of 5 timings, measured once."""
    key = "cpu" if cpu else "wall"
    if key not in _SPIN_RATE:
        clock = time.thread_time_ns if cpu else time.perf_counter_ns
        n, runs = 100_000, []
        for _ in range(5):
            t0 = clock()
            for _ in range(n):
                pass
            runs.append(clock() - t0)
        _SPIN_RATE[key] = n / max(1, sorted(runs)[2])
    return _SPIN_RATE[key]


def spin(ns: int, *, cpu: bool = False) -> None:
    """Busy for about ``ns`` nanoseconds (of this thread's CPU time with ``cpu``): an
    application's work between two memcached calls. Interpreter work (an empty loop sized
    once), not a loop reading the clock: on some virtual machines a clock read costs ~0.4 µs
    and thousands of them in a row are no application's work."""
    for _ in range(int(ns * _spin_rate(cpu))):
        pass


@dataclass
class TierCell:
    """One cell of a profile measured through a tier: its keys and the latencies (ns) of the
    calls made so far (see :func:`profile_via_tier`)."""

    op: str
    value_size: int
    keys: list[str]
    latencies: list[int] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    misses: int = 0
    calls: int = 0

    def next_keys(self) -> list[str]:
        """What the next call asks for: all keys of a multi-get; one key of a get, in turn."""
        self.calls += 1
        return self.keys if self.op == "multiget" else [self.keys[self.calls % len(self.keys)]]


def tier_cells(
    address: str, prefix: str, *, sizes: tuple[int, ...], key_counts: tuple[int, ...],
    multi_value_size: int, timeout: float = 1.0, seed: int | None = None,
) -> list[TierCell]:
    """Writes the values a tier profile reads (random bytes under ``prefix``): 4 keys per get
    size, and max(key_counts) keys of ``multi_value_size`` shared by the multi-get cells.
    Delete them with :func:`delete_tier_cells`."""
    import numpy as np

    if not sizes and not key_counts:
        raise UsageError("nothing to measure: give at least one size or key count")
    if any(not 1 <= s <= MAX_VALUE_SIZE for s in [*sizes, multi_value_size]):
        raise UsageError(f"value sizes must be between 1 byte and {MAX_VALUE_SIZE} bytes")
    if any(not 1 <= k <= MAX_KEY_COUNT for k in key_counts):
        raise UsageError(f"key counts must be between 1 and {MAX_KEY_COUNT}")
    rng = np.random.default_rng(seed)
    cells = []
    with _core.Client(address, timeout=timeout, connect_timeout=timeout) as writer:
        for s in sizes:
            keys = [f"{prefix}:g{s}:{j}" for j in range(4)]
            for k in keys:
                writer.set(k, rng.bytes(s))
            cells.append(TierCell("get", s, keys))
        if key_counts:
            mkeys = [f"{prefix}:m:{j}" for j in range(max(key_counts))]
            for k in mkeys:
                writer.set(k, rng.bytes(multi_value_size))
            cells += [TierCell("multiget", multi_value_size, mkeys[:n]) for n in key_counts]
    return cells


def delete_tier_cells(address: str, cells: list[TierCell], timeout: float = 1.0) -> None:
    """Deletes what :func:`tier_cells` wrote (best effort)."""
    keys = {k for c in cells for k in c.keys}
    with _core.Client(address, timeout=timeout, connect_timeout=timeout) as c:
        for k in keys:
            with contextlib.suppress(Exception):
                c.delete(k)


def tier_profile(
    cells: list[TierCell], *, address: str, version: str | None, client: Mapping[str, Any],
    started: float, sequence: Sequence[Sequence[tuple[int, int]]] | None = None,
) -> LatencyProfile:
    """The latency profile (the format of :func:`profile`'s) of cells measured through a
    tier; ``client`` says how (``via``, think time, samples). ``sequence``: the order the
    samples were taken in, as :func:`rank_sequence` takes it, to keep in the profile."""
    out = []
    for c in cells:
        hist = _core.hist_from_values(c.latencies if c.latencies else [1])
        out.append(_with_percentiles(Cell(
            op=c.op, value_size=c.value_size, keys=len(c.keys) if c.op == "multiget" else 1,
            samples=len(c.latencies), histogram=hist, errors=dict(c.errors),
            misses=c.misses)))
    return LatencyProfile(
        name=f"memcached {version} at {address}, via Python with think time",
        source="measured",
        created=_now(),
        cells=out,
        server={"address": address, "private": False, "version": version},
        client={"via": "python", "call": "cachelab.tiered MemcachedTier read (get_list)",
                **dict(client)},
        environment=environment.facts(),
        run={"started_unix": round(started, 3), "elapsed_s": round(time.time() - started, 3)},
        sequence=rank_sequence(cells, sequence) if sequence else None,
    )


def think_summary(think_ns: Any) -> dict[str, float]:
    """n, mean and p50/p90/p99 (ns) of think times."""
    import numpy as np

    t = np.asarray(list(think_ns), dtype=np.int64)
    if not len(t):
        return {"n": 0}
    return {"n": int(len(t)), "mean": float(t.mean()),
            **{f"p{p:g}": float(np.percentile(t, p)) for p in (50.0, 90.0, 99.0)}}


def profile_via_tier(
    address: str,
    *,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    key_counts: tuple[int, ...] = (),
    multi_value_size: int = DEFAULT_MULTI_VALUE_SIZE,
    samples: int = 500,
    warmup: int = 20,
    think_ns: Any = (),
    think_cpu: bool = False,
    timeout: float = 1.0,
    seed: int | None = None,
    prefix: str | None = None,
    tier: Any = None,
) -> LatencyProfile:
    """A latency profile measured from Python through the call :mod:`cachelab.tiered` makes
    for its L2 — the tier's ``get_list`` (or ``get_multi`` where it has none; a get is a
    multi-get of one key, as the tiered cache sends it), values copied into Python ``bytes`` —
    with *think time* before each call.

    :func:`profile` times back-to-back requests in Rust; an application calls memcached after
    doing other work, and on a busy or virtual machine a call after a pause is slower. Here,
    before each timed call the caller spins for a time drawn (seeded, with replacement) from
    ``think_ns`` (nanoseconds — of this thread's CPU time with ``think_cpu``, as an
    application's work between calls is best measured; empty: none). Cells: ``get`` at each
    of ``sizes`` and ``multiget`` at each of ``key_counts`` (values of ``multi_value_size``
    bytes), ``samples`` each after ``warmup`` untimed rounds, in one shuffled order so drift
    lands on every cell.
    ``tier`` is any tier with ``get_multi(keys)`` (default: a new ``MemcachedTier``). The
    result has the format of :func:`profile`'s (``client.via == "python"``), so ``simulate``
    and :func:`cachelab.latency_model.latency_model` take it as is. Keys are written under a
    unique prefix and deleted at the end.
    """
    import numpy as np

    from cachelab.errors import ServerError

    if samples < 1 or warmup < 0:
        raise UsageError("samples must be at least 1 and warm-up 0 or more")
    think = np.asarray(list(think_ns), dtype=np.int64)
    if len(think) and int(think.min()) < 0:
        raise UsageError("think times must be 0 or more nanoseconds")
    if tier is None:
        from cachelab.tiered import MemcachedTier

        tier = MemcachedTier(address, timeout=timeout, connect_timeout=timeout)
    seed = seed if seed is not None else secrets.randbits(63)
    rng = np.random.default_rng(seed)
    started = time.time()
    cells = tier_cells(address, prefix or new_prefix(), sizes=sizes, key_counts=key_counts,
                       multi_value_size=multi_value_size, timeout=timeout, seed=seed)
    try:
        with _core.Client(address, timeout=timeout, connect_timeout=timeout) as c:
            version = c.version()
        order = np.repeat(np.arange(len(cells)), samples)
        rng.shuffle(order)
        order = np.concatenate([np.repeat(np.arange(len(cells)), warmup), order])
        waits = think[rng.integers(0, len(think), len(order))] if len(think) else None
        clock = time.perf_counter_ns
        if hasattr(tier, "get_list"):  # how TieredCache reads its L2 (values in key order)
            def get_multi(keys: list[str]) -> Any:
                return range(tier.get_list(keys)[1])
        else:
            get_multi = tier.get_multi
        for n, i in enumerate(order.tolist()):
            cell = cells[i]
            keys = cell.next_keys()
            if waits is not None and waits[n]:
                spin(int(waits[n]), cpu=think_cpu)
            t0 = clock()
            try:
                got = get_multi(keys)
            except ServerError as e:
                cell.errors[type(e).__name__] = cell.errors.get(type(e).__name__, 0) + 1
                continue
            t1 = clock()
            if cell.calls > warmup:  # the first `warmup` calls of each cell are untimed
                cell.latencies.append(t1 - t0)
                cell.misses += len(keys) - len(got)
    finally:
        delete_tier_cells(address, cells, timeout)
    return tier_profile(cells, address=address, version=version, started=started,
                        client={"think_ns": think_summary(think), "think_cpu": think_cpu,
                                "samples": samples,
                                "warmup": warmup, "seed": seed, "timeout": timeout})
