"""Ray, the optional cluster runtime: connecting to a cluster, placing one worker per node,
and estimating a worker's clock offset. docs/scale-out.md has the whole story.

Ray is an optional extra (``pip install 'cachelab[ray]'``): nothing here imports it at module
level, so ``import cachelab`` works without it, and :func:`require_ray` turns its absence into
a :class:`~cachelab.errors.UsageError` (CLI exit code 2) that says how to get it.

The verbs that fan out (``load --ray``, ``scale --ray``, ``simulate --ray``) take a
:class:`RayOptions` and run inside :func:`connected`; they define their own actors and tasks.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from cachelab.errors import UsageError

__all__ = ["INSTALL_HINT", "PLACEMENTS", "ClockOffset", "RayOptions", "clock_offset",
           "connected", "node_count", "placement_group", "require_ray"]

#: What to run to get Ray; said by every error about its absence.
INSTALL_HINT = "pip install 'cachelab[ray]'"

#: ``spread``: one worker per node (a STRICT_SPREAD placement group: a run needs as many
#: nodes as agents); ``pack``: as few nodes as fit (several agents may share one).
PLACEMENTS = ("spread", "pack")


@dataclass
class RayOptions:
    """Where and how to fan out. ``address`` None means ``auto``: the ``RAY_ADDRESS``
    environment variable, else the cluster ``ray start`` left on this machine."""

    address: str | None = None
    #: Load agents (``load --ray``); ignored by ``simulate --ray``.
    agents: int = 1
    placement: str = "spread"
    #: This machine's address as the cluster should see it (Ray's ``_node_ip_address``):
    #: needed when the nodes listen on an address other than the machine's main one.
    node_ip: str | None = None
    #: Seconds to wait for the cluster to place every worker before giving up.
    ready_timeout: float = 60.0

    def check(self) -> None:
        """Raises UsageError naming the first bad field."""
        if not isinstance(self.agents, int) or isinstance(self.agents, bool) or \
                not 1 <= self.agents <= 1024:
            raise UsageError(f"agents must be a whole number from 1 to 1024, not {self.agents!r}")
        if self.placement not in PLACEMENTS:
            raise UsageError(f"placement must be {' or '.join(PLACEMENTS)}, "
                             f"not {self.placement!r}")
        if not self.ready_timeout > 0:
            raise UsageError("ready timeout must be above 0 seconds")


def require_ray() -> ModuleType:
    """The ``ray`` module, or UsageError saying how to install it."""
    try:
        # deferred: optional dependency (the [ray] extra), 0.5 s to import
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray, an optional extra: {INSTALL_HINT}") from None
    return ray


@contextlib.contextmanager
def connected(options: RayOptions) -> Iterator[ModuleType]:
    """Ray, connected to the cluster of ``options`` for the block (a connection the caller
    already made is used as it is and left open). A cluster that cannot be reached raises
    UsageError naming the address and how to start one."""
    ray = require_ray()
    options.check()
    if ray.is_initialized():
        yield ray
        return
    address = options.address or os.environ.get("RAY_ADDRESS") or "auto"
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": False,
                              "logging_level": "WARNING", "configure_logging": False}
    if options.node_ip:
        kwargs["_node_ip_address"] = options.node_ip
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UsageError(
            f"no Ray cluster at {address}: {str(e).splitlines()[0] if str(e) else e!r}; start "
            "one with `ray start --head` (docs/scale-out.md) or give --ray ADDRESS") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def node_count(ray: ModuleType) -> int:
    """Nodes alive in the cluster."""
    return sum(1 for n in ray.nodes() if n.get("Alive"))


def placement_group(ray: ModuleType, bundles: int, cpus: float, placement: str,
                    timeout: float) -> Any:
    """A ready placement group of ``bundles`` bundles of ``cpus`` CPUs each, one per node
    (``spread``) or packed (``pack``); UsageError when the cluster cannot place it within
    ``timeout`` seconds (too few nodes, or too few free CPUs)."""
    # deferred: optional dependency (the [ray] extra)
    from ray.util.placement_group import placement_group as make
    from ray.util.placement_group import remove_placement_group

    nodes = node_count(ray)
    if placement == "spread" and bundles > nodes:
        raise UsageError(f"{bundles} agents, one per node, need {bundles} nodes; the cluster "
                         f"has {nodes} (add nodes, or use --agent-placement pack)")
    strategy = "STRICT_SPREAD" if placement == "spread" else "PACK"
    group = make([{"CPU": cpus}] * bundles, strategy=strategy)
    ready, _ = ray.wait([group.ready()], timeout=timeout)
    if not ready:
        remove_placement_group(group)
        raise UsageError(
            f"the Ray cluster could not place {bundles} agent(s) of {cpus:g} CPU(s) "
            f"({placement}) within {timeout:g} s: {nodes} node(s), "
            f"{ray.available_resources().get('CPU', 0):g} CPU(s) free")
    return group


@dataclass
class ClockOffset:
    """A remote clock against ours: ``offset_s`` = remote − local (Unix time), within
    ± ``rtt_s`` / 2, from the round trip with the shortest ``rtt_s`` of ``rounds``."""

    offset_s: float
    rtt_s: float
    rounds: int

    def to_dict(self) -> dict[str, Any]:
        return {"offset_ms": round(self.offset_s * 1e3, 3),
                "uncertainty_ms": round(self.rtt_s * 1e3 / 2, 3),
                "rtt_ms": round(self.rtt_s * 1e3, 3), "rounds": self.rounds}


def clock_offset(remote_now: Callable[[], float], rounds: int = 7) -> ClockOffset:
    """Estimates a remote clock's offset NTP-style: each round reads our clock, the remote
    one (``remote_now()``, a blocking call) and ours again; the remote reading is taken to be
    at the midpoint, and the round with the shortest round trip wins."""
    best: tuple[float, float] | None = None
    for _ in range(max(1, rounds)):
        t0 = time.time()
        remote = remote_now()
        t1 = time.time()
        rtt = t1 - t0
        if best is None or rtt < best[1]:
            best = (remote - (t0 + t1) / 2, rtt)
    assert best is not None
    return ClockOffset(offset_s=best[0], rtt_s=best[1], rounds=max(1, rounds))
