"""A trace replayed into private redis-servers as a look-aside cache, paced so that Redis's
clocks tick as the simulator's do: the check of the simulator's Redis policies against the
real server (tests/simulate/test_redis_eviction.py, benches/redis_eviction.py).

Each request is one ``EVALSHA`` of a script that does what a cache's client does — ``GET``
the key and, on a miss, ``SET`` it to a value of the trace's size — inside the server, so a
whole chunk of requests goes in one pipeline and still every set follows its own get. The
script answers 1 (hit) or 0 (miss), not the value, so no reply grows the server's output
buffers (which count in ``used_memory`` and would evict keys of their own).

**Time.** Redis's LRU clock ticks once a second, LFU counters decay per minute of Unix time.
The replay sends ``chunk`` requests at a time at a steady ``rate`` and records, for every
request, the Unix second in which its chunk was sent: that is the trace time the simulator
gets (a Unix time, so its minutes are the server's too). The servers run with ``hz 100``
(their cached clock is at most 10 ms behind). A chunk whose replies came back in a later
second than it was sent is counted (``straddled``): its requests may have seen either second.

**Memory.** Each server starts without a limit; once the script is loaded and has run once,
its ``used_memory`` with the client connected and idle is the baseline, and ``maxmemory`` is
set to the baseline, plus what a pipelining client's buffers hold
(:data:`~cachelab.simulate.redis_memory.PIPELINING_CLIENT`), plus what the keys of the wanted
capacity take (:func:`~cachelab.simulate.redis_memory.dataset_bytes`). ``Target.held`` (the
keys the server held at the end) against ``Target.keys`` is the memory model's error.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import redis

from cachelab import servers
from cachelab.simulate.redis_memory import PIPELINING_CLIENT, dataset_bytes

SCRIPT = ("local v = redis.call('GET', KEYS[1]) "
          "if v then return 1 end "
          "redis.call('SET', KEYS[1], string.rep('x', tonumber(ARGV[1]))) return 0")

class PrivateRedis(servers.PrivateRedis):
    """:class:`cachelab.servers.PrivateRedis` with no memory limit until the replay sets one,
    the policy under test, ``hz 100``; and redis-py's client (the third party the replay
    reads the server's counters through)."""

    def __init__(self, policy: str) -> None:
        super().__init__(start_timeout=10.0, extra_args=(
            "--maxmemory", "0", "--maxmemory-policy", policy, "--hz", "100"))
        self.client: redis.Redis | None = None

    def start(self) -> PrivateRedis:
        super().start()
        host, port = self.address.rsplit(":", 1)
        self.client = redis.Redis(host=host, port=int(port), socket_timeout=5.0,
                                  socket_connect_timeout=1.0)
        return self

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        super().stop()

    def info(self, section: str) -> dict[str, Any]:
        assert self.client is not None
        return dict(self.client.info(section))


@dataclass
class Target:
    """One server of a replay: its policy, the capacity in keys it is sized for, and what it
    measured."""

    policy: str
    keys: int
    server: PrivateRedis | None = None
    sha: str = ""
    baseline: int = 0
    maxmemory: int = 0
    hits: int = 0
    misses: int = 0
    #: The client's own count of the script's answers (1 = hit).
    answered_hits: int = 0
    evicted: int = 0
    #: Keys held at the end (``DBSIZE``), against :attr:`keys`.
    held: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def hit_ratio(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else float("nan")


@dataclass
class Replay:
    """What a replay did: the request times it recorded, and each target's measurement."""

    times: np.ndarray
    targets: list[Target]
    straddled: int
    chunks: int
    seconds: float


def replay(targets: Sequence[Target], ids: np.ndarray, *, key_len: int, value_len: int,
           rate: float, chunk: int = 50) -> Replay:
    """Replays ``ids`` (look-aside gets, a set of ``value_len`` bytes on a miss; keys are the
    ids as ``key_len`` characters) into one private server per target at once, each sized
    for its ``keys``, at ``rate`` requests a second. Starts and stops the servers."""
    servers = []
    try:
        for t in targets:
            t.server = PrivateRedis(t.policy).start()
            servers.append(t.server)
            assert t.server.client is not None
            t.sha = str(t.server.client.script_load(SCRIPT))
        for t in targets:
            assert t.server is not None and t.server.client is not None
            # The script's first run allocates for good (the scripting client's buffers).
            warm = "warm".rjust(key_len, "-")
            t.server.client.evalsha(t.sha, 1, warm, value_len)
            t.server.client.delete(warm)
            memory = t.server.info("memory")
            t.baseline = int(memory["used_memory"])
            t.maxmemory = t.baseline + PIPELINING_CLIENT + dataset_bytes(t.keys, key_len,
                                                                        value_len)
            t.server.client.config_set("maxmemory", t.maxmemory)
        stats0 = [t.server.info("stats") for t in targets if t.server]
        keys = [f"{i:0{key_len}d}"[-key_len:] for i in ids.tolist()]
        times = np.zeros(len(keys), dtype=np.int64)
        pipes = [t.server.client.pipeline(transaction=False)  # type: ignore[union-attr]
                 for t in targets]
        straddled = chunks = 0
        start = time.time()
        for lo in range(0, len(keys), chunk):
            due = start + lo / rate
            pause = due - time.time()
            if pause > 0:
                time.sleep(pause)
            sent = time.time()
            for t, p in zip(targets, pipes):
                for k in keys[lo:lo + chunk]:
                    p.evalsha(t.sha, 1, k, value_len)
                t.answered_hits += sum(int(v) for v in p.execute())
            back = time.time()
            times[lo:lo + chunk] = int(sent)
            straddled += int(back) != int(sent)
            chunks += 1
        seconds = time.time() - start
        for t, s0 in zip(targets, stats0):
            assert t.server is not None and t.server.client is not None
            s1 = t.server.info("stats")
            t.hits = int(s1["keyspace_hits"]) - int(s0["keyspace_hits"])
            t.misses = int(s1["keyspace_misses"]) - int(s0["keyspace_misses"])
            t.evicted = int(s1["evicted_keys"]) - int(s0["evicted_keys"])
            t.held = int(t.server.client.dbsize())
            t.extra["used_memory"] = int(t.server.info("memory")["used_memory"])
        return Replay(times=times, targets=list(targets), straddled=straddled, chunks=chunks,
                      seconds=seconds)
    finally:
        for s in servers:
            s.stop()


def zipf_ids(n: int, keys: int, alpha: float, seed: int) -> np.ndarray:
    """``n`` requests over ``keys`` keys with Zipf(``alpha``) popularity, ranks shuffled."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, keys + 1, dtype=float) ** -alpha
    p /= p.sum()
    return rng.permutation(keys)[rng.choice(keys, size=n, p=p)]


__all__ = ["SCRIPT", "PrivateRedis", "Replay", "Target", "replay", "zipf_ids"]
