"""What a key costs Redis: the bytes ``maxmemory`` counts, so that a memory size becomes the
simulator's capacity (docs/simulation.md, "Redis's eviction").

Redis compares ``used_memory`` — every allocation through its allocator, rounded up by
jemalloc to its size class — with ``maxmemory``. A string key set with ``SET`` costs (Redis
7.0, 64-bit):

* its dictionary entry: 24 bytes, a 32-byte allocation;
* the key's sds string: a header (1 byte below 32 characters, 3 below 256, 5 below 65,536)
  + the characters + a terminating zero, rounded up;
* the value: up to 44 bytes one allocation of the 16-byte object header + a 3-byte sds
  header + the bytes + 1 (``embstr``), above that a 16-byte object and its own sds string
  (header by length as for keys);
* a slot of the main hash table: 8 bytes per bucket, the table a power of two at least as
  large as the number of keys (so 8–16 bytes a key, in steps);
* with a TTL, a second dictionary entry (32 bytes) and a slot in the expires table.

On top of that, ``used_memory`` has a baseline the keys do not change: the empty server, its
clients' buffers (a client sending pipelines holds about :data:`PIPELINING_CLIENT` more than an
idle one), the scripts it cached. Measured on Redis 7.0.15 (Debian's, jemalloc 5.3):
each ``used_memory`` delta per key for 5,000 keys of 8, 16 and 40 characters and values of
10 to 4,000 bytes was this model's figure to within 0.1 byte, ``MEMORY USAGE`` reports the
same less the entry's rounding (8) and the table slot; an empty server with one client uses
:data:`BASELINE` bytes. Integer values (stored in the object itself) and other types are not
modelled: a trace has only sizes, taken as string values.
"""

from __future__ import annotations

__all__ = ["BASELINE", "PIPELINING_CLIENT", "capacity_keys", "dataset_bytes", "jemalloc_size",
           "key_bytes", "table_bytes"]

#: ``used_memory`` of an empty Redis 7.0.15 with one client connected (measured).
BASELINE = 964_000
#: What a client sending pipelines holds in buffers beyond an idle one (its query buffer):
#: measured as 32 keys of 1,088 bytes that six servers held fewer than the model with an idle
#: client's baseline, all at once and at every size (500 to 4,000 keys).
PIPELINING_CLIENT = 34_816
#: Redis stores a value of up to this many bytes in one allocation with its object header.
EMBSTR_LIMIT = 44
_ROBJ = 16
_DICT_ENTRY = 24


def jemalloc_size(n: int) -> int:
    """The jemalloc size class an allocation of ``n`` bytes takes: multiples of 8 up to 8,
    of 16 up to 128, then four classes per doubling (160, 192, 224, 256, 320, …)."""
    if n <= 8:
        return 8
    if n <= 128:
        return (n + 15) // 16 * 16
    step = 1 << ((n - 1).bit_length() - 3)
    return (n + step - 1) // step * step


def _sds(length: int) -> int:
    """The allocation of an sds string of ``length`` bytes (header by length, + 1 for the
    terminating zero)."""
    header = 1 if length < 32 else 3 if length < 256 else 5 if length < 65536 else 9
    return jemalloc_size(header + length + 1)


def key_bytes(key_len: int, value_len: int, *, ttl: bool = False) -> int:
    """Bytes one string key of ``key_len`` characters with a ``value_len``-byte value costs
    in ``used_memory``, without its hash-table slot (:func:`table_bytes`)."""
    if value_len <= EMBSTR_LIMIT:
        value = jemalloc_size(_ROBJ + 3 + value_len + 1)
    else:
        value = jemalloc_size(_ROBJ) + _sds(value_len)
    entry = jemalloc_size(_DICT_ENTRY)
    return entry + _sds(key_len) + value + (entry if ttl else 0)


def table_bytes(keys: int, *, ttl: bool = False) -> int:
    """The hash table of ``keys`` keys: 8 bytes a bucket, buckets the power of two at least
    ``keys`` (4 at least); twice that with a TTL on every key (the expires table)."""
    buckets = 4
    while buckets < keys:
        buckets *= 2
    return 8 * buckets * (2 if ttl else 1) if keys else 0


def dataset_bytes(keys: int, key_len: int, value_len: int, *, ttl: bool = False) -> int:
    """What ``keys`` keys of one key and value length take, tables included."""
    return keys * key_bytes(key_len, value_len, ttl=ttl) + table_bytes(keys, ttl=ttl)


def capacity_keys(maxmemory: int, key_len: int, value_len: int, *, ttl: bool = False,
                  baseline: int = BASELINE) -> int:
    """How many keys of one key and value length fit under ``maxmemory`` above
    ``baseline``: the most whose :func:`dataset_bytes` fit (0 when none)."""
    room = maxmemory - baseline
    lo, hi = 0, max(0, room // key_bytes(key_len, value_len, ttl=ttl))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if dataset_bytes(mid, key_len, value_len, ttl=ttl) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo
