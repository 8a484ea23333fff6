"""`cachelab trace capture` of a real redis-server through MONITOR (docs/resp.md, "trace
capture"): a known mix sent by redis-py (a third party) is captured in order with its ops,
value sizes, databases and requests, keys pseudonymised consistently and never in clear, the
password nowhere; the capture reads back with `trace inspect`, `simulate` and `size`; Ctrl-C
and caps keep what was read, marked; an idle capture warns; refusals are one line.

One password-protected server for the module (conftest's ``redis``)."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import cachelab.traces.capture_monitor as module
from cachelab.resp import parse_url
from cachelab.traces.capture import CaptureSpec, read_capture
from cachelab.traces.capture_monitor import MonitorResult, capture_monitor
from clitools import InProcess, one_error_line
from privateredis import PrivateRedis


def _during(redis: PrivateRedis, path: Path, work: Any, url: str | None = None,
            **options: Any) -> MonitorResult:
    """A capture while ``work()`` runs; stopped once it is done and the stream drained."""
    address, login = parse_url(url or redis.url)
    done, finished = threading.Event(), [float("inf")]
    out: dict[str, MonitorResult] = {}

    def run() -> None:
        out["r"] = capture_monitor(
            CaptureSpec(address, duration=30.0, **options), path, login,
            stop=lambda: done.is_set() and time.monotonic() > finished[0] + 0.3)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)   # MONITOR answered +OK by then
    try:
        work()
    finally:
        finished[0] = time.monotonic()
        done.set()
        t.join(20)
    assert not t.is_alive()
    return out["r"]


def _mix(redis: PrivateRedis) -> None:
    c = redis.client()
    c.set("mon:a", b"x" * 5, ex=60)
    c.get("mon:a")
    c.get("mon:missing")
    c.mget("mon:a", "mon:b", b"mon:\x00bin")
    c.set(b"mon:\x00bin", b"y" * 300)
    c.execute_command("SETEX", "mon:c", 30, b"z" * 7)
    c.getex("mon:c", px=500)
    c.delete("mon:a", "mon:c")
    c.unlink(b"mon:\x00bin")
    c.ping()
    c1 = redis.client(db=1)
    c1.set("mon:a", b"q" * 2)
    c1.delete("mon:a")
    c.close()
    c1.close()


#: What ``_mix`` sends, row by row: (op, key, size, db); an MGET's keys share a request.
_ROWS = [("set", "mon:a", 5, 0), ("get", "mon:a", 0, 0), ("get", "mon:missing", 0, 0),
         ("get", "mon:a", 0, 0), ("get", "mon:b", 0, 0), ("get", "mon:\x00bin", 0, 0),
         ("set", "mon:\x00bin", 300, 0), ("setex", "mon:c", 7, 0), ("getex", "mon:c", 0, 0),
         ("del", "mon:a", 0, 0), ("del", "mon:c", 0, 0), ("unlink", "mon:\x00bin", 0, 0),
         ("set", "mon:a", 2, 1), ("del", "mon:a", 0, 1)]


def test_a_known_mix_is_captured_in_order_pseudonymised_and_reads_back(
        redis: PrivateRedis, cli: InProcess, tmp_path: Path) -> None:
    path = tmp_path / "t.capture.parquet"
    r = _during(redis, path, lambda: _mix(redis))
    table, meta = read_capture(path)
    rows = table.to_pylist()
    assert [(x["op"], x["size"], x["db"]) for x in rows] == [(o, s, d) for o, _, s, d in _ROWS]
    # Same key, same pseudonym (whatever the database); different keys, different ones.
    names: dict[str, str] = {}
    for x, (_, key, _, _) in zip(rows, _ROWS):
        assert re.fullmatch(r"k[0-9a-f]{16}", x["key"]), x["key"]
        assert names.setdefault(key, x["key"]) == x["key"]
    assert len(set(names.values())) == len(names)
    assert [x["key_bytes"] for x in rows] == [len(k.encode()) for _, k, _, _ in _ROWS]
    assert [x["ttl"] for x in rows[:9]] == [60, -1, -1, -1, -1, -1, -1, 30, -1]
    # The MGET's three keys are one request; the DEL's two are one.
    req = [x["request"] for x in rows]
    assert req[3] == req[4] == req[5] != req[2] and req[9] == req[10] != req[8]
    assert r.commands == 11 and r.multi_get_requests == 1
    assert r.other.get("ping") == 1    # counted, not written
    # Neither a key nor the password in clear anywhere in the file.
    raw = path.read_bytes()
    assert b"mon:" not in raw and redis.password.encode() not in raw
    assert meta["server"]["protocol"] == "resp" and meta["server"]["login"]["password"]
    d = r.server["deltas"]
    assert d["keyspace_hits"] >= 3 and d["calls"]["mget"] == 1
    # The readers: inspect, simulate and size take it as a flat trace of its reads.
    seen = cli("trace", "inspect", path, "--format", "json")
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout)["requests"] == 6       # get get mget(3) getex
    for verb in (("simulate", path, "--sizes", "2"), ("size", path)):
        done = cli(*verb, "--format", "json")
        assert done.returncode == 0, done.stderr


def test_the_database_in_the_url_keeps_that_databases_commands(
        redis: PrivateRedis, tmp_path: Path) -> None:
    path = tmp_path / "t.capture.parquet"
    r = _during(redis, path, lambda: _mix(redis), url=redis.url + "/1")
    table, _ = read_capture(path)
    assert [(x["op"], x["size"], x["db"]) for x in table.to_pylist()] == \
        [("set", 2, 1), ("del", 0, 1)]
    assert r.other["get"] == 2 and r.server["db"] == 1


def test_a_capture_on_the_command_line_states_its_cost_and_stops_at_its_cap(
        redis: PrivateRedis, cli: InProcess, tmp_path: Path) -> None:
    c = redis.client()
    stop = threading.Event()

    def traffic() -> None:
        for i in range(5000):
            if stop.is_set():
                return
            c.set(f"mon:cap:{i % 50}", b"v")

    t = threading.Thread(target=traffic)
    t.start()
    try:
        p = cli("trace", "capture", "--server", redis.address, "--protocol", "resp",
                "--max-events", "20", "--duration", "20", "--out", tmp_path / "o",
                "--format", "table")
    finally:
        stop.set()
        t.join(10)
    # --protocol resp with HOST:PORT sends no password: the server refuses, in one line.
    assert p.returncode == 3
    line = one_error_line(p)
    assert "refused the login" in line or "NOAUTH" in line, line
    t = threading.Thread(target=traffic)
    stop.clear()
    t.start()
    try:
        p = cli("trace", "capture", "--server", redis.url, "--max-events", "20",
                "--duration", "20", "--out", tmp_path / "o2", "--format", "table")
    finally:
        stop.set()
        t.join(10)
        c.delete(*[f"mon:cap:{i}" for i in range(50)])
        c.close()
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("PARTIAL: capture of ") and "ended by max_events" in lines[0]
    assert lines[1].strip().startswith("MONITOR copies every command")
    table, _ = read_capture(tmp_path / "o2" / "trace.capture.parquet")
    assert table.num_rows == 20
    assert redis.password not in p.stdout + p.stderr


def test_an_idle_capture_warns_and_refusals_are_one_line(
        redis: PrivateRedis, cli: InProcess, tmp_path: Path) -> None:
    idle = cli("trace", "capture", "--server", redis.url, "--duration", "0.5",
               "--out", tmp_path / "idle", "--format", "json")
    assert idle.returncode == 0, idle.stderr
    (line,) = idle.stderr.splitlines()
    assert re.fullmatch(r"cachelab: warning: captured 0 commands in [\d.]+ s: was the server "
                        r"idle\?.*", line), line
    assert json.loads(idle.stdout)["commands"] == 0
    bad = redis.url.replace(redis.password, "wrong-" + redis.password)
    for args, code, said in [
        (("--server", bad), 3, "WRONGPASS"),
        (("--server", "127.0.0.1:1", "--tls"), 2, "plain TCP"),     # a memcached
        (("--server", redis.url, "--protocol", "text"), 2, "--protocol text"),
        (("--server", redis.url, "--reader", "python"), 2, "--reader python"),
        (("--server", redis.url, "--server", redis.url.replace(str(redis.port), "1")), 2,
         "one server"),
        (("--protocol", "resp"), 2, "--server"),
    ]:
        for fmt in ("table", "json"):
            p = cli("trace", "capture", *args, "--duration", "0.5", "--out",
                    tmp_path / "bad", "--format", fmt)
            assert p.returncode == code, (args, p.stderr)
            line = one_error_line(p)
            assert said in line, line
            assert redis.password not in p.stdout + p.stderr


def test_ctrl_c_keeps_and_marks_what_was_captured(
        redis: PrivateRedis, cli: InProcess, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT once a few commands were captured: exit 130, the file written and marked."""
    real = module._core.CaptureReader

    class Reader:
        def __init__(self, *a: Any, **k: Any) -> None:
            self._r = real(*a, **k)

        def monitor(self, *a: Any, **k: Any) -> None:
            self._r.monitor(*a, **k)
            c = redis.client()
            for i in range(4):
                c.set(f"mon:int:{i}", b"v" * i)
            c.delete(*[f"mon:int:{i}" for i in range(4)])
            c.close()
            time.sleep(0.3)
            signal.raise_signal(signal.SIGINT)

        def __len__(self) -> int:
            return len(self._r)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._r, name)

    monkeypatch.setattr(module._core, "CaptureReader", Reader)
    p = cli("trace", "capture", "--server", redis.url, "--duration", "60", "--out",
            tmp_path / "c", "--format", "json")
    path = tmp_path / "c" / "trace.capture.parquet"
    assert p.returncode == 130, p.stderr
    d = json.loads(p.stdout)
    assert d["ended"] == "interrupted" and d["partial"] is True
    assert d["ops"] == {"set": 4, "del": 4}
    assert p.stderr.splitlines() == [f"cachelab: error: interrupted; 8 accesses kept in "
                                     f"{path} (PARTIAL)"]
    table, meta = read_capture(path)
    assert table.num_rows == 8 and meta["summary"]["ended"] == "interrupted"
    assert redis.password not in p.stdout + p.stderr
