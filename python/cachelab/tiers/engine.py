"""The benchmark run: :func:`tiers` gets its server (the one given, or a private memcached),
writes the data to memcached and the store, reads every (shape, method) cell interleaved in a
new random order each round, and builds the :class:`TiersResult`."""

from __future__ import annotations

import random
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import cachelab._core as _core
import cachelab.environment as environment
from cachelab.artifacts import created_now
from cachelab.errors import Interrupted, ServerError
from cachelab.servers import ServerOptions
from cachelab.target import Target
from cachelab.tiered.codecs import ValueFormat
from cachelab.tiers.data import make_data
from cachelab.tiers.findings import findings
from cachelab.tiers.result import TiersResult
from cachelab.tiers.spec import SHAPES, TiersSpec
from cachelab.tiers.stores import SQLiteStore, open_store

__all__ = ["tiers"]

#: (shape, method, read function, stored bytes): one cell of the benchmark.
Cell = tuple[str, str, Callable[[], Any], int]


def _methods(spec: TiersSpec, client: _core.Client, store: SQLiteStore, prefix: str,
             data: dict[str, Any], written: list[str]) -> list[Cell]:
    """Every cell; the memcached keys it writes are added to ``written`` as they are set."""
    cells: list[Cell] = []
    plain = ValueFormat(spec.codec, "none")

    def put(key: str, value: bytes) -> None:
        client.set(key, value)
        written.append(key)

    for shape in SHAPES:
        obj = data[shape]
        read_store = store.read_record if shape == "record" else store.read_list
        cells.append((shape, "store", read_store, 0))
        enc = plain.encode(obj)
        key = f"{prefix}:{shape}:raw"
        put(key, enc.data)
        cells.append((shape, "memcached raw", lambda k=key: client.get(k), len(enc.data)))
        key = f"{prefix}:{shape}:{spec.codec}"
        put(key, enc.data)
        cells.append((shape, f"memcached + {spec.codec}",
                      lambda k=key, f=plain: f.decode(client.get(k)), len(enc.data)))
        for comp in spec.compressions:
            fmt = ValueFormat(spec.codec, comp, threshold=0)
            e = fmt.encode(obj)
            key = f"{prefix}:{shape}:{spec.codec}:{comp}"
            put(key, e.data)
            cells.append((shape, f"memcached + {spec.codec} + {comp}",
                          lambda k=key, f=fmt: f.decode(client.get(k)), len(e.data)))
        ready = {shape: obj}
        cells.append((shape, "memory ready", lambda d=ready, s=shape: d[s], 0))
        blob = {shape: enc.data}
        cells.append((shape, f"memory + {spec.codec}",
                      lambda d=blob, s=shape, f=plain: f.decode(d[s]), 0))
        if spec.compressions:
            comp = spec.compressions[0]
            fmt = ValueFormat(spec.codec, comp, threshold=0)
            cblob = {shape: fmt.encode(obj).data}
            cells.append((shape, f"memory + {spec.codec} + {comp}",
                          lambda d=cblob, s=shape, f=fmt: f.decode(d[s]), 0))
    return cells


def _read_rounds(spec: TiersSpec, cells: list[Cell], data: dict[str, Any],
                 on_progress: Callable[[int, int], None] | None,
                 wall: list[list[int]], cpu: list[list[int]]) -> None:
    """Warms up and checks every cell, then times ``spec.reads`` rounds: the wall and this
    thread's CPU nanoseconds of every read, per cell, appended to ``wall`` and ``cpu`` as
    they are taken (so a run cut short keeps them)."""
    for _, _, fn, _ in cells:  # check every method returns the data, and warm up
        for _ in range(spec.warmup):
            fn()
    for shape, method, fn, _ in cells:
        if method != "memcached raw" and fn() != data[shape]:
            raise RuntimeError(f"{shape} via {method} does not round-trip")
    clock, tclock = time.perf_counter_ns, time.thread_time_ns
    rng = random.Random(spec.seed)
    turn = list(range(len(cells)))
    for r in range(spec.reads):
        rng.shuffle(turn)  # a new order each round: no method always follows another
        for i in turn:
            fn = cells[i][2]
            c0, t0 = tclock(), clock()
            fn()
            t1, c1 = clock(), tclock()
            wall[i].append(t1 - t0)
            cpu[i].append(c1 - c0)
        if on_progress is not None and r % 10 == 9:
            on_progress(r + 1, spec.reads)


def _row(shape: str, method: str, stored: int, wall: list[int], cpu: list[int]) -> dict[str, Any]:
    w = sorted(wall)
    return {
        "shape": shape,
        "method": method,
        "reads": len(w),
        "wall_p50_us": w[len(w) // 2] / 1000,
        "wall_p90_us": w[min(len(w) - 1, int(len(w) * 0.9))] / 1000,
        "wall_mean_us": statistics.fmean(w) / 1000,
        "cpu_mean_us": statistics.fmean(cpu) / 1000,
        "stored_bytes": stored,
        "histogram": _core.hist_from_values(w),
    }


def tiers(spec: TiersSpec | None = None, *, server: str | None = None,
          server_options: ServerOptions | None = None,
          on_progress: Callable[[int, int], None] | None = None) -> TiersResult:
    """Runs the benchmark against the memcached at ``server``, or against a private one
    started from ``server_options`` when ``server`` is None. ``on_progress(done, total)`` is
    called every ten rounds.

    Cut short, it keeps the rounds every method finished: on Ctrl-C (or SIGTERM) it raises
    :class:`~cachelab.errors.Interrupted` with the partial result as ``err.partial``
    (``run.cancelled``); when the server fails during the timed reads, the result is returned
    with ``run.aborted`` saying why. A server that fails before the timed reads raises."""
    spec = spec or TiersSpec()
    spec.check()
    record, items = make_data(spec)
    data = {"record": record, "list": items}
    started = time.monotonic()
    stop: dict[str, Any] = {"cancelled": False, "aborted": None}
    cells: list[Cell] = []
    wall: list[list[int]] = []
    cpu: list[list[int]] = []
    version = None
    with Target.of(server, options=server_options).open() as target:
        store = open_store(spec.dsn, record, items)
        prefix = f"cachelab:{secrets.token_hex(6)}"
        written: list[str] = []
        try:
            client = _core.Client(target.address, timeout=spec.timeout)
            try:
                version = client.version()
                cells += _methods(spec, client, store, prefix, data, written)
                wall += [[] for _ in cells]
                cpu += [[] for _ in cells]
                _read_rounds(spec, cells, data, on_progress, wall, cpu)
            except (KeyboardInterrupt, Interrupted):
                stop["cancelled"] = True
            except ServerError as e:
                if not wall or not min(map(len, wall)):
                    raise  # nothing timed yet: nothing to keep
                stop["aborted"] = f"the server failed: {e}"
            finally:
                for key in written:
                    try:
                        client.delete(key)
                    except Exception:  # noqa: BLE001 - best effort cleanup; the run's error wins
                        break
                client.close()
        finally:
            store.close()
        server_facts = {"address": target.address, "version": version, **target.facts}
    # The rounds every method finished (a round cut short would favour the methods it reached).
    rounds = min(map(len, wall), default=0)
    rows = [_row(shape, method, stored, wall[i][:rounds], cpu[i][:rounds])
            for i, (shape, method, _, stored) in enumerate(cells)] if rounds else []
    result = TiersResult(
        created=created_now(),
        spec={**asdict(spec), "compressions": list(spec.compressions), "dsn": bool(spec.dsn)},
        store=store.name,
        server=server_facts,
        rows=rows,
        environment=environment.facts(),
        run={"elapsed_s": round(time.monotonic() - started, 3), **stop},
    )
    if rows:
        result.findings = findings(result, spec)
    if stop["cancelled"]:
        raise Interrupted("stopped by a signal; partial results kept", partial=result)
    return result
