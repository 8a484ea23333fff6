"""``target_from(args)``: the one place the CLI turns the server flags into a
:class:`~cachelab.target.Target` — ``--server`` (once, or repeated for a pool),
``--servers-file``, ``--socket``, ``--proxy``, the pool settings (``--distribution``,
``--member-failure-limit``, ``--member-retry``), the private server's ``--server-*``
options, ``--private-pool``/``--private-proxy`` and the Ray flags. A verb reads the flags it
has: one without the pool flags takes one server."""

from __future__ import annotations

import argparse

from cachelab.cli import cluster, common
from cachelab.errors import UsageError
from cachelab.resp import is_url
from cachelab.servers import ServerOptions
from cachelab.target import Target

__all__ = ["target_from"]


def target_from(args: argparse.Namespace) -> Target:
    """The target the flags name (the default, ``Target()``: a private memcached). Raises
    UsageError (exit 2) for flags that do not go together, a bad member or address, and
    InputError for a bad servers file."""
    ray = cluster.ray_options(args) if hasattr(args, "ray") else None
    private_pool = getattr(args, "private_pool", None)
    if private_pool is not None and (args.server or args.servers_file or args.socket):
        raise UsageError("--private-pool starts its own servers: give it without --server, "
                         "--servers-file or --socket")
    if private_pool is not None and (ray is not None or args.proxy):
        raise UsageError("--private-pool is for a local run straight to the pool: not with "
                         "--ray or --proxy")
    proxy = None
    server = getattr(args, "server", None)
    if server is not None and not hasattr(args, "socket"):  # --server alone (simulate)
        members = [server] if isinstance(server, str) else list(server)
        if len(members) > 1:
            raise UsageError(f"this verb measures one server; got {len(members)} --server "
                             "options")
    elif hasattr(args, "servers_file"):  # a verb that drives a pool
        members = None if private_pool is not None else common.server_members(args)
        proxy = common.proxy_address(args)
    elif hasattr(args, "socket"):
        address = common.server_address(args)
        members = None if address is None else [address]
    else:
        members = None
    if any(is_url(m) for m in members or ()) and not getattr(args, "speaks_resp", False):
        raise UsageError("this verb measures memcached only for now: a redis:// server is "
                         "for cachelab load, profile, scale and run (docs/resp.md)")
    options = (common.server_options(args) if hasattr(args, "server_memory")
               else ServerOptions())
    return Target(servers=tuple(members or ()), proxy=proxy, options=options,
                  pool=common.pool_settings(args), private_pool=private_pool,
                  private_proxy=bool(getattr(args, "private_proxy", None)), ray=ray,
                  cluster=bool(getattr(args, "cluster", None)))
