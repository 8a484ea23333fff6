"""A latency profile of a Redis Cluster (:func:`profile_cluster`): each master profiled on its
own over RESP, as a pool's members are (:func:`~cachelab.profile.pool.profile_pool`), with
the keys of each master's profile under a **hash tag** whose slot that master serves.

Why hash tags, not MGETs split by slot: a profile's multi-get cell is the latency of one
``MGET`` of k keys, one command to one server. On a cluster an ``MGET`` must have all its keys
in one slot (else ``-CROSSSLOT``); split by slot, an MGET of k keys would become up to k
commands to up to every master, and the cell would measure that fan-out (which ``load
--cluster`` measures, as a client splitting by slot sees it) rather than the command. With
``{tag}`` in the prefix every key of a master's profile hashes to the tag's slot on that
master: each ``GET``, ``SET``, ``MGET`` and ``UNLINK`` goes straight to it, never
redirected, as an application that groups its keys by hash tag sends them. The pool's rows
weigh each master by its share of the 16,384 slots (keys hash uniformly over slots).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import cachelab._core as _core
from cachelab.errors import CachelabError, ServerUnreachable
from cachelab.profile.pool import ROUNDS, PoolProfile, profile_pool
from cachelab.profile.spec import ProfileSpec, new_prefix
from cachelab.resp import RespLogin
from cachelab.target import cluster_masters

__all__ = ["SLOTS", "profile_cluster", "tagged_prefixes"]

#: A Redis Cluster's hash slots.
SLOTS = 16_384
#: Tags tried, at most, to find one on every master's slots.
_MAX_TAGS = 100_000


def tagged_prefixes(base: str, slots: Sequence[tuple[int, int, int]],
                    masters: int) -> list[str]:
    """For each of ``masters`` masters (``slots``: ``(start, end, master)``), a key prefix
    ``{<base>-<n>}`` whose hash tag's slot that master serves (the first n that does; the
    slot by the Rust core's CRC16, the one ``load --cluster`` routes by)."""
    found: dict[int, str] = {}
    for n in range(_MAX_TAGS):
        prefix = f"{{{base}-{n}}}"
        counts = list(_core.load_cluster_key_counts(list(slots), masters, prefix, 1))
        if 1 in counts:
            found.setdefault(counts.index(1), prefix)
        if len(found) == masters:
            return [found[i] for i in range(masters)]
    missing = sorted(set(range(masters)) - set(found))
    raise ServerUnreachable(f"no hash tag found on the slots of master {missing[0] + 1} of "
                            f"{masters} in {_MAX_TAGS:,} tries: does it serve any slot?")


def profile_cluster(spec: ProfileSpec, seeds: Sequence[str], login: RespLogin, *,
                    rounds: int = ROUNDS,
                    on_progress: Callable[[int, int], None] | None = None) -> PoolProfile:
    """Profiles every master of the Redis Cluster that ``seeds`` (``host:port``, tried in
    order) belong to, as a pool of them (module docstring); raises as
    :func:`~cachelab.profile.pool.profile_pool` does, and ServerUnreachable when no seed
    gives the slot map."""
    failures = []
    for seed in seeds:
        try:
            masters = cluster_masters(seed, login, timeout=spec.connect_timeout)
        except CachelabError as e:
            failures.append(f"{seed}: {e}")
            continue
        break
    else:
        raise ServerUnreachable("could not read the cluster's slot map: " + "; ".join(failures))
    slots = [(start, end, i) for i, (_, ranges) in enumerate(masters) for start, end in ranges]
    shares = [sum(e - s + 1 for s, e in ranges) / SLOTS for _, ranges in masters]
    base = (spec.prefix or new_prefix()).replace("{", "").replace("}", "")
    prefixes = tagged_prefixes(base, slots, len(masters))
    result = profile_pool(spec, [a for a, _ in masters], distribution="cluster",
                          rounds=rounds, on_progress=on_progress, resp=login,
                          prefixes=prefixes, shares=shares)
    result.cluster = {"seed": seed, "masters": len(masters), "prefixes": prefixes}
    return result
