"""A latency profile of a pool (:func:`profile_pool`): each member profiled in turn, and the
pool as a client sees it, so a slow member stands out (docs/pools.md, "Profiling a pool").

Each member gets the whole profile (every cell of :class:`ProfileSpec`), taken in ``rounds``
rounds with the members' order rotated between them, so drift over the run falls on every
member alike; a member's rounds are merged cell by cell (their histograms added).

The **pool** row of a single-key operation (get and set at each size, the floor) is what a
client of the pool sees: a request goes to the member that holds its key, so its latency is
drawn from that member's with the member's share of the keys (from the distribution, as
production clients compute it): a mixture of the members' distributions, computed from
:data:`MIXTURE_POINTS` quantiles of each. A multi-get over a pool is split per member and
waits for the slowest part: that is measured by ``load`` on the pool, not modelled here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import cachelab._core as _core
from cachelab.artifacts import created_now, write_json
from cachelab.errors import Interrupted, ServerError, UsageError
from cachelab.pool import distribution as pool_distribution
from cachelab.pool import parse_server
from cachelab.profile.cell import TABLE_ROWS, Cell, with_percentiles
from cachelab.profile.measure import profile
from cachelab.profile.model import CSV_HEADER, LatencyProfile
from cachelab.profile.resp import server_lines
from cachelab.profile.spec import ProfileSpec
from cachelab.resp import RespLogin
from cachelab.tables import PERCENTILES, write_json_and_csv
from cachelab.units import (
    check_limit,
    format_duration_ns,
    format_size,
    limit,
    of_asked,
    partial_note,
    pick_unit,
)

__all__ = ["MIXTURE_POINTS", "SCHEMA", "SCHEMA_VERSION", "PoolProfile", "key_shares",
           "mixture_percentiles", "profile_pool"]

SCHEMA = "cachelab.pool-profile"
SCHEMA_VERSION = 1
#: Quantiles read from each member's histogram to build the pool's mixture.
MIXTURE_POINTS = 20_000
#: Keys hashed to estimate each member's share.
_SHARE_KEYS = 100_000


def key_shares(members: Sequence[str], distribution: str) -> list[float]:
    """Each member's share of keys under ``distribution`` (estimated over
    :data:`_SHARE_KEYS` keys; a pool of one holds every key)."""
    if len(members) == 1:
        return [1.0]
    counts = pool_distribution(distribution, list(members)).key_counts("share", _SHARE_KEYS)
    return [c / _SHARE_KEYS for c in counts]


def mixture_percentiles(histograms: Sequence[str], weights: Sequence[float],
                        percentiles: Sequence[float]) -> list[int]:
    """Percentiles (ns) of the mixture of encoded histograms with ``weights``: each member
    stands for its :data:`MIXTURE_POINTS` quantiles, each weighing its share over that many."""
    grid = [100.0 * (i + 0.5) / MIXTURE_POINTS for i in range(MIXTURE_POINTS)]
    values: list[np.ndarray] = []
    masses: list[np.ndarray] = []
    for h, w in zip(histograms, weights):
        if w <= 0:
            continue
        values.append(np.asarray(_core.hist_percentiles(h, grid), dtype=float))
        masses.append(np.full(MIXTURE_POINTS, w / MIXTURE_POINTS))
    if not values:
        return [0] * len(percentiles)
    v = np.concatenate(values)
    m = np.concatenate(masses)
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(m[order])
    cum /= cum[-1]
    out = []
    for p in percentiles:
        i = min(int(np.searchsorted(cum, p / 100.0, side="left")), len(v) - 1)
        out.append(int(v[i]))
    return out


@dataclass
class PoolProfile:
    """Each member's profile, its share of the keys, and the pool's single-key rows."""

    distribution: str
    addresses: list[str]
    shares: list[float]
    members: list[LatencyProfile]
    #: Per single-key cell (op, value size): the mixture's percentiles (TABLE_ROWS keys).
    pool: list[dict[str, Any]]
    spec: dict[str, Any]
    rounds: int
    created: str = field(default_factory=created_now)
    #: A Redis Cluster's masters (:mod:`cachelab.profile.cluster`): the seed that answered,
    #: the number of masters, each one's hash-tagged key prefix; None for a pool.
    cluster: dict[str, Any] | None = None

    @property
    def run(self) -> dict[str, Any]:
        """The members' runs as one: aborted with the first member's reason, if any."""
        aborted = next((f"{a}: {m.run['aborted']}" for a, m in zip(self.addresses, self.members)
                        if m.run.get("aborted")), None)
        return {"aborted": aborted,
                "cancelled": any(m.run.get("cancelled") for m in self.members),
                "elapsed_s": sum(float(m.run.get("elapsed_s") or 0) for m in self.members)}

    def failed_checks(self) -> dict[str, str]:
        """Every member's failed checks (``precision``), each reason naming its member."""
        out: dict[str, str] = {}
        for a, m in zip(self.addresses, self.members):
            for k, why in m.failed_checks().items():
                out[k] = f"{out[k]}; {a}: {why}" if k in out else f"{a}: {why}"
        return out

    def problems(self) -> dict[str, int]:
        """Every member's problems (mismatches, misses, errors, keys left), summed."""
        out: dict[str, int] = {}
        for m in self.members:
            for k, n in m.problems().items():
                out[k] = out.get(k, 0) + n
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
                "distribution": self.distribution, "rounds": self.rounds,
                "members": [{"address": a, "share": s, "profile": f"members/{_slug(i, a)}"}
                            for i, (a, s) in enumerate(zip(self.addresses, self.shares))],
                "pool": self.pool, "spec": self.spec, "created": self.created,
                **({} if self.cluster is None else {"cluster": self.cluster})}

    def save(self, path: Path) -> Path:
        return write_json(path, self.to_dict())

    def csv_table(self) -> tuple[list[str], list[list[Any]]]:
        """``profile-pool.csv`` (and ``--format csv``): every member's ``profile.csv`` rows,
        each after the member's address."""
        return (["member", *CSV_HEADER],
                [[a, *row] for a, m in zip(self.addresses, self.members) for row in m.csv_rows()])

    def write(self, out_dir: Path, *, plots: bool = True) -> list[Path]:
        """``profile-pool.json``, ``profile-pool.csv`` (:meth:`csv_table`), and each member's
        profile under ``members/<n>-<address>/``."""
        written = write_json_and_csv(self, out_dir, "profile-pool")
        for i, (a, m) in enumerate(zip(self.addresses, self.members)):
            written += m.write(out_dir / "members" / _slug(i, a), plots=plots)
        return written

    def render(self) -> str:
        asked = self.spec.get("samples")
        note = partial_note(self.run, "samples per cell: " + "; ".join(
            f"{a} {of_asked((c.samples for c in m.cells), asked)}"
            for a, m in zip(self.addresses, self.members)))
        lines = [note] if note else []
        lines += [f"pool of {len(self.addresses)} ({self.distribution}), each member "
                 f"profiled in {self.rounds} round(s), order rotated; the pool row weighs each "
                 "member by its share of the keys"] if self.cluster is None else [
            f"Redis Cluster of {len(self.addresses)} masters (seed {self.cluster['seed']}), "
            f"each profiled on its own in {self.rounds} round(s), order rotated, its keys "
            "under a hash tag of its own slots (an MGET is one command to one master); the "
            "pool row weighs each master by its share of the slots"]
        for op in ("get", "set"):
            cols = sorted({c["value_size"] for c in self.pool if c["op"] == op})
            if not cols:
                continue
            for pkey in ("50", "99"):
                rows: list[tuple[str, list[float | None]]] = []
                for a, s, m in zip(self.addresses, self.shares, self.members):
                    by = {c.value_size: c for c in m.cells_of(op)}
                    rows.append((f"{a} ({s:.0%})", [
                        float(by[v].percentiles[pkey]) if v in by and by[v].samples else None
                        for v in cols]))
                pool = {c["value_size"]: c for c in self.pool if c["op"] == op}
                rows.append(("pool", [float(pool[v]["percentiles"][pkey]) for v in cols]))
                unit = pick_unit(x for _, r in rows for x in r if x)
                width = max(len(n) for n, _ in rows) + 2
                lines += ["", f"{op} p{pkey} by value size ({unit})",
                          f"{'':{width}}" + "".join(f"{format_size(v):>10}" for v in cols)]
                for name, r in rows:
                    lines.append(f"{name:{width}}" + "".join(
                        f"{format_duration_ns(x, unit) if x else '—':>10}" for x in r))
        slow = self.slowest()
        if slow:
            lines += ["", slow]
        said = [(a, server_lines(m.server, m.client)) for a, m in zip(self.addresses, self.members)
                if m.server.get("protocol") == "resp"]
        if said:  # Redis members: what each counted, against what was sent to it
            lines += ["", "each member's own INFO over its rounds:"]
            for a, member in said:
                lines += [f"{a}: {line}" for line in member]
        return "\n".join(lines)

    def slowest(self) -> str | None:
        """A sentence naming the member whose get p50 is furthest above the others' median,
        when it is at least 1.5 times it."""
        p50s = []
        for a, m in zip(self.addresses, self.members):
            gets = [c for c in m.cells_of("get") if c.samples]
            if gets:
                p50s.append((float(np.median([c.percentiles["50"] for c in gets])), a))
        if len(p50s) < 2:
            return None
        worst = max(p50s)
        rest = float(np.median([v for v, a in p50s if a != worst[1]]))
        if rest > 0 and worst[0] >= 1.5 * rest:
            return (f"slow member: {worst[1]}'s get p50 is {worst[0] / rest:.1f}× the others' "
                    "(median over value sizes)")
        return None


def _slug(i: int, address: str) -> str:
    return f"{i}-" + "".join(ch if ch.isalnum() or ch in ".-" else "_" for ch in address)


#: A pool's rounds by default (``profile --rounds``), and their range.
ROUNDS = 2
ROUNDS_LIMIT = limit(1, 20)


def profile_pool(spec: ProfileSpec, members: Sequence[str], *, distribution: str = "ketama",
                 rounds: int = ROUNDS,
                 on_progress: Callable[[int, int], None] | None = None,
                 resp: RespLogin | None = None, prefixes: Sequence[str] | None = None,
                 shares: Sequence[float] | None = None) -> PoolProfile:
    """Profiles every member of the pool ``members`` (``host:port[:weight]``) in ``rounds``
    rounds, rotating their order, and computes the pool's single-key rows (module
    docstring). Raises what :func:`~cachelab.profile.profile` raises for a member before
    every member is measured once. ``resp``: the members are Redis or Valkey servers, each
    profiled over RESP with this login (its ``INFO commandstats`` held against what was
    sent, member by member). ``prefixes``: each member's key prefix (a Redis Cluster's
    masters, each under a hash tag of its own slots: :mod:`cachelab.profile.cluster`), round
    r's ``<prefix>r<r>``; ``shares``: each member's share of the keys, when not from
    ``distribution`` (a cluster's slots).

    Cut short, it keeps what was measured: on Ctrl-C (or SIGTERM) it raises
    :class:`~cachelab.errors.Interrupted` with the partial pool as ``err.partial`` (the
    interrupted member's samples included; a member not reached yet has no samples); when a
    member cannot be reached in a later round, the pool so far is returned with its run
    ``aborted`` saying which and why."""
    spec.check()
    if len(members) < 2:
        raise UsageError("a pool profile needs at least 2 members")
    if spec.precision is not None:  # each member is profiled in rounds, merged at the end
        raise UsageError("--precision is for one server: a pool's members are profiled in "
                         "rounds and merged (leave out --precision, or profile one member)")
    check_limit("rounds", ROUNDS_LIMIT, rounds)
    addresses = [parse_server(m).address for m in members]
    shares = list(shares) if shares is not None else key_shares(list(members), distribution)
    per_round = dataclasses.replace(spec, samples=max(1, math.ceil(spec.samples / rounds)))
    taken: list[list[LatencyProfile]] = [[] for _ in addresses]
    total = rounds * len(addresses)
    done = 0
    interrupted: Interrupted | None = None
    try:
        for r in range(rounds):
            order = list(range(len(addresses)))
            k = r % len(order)
            for i in order[k:] + order[:k]:
                try:
                    one = per_round if prefixes is None else dataclasses.replace(
                        per_round, prefix=f"{prefixes[i]}r{r}")
                    taken[i].append(profile(one, server=addresses[i], resp=resp))
                except Interrupted as e:
                    taken[i].append(e.partial)
                    raise
                except ServerError as e:
                    if not all(taken):
                        raise  # a member never measured: no pool to show
                    # A member gone in a later round: what the rounds done measured is kept.
                    taken[i].append(_unmeasured(taken[i][0], addresses[i],
                                                {"aborted": str(e)}))  # .run names the member
                    raise _PoolStopped from None
                done += 1
                if on_progress is not None:
                    on_progress(done, total)
    except (Interrupted, KeyboardInterrupt) as e:
        interrupted = e if isinstance(e, Interrupted) else Interrupted(
            "stopped by a signal; partial results kept")
        some = next((ps[0] for ps in taken if ps), None)
        if some is None:
            raise
        taken = [ps or [_unmeasured(some, a, {"cancelled": True})]
                 for ps, a in zip(taken, addresses)]
    except _PoolStopped:
        pass
    merged = [_merge(ps) for ps in taken]
    result = PoolProfile(distribution=distribution, addresses=addresses, shares=shares,
                         members=merged, pool=_pool_cells(merged, shares),
                         spec={**dataclasses.asdict(spec), "rounds": rounds}, rounds=rounds)
    if interrupted is not None:
        interrupted.partial = result
        raise interrupted
    return result


class _PoolStopped(Exception):
    """A member could not be measured in a later round: the pool stops with what it has."""


def _unmeasured(like: LatencyProfile, address: str, run: dict[str, Any]) -> LatencyProfile:
    """A member's profile with no samples, in the shape of ``like`` (the same cells, empty):
    for a member a pool cut short did not reach, or could not reach again."""
    empty = _core.hist_from_values([])
    cells = [with_percentiles(Cell(op=c.op, value_size=c.value_size, keys=c.keys, samples=0,
                                   histogram=empty, errors={}, mismatches=0, misses=0))
             for c in like.cells]
    return dataclasses.replace(like, name=f"measured {address}", cells=cells,
                               server={"address": address}, run={"elapsed_s": 0.0, **run},
                               sequence=None, tls_cost=None, behind=None, precision=None)


def _merge(profiles: list[LatencyProfile]) -> LatencyProfile:
    """One member's rounds as one profile: cells merged (histograms added, counts summed)."""
    first = profiles[0]
    cells = []
    for parts in zip(*(p.cells for p in profiles)):
        hists = [c.histogram for c in parts if c.samples]
        base = parts[0]
        cells.append(with_percentiles(Cell(
            op=base.op, value_size=base.value_size, keys=base.keys,
            samples=sum(c.samples for c in parts),
            histogram=_core.hist_merge(hists) if hists else base.histogram,
            errors={k: sum(c.errors.get(k, 0) for c in parts)
                    for k in {k for c in parts for k in c.errors}},
            mismatches=sum(c.mismatches for c in parts), misses=sum(c.misses for c in parts))))
    run = dict(first.run)
    for p in profiles[1:]:
        for k in ("elapsed_s", "leftover_keys"):
            if isinstance(p.run.get(k), (int, float)):
                run[k] = run.get(k, 0) + p.run[k]
        for k in ("cancelled", "aborted"):
            run[k] = run.get(k) or p.run.get(k)
    if first.server.get("protocol") != "resp" or len(profiles) == 1:
        return dataclasses.replace(first, cells=cells, run=run)
    # A Redis member: what each round sent, and what the server counted, added up.
    client = {**first.client, "commands": _summed(p.client.get("commands") for p in profiles)}
    server = dict(first.server)
    calls = [p.server.get("calls") for p in profiles]
    server["calls"] = None if any(c is None for c in calls) else _summed(calls)
    deltas = [p.server.get("deltas") or {} for p in profiles]
    server["deltas"] = {**deltas[0], **_summed(
        {k: v for k, v in d.items() if isinstance(v, (int, float))} for d in deltas)}
    if isinstance(deltas[-1].get("connected_clients"), dict):  # first round's before, last's after
        server["deltas"]["connected_clients"] = {
            "before": (deltas[0].get("connected_clients") or {}).get("before"),
            "after": deltas[-1]["connected_clients"].get("after")}
    return dataclasses.replace(first, cells=cells, run=run, client=client, server=server)


def _summed(counts: Any) -> dict[str, Any]:
    """Counters by name, added up over ``counts`` (mappings; None ones skipped)."""
    out: dict[str, Any] = {}
    for c in counts:
        for k, n in (c or {}).items():
            out[k] = out.get(k, 0) + n
    return out


def _pool_cells(members: list[LatencyProfile], shares: list[float]) -> list[dict[str, Any]]:
    """The pool's single-key rows: per (op, value size) cell every member has, the mixture's
    percentiles."""
    out = []
    for cell in members[0].cells:
        if cell.op not in ("get", "set", "floor"):
            continue
        same = [next((c for c in m.cells if c.op == cell.op and c.value_size == cell.value_size
                      and c.keys == cell.keys), None) for m in members]
        if any(c is None or not c.samples for c in same):
            continue
        values = mixture_percentiles([c.histogram for c in same if c], shares,
                                     [*PERCENTILES, 100.0])
        out.append({"op": cell.op, "value_size": cell.value_size, "keys": cell.keys,
                    "samples": sum(c.samples for c in same if c),
                    "percentiles": dict(zip(TABLE_ROWS, values))})
    return out
