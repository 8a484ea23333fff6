"""What a load run keeps in memcached (:func:`load_writes`), for the check that it fits a
server cachelab did not start (:mod:`cachelab.capacity`).

Every key of the key space that is set (by the prefill, or by the run's sets) holds one value
at a time; a set replaces it with a value of a new size. So the run holds up to ``key_space``
values whose sizes follow the value-size distribution: the distribution is cut into
:data:`QUANTILES` equal shares, each counted at its midpoint size (a histogram exactly).
Sizes are clamped as the engine clamps them (1 byte to 1,000,000); the largest counted for the
item size limit is the 99.99th percentile of an unbounded distribution (lognormal), or the
largest value of a bounded one.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from cachelab.capacity import Writes
from cachelab.load.spec import LoadSpec, parse_mix, parse_value_size

__all__ = ["QUANTILES", "load_writes"]

#: Shares the value-size distribution is cut into.
QUANTILES = 200
#: The engine's largest value (crates/load/src/sizes.rs MAX_VALUE).
_MAX_VALUE = 1_000_000


def load_writes(spec: LoadSpec) -> Writes:
    """The values a run of ``spec`` may hold at once (see the module docstring)."""
    w = Writes("load", "values", sizes_flag="use smaller values with --value-size",
               shrink="use fewer keys (--key-space) or smaller values (--value-size)")
    mix = parse_mix(spec.mix)
    prefill = spec.prefill
    if prefill is None:
        prefill = mix.get("get", 0) + mix.get("multiget", 0) > 0
    if not prefill and not mix.get("set", 0):
        return w
    keys = spec.key_space
    if not prefill and spec.requests is not None:
        keys = min(keys, spec.requests)
    key_len = len(spec.prefix) + 14 + len(str(max(0, spec.key_space - 1)))
    shares, largest = _shares(spec.value_size)
    done = cum = 0.0
    for size, share in shares:  # rounded so that the counts add up to ``keys``
        cum += share
        upto = round(keys * min(cum, 1.0))
        w.add(size, int(upto - done), key_len)
        done = upto
    w.add(largest, 1, key_len)  # so that the item size limit is checked against it
    return w


def _clamp(x: float) -> int:
    return int(min(max(round(x), 1), _MAX_VALUE))


def _shares(value_size: str) -> tuple[list[tuple[int, float]], int]:
    """(size, share of values) pairs that add up to the distribution, and its largest
    size."""
    name, p = parse_value_size(value_size)
    mids = [(i + 0.5) / QUANTILES for i in range(QUANTILES)]
    if name == "fixed":
        return [(_clamp(p[0]), 1.0)], _clamp(p[0])
    if name == "histogram":
        total = sum(p[1::2])
        pairs = [(_clamp(s), w / total) for s, w in zip(p[0::2], p[1::2]) if w > 0]
        return pairs, max(s for s, _ in pairs)
    if name == "uniform":
        sizes, top = [p[0] + q * (p[1] - p[0]) for q in mids], p[1]
    else:  # lognormal: median p[0], sigma p[1]
        dist = NormalDist(math.log(p[0]), p[1])
        sizes, top = [math.exp(dist.inv_cdf(q)) for q in mids], math.exp(dist.inv_cdf(0.9999))
    return [(_clamp(s), 1.0 / QUANTILES) for s in sizes], _clamp(top)
