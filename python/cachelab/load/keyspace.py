"""The key space of a run from Ray agents, seen from outside the engine: which member holds
each key (the pool's distribution, or a Redis Cluster's hash slots), a client per member
(memcached's, or a logged-in RESP client) for the agents' prefill, and the driver's clean-up
(pipelined ``UNLINK``s over RESP; on a cluster from the master serving each slot at the end,
the slot map read again). :mod:`cachelab.load.agents` uses them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import cachelab._core as _core
from cachelab.errors import CachelabError
from cachelab.load.engine import key_owners
from cachelab.resp import RespLogin

__all__ = ["RESP_BATCH", "Clients", "delete_key_space", "key_slot", "login_of", "owners"]


#: Over RESP, the ``SET``s of a prefill and the ``UNLINK``s of a clean-up go pipelined in
#: batches of this many (as the engine's own, crates/load/src/setup.rs).
RESP_BATCH = 256


def login_of(core: Mapping[str, Any]) -> RespLogin | None:
    """The login of a run over RESP (``core["protocol"]``, the engine's), else None."""
    proto = core.get("protocol")
    if not isinstance(proto, Mapping) or "resp" not in proto:
        return None
    r = proto["resp"] or {}
    return RespLogin(user=r.get("user"), password=r.get("password"), db=r.get("db"),
                     tls=core.get("tls") is not None)


#: A Redis Cluster's hash slot of a key (CRC16 of its ``{…}`` hash tag, or of the whole
#: key), by the Rust core's routing, the one the engine sends by.
key_slot = _core.load_key_slot


def _slot_owners(slots: Sequence[Sequence[int]]) -> list[int]:
    """The member serving each of the 16,384 slots (-1: none), from ``(start, end, member)``
    ranges."""
    owner = [-1] * 16384
    for start, end, member in slots:
        owner[int(start):int(end) + 1] = [int(member)] * (int(end) - int(start) + 1)
    return owner


def owners(core: Mapping[str, Any], keys: Sequence[str]) -> list[int]:
    """The index in ``core["servers"]`` of the member that holds each of ``keys``, as the
    engine routes them: by the pool's distribution (:func:`key_owners`), or on a Redis
    Cluster (``core["cluster_slots"]``) by hash slot."""
    slots = core.get("cluster_slots")
    if not slots:
        return key_owners(core, keys)
    owner = _slot_owners(slots)
    return [owner[key_slot(k)] for k in keys]


class Clients:
    """A client per member of ``core``'s pool (its one server, or the proxy), each opened
    when first used — a memcached client, or over RESP a ``_core.RespClient`` logged in as
    the run's connections are; all closed at the end of the block. ``addresses`` replaces
    the members' (a Redis Cluster's masters read again before the clean-up)."""

    def __init__(self, core: Mapping[str, Any], timeout: float,
                 addresses: Sequence[str] | None = None) -> None:
        self.core, self.timeout = core, timeout
        self.addresses = list(addresses) if addresses is not None else [
            m[0] for m in core["servers"]]
        self.login = login_of(core)
        self.open: dict[int, Any] = {}

    def get(self, member: int) -> Any:
        if member not in self.open:
            c, address = self.core, self.addresses[member]
            if self.login is not None:
                self.open[member] = _core.RespClient(
                    address, user=self.login.user, password=self.login.password,
                    db=self.login.db, connect_timeout=c["connect_timeout"],
                    timeout=self.timeout, tls=c["tls"])
            else:
                self.open[member] = _core.Client(address, connect_timeout=c["connect_timeout"],
                                                 timeout=self.timeout, tls=c["tls"])
        return self.open[member]

    def drop(self, member: int) -> None:
        client = self.open.pop(member, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def __enter__(self) -> Clients:
        return self

    def __exit__(self, *exc: object) -> None:
        for member in list(self.open):
            self.drop(member)


def delete_key_space(core: Mapping[str, Any]) -> tuple[int, int]:
    """Deletes every key of the run's key space from here, each from its member (over RESP
    pipelined ``UNLINK``s, one per key; on a Redis Cluster from the master serving its slot
    now, the slot map read again from the masters, the first that answers); (done, failed):
    a member that fails is given up, its keys left counted as failed."""
    n = int(core["key_space"])
    done = 0
    failed: set[int] = set()
    addresses, route = _now_placed(core)
    login = login_of(core)
    with Clients(core, max(5.0, core["timeout"]), addresses) as clients:
        for first in range(0, n, 1000):
            keys = [f"{core['prefix']}:{i}" for i in range(first, min(n, first + 1000))]
            parts: dict[int, list[str]] = {}
            for key, member in zip(keys, route(keys)):
                parts.setdefault(member, []).append(key)
            for member, part in parts.items():
                if member in failed or member < 0:
                    continue
                try:
                    if login is None:
                        clients.get(member).delete_many(part)
                    else:
                        for at in range(0, len(part), RESP_BATCH):
                            clients.get(member).unlink_each(part[at:at + RESP_BATCH])
                    done += len(part)
                except CachelabError:
                    failed.add(member)
                    clients.drop(member)
    return done, n - done


def _now_placed(core: Mapping[str, Any]) -> tuple[list[str], Callable[[Sequence[str]], list[int]]]:
    """The addresses to delete from and the owner of each key among them: the run's members
    and their routing, or on a Redis Cluster the masters serving the slots now (the slot map
    read again: slots moved during the run are deleted from where they went; the map read
    before the run when no master answers)."""
    slots = core.get("cluster_slots")
    members = [m[0] for m in core["servers"]]
    login = login_of(core)
    if not slots or login is None:
        return members, lambda keys: owners(core, keys)
    for seed in members:
        try:
            # (with the run's own TLS settings: its CA, its client certificate)
            masters = list(_core.load_cluster_masters(
                seed, user=login.user, password=login.password,
                connect_timeout=float(core["connect_timeout"]),
                timeout=max(2.0, float(core["timeout"])), tls=core.get("tls")))
        except Exception:  # noqa: BLE001 - a seed that cannot tell: the next one, or the old map
            continue
        addresses = [a for a, _ in masters]
        now = [(start, end, i) for i, (_, ranges) in enumerate(masters)
               for start, end in ranges]
        owner = _slot_owners(now)
        return addresses, lambda keys, owner=owner: [owner[key_slot(k)] for k in keys]
    return members, lambda keys: owners(core, keys)
