"""Load from many machines: :func:`load_on_ray` runs one workload as ``agents`` Ray actors,
one per node by default, each running the Rust engine (GIL released) with its share of the
connections and of the rate, all starting at one common instant; the driver merges what they
measured into an ordinary :class:`~cachelab.load.result.LoadResult` with an ``agents``
section. The target is one server, a pool (every agent drives every member, keys placed by
the same distribution) or a proxy; over RESP too (Redis, Valkey: one server, a client-side
pool, twemproxy in redis mode, or a Redis Cluster, whose masters every agent drives as a pool,
each key to its hash slot's master, following ``MOVED``/``ASK`` on its own). docs/scale-out.md
sets out the design; in short:

* **Shares.** Connections split as evenly as possible (the first ``connections % agents``
  agents get one more); each agent's rate is the requested rate times its share of the
  connections, so every connection runs the same per-connection schedule as in a local run
  and the union of the agents' Poisson processes is the requested one. A request count splits
  the same way. ``threads`` is per agent (capped at its connections). Agent ``k`` gets its
  own seed, derived from the run's.
* **Keys.** One run id and key prefix for all agents. The agents prefill the key space
  before the start, each its stripe (index ``k``, ``k + agents``, …), each key on the member
  the distribution names; the engines then run without a prefill and delete nothing (one
  that ends first would delete keys the others still read); when the run prefilled or its
  requests set keys, the driver deletes the whole key space once every agent is done (or
  lost), each key from its member (on a Redis Cluster, from the master that serves its slot
  at the end: the slot map is read again first).
* **Servers.** The driver checks every server for room first (each pool member, or each
  server behind a proxy, for its share of the keys; a Redis's ``maxmemory``) and watches for
  evictions. On a pool or through a proxy it reads each member's (or each server behind the
  proxy's) ``stats`` (a Redis's ``INFO``) itself, once after the prefill and once after the
  agents are done: the members' ``server`` sections (or ``behind``) are those reads, not the
  agents' own.
* **Time.** Each agent's clock offset is estimated by round trips to the driver; the agents
  start at ``start_unix`` (driver clock, shifted by each offset), so interval ``i`` of every
  agent covers the same wall-clock stretch, give or take the reported start skew.
* **Loss.** An agent that dies, or has not finished long after the run should have ended, is
  lost: the run ends with the others' measurements, and ``run.agents_lost`` says which agent,
  on which node, and when.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import random
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import cachelab._core as _core
from cachelab.capacity import evicted_message
from cachelab.errors import AgentsLost, CachelabError, Interrupted, UsageError
from cachelab.load.engine import guard_run, result_from_outcome, target_of
from cachelab.load.keyspace import RESP_BATCH, Clients, delete_key_space, login_of, owners
from cachelab.load.merge import merge_outcomes
from cachelab.load.result import LoadResult
from cachelab.load.snapshots import Snapshots
from cachelab.load.spec import LoadSpec, memory_mb, pool_members
from cachelab.raycluster import RayOptions, clock_offset, connected, placement_group
from cachelab.raycluster import connection_errors as ray_connection_errors
from cachelab.resp import RespLogin
from cachelab.servers import ServerOptions
from cachelab.target import Target

__all__ = ["AgentShare", "AgentsProgress", "LoadAgent", "load_on_ray", "plan_shares"]

#: An agent's load threads busy at least this share of the run, or waiting for a CPU this
#: share, could not do more: the client was the limit.
CLIENT_BUSY = 0.85
CLIENT_WAIT = 0.25

#: Seconds between the agents' readiness and the common start, besides twice the slowest
#: round trip: enough for every ``run`` call to arrive and wait.
START_LEAD_S = 1.0

#: Seconds the agents have to answer once placed.
READY_TIMEOUT_S = 60.0

#: Seconds an agent may take beyond the run's planned end (warm-up, duration, clean-up)
#: before it is declared lost.
GRACE_S = 30.0


@dataclass
class AgentShare:
    """One agent's part of the workload."""

    index: int
    connections: int
    threads: int
    rate: float | None
    requests: int | None
    seed: int


def _split(total: int, parts: int) -> list[int]:
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


def plan_shares(spec: LoadSpec, agents: int, seed: int) -> list[AgentShare]:
    """The agents' shares of ``spec`` (see the module docstring); UsageError when there are
    fewer connections (or requests) than agents."""
    if spec.connections < agents:
        raise UsageError(f"{agents} agents need at least {agents} connections (one each), "
                         f"not {spec.connections}")
    if spec.requests is not None and spec.requests < agents:
        raise UsageError(f"{agents} agents need at least {agents} requests, not {spec.requests}")
    conns = _split(spec.connections, agents)
    reqs = _split(spec.requests, agents) if spec.requests is not None else [None] * agents
    rng = random.Random(seed)
    return [AgentShare(index=k, connections=c, threads=min(spec.threads, c),
                       rate=None if spec.rate is None else spec.rate * c / spec.connections,
                       requests=reqs[k], seed=rng.getrandbits(63))
            for k, c in enumerate(conns)]


@dataclass
class AgentsProgress:
    """The agents' progress summed, shaped like ``_core.LoadProgress`` for the CLI's bar."""

    total: int = 0
    done: int = 0
    last_rate: float = 0.0
    last_p99_ns: int = 0
    errors: int = 0
    agents_running: int = 0


def _value_sizes(parsed: tuple[str, list[float]], rng: random.Random) -> Callable[[], int]:
    """A sampler of the value-size distribution (``parse_value_size``'s form) for the
    prefill: the same distribution the engine draws from, not the same draws."""
    name, p = parsed
    if name == "fixed":
        return lambda: int(p[0])
    if name == "uniform":
        return lambda: rng.randint(int(p[0]), int(p[1]))
    if name == "lognormal":
        mu = math.log(p[0])
        return lambda: min(1_000_000, max(1, round(rng.lognormvariate(mu, p[1]))))
    sizes, weights = [int(s) for s in p[0::2]], p[1::2]
    return lambda: rng.choices(sizes, weights)[0]


class LoadAgent:
    """One load agent (a Ray actor; :func:`load_on_ray` makes it remote). Methods are called
    from several threads (the actor's ``max_concurrency``): ``progress`` and ``cancel`` while
    ``run`` is in the engine, which holds no GIL."""

    def __init__(self, index: int) -> None:
        self.index = index
        self._progress = _core.LoadProgress()

    def where(self) -> dict[str, Any]:
        """The agent's node, host and process."""
        # deferred: optional dependency (the [ray] extra); only inside a Ray worker
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(),
                "node_ip": ray.util.get_node_ip_address(), "hostname": socket.gethostname(),
                "pid": os.getpid(), "cpus": os.cpu_count()}

    def now(self) -> float:
        """This node's clock (Unix time)."""
        return time.time()

    def prefill(self, core: Mapping[str, Any], stripe: tuple[int, int], threads: int) -> int:
        """Sets keys ``stripe[0]``, ``stripe[0] + stripe[1]``, … of ``core``'s key space, each
        on the member that holds it (a Redis Cluster's: the master of its hash slot), with
        values drawn from its size distribution, from ``threads`` threads; returns how many
        were stored. Over RESP, each thread's ``SET``s go pipelined, 256 at a time."""
        first, step = stripe
        keys = [f"{core['prefix']}:{i}" for i in range(first, int(core["key_space"]), step)]
        work = list(zip(keys, owners(core, keys)))
        chunks = [work[i::threads] for i in range(threads)]
        pool = os.urandom(1_000_000)
        ttl = int(core["ttl"])

        def fill(part: list[tuple[str, int]], seed: int) -> int:
            size = _value_sizes(tuple(core["value_size"]), random.Random(seed))  # type: ignore[arg-type]
            stored = 0
            with Clients(core, core["timeout"]) as clients:
                if not login_of(core):
                    for key, member in part:
                        stored += clients.get(member).set(key, pool[:size()], exptime=ttl)
                    return stored
                by_member: dict[int, list[str]] = {}
                for key, member in part:
                    by_member.setdefault(member, []).append(key)
                for member, mine in by_member.items():
                    for at in range(0, len(mine), RESP_BATCH):
                        batch = [(k, pool[:size()]) for k in mine[at:at + RESP_BATCH]]
                        stored += clients.get(member).set_many(batch, ttl)
            return stored

        with ThreadPoolExecutor(max_workers=threads) as ex:
            return sum(ex.map(fill, chunks, [core["seed"] + i for i in range(threads)]))

    def run(self, core: dict[str, Any], start_local: float) -> dict[str, Any]:
        """Waits for ``start_local`` (this node's clock, at most 120 s ahead), then runs the
        engine; returns its outcome with ``started``/``ended`` (this node's clock)."""
        wait = start_local - time.time()
        if wait > 120:
            raise UsageError(f"agent {self.index}: the start is {wait:.0f} s away; clocks?")
        while not self._progress.cancelled and (wait := start_local - time.time()) > 0:
            time.sleep(min(wait, 0.05))
        started = time.time()
        outcome = _core.load_run(core, self._progress)
        return {"outcome": outcome, "started": started, "ended": time.time()}

    def progress(self) -> dict[str, Any]:
        p = self._progress
        return {"total": p.total, "done": p.done, "last_rate": p.last_rate,
                "last_p99_ns": p.last_p99_ns, "errors": p.errors}

    def cancel(self) -> None:
        self._progress.cancel()


def load_on_ray(
    spec: LoadSpec,
    ray_options: RayOptions,
    *,
    server: str | Sequence[str] | None = None,
    server_options: ServerOptions | None = None,
    server_facts: Mapping[str, Any] | None = None,
    on_progress: Callable[[Any], None] | None = None,
    behind: Sequence[str] | None = None,
) -> LoadResult:
    """Runs ``spec`` from ``ray_options.agents`` agents on the Ray cluster of ``ray_options``
    and returns the merged result (module docstring; docs/scale-out.md). The target is as for
    :func:`cachelab.load.load`: ``server`` (one ``host:port``, or a pool's
    ``host:port[:weight]`` members, or ``spec.servers``), a proxy ``server`` with the servers
    ``behind`` it, or else a private memcached on this machine (reachable by the nodes on this
    machine only). ``server_facts`` are recorded in ``server``. Every agent drives the whole
    pool, with the spec's distribution and member-failure settings; the agents must reach
    every member (through a proxy: the proxy, and the servers behind it, which each engine
    checks at its start).

    Raises UsageError when Ray is missing, the cluster cannot place the agents, or the spec
    cannot be split; :class:`~cachelab.errors.ServerUnreachable` when no cluster answers
    within ``ray_options.connect_timeout``; :class:`~cachelab.capacity.WontFit` when the run
    does not fit a server; :class:`~cachelab.errors.Interrupted` (with ``err.partial``) on
    Ctrl-C (KeyboardInterrupt while still connecting, when nothing has run); CachelabError
    when every agent was lost.
    """
    return measure_on_ray(spec, target_of(spec, server, behind, server_options),
                          ray_options, server_facts=server_facts, on_progress=on_progress)


def measure_on_ray(spec: LoadSpec, target: Target, ray_options: RayOptions | None = None, *,
                   server_facts: Mapping[str, Any] | None = None,
                   on_progress: Callable[[Any], None] | None = None) -> LoadResult:
    """:func:`load_on_ray`'s work with the target decided: ``target`` opened on this
    machine (:meth:`Target.open`), driven from the agents of ``ray_options`` (default:
    ``target.ray``)."""
    ray_options = ray_options or target.ray
    if ray_options is None:
        raise UsageError("a run from Ray agents needs the Ray options (--ray)")
    spec.check()
    ray_options.check()
    if spec.repeats > 1:
        raise UsageError("--repeats is for a local run: leave out --repeats or --ray")
    if spec.add or spec.remove or spec.fail or spec.private_pool is not None:
        raise UsageError("failure drills (--add, --remove, --fail, --private-pool) are for a "
                         "local run: leave them out or leave out --ray")
    if spec.precision is not None:  # each agent would stop on its own share's p99
        raise UsageError("--precision is for a local run: a run from Ray agents has no live "
                         "merged histogram (leave out --precision or --ray)")
    base_seed = spec.seed if spec.seed is not None else secrets.randbits(63)
    shares = plan_shares(spec, ray_options.agents, base_seed)
    with connected(ray_options) as ray, \
            target.local().open(memory_mb=memory_mb(spec)) as live:
        given = live.given
        hidden = pool_members(live.behind) if live.behind else None
        facts = {**live.facts, **dict(server_facts or {})}
        members = pool_members(given) if given else [(live.address, 1)]
        run_id = secrets.token_hex(6)
        core = spec.to_core(given or live.address, run_id)
        core["seed"] = base_seed
        login = target.resp or (RespLogin() if spec.protocol == "resp" else None)
        if live.slots:  # a Redis Cluster: every agent routes by hash slot
            core["cluster_slots"] = live.slots
        if login is not None:
            # (the password goes to the agents' engines alone: never into a result)
            core["protocol"] = login.to_core()
        if hidden:
            core["behind"] = [a for a, _ in hidden]
        watch = guard_run(spec, members, hidden, core["prefix"],
                          private=bool(facts.get("private")), resp=login, slots=live.slots)
        read = core["behind"] or ([a for a, _ in members] if len(members) > 1 else [])
        snapshots = Snapshots(read, core, login=login) if read else None
        with _agents(ray, ray_options, shares) as actors:
            run = _Run(ray, actors, shares, spec, core, watch, on_progress, snapshots)
            try:
                # a broken Ray Client connection too: the key space prefilled is deleted
                with ray_connection_errors(ray_options.cluster):
                    run.prepare()
                    run.start()
                    run.monitor()
            except CachelabError:
                run.abandon()
                raise
        return run.result(live.address, facts, ray_options)


@contextlib.contextmanager
def _agents(ray: Any, options: RayOptions, shares: Sequence[AgentShare]) -> Any:
    """The agents as actors in a placement group, removed at the end."""
    # deferred: optional dependency (the [ray] extra)
    from ray.util.placement_group import remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    cpus = float(max(s.threads for s in shares))
    group = placement_group(ray, len(shares), cpus, options.placement, options.ready_timeout)
    remote = ray.remote(LoadAgent)
    actors = [remote.options(
        num_cpus=cpus, max_concurrency=4, max_restarts=0,
        scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=k),
    ).remote(k) for k in range(len(shares))]
    try:
        yield actors
    finally:
        for a in actors:
            with contextlib.suppress(Exception):
                ray.kill(a)
        with contextlib.suppress(Exception):
            remove_placement_group(group)


class _Run:
    """The driver's side of one run: readiness, prefill, the start, watching, the merge."""

    def __init__(self, ray: Any, actors: list[Any], shares: Sequence[AgentShare],
                 spec: LoadSpec, core: dict[str, Any], watch: Any,
                 on_progress: Callable[[Any], None] | None,
                 snapshots: Snapshots | None = None) -> None:
        self.ray, self.actors, self.shares, self.spec, self.core = ray, actors, shares, spec, core
        self.watch, self.on_progress, self.snapshots = watch, on_progress, snapshots
        self.where: list[dict[str, Any]] = []
        self.offsets: list[dict[str, Any]] = []
        self.cores: list[dict[str, Any]] = []
        self.done: dict[int, dict[str, Any]] = {}
        self.lost: dict[int, dict[str, Any]] = {}
        self.last_seen: dict[int, float] = {}
        self.prefilled = 0
        self.prefill_s = 0.0
        self.prefilling = False
        self.start_unix = 0.0
        self.interrupted = False
        self.evicted: int | None = None
        self.user_items_lost: int | None = None

    def _get(self, refs: Any, timeout: float, what: str) -> Any:
        """Before the start: an agent that fails or dies stops the run (nothing is measured
        yet), with its own error when its code raised one."""
        exc = self.ray.exceptions
        try:
            return self.ray.get(refs, timeout=timeout)
        except exc.GetTimeoutError:
            raise AgentsLost(f"the agents did not {what} within {timeout:g} s") from None
        except exc.RayTaskError as e:
            raise agent_error(e) from None
        except exc.RayError as e:
            raise AgentsLost(f"an agent was lost before the start (while they were to "
                                f"{what}): {_first_line(e)}") from None

    def prepare(self) -> None:
        """Every agent answers; clocks are compared; the key space is prefilled."""
        timeout = READY_TIMEOUT_S
        self.where = self._get([a.where.remote() for a in self.actors], timeout, "start")
        for a in self.actors:
            off = clock_offset(lambda a=a: self._get(a.now.remote(), 10.0, "tell the time"))
            self.offsets.append({**off.to_dict(), "offset_s": off.offset_s, "rtt_s": off.rtt_s})
        for k, s in enumerate(self.shares):
            # The latency probe runs on agent 0 alone, as mutilate's master does.
            spec = dataclasses.replace(self.spec, connections=s.connections, threads=s.threads,
                                       rate=s.rate, requests=s.requests, seed=s.seed,
                                       prefill=False, probe_rate=self.spec.probe_rate
                                       if k == 0 else None)
            spec.check()
            c = spec.to_core(self.core["servers"][0][0], "x")
            c.update({k: self.core[k] for k in ("prefix", "servers", "behind", "protocol")})
            if self.core.get("cluster_slots"):
                c["cluster_slots"] = self.core["cluster_slots"]
            # An agent that ends first must not delete keys the others still read: the
            # driver deletes the key space once every agent is done (result()).
            c["cleanup"] = False
            self.cores.append(c)
        if self.core["prefill"]:
            self.prefilling = True
            started = time.monotonic()
            n = len(self.actors)
            refs = [a.prefill.remote(self.core, (k, n), max(1, self.spec.threads) * 4)
                    for k, a in enumerate(self.actors)]
            budget = max(60.0, self.spec.key_space / 2000)
            self.prefilled = sum(self._get(refs, budget, "prefill the key space"))
            self.prefill_s = time.monotonic() - started
        if self.snapshots is not None:  # the measured phase starts from fresh counters
            self.snapshots.before()

    def abandon(self) -> None:
        """A run that stops with an error: the key space the agents prefilled (or began to)
        is deleted, as no result will say what was left."""
        if self.prefilling:
            delete_key_space(self.core)

    def start(self) -> None:
        """Every agent is told the common start (its own clock) and waits for it."""
        lead = START_LEAD_S + 2 * max(o["rtt_s"] for o in self.offsets)
        self.start_unix = time.time() + lead
        self.refs = {a.run.remote(c, self.start_unix + o["offset_s"]): k
                     for k, (a, c, o) in enumerate(zip(self.actors, self.cores, self.offsets))}
        self.last_seen = dict.fromkeys(range(len(self.actors)), self.start_unix)

    def _deadline(self) -> float | None:
        s = self.spec
        if s.duration is None:
            return None
        return self.start_unix + s.warmup + s.duration + s.give_up_after + GRACE_S

    def _lose(self, k: int, reason: str) -> None:
        self.lost[k] = {"at_s": round(time.time() - self.start_unix, 3),
                        "last_seen_s": round(self.last_seen[k] - self.start_unix, 3),
                        "reason": reason}

    def _cancel_all(self) -> None:
        for k in self.refs.values():
            with contextlib.suppress(Exception):
                self.actors[k].cancel.remote()

    def monitor(self) -> None:
        """Waits for every agent, showing their summed progress, noting the lost ones;
        Ctrl-C or evictions cancel every agent, whose partial outcomes are kept."""
        ray = self.ray
        deadline = self._deadline()
        while self.refs:
            try:
                ready, _ = ray.wait(list(self.refs), num_returns=len(self.refs), timeout=0.5)
                for ref in ready:
                    k = self.refs.pop(ref)
                    try:
                        self.done[k] = ray.get(ref)
                    except ray.exceptions.RayTaskError as e:  # raised in the agent's code
                        self._cancel_all()
                        raise agent_error(e) from None
                    except ray.exceptions.RayError as e:  # the actor died, or its node did
                        self._lose(k, _first_line(e))
                self._poll()
                now = time.time()
                silent = self.spec.give_up_after + GRACE_S
                for ref, k in list(self.refs.items()):
                    if deadline is not None and now > deadline:
                        why = (f"did not finish within {deadline - self.start_unix:.0f} s "
                               "of the start")
                    elif now - max(self.last_seen[k], self.start_unix) > silent:
                        why = f"did not answer for {silent:.0f} s"
                    else:
                        continue
                    self._lose(k, why)
                    ray.kill(self.actors[k])
                    self.refs.pop(ref)
            except KeyboardInterrupt:
                if self.interrupted:
                    raise
                self.interrupted = True
                self._cancel_all()
                deadline = time.time() + self.spec.give_up_after + GRACE_S

    def _poll(self) -> None:
        """The running agents' progress, summed for ``on_progress``; eviction watch."""
        if self.watch is not None and self.evicted is None and self.watch.poll():
            self.evicted = self.watch.evicted
            self._cancel_all()
        if not self.refs:
            return
        ks = list(self.refs.values())
        refs = [self.actors[k].progress.remote() for k in ks]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0.3)
        total = AgentsProgress(agents_running=len(ks))
        for k, ref in zip(ks, refs):
            if ref not in ready:
                continue
            try:
                p = self.ray.get(ref)
            except Exception:  # reported when its run call fails
                continue
            self.last_seen[k] = time.time()
            total.total = max(total.total, int(p["total"]))
            total.done = max(total.done, int(p["done"]))
            total.last_rate += float(p["last_rate"])
            total.last_p99_ns = max(total.last_p99_ns, int(p["last_p99_ns"]))
            total.errors += int(p["errors"])
        if self.on_progress is not None:
            self.on_progress(total)

    def result(self, address: str, facts: Mapping[str, Any],
               options: RayOptions) -> LoadResult:
        """The merged result with its ``agents`` section; Interrupted after Ctrl-C."""
        if not self.done:
            raise AgentsLost("every agent was lost: " + "; ".join(
                f"agent {k}: {v['reason']}" for k, v in sorted(self.lost.items())))
        if self.watch is not None:
            self.user_items_lost = self.watch.poll(force=True)
        ks = sorted(self.done)
        merged = merge_outcomes([self.done[k]["outcome"] for k in ks], rate=self.spec.rate,
                                agents=ks)
        if self.snapshots is not None:  # the driver's reads, before its own clean-up
            self.snapshots.after()
            behind = bool(self.core["behind"])
            theirs = merged["behind"] if behind else [m["server"] for m in merged["members"]]
            views = [{**mine, "version": mine["version"] or their["version"]}
                     for mine, their in zip(self.snapshots.views, theirs)]
            if behind:
                merged["behind"] = views
            else:
                for member, view in zip(merged["members"], views):
                    member["server"] = view
        # The probe's part is agent 0's (None when it was lost: said as PARTIAL above).
        merged["probe"] = self.done[0]["outcome"].get("probe") if 0 in self.done else None
        merged["prefilled_keys"] = self.prefilled
        merged["prefill_s"] = self.prefill_s
        if self.prefilled or _writes(self.core):
            merged["deleted_keys"], merged["leftover_keys"] = delete_key_space(self.core)
        result = result_from_outcome(merged, self.spec, self.core, address=address,
                                     server_facts=facts, started=self.start_unix,
                                     samples=None if self.watch is None else self.watch.lives())
        agents = [self._agent(k, address, facts) for k in range(len(self.actors))]
        result.agents = _agents_section(agents, options, self.start_unix)
        if self.lost:
            result.run["agents_lost"] = [
                {"agent": k, "node_ip": self.where[k]["node_ip"], **v}
                for k, v in sorted(self.lost.items())]
        if self.user_items_lost is not None:
            result.run["user_items_lost"] = self.user_items_lost
        if self.evicted is not None:
            result.run.update(cancelled=False, aborted=evicted_message(
                self.user_items_lost or self.evicted))
        elif self.interrupted:
            raise Interrupted("stopped by a signal; partial results kept", partial=result)
        return result

    def _agent(self, k: int, address: str, facts: Mapping[str, Any]) -> dict[str, Any]:
        """One agent's line of the ``agents`` section."""
        s, w, off = self.shares[k], self.where[k], self.offsets[k]
        line: dict[str, Any] = {
            "agent": k, "node_id": w["node_id"], "node_ip": w["node_ip"],
            "hostname": w["hostname"], "pid": w["pid"], "connections": s.connections,
            "threads": s.threads, "seed": s.seed, "intended_rate": s.rate,
            "requests": s.requests,
            "clock": {key: off[key] for key in ("offset_ms", "uncertainty_ms", "rtt_ms",
                                                 "rounds")},
        }
        if k in self.lost:
            return {**line, "status": "lost", "lost": self.lost[k],
                    "verdict": f"lost {self.lost[k]['at_s']:.1f} s into the run: "
                               f"{self.lost[k]['reason']}"}
        done = self.done[k]
        spec = dataclasses.replace(self.spec, connections=s.connections, threads=s.threads,
                                   rate=s.rate, requests=s.requests, seed=s.seed,
                                   probe_rate=self.spec.probe_rate if k == 0 else None)
        own = result_from_outcome(done["outcome"], spec, self.cores[k], address=address,
                                  server_facts=facts, started=done["started"])
        return {**line, **_agent_figures(own, done, self.start_unix + off["offset_s"])}


def _agent_figures(own: LoadResult, done: Mapping[str, Any],
                   start_local: float) -> dict[str, Any]:
    """An agent's own measurements and its verdict: did it keep up, and if not, was it the
    client (its threads busy or waiting for a CPU) or the server?"""
    c, t = own.client, own.totals
    elapsed = max(float(own.run["elapsed_s"]), 1e-9)
    threads = max(1, int(own.spec["threads"]))
    busy = (c["cpu_user_s"] + c["cpu_system_s"]) / elapsed / threads
    wait = c["run_queue_wait_s"] / elapsed / threads
    client_bound = busy >= CLIENT_BUSY or wait >= CLIENT_WAIT
    held = own.schedule["held"] if own.schedule else None
    best = own.latency("best")
    figures = {
        "start_skew_ms": round((done["started"] - start_local) * 1e3, 3),
        "replies": own.all["replies"],
        "measured_replies": t["replies"],
        "achieved_rate": round(t["throughput"], 3),
        "held": held,
        "p50_ns": best["percentiles"]["50"], "p99_ns": best["percentiles"]["99"],
        "counts": {"corrected": (own.all.get("corrected") or {}).get("count"),
                   "uncorrected": (own.all.get("uncorrected") or {}).get("count")},
        "cpu_us_per_op": c["cpu_us_per_op"],
        "process_cpu_us_per_op": c["process_cpu_us_per_op"],
        "run_queue_wait_us_per_op": c["run_queue_wait_us_per_op"],
        "cpu_busy": round(busy, 4),
        "run_queue_wait_share": round(wait, 4),
        "errors": sum(own.all["errors"].values()), "lost_requests": own.all["lost"],
        "aborted": own.run.get("aborted"),
    }
    if own.pool is not None and own.pool.get("redirects") is not None:
        # a Redis Cluster: the MOVEDs and ASKs this agent's connections followed
        figures["redirects"] = dict(own.pool["redirects"])
    share = f"busy {busy:.0%}, waiting for a CPU {wait:.0%}"
    if held is False and client_bound:
        status, limit = "behind", "client"
        verdict = (f"could not keep up with its {own.spec['rate']:.0f}/s ({share}): the "
                   "client, not the server, was the limit")
    elif held is False:
        status, limit = "behind", "server"
        verdict = f"fell behind its {own.spec['rate']:.0f}/s with CPU to spare ({share})"
    elif client_bound:
        status, limit = "saturated", "client"
        verdict = f"its load threads were saturated ({share}): the client was the limit"
    else:
        status, limit, verdict = "ok", None, f"kept up ({share})"
    return {**figures, "status": status, "limit": limit, "verdict": verdict}


def _agents_section(agents: list[dict[str, Any]], options: RayOptions,
                    start_unix: float) -> dict[str, Any]:
    """``agents`` in load.json: each agent, and who limited the run."""
    limits = {a.get("limit") for a in agents}
    limit = "client" if "client" in limits else "server" if "server" in limits else None
    lost = [a["agent"] for a in agents if a["status"] == "lost"]
    verdict = {
        "client": "the client, not the server, was the limit: agent(s) "
                  + ", ".join(str(a["agent"]) for a in agents if a.get("limit") == "client")
                  + " could not do more",
        "server": "agents fell behind with CPU to spare: the server (or the network) was "
                  "the limit",
        None: "every agent kept up",
    }[limit]
    if lost:
        verdict += f"; lost: agent(s) {', '.join(map(str, lost))}"
    return {"requested": len(agents), "placement": options.placement,
            "cluster": options.address or "auto", "start_unix": round(start_unix, 6),
            "limit": limit, "verdict": verdict, "list": agents}


def _writes(core: Mapping[str, Any]) -> bool:
    """Whether the run's requests may set keys (its mix, or a set after each miss)."""
    return core["mix"].get("set", 0) > 0 or core.get("on_miss") == "set"


def agent_error(e: BaseException) -> BaseException:
    """The error an agent's own code raised, out of Ray's wrapper (``RayTaskError``): its
    class and message as raised (a ServerTimeout stays exit 3 with its one line), not Ray's
    remote traceback, which the wrapper's text is."""
    cause = getattr(e, "cause", None)
    return cause if isinstance(cause, Exception) else e


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    name = type(e).__name__
    return f"{name}: {text[0]}" if text else name

