"""``cachelab run`` on a Redis (RESP): the study's profile over RESP on the redis:// server
given (conftest's ``redis``, password-protected), its server recorded as a Redis, the steps
that measure memcached (tiers, replay) skipped with the reason, every key deleted (redis-py's
DBSIZE) and the password in no output or file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clitools import InProcess
from privateredis import PrivateRedis


@pytest.mark.slow
def test_a_study_of_a_redis_profiles_it_over_resp_and_skips_memcached_steps(
        tmp_path: Path, redis: PrivateRedis, cli: InProcess) -> None:
    out = tmp_path / "study"
    p = cli("run", "--server", redis.url, "--quick", "--steps", "profile,tiers,replay",
            "--precision", "off", "--no-report", "--format", "table", "--out", out)
    assert p.returncode == 0, p.stderr
    d = json.loads((out / "run.json").read_text())
    assert d["server"]["protocol"] == "resp" and d["server"]["version"].startswith("redis ")
    steps = {s["name"]: s for s in d["steps"]}
    assert steps["profile"]["status"] == "ok", steps["profile"]
    for name in ("tiers", "replay"):
        assert steps[name]["status"] == "skipped"
        assert "measures memcached" in steps[name]["error"], steps[name]
    prof = json.loads((out / "profile" / "profile.json").read_text())
    assert prof["client"]["floor_command"] == "PING" and prof["server"]["protocol"] == "resp"
    assert all(c["samples"] > 0 and not c["errors"] for c in prof["cells"])
    assert redis.client().dbsize() == 0
    assert redis.password and redis.password not in p.stdout + p.stderr
    for f in out.rglob("*"):
        if f.is_file():
            assert redis.password.encode() not in f.read_bytes(), f
