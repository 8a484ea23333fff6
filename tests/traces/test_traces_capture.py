"""`cachelab trace capture` against a real memcached: a known workload is captured exactly
(checked against the server's own counters), keys are pseudonymised per capture, sampling
keeps whole keys, caps stop it, a stalled capture counts the lines the server skipped, and
the capture reads back as a flat trace."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from pymemcache.client.base import Client

from cachelab.errors import ServerUnreachable
from cachelab.servers import PrivateMemcached, read_stats
from cachelab.traces.capture import (
    CaptureResult,
    CaptureSpec,
    capture,
    read_capture,
    stats_deltas,
)
from cachelab.traces.formats import load_flat
from clitools import InProcess


def _capture_during(server: PrivateMemcached, path: Path, work: Callable[[], Any],
                    **options: Any) -> CaptureResult:
    """Captures while ``work()`` runs on another connection; stops once it is done and the
    stream has had a moment to drain."""
    done = threading.Event()
    result: dict[str, CaptureResult] = {}
    spec = CaptureSpec(server.address, duration=30.0, **options)

    def run() -> None:
        result["r"] = capture(spec, path, stop=lambda: done.is_set() and
                              time.monotonic() > finished[0] + 0.3)

    finished = [float("inf")]
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.3)  # the watcher is registered once capture() has its OK
    try:
        work()
    finally:
        finished[0] = time.monotonic()
        done.set()
        t.join(15)
    assert not t.is_alive()
    return result["r"]


def _workload(server: PrivateMemcached, prefix: str) -> dict[str, int]:
    """Sets, single gets (hits and misses) and multi-gets from one client; what it sent."""
    c = Client((server.host, server.port), timeout=2, connect_timeout=2)
    keys = [f"{prefix}:{i}" for i in range(60)]
    for i, k in enumerate(keys[:40]):
        c.set(k, b"v" * (10 + i))
    gets = hits = 0
    for k in keys:                       # 40 hits, 20 misses
        gets += 1
        hits += c.get(k) is not None
    for j in range(10):                  # 10 multi-gets of 6 keys, 4 of them set
        got = c.get_many(keys[36 + j:42 + j] if j < 4 else keys[j:j + 6])
        gets += 6
        hits += len(got)
    c.close()
    return {"sets": 40, "gets": gets, "hits": hits, "multi": 10, "keys": len(keys)}


def test_a_known_workload_is_captured_exactly(tmp_path: Path) -> None:
    with PrivateMemcached(memory_mb=8, threads=2) as server:
        sent: dict[str, int] = {}
        path = tmp_path / "t.capture.parquet"
        r = _capture_during(server, path, lambda: sent.update(_workload(server, "known")))
    d = r.server["deltas"]
    # What the server counted is what was captured, and what the client sent.
    assert (r.gets, r.hits, r.misses, r.stores) == (d["cmd_get"], d["get_hits"],
                                                    d["get_misses"], d["cmd_set"])
    assert (r.gets, r.hits, r.stores) == (sent["gets"], sent["hits"], sent["sets"])
    assert r.store_lookups == sent["sets"]      # the server's lookup before each store
    # Multi-gets are grouped by timing (keys of one within 5 µs): a worker thread preempted
    # mid-request on this busy 2-core machine can split one, so allow one or two.
    assert sent["multi"] - 2 <= r.multi_get_requests <= sent["multi"] + 2
    assert abs(r.requests - (sent["sets"] + 60 + sent["multi"])) <= 2
    assert r.lost == 0 and r.ended == "interrupted" and not r.checks()
    table, meta = read_capture(path)
    assert table.num_rows == r.gets + r.stores
    assert meta["pseudonymised"] and meta["summary"]["deltas"] == d
    # Pseudonyms: no key appears, equal keys stay equal.
    keys = table["key"].to_pylist()
    assert not any(k.startswith("known:") for k in keys)
    assert len(set(keys)) == sent["keys"] == r.keys
    # A multi-get's six keys share a request id; single gets each have their own.
    gets = table.filter(pc.equal(table["op"].cast("string"), "get"))
    sizes = pc.value_counts(gets["request"]).field("counts").to_pylist()
    assert max(sizes) == 6 and sorted(sizes).count(6) >= sent["multi"] - 2
    assert 58 <= sorted(sizes).count(1) <= 62


def test_timestamps_are_read_as_memcached_prints_them() -> None:
    from cachelab.traces.capture_lines import _key, _timestamp

    # The microseconds come without leading zeros: .29784 is 29,784 µs.
    assert _timestamp("1795735358.29784") == pytest.approx(1795735358.029784, abs=1e-7)
    assert _timestamp("1795735357.980059") == pytest.approx(1795735357.980059, abs=1e-7)
    assert _key("a%25b") == "a%b" and _key("plain") == "plain"


def test_pseudonyms_change_between_captures_and_keep_keys_keeps_them(tmp_path: Path) -> None:
    def one(server: PrivateMemcached, name: str, **kw: Any) -> set[str]:
        def work() -> None:
            c = Client((server.host, server.port), timeout=2)
            c.set("same-key", b"x")
            c.get("same-key")
            c.set("pct%key", b"y")      # logged URI-encoded by the server: pct%25key
            c.close()
        _capture_during(server, tmp_path / name, work, **kw)
        return set(read_capture(tmp_path / name)[0]["key"].to_pylist())

    with PrivateMemcached(memory_mb=8, threads=1) as server:
        a = one(server, "a.capture.parquet")
        b = one(server, "b.capture.parquet")
        kept = one(server, "c.capture.parquet", keep_keys=True)
    assert len(a) == len(b) == 2 and a.isdisjoint(b)
    assert kept == {"same-key", "pct%key"}
    table, _ = read_capture(tmp_path / "c.capture.parquet")
    lengths = dict(zip(table["key"].to_pylist(), table["key_bytes"].to_pylist()))
    assert lengths == {"same-key": 8, "pct%key": 7}


def test_sampling_keeps_every_access_of_a_kept_key_or_none(tmp_path: Path) -> None:
    with PrivateMemcached(memory_mb=8, threads=2) as server:
        def work() -> None:
            c = Client((server.host, server.port), timeout=2)
            for _round in range(3):
                for i in range(200):
                    c.get(f"s:{i}")
            c.close()
        r = _capture_during(server, tmp_path / "s.capture.parquet", work, sample=0.5)
    table, _ = read_capture(tmp_path / "s.capture.parquet")
    counts = pc.value_counts(table["key"]).field("counts").to_pylist()
    assert set(counts) == {3}                     # whole keys: all three rounds or nothing
    assert 60 <= r.keys <= 140                    # about half of 200 (binomial sd ~7)
    assert r.gets + r.sampled_out == 600


def test_the_event_cap_stops_the_capture(tmp_path: Path) -> None:
    with PrivateMemcached(memory_mb=8, threads=1) as server:
        def work() -> None:
            c = Client((server.host, server.port), timeout=2)
            for i in range(300):
                c.get(f"cap:{i}")
            c.close()
        r = _capture_during(server, tmp_path / "m.capture.parquet", work, max_events=100)
    assert r.ended == "max_events" and r.gets == 100 and r.partial
    assert read_capture(tmp_path / "m.capture.parquet")[0].num_rows == 100
    assert "PARTIAL" in r.render()


def test_a_capture_reads_back_as_a_flat_trace_of_its_gets(cli: InProcess, tmp_path: Path) -> None:
    with PrivateMemcached(memory_mb=8, threads=2) as server:
        path = tmp_path / "f.capture.parquet"
        r = _capture_during(server, path, lambda: _workload(server, "flat"))
    flat = load_flat(path)
    assert len(flat) == r.gets
    out = cli("trace", "inspect", path, "--format", "json")
    assert out.returncode == 0, out.stderr
    converted = cli("trace", "convert", path, tmp_path / "f.csv")
    assert converted.returncode == 0, converted.stderr
    rows = (tmp_path / "f.csv").read_text().splitlines()
    assert len(rows) - 1 == r.gets                 # a header, then one access per get
    # The workload's misses are of keys never stored: 1 byte (a request of unknown size);
    # its hits carry their sizes.
    sizes = [int(line.split(",")[2]) for line in rows[1:]]
    assert sizes.count(1) == r.misses and set(sizes) - {1} == set(range(10, 50))
    # simulate reads it as a flat trace: LRU holding everything misses each key once.
    sim = cli("simulate", path, "--policies", "lru", "--sizes", "1000", "--format", "json",
              "--out", tmp_path / "sim")
    assert sim.returncode == 0, sim.stderr
    import json
    run = json.loads(sim.stdout)["results"][0]
    assert run["requests"] == r.gets and run["misses"] == r.keys


@pytest.mark.slow
def test_a_stalled_capture_counts_the_lines_the_server_skipped(tmp_path: Path) -> None:
    """The capture process is stopped (SIGSTOP) while a load runs, so the server's buffer for
    the watcher overflows and it skips lines; the capture reports them and, asked to check
    (``--fail-on problems``), exits 1 with one line naming the check (0 unasked).

    On a busy machine neither step has a fixed length: the capture's start (a Python process,
    its imports, ``watch``) can take seconds, and a second of load may not fill the socket's
    and the logger's buffers. So the test waits for the server to count the watcher before
    stopping it, and loads until the server counts skipped lines (both bounded)."""
    from cachelab.load import LoadSpec, load

    def stat(name: str) -> int:
        return int(read_stats(server.address)[name])

    with PrivateMemcached(memory_mb=16, threads=2) as server:
        out = tmp_path / "stall" / "trace.capture.parquet"
        proc = subprocess.Popen(
            [sys.executable, "-m", "cachelab", "trace", "capture", "--server", server.address,
             "--duration", "6", "--out", str(out.parent), "--format", "json",
             "--fail-on", "problems"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        try:
            deadline = time.monotonic() + 30
            while stat("log_watchers") < 1:
                assert proc.poll() is None and time.monotonic() < deadline, "never watching"
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGSTOP)
            for _ in range(20):
                load(LoadSpec(duration=0.5, warmup=0.0, connections=4, threads=1,
                              key_space=1000, pipeline=8), server=server.address)
                if stat("log_watcher_skipped") + stat("log_worker_dropped") > 0:
                    break
            os.kill(proc.pid, signal.SIGCONT)
            stdout, stderr = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    assert proc.returncode == 1, stderr
    import json
    d = json.loads(stdout)
    deltas = d["server"]["deltas"]
    assert d["lost"] > 0 and d["ended"] == "duration"
    assert stderr.splitlines() == ["cachelab: check failed: --fail-on problems: "
                                   f"{d['lost']:,} lines lost"]
    assert d["lost"] == deltas["log_watcher_skipped"] + deltas["log_worker_dropped"]
    # No more fetches read than the server served (the lines lost may all be stores). Each
    # load's clean-up deletes its keys, and memcached 1.6 logs a delete as a fetch.
    assert d["gets"] <= deltas["cmd_get"] + deltas["delete_hits"] + deltas["delete_misses"]
    assert d["gets"] + d["stores"] + d["store_lookups"] <= deltas["log_watcher_sent"]


def test_an_unreachable_server_is_one_clear_error(cli: InProcess, tmp_path: Path) -> None:
    with pytest.raises(ServerUnreachable):
        capture(CaptureSpec("127.0.0.1:1", duration=1.0, connect_timeout=0.5),
                tmp_path / "x.capture.parquet")
    p = cli("trace", "capture", "--server", "127.0.0.1:1", "--duration", "1",
            "--out", tmp_path / "y.capture.parquet")
    assert p.returncode == 3 and "127.0.0.1:1" in p.stderr
    assert not (tmp_path / "y.capture.parquet").exists()


def _capture_process(server: PrivateMemcached, out: Path,
                     duration: float = 30) -> subprocess.Popen[str]:
    """``cachelab trace capture --format json`` of ``server`` in the background, once the
    server counts its watcher."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cachelab", "trace", "capture", "--server", server.address,
         "--duration", str(duration), "--out", str(out), "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.monotonic() + 30
    while int(read_stats(server.address)["log_watchers"]) < 1:
        assert proc.poll() is None and time.monotonic() < deadline, "never watching"
        time.sleep(0.02)
    return proc


@pytest.mark.slow
def test_a_server_killed_mid_capture_exits_3_and_keeps_what_was_read(tmp_path: Path) -> None:
    out = tmp_path / "cut" / "trace.capture.parquet"
    with PrivateMemcached(memory_mb=8, threads=2) as server:
        proc = _capture_process(server, out.parent)
        try:
            sent = _workload(server, "cut")
            assert server.pid is not None
            os.kill(server.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    assert proc.returncode == 3, stderr
    import json
    d = json.loads(stdout)
    assert d["partial"] is True and d["ended"] == "server closed the stream"
    assert d["aborted"].startswith(f"the server at {server.address} closed the stream")
    # What the capture had read when the server died; the server counts a line sent when its
    # logger takes it (and counts the capture's wake-up watch's lines too), so the last lines
    # may still have been in its buffers: the exact count is the known workload's test.
    assert d["gets"] <= sent["gets"] and d["stores"] <= sent["sets"], (d, sent)
    assert stderr.splitlines() == [f"cachelab: error: {d['aborted']}; "
                                   f"{d['gets'] + d['stores']:,} accesses kept in {out} "
                                   "(PARTIAL)"]
    table, _ = read_capture(out)
    assert table.num_rows == d["gets"] + d["stores"]


@pytest.mark.slow
def test_ctrl_c_and_an_idle_server_say_so_on_stderr(cli: InProcess, tmp_path: Path) -> None:
    with PrivateMemcached(memory_mb=8, threads=2) as server:
        proc = _capture_process(server, tmp_path / "a")
        try:
            # Once it writes: its file open (a temporary name in --out) is the capture's loop.
            deadline = time.monotonic() + 30
            while not any((tmp_path / "a").iterdir()):
                assert proc.poll() is None and time.monotonic() < deadline, "never writing"
                time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
        idle = cli("trace", "capture", "--server", server.address, "--duration", "0.5",
                   "--out", tmp_path / "b", "--format", "json")
    import json
    assert proc.returncode == 130 and json.loads(stdout)["ended"] == "interrupted"
    assert stderr.splitlines() == [f"cachelab: error: interrupted; 0 accesses kept in "
                                   f"{tmp_path / 'a' / 'trace.capture.parquet'} (PARTIAL)"]
    assert idle.returncode == 0, idle.stderr
    assert json.loads(idle.stdout)["requests"] == 0
    (line,) = idle.stderr.splitlines()
    assert re.fullmatch(r"cachelab: warning: captured 0 requests in [\d.]+ s: was the server "
                        r"idle\? \(the server counted 0 gets and 0 sets meanwhile\)", line), line


class _Watching:
    """A capture's stream reader that calls ``then()`` as soon as its watch is open."""

    def __init__(self, reader: Any, then: Callable[[], Any]) -> None:
        self._reader, self._then = reader, then

    def watch(self, *args: Any) -> None:
        self._reader.watch(*args)
        self._then()

    def __len__(self) -> int:
        return len(self._reader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def _gets_then_sets(server: PrivateMemcached, n: int) -> None:
    """``n`` gets (misses) then ``n`` sets: ``2 n`` accesses, the last a store (written at
    once; a fetch waits for its connection's next line, which may show it a store's lookup)."""
    c = Client((server.host, server.port), timeout=2, connect_timeout=2)
    keys = [f"cachelab-capture-test:sigint:{i}" for i in range(n)]
    for k in keys:
        c.get(k)
    for k in keys:
        c.set(k, b"v")
    c.close()


@pytest.mark.parametrize("moment", ["the watch opens", "the counters are read at the end"])
def test_ctrl_c_at_any_moment_writes_and_marks_what_was_captured(
        cli: InProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str) -> None:
    """SIGINT the moment the watch is open (before the capture's loop), or while the server's
    counters are read after it: the capture file is written with what was read, marked
    interrupted, and stderr says where (it used to exit 130 with no file and no JSON)."""
    import cachelab.traces.capture as module

    new_reader, server_state = module._new_reader, module._server_state

    def interrupt() -> None:
        signal.raise_signal(signal.SIGINT)

    with PrivateMemcached(memory_mb=8, threads=1) as server:
        if moment == "the watch opens":
            kept = 0
            monkeypatch.setattr(module, "_new_reader",
                                lambda *a: _Watching(new_reader(*a), interrupt))
        else:
            kept = 8     # the capture stops at --max-events 8, then reads the counters
            monkeypatch.setattr(module, "_new_reader", lambda *a: _Watching(
                new_reader(*a), lambda: _gets_then_sets(server, kept // 2)))

            def state(address: str, timeout: float, quiet: bool = False) -> Any:
                if quiet:        # the read after the capture
                    interrupt()
                return server_state(address, timeout, quiet)

            monkeypatch.setattr(module, "_server_state", state)
        p = cli("trace", "capture", "--server", server.address, "--duration", "60",
                "--max-events", kept or 1, "--out", tmp_path / "c", "--format", "json")
    path = tmp_path / "c" / "trace.capture.parquet"
    assert p.returncode == 130, p.stderr
    import json
    d = json.loads(p.stdout)
    assert d["ended"] == "interrupted" and d["partial"] is True
    assert d["gets"] + d["stores"] == kept
    assert p.stderr.splitlines() == [f"cachelab: error: interrupted; {kept:,} accesses kept "
                                     f"in {path} (PARTIAL)"]
    table, meta = read_capture(path)
    assert table.num_rows == kept and meta["summary"]["ended"] == "interrupted"


def test_counters_of_two_server_processes_are_never_subtracted() -> None:
    """A server restarted mid-capture answers the final ``stats`` from a new process: its
    counters start again from 0 and are not the capture's deltas (they came out negative)."""
    with PrivateMemcached(memory_mb=8, threads=1) as old:
        c = Client((old.host, old.port), timeout=2, connect_timeout=2)
        for i in range(50):
            c.get(f"cachelab-capture-test:{i}")
        before = read_stats(old.address)
        c.get("cachelab-capture-test:one-more")
        c.close()
        same = read_stats(old.address)
        with PrivateMemcached(memory_mb=8, threads=1) as new:  # another process
            other = read_stats(new.address)
    assert stats_deltas(before, same)["cmd_get"] == 1
    assert int(other["cmd_get"]) < int(before["cmd_get"])  # the subtraction would be < 0
    assert stats_deltas(before, other) == {}
    assert stats_deltas(before, {}) == {}
