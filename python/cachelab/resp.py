"""Redis and Valkey (RESP) servers: a run's login (:class:`RespLogin`: user, password,
database — the password never shown), ``redis://`` / ``rediss://`` server URLs
(:func:`parse_url`, the Rust client's parser), and ``INFO`` reads (:func:`read_info`), the
RESP counterpart of :func:`cachelab.servers.read_stats`.

``INFO``'s fields come as one flat dict (``keyspace_hits``, ``evicted_keys``,
``used_memory``, ``maxmemory``, ``maxmemory_policy``, ``used_cpu_sys`` …), with memcached's
names for the process's identity added — ``pid`` (``process_id``), ``uptime``
(``uptime_in_seconds``) and ``time`` (``server_time_usec`` in seconds) — so a restart is
told the same way as a memcached's (:func:`cachelab.servers.restarted`). The load engine's
own ``INFO`` reads add the same names (crates/load/src/server.rs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cachelab._core as _core
from cachelab.errors import ServerError

__all__ = ["SCHEMES", "RespLogin", "info_or_none", "is_url", "parse_url", "read_info", "redact"]

#: The URL schemes of a RESP server: plain, and over TLS.
SCHEMES = ("redis://", "rediss://")


@dataclass(frozen=True)
class RespLogin:
    """What each connection to a RESP server sends first: ``AUTH [user] password`` and
    ``SELECT db`` (each only when given); ``tls`` for a ``rediss://`` URL. The password is
    left out of ``repr`` and of every artifact."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    db: int | None = None
    tls: bool = False

    def to_core(self) -> dict[str, Any]:
        """The engine's ``{"resp": {...}}`` protocol (crates/load/src/spec.rs, ``Protocol``)."""
        return {"resp": {"user": self.user, "password": self.password, "db": self.db}}

    def client(self, address: str, *, timeout: float = 2.0,
               tls: dict[str, Any] | None = None) -> Any:
        """A ``_core.RespClient`` to ``address``, logged in."""
        return _core.RespClient(address, user=self.user, password=self.password, db=self.db,
                                timeout=timeout, connect_timeout=timeout, tls=tls)

    def described(self) -> dict[str, Any]:
        """What a result records: the user and database, whether a password was sent (never
        the password)."""
        return {"user": self.user, "db": self.db, "password": self.password is not None}


def is_url(server: str) -> bool:
    """Whether ``server`` is a ``redis://`` or ``rediss://`` URL."""
    return server.startswith(SCHEMES)


def parse_url(url: str) -> tuple[str, RespLogin]:
    """``(host:port, login)`` of a ``redis://[user:password@]host[:port][/db]`` (or
    ``rediss://``) URL; UsageError (the password shown as ``***``) for a bad one."""
    d = _core.parse_resp_url(url)
    return d["address"], RespLogin(user=d["user"], password=d["password"], db=d["db"],
                                   tls=bool(d["tls"]))


def redact(url: str) -> str:
    """``url`` with its password, if any, as ``***`` (the Rust client's redaction)."""
    return str(_core.redact_resp_url(url))


def read_info(address: str, login: RespLogin, *, timeout: float = 2.0,
              tls: dict[str, Any] | None = None, section: str | None = None) -> dict[str, str]:
    """``INFO`` (its default sections, or ``section``) of the server at ``address``, flat,
    with ``pid``, ``uptime`` and ``time`` added (see the module). A ServerError when it
    cannot be read."""
    with login.client(address, timeout=timeout, tls=tls) as c:
        info = dict(c.info(section))
    return with_identity(info)


def with_identity(info: Mapping[str, str]) -> dict[str, str]:
    """``INFO``'s fields with memcached's names for the process's identity added."""
    out = dict(info)
    for alias, name in (("pid", "process_id"), ("uptime", "uptime_in_seconds")):
        if name in out:
            out[alias] = out[name]
    if out.get("server_time_usec", "").isdigit():
        out["time"] = str(int(out["server_time_usec"]) // 1_000_000)
    return out


def info_or_none(address: str, login: RespLogin, *, timeout: float = 2.0,
                 tls: dict[str, Any] | None = None) -> dict[str, str] | None:
    """:func:`read_info`, or None when the server cannot be read."""
    try:
        return read_info(address, login, timeout=timeout, tls=tls)
    except ServerError:
        return None
