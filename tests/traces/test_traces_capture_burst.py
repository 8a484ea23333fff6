"""A burst after a quiet spell is captured whole: `trace capture` keeps the server's logger
awake and drains its stream in a thread of its own (issue 33)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pymemcache.client.base import Client

from cachelab.servers import PrivateMemcached, read_stats
from cachelab.traces.capture import CaptureResult, CaptureSpec, capture, read_capture
from clitools import InProcess

SETS, GETS = 2_000, 3_000
#: The log lines the burst makes: a store is the server's lookup and the store.
LINES = 2 * SETS + GETS


def _burst(server: PrivateMemcached) -> None:
    """2,000 sets then 3,000 gets (2,500 hits, 500 misses) back to back, one client."""
    c = Client((server.host, server.port), timeout=5, connect_timeout=5)
    for i in range(SETS):
        c.set(f"cachelab-capture-burst:{i}", b"v" * 20)
    for i in range(GETS):
        c.get(f"cachelab-capture-burst:{i % 2_500}")
    c.close()


def _captured_burst(path: Path) -> CaptureResult:
    """A capture of a fresh server: 2 s quiet once its clock started, then the burst; it
    stops 0.5 s after the burst."""
    started = threading.Event()
    finished = [float("inf")]
    result: dict[str, CaptureResult] = {}
    with PrivateMemcached(memory_mb=16, threads=2) as server:
        spec = CaptureSpec(server.address, duration=120.0)

        def run() -> None:
            result["r"] = capture(spec, path, on_progress=lambda *_: started.set(),
                                  stop=lambda: time.monotonic() > finished[0] + 0.5)

        t = threading.Thread(target=run)
        t.start()
        try:
            assert started.wait(30), "the capture never started"
            time.sleep(2.0)          # the quiet spell
            _burst(server)
        finally:
            finished[0] = time.monotonic()
            t.join(60)
        assert not t.is_alive()
    return result["r"]


@pytest.mark.slow
def test_a_burst_after_a_quiet_spell_is_captured_whole(tmp_path: Path) -> None:
    """The capture runs 2 s on an idle server (memcached's logger thread, finding nothing,
    sleeps longer each time, up to a second), then one client sends 2,000 sets and 3,000 gets
    back to back (~10,000 requests/s here): every request is in the capture. The logger used
    to sleep through the burst's start while its worker threads' 64 KiB log buffers filled:
    30-85 % of the lines dropped (5,948 in the issue; 2,178-4,471 of 7,000 here), no error.

    On this loaded machine the server still drops a few lines now and then with its logger
    awake (0 in most runs, up to 10 % in a few; scattered, no gap in the captured times): the
    server's own limit, which it counts (``log_worker_dropped``; ``-o worker_logbuf_size``
    raises it). The test accepts those only as the server counted them, and under 15 % in one
    of at most three captures (each of a fresh server; main loses more in every one)."""
    seen = []
    for attempt in range(3):
        path = tmp_path / f"burst-{attempt}.capture.parquet"
        r = _captured_burst(path)
        d = r.server["deltas"]
        dropped, skipped = d["log_worker_dropped"], d["log_watcher_skipped"]
        # Every line is captured or counted lost by the server, and none lost but as it said.
        assert r.lost == dropped + skipped
        assert r.gets + r.stores + r.store_lookups + r.lost == LINES
        table, _ = read_capture(path)
        assert table.num_rows == r.gets + r.stores
        seen.append(f"{r.lost:,} ({dropped:,} dropped by the server's workers, {skipped:,} "
                    "skipped)")
        if r.lost > LINES * 15 // 100:
            continue
        # What the user reads first: the loss, by cause, or none.
        head = r.render().splitlines()[0]
        if r.lost:
            assert head.startswith(f"PARTIAL: {r.lost:,} lines lost ("), head
        else:
            assert "lost" not in head, head
            assert (r.gets, r.stores, r.hits) == (GETS, SETS, 2_500), r.render()
            assert (r.gets, r.hits, r.stores) == (d["cmd_get"], d["get_hits"], d["cmd_set"])
        return
    pytest.fail(f"lines lost of {LINES:,} in each capture: {'; '.join(seen)}")


def _result(**fields: object) -> CaptureResult:
    base: dict[str, object] = dict(
        path="t.capture.parquet", spec={"max_buffer": 2**30}, ended="duration", elapsed_s=5.0,
        ops={"get": 3}, gets=3, hits=3, misses=0, stores=0, requests=3, multi_get_requests=0,
        keys=3, lost=0, store_lookups=0, sampled_out=0,
        server={"address": "127.0.0.1:11211", "version": "1.6.18", "deltas": {}})
    return CaptureResult(**{**base, **fields})  # type: ignore[arg-type]


def test_the_headline_names_the_lines_lost_first_by_cause() -> None:
    r = _result(lost=2_190, lost_by={"skipped": 12, "worker_dropped": 2_178})
    assert r.render().splitlines()[0].startswith(
        "PARTIAL: 2,190 lines lost (2,178 dropped by the server's worker threads, 12 skipped "
        "by the server for this capture); capture of 127.0.0.1:11211")
    assert r.to_dict()["lost_by"] == {"skipped": 12, "worker_dropped": 2_178}
    assert not _result().render().startswith("PARTIAL")


def test_a_capture_stopped_by_its_memory_cap_warns() -> None:
    r = _result(ended="max_buffer")
    assert r.partial
    (w,) = r.warnings
    assert w.startswith("the capture stopped after 5.0 s: it fell 1,024 MiB behind the "
                        "server's stream (its cap, max_buffer)"), w


def test_the_logger_is_woken_unless_asked_not_to(cli: InProcess, tmp_path: Path) -> None:
    """By default a capture opens and closes a connection every 10 ms (the server counts them)
    and waits for the server to log them promptly before its clock starts; --no-wake does
    neither. Both write the same kind of file; --buffer-mb is recorded in the spec."""
    import json

    def connections(address: str) -> int:
        return int(read_stats(address)["total_connections"])

    with PrivateMemcached(memory_mb=8, threads=1) as server:
        counts = {}
        for flags in ((), ("--no-wake", "--buffer-mb", "16")):
            before = connections(server.address)
            p = cli("trace", "capture", "--server", server.address, "--duration", "0.5",
                    "--out", tmp_path / ("quiet" if flags else "woken"), "--format", "json",
                    *flags)
            assert p.returncode == 0, p.stderr
            counts[bool(flags)] = connections(server.address) - before
            spec = json.loads(p.stdout)["spec"]
    # The capture's own: its watch, its reads of stats before and after (6 here).
    assert counts[True] <= 10, counts
    # At least the five pokes logged promptly before the clock starts, and more during it.
    assert counts[False] >= counts[True] + 5, counts
    assert (spec["wake"], spec["max_buffer"]) == (False, 16 * 2**20)
