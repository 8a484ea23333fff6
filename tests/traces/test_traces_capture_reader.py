"""The Rust capture reader against the Python one it replaces: the same recorded stream of a
real memcached, fed to both in the same chunks, gives the same capture file; the recorded
stream's gets, hits and stores are what the server counted; and a pool capture of a real
three-member pool matches each member's own counters."""

from __future__ import annotations

import random
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient
from pymemcache.exceptions import MemcacheServerError

import cachelab._core as _core
from cachelab.servers import PrivateMemcached
from cachelab.size.sizing import SizeSpec, size
from cachelab.traces.capture import (
    CaptureSpec,
    _Writer,
    batch_table,
    capture,
    read_capture,
)
from cachelab.traces.capture_lines import PyCaptureReader
from pools import loopback_pool

STATS = ("cmd_get", "get_hits", "get_misses", "cmd_set")


def _stats(server: PrivateMemcached) -> dict[str, int]:
    c = Client((server.host, server.port), timeout=2)
    try:
        s = c.stats()
    finally:
        c.close()
    return {k: int(s[k.encode()]) for k in STATS}


def _workload(server: PrivateMemcached) -> None:
    """Sets (some too large), adds, single and multi-gets, hits and misses, keys with `%`
    and non-ASCII bytes (logged URI-encoded)."""
    c = Client((server.host, server.port), timeout=2, allow_unicode_keys=True)
    keys = [f"rd:{i}" for i in range(80)] + ["rd:pct%25", "rd:€uro", "rd:a=b"]
    for i, k in enumerate(keys[:50]):
        c.set(k, b"v" * (5 + i))
    with pytest.raises(MemcacheServerError):
        c.set("rd:big", b"x" * (2 * 2**20), noreply=False)   # refused: too large
    c.add("rd:0", b"again")
    c.add("rd:new", b"fresh")
    c.set("rd:pct%25", b"p")
    c.set("rd:€uro", b"e")
    for k in keys:
        c.get(k)
    c.get("rd:big")
    for j in range(12):
        c.get_many(keys[j * 6:j * 6 + 6])
    c.close()


def _record(server: PrivateMemcached) -> bytes:
    """The raw `watch fetchers mutations` stream while the workload runs."""
    with socket.create_connection((server.host, server.port), timeout=2) as sock:
        sock.sendall(b"watch fetchers mutations\r\n")
        reply = b""
        while b"\r\n" not in reply:
            reply += sock.recv(4096)
        first, _, data = reply.partition(b"\r\n")
        assert first == b"OK"
        _workload(server)
        sock.settimeout(0.3)
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            pass
    return data


#: Lines a real memcached does not write, to hold both readers to the same rules on them.
ODD = (b"skipped=7\r\nts=1.5 gid=1 type=item_get key=o1 status=found clsid=1 cfd=9 size=3\n"
       b"ts=x.1 gid=2 type=item_get key=bad status=found cfd=9\n"
       b"ts=2.000001 gid=3 type=item_get key=o%ff%zz status=not_found cfd=99999999999\n"
       b"ts=2.000002 gid=4 type=item_get key=o%ff%zz status=not_found cfd=+1_0 size=4\n"
       b"ts=2.000003 gid=5 type=item_store key=o2 status=stored cmd=cas ttl=1_000 cfd=10\n"
       b"ts=2.4 gid=5 type=item_store key=o3 k status=stored cmd=set ttl=zz cfd=10 size=9\r\r\n"
       b"garbage line\nts=3 type=item_get key=o4 status=found cfd=11 clsid=70000\n"
       b"ts=3 type=other key=o5 status=x cfd=12\n x skipped=3 \n")


def _write(reader: Any, data: bytes, cuts: list[int], path: Path) -> Path:
    writer = _Writer(path, {b"cachelab": b"{}"})
    at = 0
    for cut in [*cuts, len(data)]:
        assert reader.feed(data[at:cut], 10**9)
        writer.add(batch_table(reader.take(), "m"))
        at = cut
    reader.flush()
    writer.add(batch_table(reader.take(), "m"))
    writer.close({b"cachelab": b"{}"})
    return path


@pytest.mark.parametrize(("keep_keys", "sample"), [(False, 1.0), (True, 1.0), (False, 0.5)])
def test_both_readers_write_the_same_file_from_a_recorded_stream(
        tmp_path: Path, keep_keys: bool, sample: float) -> None:
    with PrivateMemcached(memory_mb=8, threads=2) as server:
        before = _stats(server)
        data = _record(server)
        after = _stats(server)
    data += ODD
    secret = secrets.token_bytes(32)
    cuts = sorted(random.Random(1).sample(range(1, len(data)), 40))
    readers = {"python": PyCaptureReader(secret, keep_keys, sample),
               "rust": _core.CaptureReader(secret, keep_keys, sample)}
    files = {name: _write(r, data, cuts, tmp_path / f"{name}.parquet")
             for name, r in readers.items()}
    py, rs = (pq.read_table(files[n]) for n in ("python", "rust"))
    assert py.num_rows > 150 * sample - 30
    assert py.equals(rs), "the readers wrote different rows"
    counters = [(r.ops, r.hits, r.lost, r.store_lookups, r.sampled_out, r.t0)
                for r in readers.values()]
    assert counters[0] == counters[1]
    assert readers["python"].lost == 10          # skipped=7 and skipped=3
    if sample == 1.0:
        # The recorded part is what the server counted (the odd lines add 2 gets, 1 hit,
        # 2 stores).
        d = {k: after[k] - before[k] for k in STATS}
        gets = py.filter(pc.equal(py["op"].cast(pa.string()), "get"))
        hits = int(pc.sum(pc.equal(gets["status"].cast(pa.string()), "found")).as_py())
        assert (gets.num_rows - 2, hits - 1) == (d["cmd_get"], d["get_hits"])
        assert py.num_rows - gets.num_rows - 2 == d["cmd_set"] + 1   # set, too large, + add
    if keep_keys:
        keys = set(py["key"].to_pylist())
        assert {"rd:pct%25", "rd:€uro", "rd:a=b", "o\ufffd%zz", "o3 k"} <= keys


def _run_capture(spec: CaptureSpec, path: Path, done: threading.Event,
                 out: dict[str, Any]) -> None:
    out["r"] = capture(spec, path, stop=done.is_set)


def test_the_python_reader_captures_a_live_server_as_the_rust_one_does(tmp_path: Path) -> None:
    results = {}
    with PrivateMemcached(memory_mb=8, threads=1) as server:
        for reader in ("python", "rust"):
            done = threading.Event()
            spec = CaptureSpec(server.address, duration=20.0, reader=reader)
            out: dict[str, Any] = {}
            t = threading.Thread(target=_run_capture,
                                 args=(spec, tmp_path / f"{reader}.capture.parquet", done, out))
            t.start()
            time.sleep(0.3)
            before = _stats(server)
            _workload(server)
            time.sleep(0.3)
            d = {k: v - before[k] for k, v in _stats(server).items()}
            done.set()
            t.join(10)
            r = out["r"]
            assert (r.gets, r.hits, r.misses) == (d["cmd_get"], d["get_hits"], d["get_misses"])
            results[reader] = r
    assert results["python"].ops == results["rust"].ops
    # (Not the request counts: the two captures are of two runs of the workload, and the keys
    # of a multi-get are grouped by their timing, which differs from run to run.)


def test_a_pool_capture_counts_each_member_as_it_counts_itself(tmp_path: Path) -> None:
    with loopback_pool() as pool:
        addresses = [s.address for s in pool]
        path = tmp_path / "pool.capture.parquet"
        done = threading.Event()
        out: dict[str, Any] = {}
        t = threading.Thread(target=lambda: out.update(r=capture(
            CaptureSpec(servers=tuple(addresses), duration=20.0), path, stop=done.is_set)))
        t.start()
        time.sleep(0.4)
        client = HashClient([(s.host, s.port) for s in pool], timeout=2, connect_timeout=2)
        keys = [f"pool:{i}" for i in range(300)]
        for k in keys[:200]:
            client.set(k, b"v" * 20)
        for k in keys:
            client.get(k)
        client.get_many(keys[100:160])
        for s in pool:                          # one key on every member: one pseudonym
            c = Client((s.host, s.port), timeout=2)
            c.set("pool:everywhere", b"x")
            c.close()
        client.close()
        time.sleep(0.4)
        done.set()
        t.join(15)
    r = out["r"]
    assert [m["address"] for m in r.members] == addresses
    for m in r.members:
        d = m["deltas"]
        assert (m["gets"], m["hits"], m["misses"], m["stores"]) == (
            d["cmd_get"], d["get_hits"], d["get_misses"], d["cmd_set"]), m
        assert m["gets"] > 50 and m["lost"] == 0
    assert r.gets == 360 and r.hits == 260 and r.stores == 203 and r.ended == "interrupted"
    table, meta = read_capture(path)
    assert [m["address"] for m in meta["members"]] == addresses
    assert meta["server"]["limit_maxbytes"] == sum(m["limit_maxbytes"] for m in meta["members"])
    assert all(m["settings"]["maxbytes"] == str(16 * 2**20) for m in meta["members"])
    times = table["time"].to_numpy()
    assert (times[1:] >= times[:-1]).all() and times.min() > -1  # a held fetch: a little < 0
    # Rows written in time order, members interleaved, but for fetches held back until their
    # connection's next line (here the last fetch of each connection, written at the end).
    written = pq.read_table(path)["time"].to_numpy()
    assert (written[1:] < written[:-1]).sum() <= 6
    # One pseudonym for the key set on every member, three members' rows.
    members_of = table.group_by("key").aggregate([("member", "count_distinct")])
    assert members_of.filter(pc.equal(members_of["member_count_distinct"], 3)).num_rows == 1
    # Connection ids differ between members.
    conns = table.group_by("conn").aggregate([("member", "count_distinct")])
    assert pc.max(conns["member_count_distinct"]).as_py() == 1
    # Sizing a pool capture: the members' total memory, the pool taken as one LRU.
    sized = size(SizeSpec(trace=str(path)))
    assert sized.memory == 3 * 16 * 2**20
    assert sized.check is not None and "one LRU of their total memory" in sized.check["verdict"]
