"""Reading a capture file back (:mod:`cachelab.traces.capture` writes it): its rows and
facts, and its gets as a flat trace, with sizes as value bytes or as what each item takes in
memcached's memory (its slab chunk)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cachelab.errors import InputError, UsageError

__all__ = ["READS", "SCHEMA", "SCHEMA_VERSION", "UNKNOWN_SIZE", "capture_accesses",
           "memcached_bytes", "read_capture", "slab_classes"]

SCHEMA = "cachelab.capture"
SCHEMA_VERSION = 1
#: The size given, as a flat trace, to a key the capture never saw a size of.
UNKNOWN_SIZE = 1
#: The ops a capture's flat trace reads as gets: memcached's ``get``, and a Redis capture's
#: reads (MGET's keys are ``get`` rows; GETEX and GETDEL return the value too).
READS = ("get", "getex", "getdel")


def read_capture(path: str | os.PathLike[str]) -> tuple[pa.Table, dict[str, Any]]:
    """A capture file's rows, in time order, and its metadata (``cachelab`` facts and
    ``summary``). The file holds them in the order they were written: a fetch is written when
    its connection's next line shows it was no store's lookup, and the server interleaves its
    worker threads' lines in chunks."""
    try:
        table = pq.read_table(str(path))
        raw = {**(table.schema.metadata or {}), **(pq.read_metadata(str(path)).metadata or {})}
    except (OSError, pa.ArrowInvalid) as e:
        raise InputError(f"{path}: not a readable capture file: {e}") from e
    if b"cachelab" not in raw:
        raise InputError(f"{path}: not a cachelab capture (no cachelab metadata)")
    try:
        meta = json.loads(raw[b"cachelab"])
        summary = json.loads(raw.get(b"cachelab.summary", b"{}"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: the capture's metadata is not readable JSON: {e}") from None
    if not isinstance(meta, dict):
        raise InputError(f"{path}: the capture's metadata is not an object")
    if meta.get("schema") != SCHEMA:
        raise InputError(f"{path}: schema {meta.get('schema')!r}, not {SCHEMA}")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise InputError(f"{path}: {SCHEMA} version {meta.get('schema_version')}; this "
                         f"cachelab reads version {SCHEMA_VERSION}")
    meta["summary"] = summary
    order = pc.sort_indices(table, sort_keys=[("time", "ascending")])
    return table.take(order), meta


def slab_classes(server: dict[str, Any]) -> np.ndarray:
    """The chunk sizes of memcached's slab classes, from its settings as a capture records
    them (``chunk_size``, ``growth_factor``, ``slab_chunk_max``), as ``slabs_init`` computes
    them: 48 bytes of item header plus ``chunk_size``, each class the last times the factor,
    aligned to 8 bytes, and a last class of ``slab_chunk_max``."""
    factor = float(server.get("growth_factor") or 1.25)
    chunk_max = int(server.get("slab_chunk_max") or 512 * 1024)
    size = _ITEM_HEADER + int(server.get("chunk_size") or 48)
    out = []
    while size < chunk_max / factor and len(out) < 62:
        size += (-size) % 8
        out.append(size)
        size = int(size * factor)
    out.append(chunk_max)
    return np.asarray(out, dtype=np.int64)


def memcached_bytes(value: np.ndarray, key_bytes: np.ndarray,
                    server: dict[str, Any]) -> np.ndarray:
    """What items of ``value`` bytes under keys of ``key_bytes`` take in memcached's memory:
    the item (header, CAS if enabled, key, its terminator, value and its CRLF) rounded up to
    its slab class's chunk, and an item larger than the largest chunk to whole chunks."""
    cas = 8 if server.get("cas_enabled", True) else 0
    total = _ITEM_HEADER + cas + key_bytes.astype(np.int64) + 1 + value.astype(np.int64) + 2
    classes = slab_classes(server)
    at = np.searchsorted(classes, total)
    largest = classes[-1]
    return np.where(at < len(classes), classes[np.minimum(at, len(classes) - 1)],
                    -(-total // largest) * largest)


_ITEM_HEADER = 48  # sizeof(item) on 64-bit memcached 1.6


def capture_accesses(path: str | os.PathLike[str], accounting: str = "value", *,
                     read: tuple[pa.Table, dict[str, Any]] | None = None,
                     ) -> tuple[Any, Any, Any]:
    """The gets (:data:`READS`) of a capture as a flat trace's columns (numpy arrays): key
    ids (numbered by first access, as the flat readers number keys), sizes, and whole-second
    times.

    ``accounting``: ``value`` (sizes are value bytes, as the stream gives them) or
    ``memcached`` (what each item takes in the server's memory: :func:`memcached_bytes`,
    from the slab settings the capture recorded), so capacities compare with ``-m``.

    A miss carries no size in the stream; it takes the size its key has next in the capture
    (the value the client then stored), else the size it had last. A key that never shows a
    size (only missed, never stored) counts as :data:`UNKNOWN_SIZE` byte: the simulators skip
    requests of size 0, and these are requests — exact in objects, next to nothing in bytes.
    ``read``: what :func:`read_capture` already returned for ``path``, not to read it twice.
    """
    if accounting not in ("value", "memcached"):
        raise UsageError(f"accounting {accounting!r}: value or memcached")
    table, meta = read if read is not None else read_capture(path)
    n = table.num_rows
    keys = table["key"].to_numpy(zero_copy_only=False)
    rows = np.arange(n)
    uniq, inv = np.unique(keys, return_inverse=True)
    first = np.full(len(uniq), n, dtype=np.int64)
    np.minimum.at(first, inv, rows)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    ids = rank[inv]
    sizes = table["size"].to_numpy().astype(np.int64)
    # Rows grouped by key, in time order within a key; fill each unknown size from the next
    # known one of its key, else the previous known one.
    order = np.lexsort((rows, ids))
    s, g = sizes[order], ids[order]
    known = s > 0
    nxt = np.minimum.accumulate(np.where(known, rows, n)[::-1])[::-1]
    prv = np.maximum.accumulate(np.where(known, rows, -1))
    take_next = (nxt < n) & (g[np.minimum(nxt, n - 1)] == g)
    take_prev = (prv >= 0) & (g[np.maximum(prv, 0)] == g)
    filled = np.where(known, s, np.where(take_next, s[np.minimum(nxt, n - 1)],
                                         np.where(take_prev, s[np.maximum(prv, 0)],
                                                  UNKNOWN_SIZE)))
    out_sizes = np.empty(n, dtype=np.int64)
    out_sizes[order] = filled
    unknown = np.empty(n, dtype=bool)
    unknown[order] = ~(known | take_next | take_prev)
    if accounting == "memcached":
        # A key never seen with a size stays UNKNOWN_SIZE: a chunk would make its misses push
        # real items out of the simulated cache, which memcached never stores.
        sized = memcached_bytes(out_sizes, table["key_bytes"].to_numpy(), meta["server"])
        out_sizes = np.where(unknown, UNKNOWN_SIZE, sized)
    is_get = np.isin(table["op"].cast(pa.string()).to_numpy(zero_copy_only=False), READS)
    times = table["time"].to_numpy()
    return (ids[is_get].astype(np.uint64), out_sizes[is_get].astype(np.uint32),
            np.floor(np.maximum(times[is_get], 0.0)).astype(np.uint32))
