"""``cachelab scale`` against a real redis-server (RESP): a short two-point sweep over
connections, each point a load run over RESP, the table saying so with the server's
io-threads, and every key written deleted (redis-py's DBSIZE: a third party)."""

from __future__ import annotations

import json
from pathlib import Path

from clitools import InProcess
from privateredis import PrivateRedis

#: A short sweep: two points, one run each, 0.8 s a run.
SHORT = ["--points", "1,2", "--repeats", "1", "--warmup", "0.2", "--settle", "0.2",
         "--window", "0.4", "--interval", "0.1", "--bootstrap", "0", "--key-space", "1000",
         "--no-plots", "--format", "table"]


def test_a_sweep_over_resp_measures_each_point_and_says_resp(
        tmp_path: Path, redis: PrivateRedis, cli: InProcess) -> None:
    c = redis.client()
    gets = int((c.info("commandstats").get("cmdstat_get") or {"calls": 0})["calls"])
    out = tmp_path / "out"
    proc = cli("scale", "--server", redis.url, *SHORT, "--out", out)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("scale sweep: "))
    assert "redis 7" in line and f"at {redis.address}, resp protocol, io-threads 1" in line
    saved = json.loads((out / "scale.json").read_text())
    assert [r["n"] for r in saved["runs"]] == [1, 2]
    assert all(r["throughput"] > 0 and r["errors"] == 0 for r in saved["runs"])
    assert saved["server"]["protocol"] == "resp" and saved["server"]["io_threads"] == 1
    # the runs went to the server as RESP GETs (counted by the server), and left no key
    assert int(c.info("commandstats")["cmdstat_get"]["calls"]) > gets
    assert c.dbsize() == 0
    assert (redis.password or "") not in proc.stdout + proc.stderr
