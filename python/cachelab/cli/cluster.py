"""The flags of the verbs that fan out on a Ray cluster (``--ray [ADDRESS]``, ``--ray-timeout``,
``--agents``, ``--agent-placement``, ``--ray-node-ip``) and the
:class:`~cachelab.raycluster.RayOptions` they make. Without Ray installed, ``--ray`` exits 2
saying how to get it."""

from __future__ import annotations

import argparse

from cachelab.cli import common
from cachelab.errors import UsageError
from cachelab.raycluster import (
    CONNECT_TIMEOUT,
    PLACEMENTS,
    RAY_LIMITS,
    RayOptions,
    require_ray,
)

__all__ = ["add_flags", "ray_options"]

#: ``--ray`` given without an address.
_AUTO = "auto"

#: Load agents with ``--ray`` when ``--agents`` is not given.
AGENTS = 2


def add_flags(p: argparse.ArgumentParser, *, agents: bool = False,
              shared_trace: bool = False) -> None:
    """Adds the Ray flags to ``p``; ``agents``: also the load-agent flags; ``shared_trace``:
    also ``--ray-shared-trace`` (simulate)."""
    # cachelab is not on PyPI: pip takes the extra from the cachelab already installed
    g = p.add_argument_group("Ray cluster (docs/scale-out.md; Ray is the [ray] extra: "
                             "pip install 'cachelab[ray]' adds it to this cachelab)")
    g.add_argument("--ray", nargs="?", const=_AUTO, default=None, metavar="ADDRESS",
                   help="fan out on the Ray cluster at ADDRESS: HOST:PORT, the head's GCS port "
                   "(`ray start --head --port 6379`: HEAD:6379), or ray://HOST:PORT, Ray Client "
                   "(ray://HEAD:10001); default: $RAY_ADDRESS, else the cluster `ray start` "
                   "runs on this machine. A cluster that does not answer within --ray-timeout "
                   "is an error (exit 3)")
    g.add_argument("--ray-timeout", type=common.limit_range(RAY_LIMITS["connect_timeout"]),
                   default=CONNECT_TIMEOUT, metavar="S",
                   help=f"seconds to wait for the Ray cluster to answer when connecting "
                   f"(default {CONNECT_TIMEOUT:g}); e.g. --ray HEAD:6379 --ray-timeout 10")
    g.add_argument("--ray-node-ip", metavar="IP",
                   help="this machine's address as the cluster sees it (when its nodes listen "
                   "on another address than the machine's main one)")
    if agents:
        g.add_argument("--agents", type=common.limit_range(RAY_LIMITS["agents"]), metavar="N",
                       help=f"with --ray: load agents, one per node (default {AGENTS}); "
                       "connections and rate are split among them")
        g.add_argument("--agent-placement", choices=PLACEMENTS, default="spread",
                       help="spread: one agent per node (default); pack: agents may share a "
                       "node")
    if shared_trace:
        g.add_argument("--ray-shared-trace", action="store_true",
                       help="with --ray: every node reads a flat TRACE from the same path (a "
                       "shared file system) instead of from the object store")


def ray_options(args: argparse.Namespace) -> RayOptions | None:
    """The options of ``--ray`` (None without it); UsageError (exit 2) when Ray is missing,
    or when agent flags are given without ``--ray``."""
    agents = getattr(args, "agents", None)
    if args.ray is None:
        if agents is not None:
            raise UsageError("--agents needs --ray")
        return None
    require_ray()
    options = RayOptions(address=None if args.ray == _AUTO else args.ray,
                         agents=agents if agents is not None else AGENTS,
                         placement=getattr(args, "agent_placement", "spread"),
                         node_ip=args.ray_node_ip, connect_timeout=args.ray_timeout)
    options.check()
    return options
