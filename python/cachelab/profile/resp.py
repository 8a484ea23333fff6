"""A profile of a Redis or Valkey (RESP): the server's side of the run, from ``INFO``.

The engine speaks RESP itself (``SET``, ``GET``, ``MGET``, ``UNLINK``; the floor ``PING``:
crates/profile/src/conn.rs) and counts every command it sends (``client.commands``). Here,
around the run, ``INFO`` (its default sections and ``commandstats``) is read before and after:
the counters' deltas (commands, keyspace hits and misses, evicted keys, CPU, clients), as
``load`` shows them, and each command's calls — which the server counts on its own, so the
two can be held against each other (:func:`calls_agree`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cachelab.capacity import RespMemory, Writes
from cachelab.errors import ServerError
from cachelab.load import server_view
from cachelab.load.result import resp_counters
from cachelab.resp import RespLogin, with_identity

__all__ = ["DATA_COMMANDS", "calls_agree", "memory_mb_for", "resp_server", "resp_version",
           "server_lines", "snapshot"]

#: The commands a profile sends over RESP, as ``commandstats`` names them (lower case).
DATA_COMMANDS = ("get", "set", "mget", "unlink", "ping")


def snapshot(address: str, login: RespLogin, *, timeout: float,
             tls: dict[str, Any] | None = None, required: bool) -> dict[str, str]:
    """``INFO`` and ``INFO commandstats`` of the server, flat, with memcached's names for
    the process's identity (:func:`cachelab.resp.with_identity`); empty when it cannot be
    read and not ``required`` (a ServerError when it is)."""
    try:
        with login.client(address, timeout=timeout, tls=tls) as c:
            info = dict(c.info(None))
            info.update(dict(c.info("commandstats")))
    except ServerError:
        if required:
            raise
        return {}
    return with_identity(info)


def _calls(info: Mapping[str, str]) -> dict[str, int]:
    """Each command's ``calls`` in ``commandstats`` (``cmdstat_get:calls=3,usec=…``)."""
    out = {}
    for k, v in info.items():
        if k.startswith("cmdstat_"):
            fields = dict(p.split("=", 1) for p in v.split(",") if "=" in p)
            if fields.get("calls", "").isdigit():
                out[k[len("cmdstat_"):]] = int(fields["calls"])
    return out


def resp_server(before: Mapping[str, str], after: Mapping[str, str],
                elapsed: float) -> dict[str, Any]:
    """The server's side of the run: ``load``'s view (version, ``deltas``, restart) and
    ``calls``, each command's calls over the run (those the server counted at all)."""
    view = server_view({"version": "", "before": dict(before), "after": dict(after)}, elapsed)
    b, a = _calls(before), _calls(after)
    calls = ({k: max(0, n - b.get(k, 0)) for k, n in sorted(a.items()) if n - b.get(k, 0)}
             if before and after and not view["restart"] else None)
    return {"deltas": view["deltas"], "restart": view["restart"], "calls": calls}


def calls_agree(sent: Mapping[str, int], calls: Mapping[str, int] | None,
                servers: int = 1) -> bool | None:
    """Whether the server counted each data command (:data:`DATA_COMMANDS`) as often as
    the profile sent it; None when the server's counts are unknown. Through a proxy in front
    of ``servers`` servers (``calls`` their sum): twemproxy splits an ``MGET`` into one per
    server holding some of its keys, so the servers count from 1 to ``servers`` MGETs for
    each one sent."""
    if calls is None:
        return None
    mine = {k.lower(): int(n) for k, n in sent.items()}
    return all(mine.get(c, 0) <= calls.get(c, 0) <= servers * mine.get(c, 0)
               if c == "mget" else mine.get(c, 0) == calls.get(c, 0) for c in DATA_COMMANDS)


def server_lines(server: Mapping[str, Any], client: Mapping[str, Any]) -> list[str]:
    """The report's lines about the server's side: its counters' deltas, and whether its
    own count of each command matches what the profile sent. Through a proxy (``server``'s
    ``calls`` the servers' behind it added up; their deltas are in the rows behind it), the
    second line alone."""
    d = server.get("deltas") or {}
    proxy = bool(server.get("proxy"))
    if not d and not proxy:
        return []
    lines = [] if proxy else [f"server: {resp_counters(d)}"]
    calls, sent = server.get("calls"), client.get("commands") or {}
    servers = len(server.get("behind") or []) if proxy else 1
    agree = calls_agree(sent, calls, max(1, servers))
    if agree is not None:
        shown = ", ".join(f"{c.upper()} {calls.get(c, 0):,}" for c in DATA_COMMANDS
                          if calls.get(c) or sent.get(c.upper()))
        whose = (f"the {servers} servers' commandstats behind the proxy, added up"
                 if proxy else "server's commandstats over the run")
        same = ("the commands the profile sent, each counted once"
                + (f" (each MGET as 1 to {servers}: the proxy splits it by server)"
                   if proxy and sent.get("MGET") else ""))
        lines.append(f"{whose}: {shown}: "
                     + (same if agree else
                        "NOT what the profile sent (" + ", ".join(
                            f"{k} {n:,}" for k, n in sorted(sent.items())) +
                        "): another client was busy on the server, or requests were lost"))
    return lines


def resp_version(info: Mapping[str, str]) -> str:
    """A Redis's or Valkey's version as ``INFO`` gives it: ``redis 7.0.15``, ``valkey 8.0.1``
    ("" when it does not say)."""
    for name in ("valkey", "redis"):
        if info.get(f"{name}_version"):
            return f"{name} {info[f'{name}_version']}"
    return ""


def memory_mb_for(writes: Writes) -> int:
    """A private redis-server's ``maxmemory`` (MB) for a profile's writes: twice what they
    take (:meth:`~cachelab.capacity.RespMemory.need`) and 16 MB more for the server's own."""
    return 16 + -(-2 * RespMemory.need(writes) // 2**20)
