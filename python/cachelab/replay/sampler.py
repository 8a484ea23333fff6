"""Each strategy's latency profile, measured while the replay runs: which cells it needs
(:func:`profile_cells`) and when its samples are taken (:class:`Sampler`), through the same
L2 read and connection as the strategy's requests, after think time drawn from theirs."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from cachelab.errors import ServerError
from cachelab.profile import spin, spin_until
from cachelab.profile.tier import COLD_BYTES
from cachelab.replay.driver import GapTier, Workload

__all__ = ["SIZE_PERCENTILES", "Sampler", "pool_bytes", "profile_cells"]

#: Where a strategy's get cells are measured: these percentiles of the sizes the evaluated
#: requests touch (with repeats). The simulator interpolates between cells on a log scale of
#: size while a get's latency grows about linearly with size, so cells spread over a decade
#: would overstate the items between them; cells where the touches are avoid that.
SIZE_PERCENTILES = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 97.0, 99.5, 100.0)


def pool_bytes(trace: Any) -> int:
    """The bytes of values the multi-get cells rotate over (``tier_cells``' ``pool_bytes``):
    :data:`~cachelab.profile.tier.COLD_BYTES`, or the catalog's bytes when smaller — the
    application's reads are as hot as its catalog is small."""
    return int(min(COLD_BYTES, max(1, int(np.asarray(trace.item_sizes).sum()))))


def profile_cells(work: Workload, depth: int, evaluated: np.ndarray) -> dict[str, Any]:
    """Which cells a strategy's model needs: gets at the :data:`SIZE_PERCENTILES` of the
    touched items' sizes; for prefetch, multi-gets by key count (powers of two) up to the
    largest batch it can send (the most items a prefetch at any topic walks, by the
    simulator's walk)."""
    trace = work.trace
    touched = np.concatenate([trace.touches(int(r)) for r in np.flatnonzero(evaluated)])
    sizes = np.asarray(trace.item_sizes)[touched] if len(touched) else trace.item_sizes
    at = np.percentile(sizes, SIZE_PERCENTILES, method="nearest")
    out: dict[str, Any] = {"sizes": tuple(sorted({max(1, int(x)) for x in at})),
                           "key_counts": ()}
    if depth:
        biggest = max(map(len, work.subtrees(work.topics(), depth)), default=1)
        counts, k = [1], 1
        while k < biggest:
            k *= 2
            counts.append(k)
        out["key_counts"] = tuple(counts)
    return out


class Sampler:
    """A strategy's latency profile, measured on the strategy's own connection while the
    replay runs: a shuffled schedule (every cell ``samples`` times) spread evenly over the
    evaluated requests, each sample after spinning for a think time drawn from the gaps (CPU
    time) the strategy's own reads have had so far. :meth:`after_request` takes the samples
    due — after every request (``interleaved``) or after every slice (``slices``)."""

    def __init__(self, tier: GapTier, cells: list[Any], samples: int, requests: int,
                 rng: np.random.Generator) -> None:
        self.tier, self.cells, self.rng = tier, cells, rng
        self.schedule = np.repeat(np.arange(len(cells)), samples)
        rng.shuffle(self.schedule)
        self.requests = max(1, requests)
        self.done_requests = 0
        self.pos = 0
        self.think: list[int] = []
        #: (cell index, ns) of every sample in the order taken, cut into segments of
        #: back-to-back sampling (:meth:`new_segment`).
        self.sequence: list[list[tuple[int, int]]] = [[]]

    def new_segment(self) -> None:
        """The next samples are not back to back with the ones before."""
        if self.sequence[-1]:
            self.sequence.append([])

    def warm(self, rounds: int) -> None:
        for _ in range(rounds):
            for c in self.cells:
                self.tier.sample(c.next_keys())

    def after_request(self, requests: int = 1) -> None:
        """Takes the samples due once ``requests`` more requests have run."""
        self.done_requests += requests
        target = len(self.schedule) * self.done_requests // self.requests
        gaps = self.tier.cpu_gaps
        if self.pos < min(target, len(self.schedule)):
            # An untimed read first: the first sample would follow the rest of the request
            # (its work after its last read), a longer gap than the think it draws, and a
            # read's latency grows with the gap before it. The next gap starts here.
            with contextlib.suppress(ServerError):  # a failed primer is no sample
                self.tier.sample(self.cells[0].keys[:1])
        while self.pos < min(target, len(self.schedule)):
            ci = int(self.schedule[self.pos])
            cell = self.cells[ci]
            self.pos += 1
            keys = cell.next_keys()
            think = int(gaps[int(self.rng.integers(len(gaps)))]) if gaps else 0
            self.think.append(think)
            if think:
                # From the end of the last read, as the application's gaps are measured: the
                # sampler's own work before the read is part of the think time, not added.
                shared = self.tier.shared
                if shared["last"]:
                    spin_until(shared["cpu"] + think, cpu=True)
                else:
                    spin(think, cpu=True)
            try:
                ns, found = self.tier.sample(keys)
            except ServerError as e:
                cell.errors[type(e).__name__] = cell.errors.get(type(e).__name__, 0) + 1
                continue
            cell.latencies.append(ns)
            cell.misses += len(keys) - found
            self.sequence[-1].append((ci, ns))
